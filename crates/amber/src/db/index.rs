//! `PIndex`: an ordered map from u64 keys to objects, a B+tree whose nodes
//! are reached through persistent addresses translated at each use.
//!
//! This is Texas's mixed granularity (`papers/001_*` §5): faulting in a node
//! swizzles nothing, so a lookup that follows one path down a tree of
//! fan-out 250 reserves frames for that path only, not for every child of
//! every node it touches. Nodes are arrays of u64 (no swizzled pointers):
//!
//! ```text
//! [0]            count | LEAF (bit 63)
//! [1]            next leaf (persistent address; leaves only)
//! [2 .. 2+F]     keys, ascending
//! [2+F .. 3+2F]  leaves: values (persistent addresses); inner: F+1 children
//! ```
//!
//! With F = 252 a node is 4,056 bytes and fills a 4 KiB page.

use super::tx::Tx;
use super::{Db, translate};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::objects::{FLAG_FREE, OBJECT_ALIGN, OBJECT_HEADER};
use crate::format::page::HEADER_SIZE;
use crate::ptr::{PIndex, PRef};
use crate::schema::layout::pages_for;
use crate::vm::{Access, FrameSpace, Persistent};
use std::collections::HashSet;
use std::num::NonZeroU64;
use std::path::Path;

// The node format is shared with the deep verification (`inspect/deep`).
/// Keys per node.
pub(crate) const F: usize = 252;
/// u64 words per node.
pub(crate) const WORDS: usize = 3 + 2 * F;
pub(crate) const LEAF: u64 = 1 << 63;
pub(crate) const KEYS: usize = 2;
pub(crate) const VALS: usize = 2 + F;

/// Reads nodes through the frame table.
///
/// Nodes come from the database's pages, which a checksum protects from
/// media damage but not from a crafted page with a valid checksum, or a bug
/// that stored a wrong address. So every node is checked before its words
/// are used as indexes or addresses: it must lie within one page, be
/// readable, be an object of a node's size, and hold fewer than `F` keys; a
/// child or next-leaf address must not be null; the leaf chain must not
/// loop. A violation is `Error::Corrupt` naming the page and the node,
/// never a panic or a hang.
struct Nodes<'a> {
    access: &'a Access,
    fs: &'a FrameSpace,
    path: &'a Path,
}

/// Bytes of a node.
pub(crate) const NODE_BYTES: usize = WORDS * 8;

/// The virtual address of the node at `paddr`, after checking that it lies
/// within one page, after an object header, and that its page can be read.
fn node_va(fs: &FrameSpace, path: &Path, paddr: u64) -> Result<u64> {
    let ps = fs.frame_size() as u64;
    let off = paddr % ps;
    if paddr == 0 || off < (HEADER_SIZE + OBJECT_HEADER) as u64 || off + NODE_BYTES as u64 > ps {
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
fn damaged(path: &Path, fs: &FrameSpace, paddr: u64, what: String) -> Error {
    Error::Corrupt {
        file: FileKind::PageFile,
        path: path.to_path_buf(),
        at: Location::Page(paddr >> fs.frame_size().trailing_zeros()),
        what: format!("index node at {paddr:#x}: {what}"),
    }
}

impl Nodes<'_> {
    fn damaged(&self, paddr: u64, what: String) -> Error {
        damaged(self.path, self.fs, paddr, what)
    }

    /// The node at `paddr` and its key count, checked.
    fn node(&self, paddr: u64) -> Result<(&[u64], usize)> {
        let va = node_va(self.fs, self.path, paddr)?;
        let hdr = self.access.obj::<[u32; 2]>(va - OBJECT_HEADER as u64);
        if hdr[1] as usize != NODE_BYTES || (hdr[0] >> 24) as u8 & FLAG_FREE != 0 {
            return Err(self.damaged(
                paddr,
                format!(
                    "the object there is {} bytes{}, not a node",
                    hdr[1],
                    if (hdr[0] >> 24) as u8 & FLAG_FREE != 0 {
                        " and free"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let n = self.access.slice::<u64>(va, WORDS);
        let count = (n[0] & !LEAF) as usize;
        if count >= F {
            return Err(self.damaged(
                paddr,
                format!("it holds {count} keys, more than a node's {}", F - 1),
            ));
        }
        Ok((n, count))
    }

    /// The leaf that would hold `key`, and the path of inner nodes to it.
    fn descend(&self, root: u64, key: u64) -> Result<(u64, Vec<(u64, usize)>)> {
        let mut path = Vec::new();
        let mut at = root;
        for _ in 0..64 {
            let (n, count) = self.node(at)?;
            if n[0] & LEAF != 0 {
                return Ok((at, path));
            }
            let i = n[KEYS..KEYS + count].partition_point(|&k| k <= key);
            path.push((at, i));
            let child = n[VALS + i];
            if child == 0 {
                return Err(self.damaged(at, format!("child {i} is null")));
            }
            at = child;
        }
        Err(self.damaged(root, "the index is deeper than 64 levels".into()))
    }

    fn get(&self, root: u64, key: u64) -> Result<Option<u64>> {
        if root == 0 {
            return Ok(None);
        }
        let (leaf, _) = self.descend(root, key)?;
        let (n, count) = self.node(leaf)?;
        let keys = &n[KEYS..KEYS + count];
        Ok(keys.binary_search(&key).ok().map(|i| n[VALS + i]))
    }

    /// Entries with `lo <= key < hi`, in order.
    fn range(&self, root: u64, lo: u64, hi: u64, out: &mut Vec<(u64, u64)>) -> Result<()> {
        if root == 0 || lo >= hi {
            return Ok(());
        }
        let (mut leaf, _) = self.descend(root, lo)?;
        let mut seen = HashSet::new();
        loop {
            if !seen.insert(leaf) {
                return Err(self.damaged(leaf, "the leaf chain loops back to it".into()));
            }
            let (n, count) = self.node(leaf)?;
            for i in 0..count {
                let k = n[KEYS + i];
                if k >= hi {
                    return Ok(());
                }
                if k >= lo {
                    out.push((k, n[VALS + i]));
                }
            }
            if n[1] == 0 {
                return Ok(());
            }
            leaf = n[1];
        }
    }
}

/// The pointer an index value (a persistent address) stands for.
fn to_ref<V: Persistent>(fs: &FrameSpace, path: &Path, paddr: u64) -> Result<PRef<V>> {
    if paddr == 0 || !paddr.is_multiple_of(OBJECT_ALIGN as u64) {
        return Err(Error::Corrupt {
            file: FileKind::PageFile,
            path: path.to_path_buf(),
            at: Location::Page(paddr >> fs.frame_size().trailing_zeros()),
            what: format!("an index value, {paddr:#x}, is not an object's address"),
        });
    }
    let va = translate(
        fs,
        paddr,
        pages_for(u64::from(V::DESC.size), fs.frame_size()),
    )?;
    NonZeroU64::new(va)
        .map(PRef::from_addr)
        .ok_or_else(|| Error::invalid("index value at address 0"))
}

impl Db {
    fn nodes(&self) -> Nodes<'_> {
        Nodes {
            access: &self.access,
            fs: &self.fs,
            path: self.store.path(),
        }
    }

    /// The object under `key`.
    pub fn index_get<V: Persistent>(&self, idx: &PIndex<V>, key: u64) -> Result<Option<PRef<V>>> {
        self.nodes()
            .get(idx.root, key)?
            .map(|pa| to_ref(&self.fs, self.store.path(), pa))
            .transpose()
    }

    /// Entries with keys in `lo..hi`, in key order.
    pub fn index_range<V: Persistent>(
        &self,
        idx: &PIndex<V>,
        lo: u64,
        hi: u64,
    ) -> Result<Vec<(u64, PRef<V>)>> {
        let mut raw = Vec::new();
        self.nodes().range(idx.root, lo, hi, &mut raw)?;
        raw.into_iter()
            .map(|(k, pa)| Ok((k, to_ref(&self.fs, self.store.path(), pa)?)))
            .collect()
    }
}

impl Tx<'_> {
    fn nodes(&self) -> Nodes<'_> {
        Nodes {
            access: self.access,
            fs: self.fs,
            path: self.pager.store.path(),
        }
    }

    /// A value read from a node, as a pointer.
    fn value<V: Persistent>(&self, paddr: u64) -> Result<PRef<V>> {
        to_ref(self.fs, self.pager.store.path(), paddr)
    }

    /// The object under `key`.
    pub fn index_get<V: Persistent>(&self, idx: &PIndex<V>, key: u64) -> Result<Option<PRef<V>>> {
        self.nodes()
            .get(idx.root, key)?
            .map(|pa| self.value(pa))
            .transpose()
    }

    fn new_node(&mut self, leaf: bool, near: Option<u64>) -> Result<(u64, u64)> {
        let id = self.array_id::<u64>()?;
        let va = self.alloc_raw(id, (WORDS * 8) as u32, near)?;
        let n = self.access.slice_mut::<u64>(va, WORDS);
        n.fill(0);
        if leaf {
            n[0] = LEAF;
        }
        Ok((va, self.paddr(va)?))
    }

    /// The node at `paddr`, mutably; its address is checked, its count is
    /// the caller's (a node on the path `descend` checked, or one being
    /// split).
    fn node_mut(&mut self, paddr: u64) -> Result<&mut [u64]> {
        let va = node_va(self.fs, self.pager.store.path(), paddr)?;
        Ok(self.access.slice_mut::<u64>(va, WORDS))
    }

    /// Maps `key` to `value` in index `field` of `obj`; returns the value it
    /// replaced.
    pub fn index_insert<O: Persistent, V: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PIndex<V>,
        key: u64,
        value: PRef<V>,
    ) -> Result<Option<PRef<V>>> {
        let iaddr = std::ptr::from_mut(field(self.access.object_mut(obj.addr()))) as u64;
        let vpa = self.live_paddr::<V>(value.addr())?;
        let root = self.access.obj::<PIndex<V>>(iaddr).root;
        let root = if root == 0 {
            let (_, pa) = self.new_node(true, Some(obj.addr()))?;
            self.access.obj_mut::<PIndex<V>>(iaddr).root = pa;
            pa
        } else {
            root
        };
        let (leaf, path) = self.nodes().descend(root, key)?;
        let n = self.node_mut(leaf)?;
        let count = (n[0] & !LEAF) as usize;
        match n[KEYS..KEYS + count].binary_search(&key) {
            Ok(i) => {
                let old = std::mem::replace(&mut n[VALS + i], vpa);
                return self.value(old).map(Some);
            }
            Err(i) => {
                n.copy_within(KEYS + i..KEYS + count, KEYS + i + 1);
                n.copy_within(VALS + i..VALS + count, VALS + i + 1);
                n[KEYS + i] = key;
                n[VALS + i] = vpa;
                n[0] = LEAF | (count as u64 + 1);
            }
        }
        self.access.obj_mut::<PIndex<V>>(iaddr).len += 1;
        if count + 1 == F {
            self.split::<V>(iaddr, leaf, path)?;
        }
        Ok(None)
    }

    /// Splits the full node `at`, pushing the separator up `path` (and
    /// growing a new root at the top).
    fn split<V: Persistent>(
        &mut self,
        iaddr: u64,
        mut at: u64,
        mut path: Vec<(u64, usize)>,
    ) -> Result<()> {
        loop {
            let full: Vec<u64> = self.node_mut(at)?.to_vec();
            let leaf = full[0] & LEAF != 0;
            let count = (full[0] & !LEAF) as usize;
            let mid = count / 2;
            let (right_va, right_pa) = self.new_node(leaf, Some(translate(self.fs, at, 1)?))?;
            let sep;
            {
                let r = self.access.slice_mut::<u64>(right_va, WORDS);
                if leaf {
                    let n = count - mid;
                    r[KEYS..KEYS + n].copy_from_slice(&full[KEYS + mid..KEYS + count]);
                    r[VALS..VALS + n].copy_from_slice(&full[VALS + mid..VALS + count]);
                    r[0] = LEAF | n as u64;
                    r[1] = full[1];
                    sep = full[KEYS + mid];
                } else {
                    // The middle key moves up; its right child starts the new node.
                    let n = count - mid - 1;
                    r[KEYS..KEYS + n].copy_from_slice(&full[KEYS + mid + 1..KEYS + count]);
                    r[VALS..=VALS + n].copy_from_slice(&full[VALS + mid + 1..=VALS + count]);
                    r[0] = n as u64;
                    sep = full[KEYS + mid];
                }
            }
            {
                let l = self.node_mut(at)?;
                l[0] = if leaf { LEAF | mid as u64 } else { mid as u64 };
                if leaf {
                    l[1] = right_pa;
                }
            }
            match path.pop() {
                None => {
                    let (root_va, root_pa) = self.new_node(false, None)?;
                    let r = self.access.slice_mut::<u64>(root_va, WORDS);
                    r[0] = 1;
                    r[KEYS] = sep;
                    r[VALS] = at;
                    r[VALS + 1] = right_pa;
                    self.access.obj_mut::<PIndex<V>>(iaddr).root = root_pa;
                    return Ok(());
                }
                Some((parent, i)) => {
                    let p = self.node_mut(parent)?;
                    let count = p[0] as usize;
                    p.copy_within(KEYS + i..KEYS + count, KEYS + i + 1);
                    p.copy_within(VALS + i + 1..=VALS + count, VALS + i + 2);
                    p[KEYS + i] = sep;
                    p[VALS + i + 1] = right_pa;
                    p[0] = count as u64 + 1;
                    if count + 1 < F {
                        return Ok(());
                    }
                    at = parent;
                }
            }
        }
    }

    /// Removes `key` from index `field` of `obj`; returns its value. Leaves
    /// are not merged (lookups stay correct; space is reclaimed when keys
    /// come back).
    pub fn index_remove<O: Persistent, V: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PIndex<V>,
        key: u64,
    ) -> Result<Option<PRef<V>>> {
        let iaddr = std::ptr::from_mut(field(self.access.object_mut(obj.addr()))) as u64;
        let root = self.access.obj::<PIndex<V>>(iaddr).root;
        if root == 0 {
            return Ok(None);
        }
        let (leaf, _) = self.nodes().descend(root, key)?;
        let n = self.node_mut(leaf)?;
        let count = (n[0] & !LEAF) as usize;
        let Ok(i) = n[KEYS..KEYS + count].binary_search(&key) else {
            return Ok(None);
        };
        let old = n[VALS + i];
        n.copy_within(KEYS + i + 1..KEYS + count, KEYS + i);
        n.copy_within(VALS + i + 1..VALS + count, VALS + i);
        n[0] = LEAF | (count as u64 - 1);
        self.access.obj_mut::<PIndex<V>>(iaddr).len -= 1;
        self.value(old).map(Some)
    }
}
