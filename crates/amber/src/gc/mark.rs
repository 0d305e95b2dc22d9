//! Marking: every object reachable from the named roots, and how it was
//! reached — which is what says where its own references lie.
//!
//! A struct object's references are its fields' (its stored descriptor); a
//! vector's buffer holds its elements' references up to the vector's
//! length, so the buffer's role carries the element kind and the length
//! from the owner; an index node's are the node format's (`index.rs`). The
//! descent through a value's descriptor is deep verification's
//! (`inspect/deep/visit.rs`): one walker for both.
//!
//! A freed object that a live one still points at (a dangling reference the
//! program committed) is reached like any other and kept, FREE flag and
//! all, with everything it points at: following the reference must still
//! be refused as dangling after the collection, and the freed object's
//! pointers are swizzled when its page is fetched like every other's, so
//! they must lead somewhere that exists.

use super::index::{self, NodeRef};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::bytes::{get_u32, get_u64};
use crate::format::meta::RootEntry;
use crate::inspect::deep::Types;
use crate::inspect::deep::map::{Blocks, ObjectMap, Start};
use crate::inspect::deep::visit::{self, Slots};
use crate::schema::desc::{Shape, StoredKind, StoredType};
use std::path::Path;
use std::sync::Arc;

/// How an object was reached.
#[derive(Debug, Clone, Copy)]
pub(super) enum Role<'a> {
    /// Through a pointer, an index value or a root: its own stored type
    /// says where its references are.
    Object,
    /// As a vector's buffer: its first `len` elements of `elem`
    /// (`elem_size` bytes each) are the vector's value; the rest is spare
    /// capacity, no part of any value.
    Buffer {
        elem: &'a StoredKind,
        elem_size: u32,
        len: u32,
    },
    /// As an index node.
    Node,
}

/// The marking's state: the role of every reached object (by its position
/// in the map of starts) and the objects whose references are still to be
/// followed.
struct Marker<'m, 'a> {
    map: &'m ObjectMap,
    types: &'a Types,
    path: &'m Path,
    roles: Vec<Option<Role<'a>>>,
    work: Vec<usize>,
    /// The object whose references are being followed (for messages).
    from: u64,
    failed: Option<Error>,
}

/// Marks everything reachable from `roots`; returns each object's role
/// (`None`: unreachable), parallel to `map.starts`.
pub(super) fn mark<'a>(
    path: &Path,
    map: &ObjectMap,
    types: &'a Types,
    roots: &[RootEntry],
    blocks: &mut Blocks<'_>,
) -> Result<Vec<Option<Role<'a>>>> {
    let mut m = Marker {
        map,
        types,
        path,
        roles: vec![None; map.starts.len()],
        work: Vec::new(),
        from: 0,
        failed: None,
    };
    for r in roots.iter().filter(|r| r.addr != 0) {
        if map.start_index(r.addr).is_none() {
            return Err(m.corrupt(format!(
                "root `{}` holds {:#x}, which is no object's start (a root set through \
                 the storage API?): collect works on object databases only",
                r.name, r.addr
            )));
        }
        m.reach(r.addr, Role::Object);
    }
    while let Some(i) = m.work.pop() {
        if let Some(e) = m.failed.take() {
            return Err(e);
        }
        m.scan(i, blocks)?;
    }
    match m.failed.take() {
        Some(e) => Err(e),
        None => Ok(m.roles),
    }
}

/// The stored type of `s`, which must have a decodable descriptor.
pub(super) fn type_of<'a>(
    types: &'a Types,
    s: &Start,
) -> std::result::Result<&'a StoredType, String> {
    match types.get(&s.type_id()) {
        Some(Some(t)) => Ok(t),
        Some(None) => Err(format!(
            "type id {} has a descriptor that does not decode",
            s.type_id()
        )),
        None => Err(format!("type id {} is not in the catalog", s.type_id())),
    }
}

/// The committed image of the block holding `s`, and `s`'s body's offset
/// in it.
pub(super) fn image_of(
    map: &ObjectMap,
    blocks: &mut Blocks<'_>,
    s: &Start,
) -> Option<(Arc<Vec<u8>>, usize)> {
    let ps = map.page_size;
    let b = map.block_of(s.addr / ps)?;
    let image = blocks.get(b.start)?;
    let off = (s.addr - b.start * ps) as usize;
    (off + s.size as usize <= image.len()).then_some((image, off))
}

impl<'a> Marker<'_, 'a> {
    fn corrupt(&self, what: String) -> Error {
        Error::Corrupt {
            file: FileKind::PageFile,
            path: self.path.to_path_buf(),
            at: Location::Page(self.from / self.map.page_size),
            what: format!("collect: {what}"),
        }
    }

    /// `addr` is reached as `role`: marked, and queued to have its
    /// references followed, unless it was reached already. A buffer reached
    /// again with a longer length (two vectors sharing one buffer, which
    /// the safe API never makes) is followed again up to it.
    fn reach(&mut self, addr: u64, role: Role<'a>) {
        if self.failed.is_some() {
            return;
        }
        let Some(i) = self.map.start_index(addr) else {
            let ps = self.map.page_size;
            let what = format!(
                "the object at {}:{} holds {}:{}, which is no object's start",
                self.from / ps,
                self.from % ps,
                addr / ps,
                addr % ps
            );
            self.failed = Some(self.corrupt(what));
            return;
        };
        match (&mut self.roles[i], role) {
            (slot @ None, _) => {
                *slot = Some(role);
                self.work.push(i);
            }
            (Some(Role::Buffer { len: old, .. }), Role::Buffer { len, .. }) if len > *old => {
                *old = len;
                self.work.push(i);
            }
            _ => {}
        }
    }

    /// Follows the references of the object at position `i`.
    fn scan(&mut self, i: usize, blocks: &mut Blocks<'_>) -> Result<()> {
        let s = self.map.starts[i];
        self.from = s.addr;
        let Some((image, off)) = image_of(self.map, blocks, &s) else {
            blocks.result()?;
            return Err(self.corrupt(format!("the block of object {:#x} cannot be read", s.addr)));
        };
        let body = &image[off..off + s.size as usize];
        match self.roles[i] {
            Some(Role::Object) => {
                let t = type_of(self.types, &s).map_err(|w| self.corrupt(w))?;
                match &t.shape {
                    Shape::Struct(fields) => visit::fields(self, body, 0, fields),
                    // An array object reached as a whole (not through a
                    // vector): every element is part of it.
                    Shape::Array(elem) => {
                        let n = u64::from(s.size) / u64::from(t.size.max(1));
                        visit::elements(self, body, n, elem, t.size);
                    }
                }
            }
            Some(Role::Buffer {
                elem,
                elem_size,
                len,
            }) => visit::elements(self, body, u64::from(len), elem, elem_size),
            Some(Role::Node) => {
                for (at, kind) in index::refs(body).map_err(|w| self.corrupt(w))? {
                    let v = get_u64(body, at).unwrap_or(0);
                    let role = match kind {
                        NodeRef::Node => Role::Node,
                        NodeRef::Value => Role::Object,
                    };
                    self.reach(v, role);
                }
            }
            None => {}
        }
        Ok(())
    }
}

impl<'a> Slots<'a> for Marker<'_, 'a> {
    fn pointer(&mut self, b: &[u8], at: usize, kind: &'a StoredKind) {
        if let Some(v) = get_u64(b, at).filter(|&v| v != 0) {
            // A `PRef` is stored in the database's encoding, a `Smart` as
            // its persistent address (`format/home.rs`).
            let v = match kind {
                StoredKind::Ref { .. } => self.map.home.paddr(v),
                _ => v,
            };
            self.reach(v, Role::Object);
        }
    }

    fn vector(&mut self, b: &[u8], at: usize, elem: &'a StoredKind, elem_size: u32) {
        if let (Some(buf), Some(len)) = (get_u64(b, at), get_u32(b, at + 8))
            && buf != 0
        {
            self.reach(
                self.map.home.paddr(buf),
                Role::Buffer {
                    elem,
                    elem_size,
                    len,
                },
            );
        }
    }

    fn index(&mut self, b: &[u8], at: usize, _kind: &'a StoredKind) {
        if let Some(root) = get_u64(b, at).filter(|&v| v != 0) {
            self.reach(root, Role::Node);
        }
    }
}
