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

use super::copies::CleanCopies;
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
        let mut page = PersistentPage::new(self, head, frame);
        let chunk = copies.chunk();
        let base = page.base;
        let clean_of = |off: usize, buf: &mut [u8]| {
            // Lay every copied chunk over `buf` (the bytes at `off`).
            let (start, end) = (base + off as u64, base + (off + buf.len()) as u64);
            let mut c = start & !(chunk - 1);
            while c < end {
                if let Some(copy) = copies.get(c) {
                    let (lo, hi) = (c.max(start), (c + chunk).min(end));
                    buf[(lo - start) as usize..(hi - start) as usize]
                        .copy_from_slice(&copy[(lo - c) as usize..(hi - c) as usize]);
                }
                c += chunk;
            }
        };
        let mut used_regions = Vec::new();
        if touches_used(within) {
            let dirty = page.read(USED_OFFSET, 4);
            let mut clean = dirty.clone();
            clean_of(USED_OFFSET, &mut clean);
            diff_into(&clean, &dirty, USED_OFFSET, &mut used_regions);
        }
        let mut body_regions = Vec::new();
        let mut k = 0;
        for i in 0..page.spans.len() {
            let s = page.spans[i];
            while k < within.len() && within[k].1 <= s.header {
                k += 1;
            }
            if k == within.len() {
                break;
            }
            if within[k].0 >= s.end {
                continue;
            }
            let mut clean = page.read(s.header, s.end - s.header);
            clean_of(s.header, &mut clean);
            self.persistent_object(head, &mut clean)?;
            diff_into(&clean, page.object(i)?, s.header, &mut body_regions);
        }
        let mut out = Vec::new();
        for (regions, group) in [(used_regions, 0), (body_regions, 1)] {
            stats.changed_bytes += regions.iter().map(|r| r.len() as u64).sum::<u64>();
            for r in Self::coalesced(&regions, 1, stats) {
                let bytes = if group == 0 {
                    page.read(r.start, r.len())
                } else {
                    page.bytes(r.start, r.end)?
                };
                out.push((r.start, bytes));
            }
        }
        Ok(out)
    }

    /// The object-area bytes `[start, end)` of the one-page block `head`
    /// at `frame`, in persistent form, and its `used` field if `within`
    /// touches it: sub-page logging's records, each recorded range whole
    /// (clipped to what the log may carry: the header's other bytes are
    /// the store's).
    pub(crate) fn recorded_ranges(
        &self,
        head: PageNo,
        frame: FrameNo,
        within: &[(usize, usize)],
    ) -> Result<Vec<(usize, Vec<u8>)>> {
        let mut page = PersistentPage::new(self, head, frame);
        let mut out = Vec::new();
        if touches_used(within) {
            out.push((USED_OFFSET, page.read(USED_OFFSET, 4)));
        }
        for &(s, e) in within {
            let s = s.max(HEADER_SIZE);
            if s < e {
                out.push((s, page.bytes(s, e)?));
            }
        }
        Ok(out)
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

/// Whether ranges (ascending) touch the page header's `used` field.
fn touches_used(within: &[(usize, usize)]) -> bool {
    let used = USED_OFFSET..USED_OFFSET + 4;
    within.iter().any(|&(s, e)| s < used.end && used.start < e)
}

/// A resident one-page block read in persistent form, object by object:
/// only the objects a caller asks for are converted (once), so the commit
/// never unswizzles the page whole.
struct PersistentPage<'t, 'db> {
    tx: &'t Tx<'db>,
    head: PageNo,
    base: u64,
    /// The page's objects, in address order.
    spans: Vec<Span>,
    /// The persistent form of every object converted so far.
    converted: Vec<Option<Vec<u8>>>,
}

impl<'t, 'db> PersistentPage<'t, 'db> {
    fn new(tx: &'t Tx<'db>, head: PageNo, frame: FrameNo) -> Self {
        let base = tx.fs.frame_addr(frame) as u64;
        let used = *tx.access.obj::<u32>(base + USED_OFFSET as u64) as usize;
        let spans = object_spans(tx, base, used.min(tx.page_size));
        let converted = vec![None; spans.len()];
        PersistentPage {
            tx,
            head,
            base,
            spans,
            converted,
        }
    }

    /// `len` bytes at page offset `off`, as they are in memory.
    fn read(&self, off: usize, len: usize) -> Vec<u8> {
        self.tx.access.slice::<u8>(self.base + off as u64, len).to_vec()
    }

    /// Object `i` (header and slot) in persistent form.
    fn object(&mut self, i: usize) -> Result<&[u8]> {
        if self.converted[i].is_none() {
            let s = self.spans[i];
            let mut b = self.read(s.header, s.end - s.header);
            self.tx.persistent_object(self.head, &mut b)?;
            self.converted[i] = Some(b);
        }
        Ok(self.converted[i].as_deref().unwrap_or_default())
    }

    /// The bytes `[start, end)` of the object area in persistent form:
    /// the objects there converted, any bytes between or after them (free
    /// space) as they are.
    fn bytes(&mut self, start: usize, end: usize) -> Result<Vec<u8>> {
        let mut out = self.read(start, end - start);
        let first = self.spans.partition_point(|s| s.end <= start);
        for i in first..self.spans.len() {
            let s = self.spans[i];
            if s.header >= end {
                break;
            }
            let obj = self.object(i)?;
            let (lo, hi) = (s.header.max(start), s.end.min(end));
            out[lo - start..hi - start].copy_from_slice(&obj[lo - s.header..hi - s.header]);
        }
        Ok(out)
    }
}

/// The objects of the page at `base` whose object area ends at `used`
/// (header reads only; a damaged map ends the walk, and the commit's
/// whole-page check reports it).
fn object_spans(tx: &Tx<'_>, base: u64, used: usize) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut pos = HEADER_SIZE;
    while pos + OBJECT_HEADER <= used {
        let header = *tx.access.obj::<u64>(base + pos as u64);
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
