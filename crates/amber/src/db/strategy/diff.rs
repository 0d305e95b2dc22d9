//! The commit's diff under a software scheme: the recorded ranges of a
//! written page, object by object, against the barrier's clean copies
//! (`copies.rs`), without reading the page whole or its committed image.
//!
//! Each object the ranges touch is read from memory twice over: as it is
//! (dirty) and with every copied chunk laid over it (clean; a chunk the
//! barrier never copied was never written). Both are unswizzled on their
//! own, with the object's mark cleared, and diffed, header included, so
//! the differences are exactly those of the whole-page diff (debug builds
//! check it, `commit.rs`). The regions are coalesced by the minimal-log
//! rule; the bytes a merged region spans between two changed objects are
//! unchanged and are taken, unswizzled, from the objects there.

use super::copies::{CHUNK, CleanCopies};
use crate::db::tx::{CommitStats, Tx};
use crate::error::Result;
use crate::format::PageNo;
use crate::format::objects::{FLAG_MARK, MAX_TYPE_ID, OBJECT_HEADER, ObjectEntry, slot_size};
use crate::format::page::{HEADER_SIZE, USED_OFFSET};
use crate::vm::FrameNo;
use crate::wal::coalesce::diff_into;

/// One object of the page's map: where its header starts and its slot ends.
#[derive(Clone, Copy)]
struct Span {
    header: usize,
    end: usize,
}

impl Tx<'_> {
    /// The changes of the one-page block `head` at `frame`, within `within`
    /// (page offsets, ascending, disjoint), diffed against `copies`: the
    /// regions to log, each with its bytes in persistent form.
    pub(crate) fn changes_from_copies(
        &self,
        head: PageNo,
        frame: FrameNo,
        within: &[(usize, usize)],
        copies: &CleanCopies,
        stats: &mut CommitStats,
    ) -> Result<Vec<(usize, Vec<u8>)>> {
        let ps = self.page_size;
        let base = self.fs.frame_addr(frame) as u64;
        let read = |off: usize, len: usize| -> Vec<u8> { self.access.slice::<u8>(base + off as u64, len).to_vec() };
        let clean_of = |off: usize, buf: &mut [u8]| {
            // Lay every copied chunk over `buf` (the bytes at `off`).
            let (start, end) = (base + off as u64, base + (off + buf.len()) as u64);
            let mut c = start & !(CHUNK - 1);
            while c < end {
                if let Some(copy) = copies.get(c) {
                    let (lo, hi) = (c.max(start), (c + CHUNK).min(end));
                    buf[(lo - start) as usize..(hi - start) as usize]
                        .copy_from_slice(&copy[(lo - c) as usize..(hi - c) as usize]);
                }
                c += CHUNK;
            }
        };
        let mut used_regions = Vec::new();
        let used_field = USED_OFFSET..USED_OFFSET + 4;
        if within.iter().any(|&(s, e)| s < used_field.end && used_field.start < e) {
            let dirty = read(USED_OFFSET, 4);
            let mut clean = dirty.clone();
            clean_of(USED_OFFSET, &mut clean);
            diff_into(&clean, &dirty, USED_OFFSET, &mut used_regions);
        }
        let used_now = (*self.access.obj::<u32>(base + USED_OFFSET as u64) as usize).min(ps);
        let spans = self.object_spans(base, used_now);
        // The persistent form of every object converted so far.
        let mut img = vec![0u8; ps];
        let mut done = vec![false; spans.len()];
        let mut body_regions = Vec::new();
        let mut k = 0;
        for (i, s) in spans.iter().enumerate() {
            while k < within.len() && within[k].1 <= s.header {
                k += 1;
            }
            if k == within.len() {
                break;
            }
            if within[k].0 >= s.end {
                continue;
            }
            let mut dirty = read(s.header, s.end - s.header);
            let mut clean = dirty.clone();
            clean_of(s.header, &mut clean);
            self.persistent_object(head, &mut dirty)?;
            self.persistent_object(head, &mut clean)?;
            diff_into(&clean, &dirty, s.header, &mut body_regions);
            img[s.header..s.end].copy_from_slice(&dirty);
            done[i] = true;
        }
        let mut out = Vec::new();
        for (regions, group) in [(used_regions, 0), (body_regions, 1)] {
            stats.changed_bytes += regions.iter().map(|r| r.len() as u64).sum::<u64>();
            let merged = Self::coalesced(&regions, 1, stats);
            for r in merged {
                if group == 0 {
                    out.push((r.start, read(r.start, r.len())));
                    continue;
                }
                // Fill what the region spans of objects not converted yet
                // (unchanged bytes between two changed objects).
                for (i, s) in spans.iter().enumerate() {
                    if !done[i] && s.header < r.end && r.start < s.end {
                        let mut b = read(s.header, s.end - s.header);
                        self.persistent_object(head, &mut b)?;
                        img[s.header..s.end].copy_from_slice(&b);
                        done[i] = true;
                    }
                }
                out.push((r.start, img[r.start..r.end].to_vec()));
            }
        }
        Ok(out)
    }

    /// The objects of the page at `base` whose object area ends at `used`
    /// (header reads only; a damaged map ends the walk, and the commit's
    /// whole-page check reports it).
    fn object_spans(&self, base: u64, used: usize) -> Vec<Span> {
        let mut spans = Vec::new();
        let mut pos = HEADER_SIZE;
        while pos + OBJECT_HEADER <= used {
            let header = *self.access.obj::<u64>(base + pos as u64);
            let (tag, size) = (header as u32, (header >> 32) as usize);
            let end = pos + slot_size(size);
            if tag & MAX_TYPE_ID == 0 || end > used {
                break;
            }
            spans.push(Span { header: pos, end });
            pos = end;
        }
        spans
    }

    /// Converts one object (header and body, in memory form) to its
    /// persistent form in place, its mark cleared. A header of zeros (the
    /// clean version of an object placed by this transaction) stays zeros.
    fn persistent_object(&self, head: PageNo, obj: &mut [u8]) -> Result<()> {
        obj[3] &= !FLAG_MARK;
        let tag = u32::from_le_bytes([obj[0], obj[1], obj[2], obj[3]]);
        if tag & MAX_TYPE_ID == 0 {
            return Ok(());
        }
        let size = u32::from_le_bytes([obj[4], obj[5], obj[6], obj[7]]) as usize;
        let e = ObjectEntry {
            header: 0,
            body: OBJECT_HEADER,
            size: size.min(obj.len() - OBJECT_HEADER),
            type_id: tag & MAX_TYPE_ID,
            flags: (tag >> 24) as u8,
        };
        self.unswizzle_object(head, obj, &e)
    }
}
