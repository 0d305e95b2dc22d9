//! Reading an index: nodes checked as they are read, descent to a key, and
//! ordered iteration from a bound with a cursor (a stack of the nodes on
//! the path to the current leaf: leaves are not chained, so freeing an
//! empty leaf never has to find its neighbour).

use super::node::{self, Header, NODE_BYTES};
use crate::db::translate;
use crate::error::{Error, FileKind, Location, Result};
use crate::format::objects::{FLAG_FREE, OBJECT_ALIGN, OBJECT_HEADER};
use crate::format::page::HEADER_SIZE;
use crate::vm::{Access, FrameSpace};
use std::ops::Bound;
use std::path::Path;

/// Trees deeper than this are refused as damaged (a node holds at least
/// three keys, so 64 levels is more entries than an address space holds).
const MAX_DEPTH: usize = 64;

/// Reads nodes through the frame table: what a `Db` and a `Tx` both have.
///
/// Nodes come from the database's pages, which a checksum protects from
/// media damage but not from a crafted page with a valid checksum, or a bug
/// that stored a wrong address. So every node is checked before its bytes
/// are used as offsets or addresses: it must lie within one page, be
/// readable, be a live object of a node's size, and have a well-formed
/// header; each key is checked as it is read; the tree must not be deeper
/// than 64 levels; iteration refuses keys out of order (which also stops a
/// walk through a node reached twice). A violation is `Error::Corrupt`
/// naming the page and the node, never a panic or a hang.
#[derive(Clone, Copy)]
pub(crate) struct Nodes<'a> {
    pub access: &'a Access,
    pub fs: &'a FrameSpace,
    pub path: &'a Path,
}

/// A node read and its header checked.
#[derive(Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    pub at: u64,
    pub b: &'a [u8],
    pub h: Header,
}

/// The virtual address of the node at `paddr`, after checking that it lies
/// within one page, after an object header, and that its page can be read.
pub(crate) fn node_va(fs: &FrameSpace, path: &Path, paddr: u64) -> Result<u64> {
    let ps = fs.frame_size() as u64;
    let off = paddr % ps;
    if paddr == 0
        || off < (HEADER_SIZE + OBJECT_HEADER) as u64
        || off + NODE_BYTES as u64 > ps
        || !off.is_multiple_of(OBJECT_ALIGN as u64)
    {
        return Err(damaged(
            path,
            fs,
            paddr,
            "the address cannot hold a node".into(),
        ));
    }
    let va = translate(fs, paddr, 1)?;
    let f = fs
        .frame_at(va as usize)
        .ok_or_else(|| Error::invalid("index node outside this database"))?;
    fs.ensure_resident(f).map_err(|e| Error::Corrupt {
        file: FileKind::PageFile,
        path: path.to_path_buf(),
        at: Location::Page(e.page),
        what: format!("index node at {paddr:#x}: {}", e.message),
    })?;
    Ok(va)
}

/// A damaged index node.
pub(crate) fn damaged(path: &Path, fs: &FrameSpace, paddr: u64, what: String) -> Error {
    Error::Corrupt {
        file: FileKind::PageFile,
        path: path.to_path_buf(),
        at: Location::Page(paddr >> fs.frame_size().trailing_zeros()),
        what: format!("index node at {paddr:#x}: {what}"),
    }
}

impl<'a> Nodes<'a> {
    pub fn damaged(&self, paddr: u64, what: String) -> Error {
        damaged(self.path, self.fs, paddr, what)
    }

    /// The node at `paddr`, checked.
    pub fn node(&self, paddr: u64) -> Result<NodeRef<'a>> {
        let va = node_va(self.fs, self.path, paddr)?;
        let [tag, size] = *self.access.obj::<[u32; 2]>(va - OBJECT_HEADER as u64);
        let free = (tag >> 24) as u8 & FLAG_FREE != 0;
        if size as usize != NODE_BYTES || free {
            return Err(self.damaged(
                paddr,
                format!(
                    "the object there is {size} bytes{}, not a node",
                    if free { " and free" } else { "" }
                ),
            ));
        }
        let b = self.access.slice::<u8>(va, NODE_BYTES);
        let h = node::header(b).map_err(|w| self.damaged(paddr, w))?;
        Ok(NodeRef { at: paddr, b, h })
    }

    /// The key of slot `i` of `n`.
    pub fn key(&self, n: &NodeRef<'a>, i: usize) -> Result<&'a [u8]> {
        node::key(n.b, &n.h, i).map_err(|w| self.damaged(n.at, w))
    }

    /// Where `key` is in `n` (as `node::search`).
    pub fn search(&self, n: &NodeRef<'a>, key: &[u8]) -> Result<Result<usize, usize>> {
        node::search(n.b, &n.h, key).map_err(|w| self.damaged(n.at, w))
    }

    /// The leaf that would hold `key`, and (if `path` is given) the inner
    /// nodes on the way to it with the child taken at each.
    fn walk_down(
        &self,
        root: u64,
        key: &[u8],
        mut path: Option<&mut Vec<(NodeRef<'a>, usize)>>,
    ) -> Result<NodeRef<'a>> {
        let mut n = self.node(root)?;
        for _ in 0..MAX_DEPTH {
            if n.h.leaf {
                return Ok(n);
            }
            let j = node::child_for(n.b, &n.h, key).map_err(|w| self.damaged(n.at, w))?;
            let next = self.node(node::child(n.b, &n.h, j))?;
            if let Some(p) = path.as_deref_mut() {
                p.push((n, j));
            }
            n = next;
        }
        Err(self.damaged(root, format!("the index is deeper than {MAX_DEPTH} levels")))
    }

    /// The leaf that would hold `key`, and the path of inner nodes to it
    /// with the child taken at each.
    pub fn descend(&self, root: u64, key: &[u8]) -> Result<(NodeRef<'a>, Vec<(NodeRef<'a>, usize)>)> {
        let mut path = Vec::new();
        let leaf = self.walk_down(root, key, Some(&mut path))?;
        Ok((leaf, path))
    }

    /// The value under `key`.
    pub fn get(&self, root: u64, key: &[u8]) -> Result<Option<u64>> {
        if root == 0 {
            return Ok(None);
        }
        let leaf = self.walk_down(root, key, None)?;
        Ok(self.search(&leaf, key)?.ok().map(|i| node::value(leaf.b, i)))
    }

    /// A cursor over the entries within `lo..hi`, in order.
    pub fn range(&self, root: u64, lo: Bound<&[u8]>, hi: Bound<Vec<u8>>) -> Result<Cursor<'a>> {
        let mut c = Cursor {
            nodes: *self,
            stack: Vec::new(),
            hi,
            last: None,
            done: root == 0,
        };
        if root == 0 {
            return Ok(c);
        }
        let k: &[u8] = match lo {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let (leaf, path) = self.descend(root, k)?;
        let i = match (lo, self.search(&leaf, k)?) {
            (Bound::Excluded(_), Ok(i)) => i + 1,
            (_, Ok(i) | Err(i)) => i,
        };
        c.stack = path;
        c.stack.push((leaf, i));
        Ok(c)
    }
}

/// Entries in key order from a starting point to an upper bound: the
/// stack holds the path's nodes and, for each, the child (inner) or slot
/// (leaf) at hand.
pub(crate) struct Cursor<'a> {
    nodes: Nodes<'a>,
    stack: Vec<(NodeRef<'a>, usize)>,
    hi: Bound<Vec<u8>>,
    /// The key last returned: keys must ascend.
    last: Option<&'a [u8]>,
    /// Past the end, or after an error.
    done: bool,
}

impl<'a> Cursor<'a> {
    /// Ends the iteration (after an error found by the caller).
    pub fn stop(&mut self) {
        self.done = true;
    }

    fn step(&mut self) -> Result<Option<(u64, &'a [u8], u64)>> {
        loop {
            let Some(&(n, i)) = self.stack.last() else {
                return Ok(None);
            };
            if n.h.leaf && i < n.h.count {
                let key = self.nodes.key(&n, i)?;
                let past = match &self.hi {
                    Bound::Included(h) => key > h.as_slice(),
                    Bound::Excluded(h) => key >= h.as_slice(),
                    Bound::Unbounded => false,
                };
                if past {
                    return Ok(None);
                }
                if self.last.is_some_and(|l| l >= key) {
                    return Err(self.nodes.damaged(
                        n.at,
                        format!("key {i} is not above the key before it"),
                    ));
                }
                self.last = Some(key);
                self.stack.last_mut().expect("a node").1 += 1;
                return Ok(Some((n.at, key, node::value(n.b, i))));
            }
            if n.h.leaf && n.h.count == 0 && self.stack.len() > 1 {
                return Err(self.nodes.damaged(n.at, "a leaf below the root is empty".into()));
            }
            // This node is done: go on in its parent's next child.
            self.stack.pop();
            let Some((p, j)) = self.stack.last_mut() else {
                return Ok(None);
            };
            *j += 1;
            if *j > p.h.count {
                continue;
            }
            let mut next = self.nodes.node(node::child(p.b, &p.h, *j))?;
            loop {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(self.nodes.damaged(
                        next.at,
                        format!("the index is deeper than {MAX_DEPTH} levels"),
                    ));
                }
                if next.h.leaf {
                    self.stack.push((next, 0));
                    break;
                }
                let first = self.nodes.node(next.h.child0)?;
                self.stack.push((next, 0));
                next = first;
            }
        }
    }
}

impl<'a> Iterator for Cursor<'a> {
    /// The node holding the entry, its key and its value.
    type Item = Result<(u64, &'a [u8], u64)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.step().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}
