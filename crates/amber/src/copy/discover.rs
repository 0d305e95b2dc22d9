//! Where the pointers of a copy are, for eager swizzling upon discovery
//! (White & DeWitt 1992 §3, `papers/003_*`; the object-at-a-time scheme of
//! Moss that its §2 describes): the first use of a copy discovers every
//! pointer in it, copying each target in and linking the field to it; the
//! targets are not walked until they are used themselves (Figure 4b: a
//! traversal to depth 1 from the root of a tree of eight parts copies all
//! eight, where the lazy variant copies the four it visits).
//!
//! The pointers are found by the stored type descriptor (the catalog's, as
//! the page swizzler finds them through the layout), with their targets'
//! sizes, which a copy-in needs: a `PRef` (its word a direct address, as
//! the frames hold it), a `Smart` (a persistent address) and a `Lazy`
//! (either), nullable or not. Vector and byte-string buffers and indexes
//! are not objects the cache follows ([`CopyPtr`](super::CopyPtr)), so
//! they are not discovered either.

use crate::db::Tx;
use crate::error::Result;
use crate::ptr::LAZY_DIRECT;
use crate::schema::desc::{Shape, StoredKind, StoredType};

/// How a pointer field holds its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `PRef`: the target's virtual address in the frames.
    Ref,
    /// `Smart`: its persistent address.
    Smart,
    /// `Lazy`: its persistent address, or (bit 0 set) its virtual address
    /// if a read through the frames rewrote it.
    Lazy,
}

/// One pointer field of a type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PtrField {
    /// Its offset in the object.
    pub(crate) offset: u32,
    form: Form,
    /// The size of the object it leads to.
    pub(crate) target_size: u32,
}

impl PtrField {
    /// The persistent address of the target of the field holding `word`
    /// (`None` for null).
    pub(crate) fn target(&self, tx: &Tx<'_>, word: u64) -> Result<Option<u64>> {
        Ok(match (self.form, word) {
            (_, 0) => None,
            (Form::Ref, va) => Some(tx.paddr(va)?),
            (Form::Lazy, w) if w & LAZY_DIRECT != 0 => Some(tx.paddr(w & !LAZY_DIRECT)?),
            (Form::Smart | Form::Lazy, pa) => Some(pa),
        })
    }
}

/// The pointer fields of the objects of one stored type, by offset. Empty
/// for an array type (a buffer): the cache never hands one to the program.
#[derive(Debug, Default)]
pub(crate) struct PtrMap {
    fields: Vec<PtrField>,
}

impl PtrMap {
    /// The pointer fields of type `t`.
    pub(crate) fn of(t: &StoredType) -> PtrMap {
        let mut fields = Vec::new();
        if let Shape::Struct(fs) = &t.shape {
            for f in fs {
                collect(&f.kind, f.offset, &mut fields);
            }
        }
        fields.sort_by_key(|f| f.offset);
        PtrMap { fields }
    }

    /// The pointer fields lying in bytes `[lo, hi)`.
    pub(crate) fn within(&self, lo: usize, hi: usize) -> &[PtrField] {
        let a = self.fields.partition_point(|f| (f.offset as usize) < lo);
        let b = self
            .fields
            .partition_point(|f| (f.offset as usize) + 8 <= hi);
        &self.fields[a..b.max(a)]
    }
}

/// Appends the pointer fields of a value of `kind` at offset `at`.
fn collect(kind: &StoredKind, at: u32, out: &mut Vec<PtrField>) {
    let mut push = |form, target_size: &u32| {
        out.push(PtrField {
            offset: at,
            form,
            target_size: *target_size,
        })
    };
    match kind {
        StoredKind::Ref { target_size, .. } => push(Form::Ref, target_size),
        StoredKind::Smart {
            target_size, lazy, ..
        } => push(if *lazy { Form::Lazy } else { Form::Smart }, target_size),
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            for i in 0..*len {
                collect(elem, at + i * elem_size, out);
            }
        }
        StoredKind::Struct { fields, .. } => {
            for f in fields {
                collect(&f.kind, at + f.offset, out);
            }
        }
        StoredKind::Prim(_)
        | StoredKind::Index { .. }
        | StoredKind::Vec { .. }
        | StoredKind::Bytes
        | StoredKind::Str => {}
    }
}
