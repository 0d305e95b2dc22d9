//! The object map of a data block: how a block is walked object by object,
//! so that a page can be swizzled, unswizzled or dumped without knowing how it
//! was reached.
//!
//! Objects are laid out one after another from the end of the page header to
//! the header's `used` offset. Each has an 8-byte header and a body padded to
//! 8 bytes, so every body is 8-aligned:
//!
//! ```text
//! offset size field
//!  0     4    tag    type id in bits 0..24, flags in bits 24..32
//!  4     4    size   body bytes (before padding)
//!  8     size body
//! ```
//!
//! Flags: [`FLAG_FREE`] marks a freed slot (kept with its type: freed memory is
//! reused only by the same type, so a stale reference never sees another
//! type's bytes); [`FLAG_MARK`] is the object-marking update-detection bit.
//! Type id 0 is invalid.

use super::bytes::get_u32;
use super::page::HEADER_SIZE;

/// Bytes of an object header.
pub const OBJECT_HEADER: usize = 8;
/// Alignment of object headers and bodies.
pub const OBJECT_ALIGN: usize = 8;
/// The slot is free (its type is kept for type-stable reuse).
pub const FLAG_FREE: u8 = 1;
/// Object marking: the object was updated in the current transaction.
pub const FLAG_MARK: u8 = 2;
/// Largest type id.
pub const MAX_TYPE_ID: u32 = (1 << 24) - 1;

/// Rounds `n` up to the object alignment.
pub const fn align_up(n: usize) -> usize {
    (n + OBJECT_ALIGN - 1) & !(OBJECT_ALIGN - 1)
}

/// Bytes a slot of body size `size` occupies, header included.
pub const fn slot_size(size: usize) -> usize {
    OBJECT_HEADER + align_up(size)
}

/// Encodes an object header.
pub fn encode_header(type_id: u32, flags: u8, size: u32) -> [u8; 8] {
    let tag = (type_id & MAX_TYPE_ID) | (u32::from(flags) << 24);
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&tag.to_le_bytes());
    h[4..].copy_from_slice(&size.to_le_bytes());
    h
}

/// One entry of a block's object map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectEntry {
    /// Offset of the object header in the block.
    pub header: usize,
    /// Offset of the body (`header + 8`).
    pub body: usize,
    /// Body bytes.
    pub size: usize,
    /// Type id.
    pub type_id: u32,
    /// Flag bits.
    pub flags: u8,
}

impl ObjectEntry {
    /// Whether the slot is free.
    pub fn is_free(&self) -> bool {
        self.flags & FLAG_FREE != 0
    }

    /// Offset just past the slot (padding included).
    pub fn end(&self) -> usize {
        self.body + align_up(self.size)
    }
}

/// What is wrong with an object map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapError {
    /// Offset in the block where the walk failed.
    pub offset: usize,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for MapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "object map at offset {}: {}", self.offset, self.what)
    }
}

/// Walks the object map of a data block (the whole block: a run's bytes for a
/// multi-page block). `used` is the header's end of the object area.
pub fn walk(block: &[u8], used: usize) -> ObjectWalk<'_> {
    ObjectWalk {
        block,
        used,
        pos: HEADER_SIZE,
        failed: false,
    }
}

/// The object whose header is at `pos` in a block whose object area ends at
/// `used`, or `None` at the end of the map. One step of [`walk`], for callers
/// that change the block between steps (swizzling); the next object's header
/// is at the entry's [`end`](ObjectEntry::end). Inlined into those loops,
/// with the error path out of line.
#[inline(always)]
pub fn entry_at(block: &[u8], used: usize, pos: usize) -> Result<Option<ObjectEntry>, MapError> {
    if pos >= used {
        return Ok(None);
    }
    if used <= block.len()
        && let (Some(tag), Some(size)) = (get_u32(block, pos), get_u32(block, pos + 4))
    {
        let e = ObjectEntry {
            header: pos,
            body: pos + OBJECT_HEADER,
            size: size as usize,
            type_id: tag & MAX_TYPE_ID,
            flags: (tag >> 24) as u8,
        };
        if e.type_id != 0 && e.end() <= used {
            return Ok(Some(e));
        }
    }
    Err(bad_entry(block, used, pos))
}

/// What is wrong with the object header at `pos` (which `entry_at` refused).
#[cold]
#[inline(never)]
fn bad_entry(block: &[u8], used: usize, pos: usize) -> MapError {
    let what = if used > block.len() {
        format!(
            "object area ends at {used} beyond the block's {} bytes",
            block.len()
        )
    } else {
        match (get_u32(block, pos), get_u32(block, pos + 4)) {
            (Some(tag), _) if tag & MAX_TYPE_ID == 0 => "object with type id 0".into(),
            (Some(_), Some(size)) => {
                format!("object of {size} bytes runs past the object area end {used}")
            }
            _ => "truncated object header".into(),
        }
    };
    MapError { offset: pos, what }
}

/// Iterator over a block's objects; yields an error once and stops if the map
/// is damaged.
#[derive(Debug)]
pub struct ObjectWalk<'a> {
    block: &'a [u8],
    used: usize,
    pos: usize,
    failed: bool,
}

impl Iterator for ObjectWalk<'_> {
    type Item = Result<ObjectEntry, MapError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match entry_at(self.block, self.used, self.pos) {
            Ok(Some(e)) => {
                self.pos = e.end();
                Some(Ok(e))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Clears the object-marking bit of every object in a data block image
/// whose object area ends at `used`: a block copied out while marks were
/// set (marks are memory state, never stored). Stops at a damaged entry.
pub fn clear_marks(block: &mut [u8], used: usize) {
    let mut pos = HEADER_SIZE;
    while let Ok(Some(e)) = entry_at(block, used, pos) {
        block[e.header + 3] &= !FLAG_MARK;
        pos = e.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::page::{BlockKind, USED_OFFSET, format};

    #[test]
    fn walk_a_block() {
        let mut b = vec![0u8; 4096];
        format(&mut b, BlockKind::Data, 2, 1);
        let mut at = HEADER_SIZE;
        for (t, sz) in [(1u32, 12usize), (2, 8), (1, 1)] {
            b[at..at + 8].copy_from_slice(&encode_header(t, 0, sz as u32));
            at += slot_size(sz);
        }
        b[USED_OFFSET..USED_OFFSET + 4].copy_from_slice(&(at as u32).to_le_bytes());
        let v: Vec<_> = walk(&b, at).collect::<Result<_, _>>().expect("walk");
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].body, 40);
        assert_eq!(v[1].header, 56);
        assert_eq!(v[2].size, 1);
        // A damaged size is reported, not followed.
        b[HEADER_SIZE + 4..HEADER_SIZE + 8].copy_from_slice(&5000u32.to_le_bytes());
        let r: Vec<_> = walk(&b, at).collect();
        assert_eq!(r.len(), 1);
        assert!(r[0].is_err());
    }
}
