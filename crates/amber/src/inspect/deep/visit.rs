//! Where the references of a stored value lie: the descent through a
//! value's stored descriptor (nested structs, fixed arrays) down to its
//! reference slots — `PRef`/`Smart` fields, `PVec`/`PBytes` headers,
//! `PIndex` headers — shared by everything that must find every reference
//! of an object: deep verification checks them (`walk.rs`), the collector
//! marks and relocates through them (`crate::gc`). One descent, so that a
//! new field kind is taught to both at once.
//!
//! What is done at a slot is the visitor's ([`Slots`]); the descent only
//! says where the slots are, and names the path to each ([`Seg`]) for
//! messages.

use crate::schema::desc::{StoredField, StoredKind};

/// One step of a field path.
#[derive(Debug, Clone)]
pub(crate) enum Seg<'a> {
    /// The object's type name (the first step).
    Type(&'a str),
    /// A field.
    Field(&'a str),
    /// An element of a fixed array or a vector.
    Index(u64),
    /// An index entry, by its key as shown (`walk/index.rs`).
    Key(String),
}

/// What is done at each reference slot of a value. `b` is the buffer the
/// value lies in (an object's body, or a vector's buffer) and `at` the
/// slot's offset in it; bytes past the end of `b` are the visitor's to
/// refuse or ignore.
pub(crate) trait Slots<'a> {
    /// The descent steps into a field or element (for paths in messages).
    fn enter(&mut self, _seg: Seg<'a>) {}
    /// ... and back out of it.
    fn leave(&mut self) {}
    /// A `PRef`/`Option<PRef>` or `Smart`/`Option<Smart>` slot: 8 bytes,
    /// the target's persistent address (`kind` says which, its target and
    /// nullability).
    fn pointer(&mut self, b: &[u8], at: usize, kind: &'a StoredKind);
    /// A `PVec`/`PBytes` header: buffer address u64, len u32, cap u32; the
    /// buffer holds elements of `elem`, `elem_size` bytes each.
    fn vector(&mut self, b: &[u8], at: usize, elem: &'a StoredKind, elem_size: u32);
    /// A `PString` header: a `PBytes` whose bytes are UTF-8.
    fn string(&mut self, b: &[u8], at: usize) {
        self.vector(b, at, &BYTE, 1);
    }
    /// A `PIndex`/`PMultiIndex` header (`kind`, a `StoredKind::Index`):
    /// root node address u64, len u64 (and a multi-index's next sequence
    /// number u64); values are objects of the struct type it names.
    fn index(&mut self, b: &[u8], at: usize, kind: &'a StoredKind);
}

/// `[u8]`: the element kind of a `PBytes` buffer.
pub(crate) static BYTE: StoredKind = StoredKind::Prim(crate::schema::desc::Prim::U8);

/// Whether values of kind `k` hold any reference.
pub(crate) fn has_pointers(k: &StoredKind) -> bool {
    match k {
        StoredKind::Prim(_) => false,
        StoredKind::Array { elem, .. } => has_pointers(elem),
        StoredKind::Struct { fields, .. } => fields.iter().any(|f| has_pointers(&f.kind)),
        _ => true,
    }
}

/// Visits the reference slots of the struct fields `fields` lying at `at`
/// in `b`.
pub(crate) fn fields<'a>(v: &mut impl Slots<'a>, b: &[u8], at: usize, fields: &'a [StoredField]) {
    for f in fields {
        if !has_pointers(&f.kind) {
            continue;
        }
        v.enter(Seg::Field(&f.name));
        value(v, b, at + f.offset as usize, &f.kind);
        v.leave();
    }
}

/// Visits the reference slots of the value of kind `k` at `at` in `b`.
pub(crate) fn value<'a>(v: &mut impl Slots<'a>, b: &[u8], at: usize, k: &'a StoredKind) {
    match k {
        StoredKind::Prim(_) => {}
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            if !has_pointers(elem) {
                return;
            }
            for i in 0..*len as usize {
                v.enter(Seg::Index(i as u64));
                value(v, b, at + i * *elem_size as usize, elem);
                v.leave();
            }
        }
        StoredKind::Struct { fields: fs, .. } => fields(v, b, at, fs),
        StoredKind::Ref { .. } | StoredKind::Smart { .. } => v.pointer(b, at, k),
        StoredKind::Vec { elem, elem_size } => v.vector(b, at, elem, *elem_size),
        StoredKind::Bytes => v.vector(b, at, &BYTE, 1),
        StoredKind::Str => v.string(b, at),
        StoredKind::Index { .. } => v.index(b, at, k),
    }
}

/// Visits the reference slots of the first `len` elements of a buffer `b`
/// holding elements of `elem`, `elem_size` bytes each (a vector's live
/// elements: its spare capacity is no part of its value).
pub(crate) fn elements<'a>(
    v: &mut impl Slots<'a>,
    b: &[u8],
    len: u64,
    elem: &'a StoredKind,
    elem_size: u32,
) {
    if len == 0 || elem_size == 0 || !has_pointers(elem) {
        return;
    }
    let n = len.min((b.len() / elem_size as usize) as u64);
    for i in 0..n {
        v.enter(Seg::Index(i));
        value(v, b, (i * u64::from(elem_size)) as usize, elem);
        v.leave();
    }
}
