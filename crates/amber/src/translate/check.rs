//! Checking a fetched block without swizzling it: what
//! [`convert_block`](super::swizzle::convert_block) refuses when it
//! swizzles (a damaged object map, an unknown type, an object shorter than
//! its type, a misaligned pointer, a pointer no frame can be given, a null
//! in a non-null field), found without writing a byte.
//!
//! The `mapped` backend (docs/design.md §4.3.1) reads pages as the page
//! file holds them: at home a stored pointer already is the address its
//! target has, so the check needs no translated copy of the block, and can
//! read the block where it lies (the mapped page cache) rather than a copy
//! of it. The walk is the swizzling walk's, slot for slot; only the
//! conversions' results are dropped.

use crate::format::bytes::get_u32;
use crate::format::objects::{self, ObjectEntry};
use crate::format::page::{HEADER_SIZE, PageHeader};
use crate::schema::layout::{PtrSlot, SlotKind, pages_for};
use crate::schema::registry::{Snapshot, TypeEntry};

use super::swizzle::{AddrMap, Direction, aligned, slot_word, type_of};

/// Checks every object of `block` (a whole block, run included) as
/// swizzling it would, mapping each pointer through `map` (whose answers
/// are dropped: a pointer is refused only if `map` refuses it).
pub fn check_block(
    block: &[u8],
    page_size: usize,
    types: &Snapshot,
    map: &impl AddrMap,
) -> Result<(), String> {
    let h = PageHeader::read(block).ok_or("block shorter than its header")?;
    let used = h.used as usize;
    // `entry_at` rather than `objects::walk`: the iterator's items carry
    // the error's message, and walking through it took 2-3 times as long.
    let mut pos = HEADER_SIZE;
    while let Some(e) = objects::entry_at(block, used, pos).map_err(|e| e.to_string())? {
        pos = e.end();
        check_object(block, &e, page_size, types, map)?;
    }
    Ok(())
}

/// Checks the pointers of one object, given its map entry.
fn check_object(
    block: &[u8],
    e: &ObjectEntry,
    page_size: usize,
    types: &Snapshot,
    map: &impl AddrMap,
) -> Result<(), String> {
    let t = type_of(types, e)?;
    let l = &t.layout;
    if l.slots.is_empty() {
        return Ok(());
    }
    if !l.array {
        if e.size < l.size as usize {
            return Err(format!(
                "object at offset {} is {} bytes, its type `{}` needs {}",
                e.header, e.size, t.stored.name, l.size
            ));
        }
        return check_slots(block, e.body, t, e, page_size, map);
    }
    if l.size == 0 {
        return Ok(());
    }
    let n = e.size / l.size as usize;
    if let (
        [
            PtrSlot {
                offset: 0,
                kind: SlotKind::Ref { pages, nullable: true },
            },
        ],
        8,
    ) = (l.slots.as_slice(), l.size)
    {
        let words = e
            .body
            .checked_add(n * 8)
            .and_then(|end| block.get(e.body..end))
            .ok_or_else(|| format!("array at offset {} outside its block", e.body))?;
        let home = map.home();
        for word in words.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(word);
            match u64::from_le_bytes(b) {
                0 => {}
                v => {
                    map.to_va(home.paddr(aligned(v)?), *pages)?;
                }
            }
        }
        return Ok(());
    }
    for i in 0..n {
        check_slots(block, e.body + i * l.size as usize, t, e, page_size, map)?;
    }
    Ok(())
}

/// Checks the slots of the object (or array element) of type `t` at
/// `base`, part of the object `e`: `convert_slots` swizzling, writing
/// nothing.
#[inline(always)]
fn check_slots(
    block: &[u8],
    base: usize,
    t: &TypeEntry,
    e: &ObjectEntry,
    page_size: usize,
    map: &impl AddrMap,
) -> Result<(), String> {
    let home = map.home();
    for s in &t.layout.slots {
        let at = base + s.offset as usize;
        let Some(v) = slot_word(block, at, s, t, e, Direction::Swizzle)? else {
            continue;
        };
        match s.kind {
            SlotKind::Smart => {}
            SlotKind::Lazy => {
                aligned(v)?;
            }
            SlotKind::Ref { pages, .. } => {
                map.to_va(home.paddr(aligned(v)?), pages)?;
            }
            SlotKind::Buffer { elem_size } => {
                let cap = get_u32(block, at + 12).ok_or("buffer capacity truncated")?;
                let pages = pages_for(u64::from(cap) * u64::from(elem_size), page_size);
                map.to_va(home.paddr(aligned(v)?), pages)?;
            }
        }
    }
    Ok(())
}
