//! Pointer layouts: where the swizzled pointers of a type lie, flattened from
//! its (stored) descriptor, how many pages each pointer's target spans, and
//! which pointers may not hold null. This is all the fault handler needs to
//! swizzle and check an object, and it is computed from the catalog alone,
//! so pages of types the program has not named yet still swizzle.
//!
//! Elements of a vector's buffer (an array type) are never checked for
//! null: the buffer does not know the vector's length, and its spare
//! capacity, from the length to the capacity, is zero until pushed into. A
//! vector's element kind is compared by the schema check with the rest of
//! its owner's field, so a buffer of nullable elements is not read as one of
//! non-null elements.

use super::desc::{Nullability, Shape, StoredField, StoredKind, StoredType};
use crate::format::objects::OBJECT_HEADER;
use crate::format::page::HEADER_SIZE;

/// A pointer the fault handler swizzles or checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtrSlot {
    /// Offset in the object (or array element).
    pub offset: u32,
    /// What it points to.
    pub kind: SlotKind,
}

/// The kinds of pointer slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// `PRef`: its target's block spans this many pages.
    Ref {
        /// Pages of the target's block.
        pages: u32,
        /// Whether it may hold 0: an `Option<PRef<T>>`, a field of a
        /// version-1 entry (which does not say), or an element of a buffer.
        nullable: bool,
    },
    /// A `Smart<T>`: never translated, only checked not to hold 0 (an
    /// `Option<Smart<T>>` needs no slot).
    Smart,
    /// A `Lazy<T>`: left as a persistent address when fetched (checked
    /// aligned; 0 is null); unswizzled at commit if the program's reads
    /// rewrote it to a direct address.
    Lazy,
    /// `PVec` / `PBytes` buffer pointer; the capacity (u32) is at offset + 12
    /// and each element has `elem_size` bytes.
    Buffer {
        /// Element size.
        elem_size: u32,
    },
}

impl SlotKind {
    /// Whether the slot may hold 0. Only a `Ref` or `Smart` slot may not: a
    /// `PRef` or `Smart` holding 0 would be undefined behaviour in safe code,
    /// while a null `Lazy` is a value and a null buffer pointer an empty
    /// vector.
    #[inline(always)]
    pub fn nullable(self) -> bool {
        match self {
            SlotKind::Ref { nullable, .. } => nullable,
            SlotKind::Smart => false,
            SlotKind::Lazy => true,
            SlotKind::Buffer { .. } => true,
        }
    }
}

/// A type's swizzling layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Object size (for arrays: element size).
    pub size: u32,
    /// Whether objects of this type are arrays of `size`-byte elements.
    pub array: bool,
    /// Pointer slots of one object (or one element), by offset: swizzled,
    /// or (`SlotKind::Smart`) only checked.
    pub slots: Vec<PtrSlot>,
}

/// Pages a block holding one object of `size` body bytes needs: one if the
/// object fits in a page after the page header, else a run.
#[inline]
pub fn pages_for(size: u64, page_size: usize) -> u32 {
    let need = HEADER_SIZE as u64 + OBJECT_HEADER as u64 + size;
    // Swizzling asks for every vector it meets; most fit in a page, and a
    // division per vector was a tenth of swizzling an OO1 page.
    if need <= page_size as u64 {
        return 1;
    }
    need.div_ceil(page_size as u64) as u32
}

/// Whether an object of `size` body bytes goes in a block of its own.
pub fn is_large(size: u64, page_size: usize) -> bool {
    pages_for(size, page_size) > 1
}

/// Appends the slots of a value of kind `kind` at offset `at`; `in_buffer`:
/// the value is (in) an element of a buffer, whose pointers are not checked
/// for null (see the module's comment).
fn flatten(kind: &StoredKind, at: u32, page_size: usize, in_buffer: bool, out: &mut Vec<PtrSlot>) {
    let non_null = |n: &Nullability| *n == Nullability::NonNull && !in_buffer;
    match kind {
        StoredKind::Prim(_) | StoredKind::Index { .. } => {}
        StoredKind::Smart { lazy: true, .. } => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Lazy,
        }),
        StoredKind::Smart { nullability, .. } => {
            if non_null(nullability) {
                out.push(PtrSlot {
                    offset: at,
                    kind: SlotKind::Smart,
                });
            }
        }
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            let mut inner = Vec::new();
            flatten(elem, 0, page_size, in_buffer, &mut inner);
            if !inner.is_empty() {
                for i in 0..*len {
                    for s in &inner {
                        out.push(PtrSlot {
                            offset: at + i * elem_size + s.offset,
                            kind: s.kind,
                        });
                    }
                }
            }
        }
        StoredKind::Struct { fields, .. } => flatten_fields(fields, at, page_size, in_buffer, out),
        StoredKind::Ref {
            target_size,
            nullability,
            ..
        } => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Ref {
                pages: pages_for(u64::from(*target_size), page_size),
                nullable: !non_null(nullability),
            },
        }),
        StoredKind::Vec { elem_size, .. } => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Buffer {
                elem_size: *elem_size,
            },
        }),
        StoredKind::Bytes | StoredKind::Str => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Buffer { elem_size: 1 },
        }),
    }
}

fn flatten_fields(
    fields: &[StoredField],
    at: u32,
    page_size: usize,
    in_buffer: bool,
    out: &mut Vec<PtrSlot>,
) {
    for f in fields {
        flatten(&f.kind, at + f.offset, page_size, in_buffer, out);
    }
}

impl Layout {
    /// The layout of a stored type for a database of `page_size`-byte pages.
    pub fn of(t: &StoredType, page_size: usize) -> Layout {
        let mut slots = Vec::new();
        let array = match &t.shape {
            Shape::Struct(fields) => {
                flatten_fields(fields, 0, page_size, false, &mut slots);
                false
            }
            Shape::Array(elem) => {
                flatten(elem, 0, page_size, true, &mut slots);
                true
            }
        };
        slots.sort_by_key(|s| s.offset);
        Layout {
            size: t.size,
            array,
            slots,
        }
    }

    /// Whether objects of this type hold pointers to swizzle or check at all.
    pub fn has_pointers(&self) -> bool {
        !self.slots.is_empty()
    }
}

/// The pointer field at byte `offset` of an object of struct type `t`, as a
/// path (`next`, `cells[2].p`) with its kind; for messages about a slot.
pub fn pointer_at(t: &StoredType, offset: u32) -> Option<(String, &StoredKind)> {
    let Shape::Struct(fields) = &t.shape else {
        return None;
    };
    pointer_in_fields(fields, 0, u64::from(offset), "")
}

fn pointer_in_fields<'a>(
    fields: &'a [StoredField],
    at: u64,
    offset: u64,
    prefix: &str,
) -> Option<(String, &'a StoredKind)> {
    fields.iter().find_map(|f| {
        let path = format!("{prefix}{}", f.name);
        pointer_in(&f.kind, at + u64::from(f.offset), offset, path)
    })
}

fn pointer_in(k: &StoredKind, at: u64, offset: u64, path: String) -> Option<(String, &StoredKind)> {
    match k {
        StoredKind::Ref { .. } | StoredKind::Smart { .. } if at == offset => Some((path, k)),
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } if offset >= at && *elem_size > 0 => {
            let i = (offset - at) / u64::from(*elem_size);
            if i >= u64::from(*len) {
                return None;
            }
            let start = at + i * u64::from(*elem_size);
            pointer_in(elem, start, offset, format!("{path}[{i}]"))
        }
        StoredKind::Struct { fields, .. } => {
            pointer_in_fields(fields, at, offset, &format!("{path}."))
        }
        _ => None,
    }
}
