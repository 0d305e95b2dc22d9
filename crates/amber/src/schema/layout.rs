//! Pointer layouts: where the swizzled pointers of a type lie, flattened from
//! its (stored) descriptor, and how many pages each pointer's target spans.
//! This is all the fault handler needs to swizzle an object, and it is
//! computed from the catalog alone, so pages of types the program has not
//! named yet still swizzle.

use super::desc::{Shape, StoredField, StoredKind, StoredType};
use crate::format::objects::OBJECT_HEADER;
use crate::format::page::HEADER_SIZE;

/// A pointer the fault handler swizzles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtrSlot {
    /// Offset in the object (or array element).
    pub offset: u32,
    /// What it points to.
    pub kind: SlotKind,
}

/// The kinds of swizzled pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// `PRef`: its target's block spans this many pages.
    Ref {
        /// Pages of the target's block.
        pages: u32,
    },
    /// `PVec` / `PBytes` buffer pointer; the capacity (u32) is at offset + 12
    /// and each element has `elem_size` bytes.
    Buffer {
        /// Element size.
        elem_size: u32,
    },
}

/// A type's swizzling layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Object size (for arrays: element size).
    pub size: u32,
    /// Whether objects of this type are arrays of `size`-byte elements.
    pub array: bool,
    /// Swizzled pointers of one object (or one element).
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

fn flatten(kind: &StoredKind, at: u32, page_size: usize, out: &mut Vec<PtrSlot>) {
    match kind {
        StoredKind::Prim(_) | StoredKind::Smart { .. } | StoredKind::Index { .. } => {}
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            let mut inner = Vec::new();
            flatten(elem, 0, page_size, &mut inner);
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
        StoredKind::Struct { fields, .. } => flatten_fields(fields, at, page_size, out),
        StoredKind::Ref { target_size, .. } => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Ref {
                pages: pages_for(u64::from(*target_size), page_size),
            },
        }),
        StoredKind::Vec { elem_size, .. } => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Buffer {
                elem_size: *elem_size,
            },
        }),
        StoredKind::Bytes => out.push(PtrSlot {
            offset: at,
            kind: SlotKind::Buffer { elem_size: 1 },
        }),
    }
}

fn flatten_fields(fields: &[StoredField], at: u32, page_size: usize, out: &mut Vec<PtrSlot>) {
    for f in fields {
        flatten(&f.kind, at + f.offset, page_size, out);
    }
}

impl Layout {
    /// The layout of a stored type for a database of `page_size`-byte pages.
    pub fn of(t: &StoredType, page_size: usize) -> Layout {
        let mut slots = Vec::new();
        let array = match &t.shape {
            Shape::Struct(fields) => {
                flatten_fields(fields, 0, page_size, &mut slots);
                false
            }
            Shape::Array(elem) => {
                flatten(elem, 0, page_size, &mut slots);
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

    /// Whether objects of this type hold swizzled pointers at all.
    pub fn has_pointers(&self) -> bool {
        !self.slots.is_empty()
    }
}
