//! Changing an index in a transaction: insertion with node splits up the
//! path, removal freeing the nodes it empties. Node bytes are written
//! through `Access`, so the session's page tracking rolls them back with
//! the rest of a transaction that fails or aborts.
//!
//! Underfull nodes are not merged with their neighbours: a node is freed
//! when it becomes empty (a leaf with no entry, an inner node with no
//! child), and a root left with one child gives way to it, so that a tree
//! emptied by removals holds no node at all. Lookups stay one node per
//! level either way; space in underfull nodes is used again when keys come
//! back to their range.

use super::node::{self, MAX_KEY, NODE_BYTES};
use super::read::{NodeRef, Nodes, node_va};
use crate::db::translate;
use crate::db::tx::Tx;
use crate::error::{Error, Result};

/// The words at the start of every index header: the root node's
/// persistent address (0: empty) and the entry count.
const ROOT: usize = 0;
const LEN: usize = 1;

impl Tx<'_> {
    pub(super) fn nodes(&self) -> Nodes<'_> {
        Nodes {
            access: self.access,
            fs: self.fs,
            path: self.pager.source.name(),
        }
    }

    /// The node at `paddr`, mutably; its address is checked, its header is
    /// the caller's to check (a node `descend` read, or one just made).
    fn node_mut(&mut self, paddr: u64) -> Result<&mut [u8]> {
        let va = node_va(self.fs, self.pager.source.name(), paddr)?;
        Ok(self.access.slice_mut::<u8>(va, NODE_BYTES))
    }

    /// A new empty node near `near` (a virtual address); its persistent
    /// address.
    fn new_node(&mut self, leaf: bool, child0: u64, near: Option<u64>) -> Result<u64> {
        let id = self.array_id::<u64>()?;
        let va = self.alloc_raw(id, NODE_BYTES as u32, near)?;
        node::init(self.access.slice_mut::<u8>(va, NODE_BYTES), leaf, child0);
        self.paddr(va)
    }

    fn free_node(&mut self, paddr: u64) -> Result<()> {
        let va = node_va(self.fs, self.pager.source.name(), paddr)?;
        self.free_raw(va)
    }

    /// A node's bytes failed a check: the error names its page.
    fn damaged(&self, paddr: u64) -> impl Fn(String) -> Error + '_ {
        move |w| self.nodes().damaged(paddr, w)
    }

    /// Inserts `key` (encoded) with value `v` (a persistent address) into
    /// the tree whose header is at `head` (a virtual address inside the
    /// object at `owner`, near which a first node goes). An existing entry
    /// of `key` has its value replaced (and returned) if `replace`, and is
    /// an internal error otherwise (a multi-index's keys are unique).
    pub(super) fn tree_insert(
        &mut self,
        head: u64,
        owner: u64,
        key: &[u8],
        v: u64,
    ) -> Result<Option<u64>> {
        if key.len() > MAX_KEY {
            return Err(Error::invalid(format!(
                "an index key of {} encoded bytes: keys are limited to {MAX_KEY} encoded bytes \
                 (a multi-index key's encoding includes its escaping and an 8-byte sequence number)",
                key.len()
            )));
        }
        let mut root = self.access.obj::<[u64; 2]>(head)[ROOT];
        if root == 0 {
            root = self.new_node(true, 0, Some(owner))?;
            self.access.obj_mut::<[u64; 2]>(head)[ROOT] = root;
        }
        let (leaf, path) = self.nodes().descend(root, key)?;
        let (at, pos) = (leaf.at, self.nodes().search(&leaf, key)?);
        let path: Vec<(u64, usize)> = path.iter().map(|(n, j)| (n.at, *j)).collect();
        match pos {
            Ok(i) => {
                let b = self.node_mut(at)?;
                let old = node::value(b, i);
                node::set_value(b, i, v);
                return Ok(Some(old));
            }
            Err(i) => {
                let r = node::insert(self.node_mut(at)?, i, key, v);
                if !r.map_err(self.damaged(at))? {
                    self.split(head, at, path, i, key.to_vec(), v)?;
                }
            }
        }
        self.access.obj_mut::<[u64; 2]>(head)[LEN] += 1;
        Ok(None)
    }

    /// Inserts `(key, v)` at slot `i` of the full node `at` by splitting it,
    /// pushing the separator up `path` (splitting full parents in turn, and
    /// growing a new root at the top).
    fn split(
        &mut self,
        head: u64,
        mut at: u64,
        mut path: Vec<(u64, usize)>,
        mut i: usize,
        mut key: Vec<u8>,
        mut v: u64,
    ) -> Result<()> {
        loop {
            let image = self.node_mut(at)?.to_vec();
            let (h, mut e) = node::entries(&image).map_err(self.damaged(at))?;
            e.insert(i, (&key, v));
            let near = translate(self.fs, at, 1)?;
            let (left, sep, right, right_child0) = if h.leaf {
                let m = node::split_point(&e, 1);
                let right = e.split_off(m);
                let sep = node::separator(e[m - 1].0, right[0].0);
                (e, sep, right, 0)
            } else {
                // The first right entry's key moves up; its child starts
                // the right node.
                let m = node::split_point(&e, 2);
                let mut right = e.split_off(m);
                let (sep, child0) = right.remove(0);
                (e, sep.to_vec(), right, child0)
            };
            if !node::fits(&left) || !node::fits(&right) {
                return Err(Error::internal("an index node split leaves a half too large"));
            }
            let right_pa = self.new_node(h.leaf, right_child0, Some(near))?;
            node::build(self.node_mut(right_pa)?, h.leaf, right_child0, &right);
            node::build(self.node_mut(at)?, h.leaf, h.child0, &left);
            match path.pop() {
                None => {
                    let root = self.new_node(false, at, Some(near))?;
                    let r = node::insert(self.node_mut(root)?, 0, &sep, right_pa);
                    if !r.map_err(self.damaged(root))? {
                        return Err(Error::internal("a separator does not fit in a new root"));
                    }
                    self.access.obj_mut::<[u64; 2]>(head)[ROOT] = root;
                    return Ok(());
                }
                Some((parent, j)) => {
                    let r = node::insert(self.node_mut(parent)?, j, &sep, right_pa);
                    if r.map_err(self.damaged(parent))? {
                        return Ok(());
                    }
                    (at, i, key, v) = (parent, j, sep, right_pa);
                }
            }
        }
    }

    /// Removes `key` (encoded) from the tree whose header is at `head`;
    /// returns its value. Nodes left empty are freed (module docs).
    pub(super) fn tree_remove(&mut self, head: u64, key: &[u8]) -> Result<Option<u64>> {
        let root = self.access.obj::<[u64; 2]>(head)[ROOT];
        if root == 0 {
            return Ok(None);
        }
        let (leaf, path) = self.nodes().descend(root, key)?;
        let Ok(i) = self.nodes().search(&leaf, key)? else {
            return Ok(None);
        };
        let old = node::value(leaf.b, i);
        let (at, emptied) = (leaf.at, leaf.h.count == 1);
        let path: Vec<(u64, usize)> = path.iter().map(|(n, j)| (n.at, *j)).collect();
        let r = node::remove(self.node_mut(at)?, i);
        r.map_err(self.damaged(at))?;
        self.access.obj_mut::<[u64; 2]>(head)[LEN] -= 1;
        if emptied {
            self.unlink_empty(head, at, path)?;
        }
        Ok(Some(old))
    }

    /// Frees the empty node `at` and takes it out of its parent, freeing
    /// parents left without children, and lets a root with one child give
    /// way to it.
    fn unlink_empty(&mut self, head: u64, mut at: u64, mut path: Vec<(u64, usize)>) -> Result<()> {
        loop {
            self.free_node(at)?;
            let Some((parent, j)) = path.pop() else {
                self.access.obj_mut::<[u64; 2]>(head)[ROOT] = 0;
                return Ok(());
            };
            let r = node::remove_child(self.node_mut(parent)?, j);
            if r.map_err(self.damaged(parent))? {
                break;
            }
            at = parent;
        }
        // A root with one child (no key) hands the tree to it.
        loop {
            let root = self.access.obj::<[u64; 2]>(head)[ROOT];
            let n: NodeRef<'_> = self.nodes().node(root)?;
            if n.h.leaf || n.h.count > 0 {
                return Ok(());
            }
            let child = n.h.child0;
            self.free_node(root)?;
            self.access.obj_mut::<[u64; 2]>(head)[ROOT] = child;
        }
    }

    /// Every node of the tree whose header is at `head`, and the values
    /// (persistent addresses) its leaves hold.
    fn tree_nodes(&self, head: u64) -> Result<(std::collections::BTreeSet<u64>, Vec<u64>)> {
        let root = self.access.obj::<[u64; 2]>(head)[ROOT];
        let mut work = if root == 0 { vec![] } else { vec![root] };
        let mut all = std::collections::BTreeSet::new();
        let mut values = Vec::new();
        while let Some(at) = work.pop() {
            if !all.insert(at) {
                return Err(self.nodes().damaged(at, "the node is reached twice".into()));
            }
            let n = self.nodes().node(at)?;
            if n.h.leaf {
                values.extend((0..n.h.count).map(|i| node::value(n.b, i)));
            } else {
                work.extend((0..=n.h.count).map(|j| node::child(n.b, &n.h, j)));
            }
        }
        Ok((all, values))
    }

    /// The values (persistent addresses) of the tree whose header is at
    /// `head`: what `free_tree` follows through an index.
    pub(crate) fn tree_values(&self, head: u64) -> Result<Vec<u64>> {
        Ok(self.tree_nodes(head)?.1)
    }

    /// Frees every node of the tree whose header is at `head` and empties
    /// it (the entries' objects stay).
    pub(crate) fn tree_clear(&mut self, head: u64) -> Result<()> {
        for at in self.tree_nodes(head)?.0 {
            self.free_node(at)?;
        }
        *self.access.obj_mut::<[u64; 2]>(head) = [0, 0];
        Ok(())
    }
}
