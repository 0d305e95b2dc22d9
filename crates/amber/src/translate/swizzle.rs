//! Swizzling and unswizzling a block: every pointer of every object, found
//! through the object map and the type layouts, converted between persistent
//! addresses and virtual addresses.
//!
//! Both directions are pure functions over a block's bytes and an address
//! mapping, so the fault handler (which swizzles a fetched block before
//! installing it) and the commit path (which unswizzles a changed block
//! before diffing it) share them, and tests can drive them without memory
//! mapping.
//!
//! The words are stored in the database's encoding (`format/home.rs`): a
//! persistent address plus the database's home, which the map names
//! ([`AddrMap::home`]); with the reservation at home, swizzling a pointer
//! to the identity region gives the word back unchanged.
//!
//! A `Lazy<T>` is fetched as it is stored, a persistent address, and
//! unswizzled only if a read rewrote it to a direct address (bit 0 set,
//! `ptr.rs`); so a commit always writes the persistent form.
//!
//! Both also refuse a 0 in a slot that may not hold null (`PRef<T>`,
//! `Smart<T>`: a `NonZeroU64` holding 0 is undefined behaviour): a fetched
//! page holding one is damaged or crafted, and is not installed; a block
//! about to be logged holding one would be Amber's own error, and is not
//! logged.

use crate::format::bytes::{get_u32, get_u64, put_u64};
use crate::format::home::Home;
use crate::format::objects::{self, OBJECT_ALIGN, ObjectEntry};
use crate::format::page::{HEADER_SIZE, PageHeader};
use crate::ptr::LAZY_DIRECT;
use crate::schema::desc::kind_name;
use crate::schema::layout::{PtrSlot, SlotKind, pages_for, pointer_at};
use crate::schema::registry::{Snapshot, TypeEntry};

/// Converts between persistent and virtual addresses.
pub trait AddrMap {
    /// The home of the database whose blocks are converted: how its
    /// swizzled pointers are stored. No default, so that every map says.
    fn home(&self) -> Home;
    /// The virtual address of persistent address `paddr`, whose block spans
    /// `pages` pages (a frame run is reserved for it if needed).
    fn to_va(&self, paddr: u64, pages: u32) -> Result<u64, String>;
    /// The persistent address of virtual address `va`.
    fn to_paddr(&self, va: u64) -> Result<u64, String>;
    /// Checks a persistent address about to be logged as it is (a smart
    /// pointer's, which unswizzling leaves alone): the commit path refuses
    /// addresses in dead space (`db/dead.rs`). Nothing to check by default.
    fn check_paddr(&self, _paddr: u64) -> Result<(), String> {
        Ok(())
    }
}

/// Which way to convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Persistent → virtual (after fetching).
    Swizzle,
    /// Virtual → persistent (before logging).
    Unswizzle,
}

/// Converts every pointer in `block` (a whole block, run included).
/// `page_size` is the database's. Reports a damaged object map, an unknown
/// type, an impossible pointer or a null in a non-null field.
pub fn convert_block(
    block: &mut [u8],
    page_size: usize,
    types: &Snapshot,
    map: &impl AddrMap,
    dir: Direction,
) -> Result<(), String> {
    let h = PageHeader::read(block).ok_or("block shorter than its header")?;
    let used = h.used as usize;
    let mut pos = HEADER_SIZE;
    while let Some(e) = objects::entry_at(block, used, pos).map_err(|e| e.to_string())? {
        pos = e.end();
        convert_object(block, &e, page_size, types, map, dir)?;
    }
    Ok(())
}

/// Converts the pointers of one object, given its map entry.
pub fn convert_object(
    block: &mut [u8],
    e: &ObjectEntry,
    page_size: usize,
    types: &Snapshot,
    map: &impl AddrMap,
    dir: Direction,
) -> Result<(), String> {
    let t = type_of(types, e)?;
    let l = &t.layout;
    if l.slots.is_empty() {
        return Ok(());
    }
    if l.array {
        if l.size == 0 {
            return Ok(());
        }
        // Element sizes are mostly powers of two: spare the division.
        let n = if l.size.is_power_of_two() {
            e.size >> l.size.trailing_zeros()
        } else {
            e.size / l.size as usize
        };
        if let (
            [
                PtrSlot {
                    offset: 0,
                    kind:
                        SlotKind::Ref {
                            pages,
                            nullable: true,
                        },
                },
            ],
            8,
        ) = (l.slots.as_slice(), l.size)
        {
            return convert_refs(block, e.body, n, *pages, map, dir);
        }
        for i in 0..n {
            convert_slots(
                block,
                e.body + i * l.size as usize,
                t,
                e,
                page_size,
                map,
                dir,
            )?;
        }
        Ok(())
    } else {
        if e.size < l.size as usize {
            return Err(format!(
                "object at offset {} is {} bytes, its type `{}` needs {}",
                e.header, e.size, t.stored.name, l.size
            ));
        }
        convert_slots(block, e.body, t, e, page_size, map, dir)
    }
}

/// The type of object `e`, or why it has none.
#[inline(always)]
pub(super) fn type_of<'t>(types: &'t Snapshot, e: &ObjectEntry) -> Result<&'t TypeEntry, String> {
    types
        .get(e.type_id as usize)
        .and_then(Option::as_deref)
        .ok_or_else(|| {
            format!(
                "object at offset {} has unknown type id {}",
                e.header, e.type_id
            )
        })
}

/// The `n` nullable pointers of an array of `PRef`s (vectors of references,
/// the commonest pointer arrays: OO1's incoming lists and id index), each to
/// a block of `pages` pages: one loop over the words, without the per-slot
/// dispatch of `convert_slots` (which also refuses a 0 in a non-null slot).
#[inline(always)]
fn convert_refs(
    block: &mut [u8],
    body: usize,
    n: usize,
    pages: u32,
    map: &impl AddrMap,
    dir: Direction,
) -> Result<(), String> {
    let words = body
        .checked_add(n * 8)
        .and_then(|end| block.get_mut(body..end))
        .ok_or_else(|| format!("array at offset {body} outside its block"))?;
    let home = map.home();
    for word in words.chunks_exact_mut(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(word);
        let v = u64::from_le_bytes(b);
        if v == 0 {
            continue;
        }
        let out = match dir {
            Direction::Unswizzle => home.stored(map.to_paddr(v)?)?,
            Direction::Swizzle => map.to_va(home.paddr(aligned(v)?), pages)?,
        };
        word.copy_from_slice(&out.to_le_bytes());
    }
    Ok(())
}

/// The stored word `v`, if it can be an object's address: bodies are
/// 8-aligned (and a home is, far more). A swizzled pointer is then aligned
/// by construction, so the dereference need not check (`vm/typed.rs`).
#[inline(always)]
pub(super) fn aligned(v: u64) -> Result<u64, String> {
    if v.is_multiple_of(OBJECT_ALIGN as u64) {
        Ok(v)
    } else {
        Err(misaligned(v))
    }
}

#[cold]
#[inline(never)]
fn misaligned(v: u64) -> String {
    format!("a pointer holds {v:#x}, which is not an object's address (not 8-aligned)")
}

/// Converts the pointers of the object (or array element) of type `t` at
/// `base`, part of the object `e`. Inlined into `convert_object`: it runs
/// once per object (an OO1 page holds about 45 objects and 230 pointers),
/// and a call per object cost a tenth of a fault's swizzling.
#[inline(always)]
fn convert_slots(
    block: &mut [u8],
    base: usize,
    t: &TypeEntry,
    e: &ObjectEntry,
    page_size: usize,
    map: &impl AddrMap,
    dir: Direction,
) -> Result<(), String> {
    let home = map.home();
    for s in &t.layout.slots {
        let at = base + s.offset as usize;
        let Some(v) = slot_word(block, at, s, t, e, dir)? else {
            continue;
        };
        let out = match (dir, s.kind) {
            // A smart pointer keeps its persistent address.
            (Direction::Unswizzle, SlotKind::Smart) => {
                map.check_paddr(v)?;
                continue;
            }
            (Direction::Swizzle, SlotKind::Smart) => continue,
            // A lazy pointer is fetched as stored, a persistent address
            // (bit 0 clear: a direct address never reaches the disk).
            (Direction::Swizzle, SlotKind::Lazy) => {
                aligned(v)?;
                continue;
            }
            // Rewritten upon discovery: back to the persistent address.
            (Direction::Unswizzle, SlotKind::Lazy) if v & LAZY_DIRECT != 0 => {
                map.to_paddr(v & !LAZY_DIRECT)?
            }
            (Direction::Unswizzle, SlotKind::Lazy) => {
                map.check_paddr(v)?;
                continue;
            }
            (Direction::Unswizzle, _) => home.stored(map.to_paddr(v)?)?,
            (Direction::Swizzle, SlotKind::Ref { pages, .. }) => {
                map.to_va(home.paddr(aligned(v)?), pages)?
            }
            (Direction::Swizzle, SlotKind::Buffer { elem_size }) => {
                let cap = get_u32(block, at + 12).ok_or("buffer capacity truncated")?;
                map.to_va(
                    home.paddr(aligned(v)?),
                    pages_for(u64::from(cap) * u64::from(elem_size), page_size),
                )?
            }
        };
        put_u64(block, at, out);
    }
    Ok(())
}

/// The word of slot `s` at block offset `at` (of object `e`, type `t`):
/// None for a null the slot may hold; refused outside the block, or 0 where
/// the slot may not hold null.
#[inline(always)]
pub(super) fn slot_word(
    block: &[u8],
    at: usize,
    s: &PtrSlot,
    t: &TypeEntry,
    e: &ObjectEntry,
    dir: Direction,
) -> Result<Option<u64>, String> {
    let Some(v) = get_u64(block, at) else {
        return Err(format!("pointer at offset {at} outside its block"));
    };
    if v != 0 {
        Ok(Some(v))
    } else if s.kind.nullable() {
        Ok(None)
    } else {
        Err(null_in_non_null(t, e, at, dir))
    }
}

/// The message for a 0 at block offset `at`, in a slot of object `e` (of
/// type `t`) that may not hold null: the field's name and kind, the
/// object's and the pointer's offsets. Met while swizzling, the block is
/// damaged (or crafted: its checksum was valid); while unswizzling, Amber
/// itself put it there.
#[cold]
#[inline(never)]
fn null_in_non_null(t: &TypeEntry, e: &ObjectEntry, at: usize, dir: Direction) -> String {
    let field = u32::try_from(at - e.body)
        .ok()
        .and_then(|off| pointer_at(&t.stored, off))
        .map_or_else(
            || format!("a non-null field of `{}`", t.stored.name),
            |(path, kind)| format!("field `{}.{path}` (`{}`)", t.stored.name, kind_name(kind)),
        );
    let at = format!("the object at offset {}, pointer at offset {at}", e.header);
    match dir {
        Direction::Swizzle => format!("null in non-null {field}: {at}"),
        Direction::Unswizzle => {
            format!("internal error: null in non-null {field} about to be logged: {at}")
        }
    }
}
