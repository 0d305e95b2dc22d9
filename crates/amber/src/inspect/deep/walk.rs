//! The second pass of deep verification: every live object's fields walked
//! by its stored descriptor, every pointer looked up in the object map.
//!
//! A vector's buffer is checked from the vector (its type, and that it holds
//! `cap` elements), and so are its elements, up to `len`: the spare capacity
//! past it may still hold what a `pop` left, which is not part of any value.
//! An index is walked from its root: every node must be a live node object,
//! every value a pointer to an object of the index's value type, and the
//! entries must number the index's `len` (`walk/index.rs`). Buffers and
//! nodes are read through
//! the block cache, so a finding names the owner's field (`Part.to[2]`,
//! `Part.idx[key 17]`).

mod index;

use super::map::{Blocks, Located, ObjectMap, Start};
use super::visit::{self, Seg, Slots, has_pointers};
use super::{DeepReport, FindingClass, Place, Types};
use crate::db::index::node::NODE_BYTES;
use crate::format::bytes::{get_u32, get_u64};
use crate::format::meta::RootEntry;
use crate::format::objects::walk as walk_objects;
use crate::format::page::PageHeader;
use crate::schema::compare::{PROGRAM_DATABASE, difference};
use crate::schema::desc::{Nullability, Prim, Shape, StoredKind, StoredType, kind_name};
use std::collections::HashMap;
use std::sync::Arc;

/// What a pointer must point at.
#[derive(Debug, Clone, Copy)]
enum Want<'a> {
    /// A live object of the struct type of this name (`PRef<T>`,
    /// `Smart<T>`, an index value).
    Struct(&'a str),
    /// A live object of this type id (a root).
    Id(u32),
    /// A live buffer of `[elem]`, `elem_size` bytes each (`PVec`, `PBytes`).
    Buffer(&'a StoredKind, u32),
    /// A live index node.
    Node,
}

/// `[u64]`: the type of index nodes (and of `PVec<u64>` buffers).
const NODE_ELEM: StoredKind = StoredKind::Prim(Prim::U64);

/// Whose pointers are being checked.
#[derive(Debug, Clone)]
enum Owner {
    /// The object whose body is at this address.
    Object(u64),
    /// A named root.
    Root(String),
}

/// Walks objects and checks their pointers.
pub(super) struct Walker<'a> {
    map: &'a ObjectMap,
    types: &'a Types,
    report: &'a mut DeepReport,
    /// Whose pointers are at hand, and (for an object) the path to the
    /// value at hand.
    owner: Owner,
    path: Vec<Seg<'a>>,
    /// Whether a type id is the array type of elements of a kind (keyed by
    /// the kind's address in `types`): the comparison clones descriptors.
    buffer_types: HashMap<(u32, usize), bool>,
}

impl<'a> Walker<'a> {
    pub fn new(map: &'a ObjectMap, types: &'a Types, report: &'a mut DeepReport) -> Walker<'a> {
        Walker {
            map,
            types,
            report,
            owner: Owner::Object(0),
            path: Vec::new(),
            buffer_types: HashMap::new(),
        }
    }

    fn ty(&self, id: u32) -> Option<&'a StoredType> {
        self.types.get(&id).and_then(Option::as_ref)
    }

    /// `page:offset`.
    fn at(&self, addr: u64) -> String {
        let ps = self.map.page_size;
        format!("{}:{}", addr / ps, addr % ps)
    }

    fn type_label(&self, id: u32) -> String {
        match self.types.get(&id) {
            Some(Some(t)) => format!("`{}`", t.name),
            Some(None) => format!("type id {id} (undecodable descriptor)"),
            None => format!("type id {id} (not in the catalog)"),
        }
    }

    fn path_string(&self) -> String {
        let mut s = String::new();
        for seg in &self.path {
            match seg {
                Seg::Type(t) => s.push_str(t),
                Seg::Field(f) => {
                    s.push('.');
                    s.push_str(f);
                }
                Seg::Index(i) => s.push_str(&format!("[{i}]")),
                Seg::Key(k) => s.push_str(&format!("[key {k}]")),
            }
        }
        s
    }

    /// A finding at the root, or the object's field the path names.
    fn found(&mut self, class: FindingClass, what: String) {
        let ps = self.map.page_size;
        let place = match &self.owner {
            Owner::Object(object) => Place::Field {
                object: *object,
                page: object / ps,
                offset: object % ps,
                path: self.path_string(),
            },
            Owner::Root(name) => Place::Root { name: name.clone() },
        };
        self.report.add(class, place, what);
    }

    /// Walks every live object of the data block `image` starting at page
    /// `head` (its object map was checked by the first pass).
    pub fn block(&mut self, image: &[u8], head: u64, blocks: &mut Blocks<'_>) {
        let used = PageHeader::read(image).map_or(0, |h| h.used as usize);
        for e in walk_objects(image, used).map_while(Result::ok) {
            let Some(t) = self.ty(e.type_id) else {
                continue;
            };
            let Shape::Struct(fields) = &t.shape else {
                continue; // buffers and nodes: checked from their owners
            };
            if e.is_free() || !fields.iter().any(|f| has_pointers(&f.kind)) {
                continue;
            }
            self.owner = Owner::Object(head * self.map.page_size + e.body as u64);
            self.path.clear();
            self.path.push(Seg::Type(&t.name));
            let body = image.get(e.body..e.body + e.size).unwrap_or(&[]);
            visit::fields(&mut Visiting { w: self, blocks }, body, 0, fields);
        }
    }

    /// Checks that `v` points at what `want` says; returns the object when
    /// it does (live, of the right type).
    fn pointer(&mut self, v: u64, want: Want<'_>) -> Option<&'a Start> {
        self.report.pointers += 1;
        let map = self.map;
        let s = match map.locate(v) {
            Located::Start(s) => s,
            Located::Unreadable => {
                self.report.unchecked += 1;
                return None;
            }
            l => {
                let what = format!("holds {}, {}", self.at(v), self.nowhere(l));
                self.found(FindingClass::Damage, what);
                return None;
            }
        };
        let matches = match want {
            Want::Id(id) => Some(s.type_id() == id),
            Want::Struct(name) => match self.types.get(&s.type_id()) {
                Some(Some(t)) => Some(t.name == name && matches!(t.shape, Shape::Struct(_))),
                Some(None) => None,
                None => Some(false),
            },
            Want::Buffer(elem, size) => self.is_buffer_type(s.type_id(), elem, size),
            Want::Node => self
                .is_buffer_type(s.type_id(), &NODE_ELEM, 8)
                .map(|ok| ok && s.size as usize == NODE_BYTES),
        };
        let wanted = || match want {
            Want::Id(id) => format!("a {}", self.type_label(id)),
            Want::Struct(name) => format!("a `{name}`"),
            Want::Buffer(elem, _) => format!("a `[{}]` buffer", kind_name(elem)),
            Want::Node => format!("an index node (a `[u64]` of {NODE_BYTES} bytes)"),
        };
        match matches {
            None => {
                self.report.unchecked += 1;
                None
            }
            Some(false) => {
                let what = format!(
                    "holds {}, the start of a {} object of {} bytes, not {}",
                    self.at(v),
                    self.type_label(s.type_id()),
                    s.size,
                    wanted()
                );
                self.found(FindingClass::Damage, what);
                None
            }
            Some(true) if s.is_free() => {
                // Only the program frees the targets of its own pointers;
                // buffers and nodes are Amber's, freed only once unlinked.
                let (class, what) = match want {
                    Want::Struct(_) | Want::Id(_) => (
                        FindingClass::Dangling,
                        format!("holds {}, {} the program freed", self.at(v), wanted()),
                    ),
                    Want::Buffer(..) | Want::Node => (
                        FindingClass::Damage,
                        format!(
                            "holds {}, {} that is free though this live owner points at it",
                            self.at(v),
                            wanted()
                        ),
                    ),
                };
                self.found(class, what);
                None
            }
            Some(true) => Some(s),
        }
    }

    /// Whether type `id` is the array type of `elem` elements of `size`
    /// bytes (`None`: its descriptor does not decode).
    fn is_buffer_type(&mut self, id: u32, elem: &StoredKind, size: u32) -> Option<bool> {
        let key = (id, std::ptr::from_ref(elem) as usize);
        if let Some(&ok) = self.buffer_types.get(&key) {
            return Some(ok);
        }
        let ok = match self.types.get(&id)? {
            None => return None,
            Some(t) => {
                let want = StoredType::array_of(elem.clone(), size);
                matches!(t.shape, Shape::Array(_))
                    && difference(&want, t, PROGRAM_DATABASE).is_none()
            }
        };
        self.buffer_types.insert(key, ok);
        Some(ok)
    }

    /// What is at an address that is no object's start.
    fn nowhere(&self, l: Located<'_>) -> String {
        match l {
            Located::Start(s) => format!("the start of the object at {}", self.at(s.addr)),
            Located::Inside { obj, by } => format!(
                "{by} bytes into the {} object at {}",
                self.type_label(obj.type_id()),
                self.at(obj.addr)
            ),
            Located::Header(obj) => format!(
                "inside the header of the {} object at {}",
                self.type_label(obj.type_id()),
                self.at(obj.addr)
            ),
            Located::Gap { block, offset } => format!(
                "where the data block at page {block} holds no object (block offset {offset})"
            ),
            Located::Other { block, what } => format!("inside the {what} at page {block}"),
            Located::Unreadable => "inside a block that cannot be read".into(),
            Located::Reserved => "inside the superblocks, below the first data page".into(),
            Located::FreePage(p) => format!("on page {p}, which is free"),
            Located::Beyond { page, pages } => {
                format!("on page {page}, past the end of the database ({pages} pages)")
            }
        }
    }

    /// The committed image of the block holding `s`, and `s`'s body's
    /// offset in it.
    fn image_of(&self, s: &Start, blocks: &mut Blocks<'_>) -> Option<(Arc<Vec<u8>>, usize)> {
        let ps = self.map.page_size;
        let b = self.map.block_of(s.addr / ps)?;
        let image = blocks.get(b.start)?;
        Some((image, (s.addr - b.start * ps) as usize))
    }

    /// A `PVec` (or `PBytes`: `u8` elements) at `at` in `b`.
    fn vector(
        &mut self,
        b: &[u8],
        at: usize,
        elem: &'a StoredKind,
        elem_size: u32,
        blocks: &mut Blocks<'_>,
    ) {
        let (Some(word), Some(len), Some(cap)) =
            (get_u64(b, at), get_u32(b, at + 8), get_u32(b, at + 12))
        else {
            return;
        };
        if len > cap {
            self.found(
                FindingClass::Damage,
                format!("len {len} is more than cap {cap}"),
            );
        }
        if word == 0 {
            if cap > 0 {
                self.found(
                    FindingClass::Damage,
                    format!("no buffer, but len {len} and cap {cap}"),
                );
            }
            return;
        }
        let buf = self.map.home.paddr(word);
        let Some(s) = self.pointer(buf, Want::Buffer(elem, elem_size)) else {
            return;
        };
        let need = u64::from(cap) * u64::from(elem_size);
        if u64::from(s.size) < need {
            let what = format!(
                "its buffer at {} is {} bytes, too small for cap {cap} elements of {elem_size} bytes ({need} bytes)",
                self.at(buf),
                s.size
            );
            self.found(FindingClass::Damage, what);
        }
        if len == 0 || !has_pointers(elem) || elem_size == 0 {
            return;
        }
        let Some((image, off)) = self.image_of(s, blocks) else {
            return;
        };
        let body = image.get(off..off + s.size as usize).unwrap_or(&[]);
        visit::elements(
            &mut Visiting { w: self, blocks },
            body,
            u64::from(len),
            elem,
            elem_size,
        );
    }

    /// A `PString` at `at` in `b`: a byte string whose `len` bytes are
    /// UTF-8 (reading it as `&str` checks that too, and refuses it).
    fn string(&mut self, b: &[u8], at: usize, blocks: &mut Blocks<'_>) {
        self.vector(b, at, &StoredKind::Prim(Prim::U8), 1, blocks);
        let (Some(word), Some(len)) = (get_u64(b, at), get_u32(b, at + 8)) else {
            return;
        };
        if len == 0 || word == 0 {
            return;
        }
        let buf = self.map.home.paddr(word);
        // A missing, misplaced or freed buffer was reported just above.
        let Located::Start(s) = self.map.locate(buf) else {
            return;
        };
        if s.is_free() {
            return;
        }
        let Some((image, off)) = self.image_of(s, blocks) else {
            return;
        };
        let n = len.min(s.size) as usize;
        if let Err(e) = std::str::from_utf8(image.get(off..off + n).unwrap_or(&[])) {
            let what = format!("its text at {} is not UTF-8: {e}", self.at(buf));
            self.found(FindingClass::Damage, what);
        }
    }

    /// A `PRef`/`Smart` slot at `at` in `b`.
    fn pointer_slot(&mut self, b: &[u8], at: usize, k: &'a StoredKind) {
        let (StoredKind::Ref {
            target,
            nullability,
            ..
        }
        | StoredKind::Smart {
            target,
            nullability,
            ..
        }) = k
        else {
            return;
        };
        match get_u64(b, at) {
            None => {}
            Some(0) if *nullability == Nullability::NonNull => self.found(
                FindingClass::Damage,
                format!(
                    "null in a non-null `{}` (a page holding it is refused when fetched)",
                    kind_name(k)
                ),
            ),
            Some(0) => {}
            // A `PRef` is stored in the database's encoding, a `Smart` as
            // its persistent address (`format/home.rs`).
            Some(v) => {
                let v = match k {
                    StoredKind::Ref { .. } => self.map.home.paddr(v),
                    _ => v,
                };
                self.pointer(v, Want::Struct(target));
            }
        }
    }

    /// A named root: it must point at a live object of its type. A root
    /// whose type has no decodable descriptor is a storage-level user's,
    /// and is not checked.
    pub fn root(&mut self, r: &RootEntry) {
        if r.addr == 0 || self.ty(r.type_id).is_none() {
            return;
        }
        self.owner = Owner::Root(r.name.clone());
        self.path.clear();
        self.pointer(r.addr, Want::Id(r.type_id));
    }
}

/// The walker with its block cache, as the descent's visitor: checks each
/// reference slot the descent finds.
struct Visiting<'w, 'a, 'b, 's> {
    w: &'w mut Walker<'a>,
    blocks: &'b mut Blocks<'s>,
}

impl<'a> Slots<'a> for Visiting<'_, 'a, '_, '_> {
    fn enter(&mut self, seg: Seg<'a>) {
        self.w.path.push(seg);
    }

    fn leave(&mut self) {
        self.w.path.pop();
    }

    fn pointer(&mut self, b: &[u8], at: usize, kind: &'a StoredKind) {
        self.w.pointer_slot(b, at, kind);
    }

    fn vector(&mut self, b: &[u8], at: usize, elem: &'a StoredKind, elem_size: u32) {
        self.w.vector(b, at, elem, elem_size, self.blocks);
    }

    fn string(&mut self, b: &[u8], at: usize) {
        self.w.string(b, at, self.blocks);
    }

    fn index(&mut self, b: &[u8], at: usize, kind: &'a StoredKind) {
        if let StoredKind::Index {
            target, key, multi, ..
        } = kind
        {
            let f = index::IndexField {
                target,
                key,
                multi: *multi,
            };
            self.w.index(b, at, &f, self.blocks);
        }
    }
}
