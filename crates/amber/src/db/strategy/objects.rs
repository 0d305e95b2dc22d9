//! Object marking (Hosking et al. §4): the barrier sets [`FLAG_MARK`] in
//! the header of the object it is told of (`vm/barrier.rs` writes the
//! bit); the commit walks every resident data block's object map, takes
//! each marked object and clears its mark. The barrier is the cheapest of
//! the schemes (one byte store) and the commit the dearest: its scan is
//! proportional to the resident objects, not to the updated ones.
//!
//! A mark is memory state, never logged: the scan clears it before the
//! commit copies the block out, and a block logged early (spilled) is
//! copied with its marks cleared (`commit.rs`, `dirty_image`).

use super::{Ranges, Scan};
use crate::format::objects::{FLAG_MARK, MAX_TYPE_ID, OBJECT_HEADER, slot_size};
use crate::format::page::{BlockKind, HEADER_SIZE, USED_OFFSET};

/// Object marking keeps no records of its own: they are in the headers.
#[derive(Debug)]
pub(super) struct Marks;

impl Marks {
    /// Scans every resident object; appends the bodies of the marked ones
    /// to `out` and unmarks them.
    pub(super) fn take(&mut self, scan: &mut Scan<'_>, out: &mut Ranges) {
        for (frame, run) in (scan.resident)() {
            let base = scan.fs.frame_addr(frame) as u64;
            let len = u64::from(run) * scan.fs.frame_size() as u64;
            let kind = scan.access.obj::<[u8; 8]>(base)[4];
            if kind != BlockKind::Data as u8 {
                continue;
            }
            let used = u64::from(*scan.access.obj::<u32>(base + USED_OFFSET as u64)).min(len);
            let mut pos = HEADER_SIZE as u64;
            while pos + OBJECT_HEADER as u64 <= used {
                let header = *scan.access.obj::<u64>(base + pos);
                let (tag, size) = (header as u32, header >> 32);
                if tag & MAX_TYPE_ID == 0 {
                    break; // Not a map a transaction wrote: nothing marked.
                }
                let body = base + pos + OBJECT_HEADER as u64;
                if (tag >> 24) as u8 & FLAG_MARK != 0 {
                    out.push((body, (body + size).min(base + used)));
                    scan.access.unmark(body);
                }
                pos += slot_size(size as usize) as u64;
            }
        }
    }
}
