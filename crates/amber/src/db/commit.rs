//! Commit and abort under page protection.
//!
//! Commit: the fault backend lists the frames written since the transaction
//! began (`PAGEMAP_SCAN` of asynchronously write-protected pages with
//! userfaultfd; the pages that took a write fault with SIGSEGV). Each written
//! block is copied out and unswizzled, and diffed against its clean version —
//! the committed image in the store (page file plus pending log changes) read
//! back now, or for a block allocated by this transaction its empty formatted
//! image. That is correct because a page's in-memory content at the start of
//! a transaction is, unswizzled, exactly its committed image: every earlier
//! transaction either committed (and the store holds its changes) or aborted
//! (and restored the page from the store). The modified regions are merged
//! by the minimal-log rule (after-images only, so 1 · gap ≤ E, the 4 bytes
//! a range costs in a ranges record) and logged, in address order, as
//! ranges records; pointers are in persistent form because the dirty copy
//! was unswizzled. Then one commit record and one sync.
//!
//! No pointer into dead space (`dead.rs`) may be logged: unswizzling the
//! written blocks refuses one, as `Error::Dangling`.
//!
//! Abort, and a commit that fails at any step: the transaction is rolled
//! back (`session.rs`): memory returns to the committed state, and nothing
//! of the transaction is in the store.

use super::dead::Dead;
use super::fetch::FrameMap;
use super::session;
use super::strategy::loggen::{self, Record, Written};
use super::strategy::{Ranges, Scan, Software};
use super::tx::{CommitStats, Tx};
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use crate::format::objects::ObjectEntry;
use crate::translate::swizzle::{AddrMap, Direction, convert_block, convert_object};
use crate::vm::{Barrier, FrameNo};
use crate::wal::coalesce::{Region, coalesce, diff_into, ranges_cost, records_needed};
use crate::wal::ranges::{ENTRY, RECORD};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The commit path's address map: the frame table's, refusing persistent
/// addresses in dead space (and remembering that it did, so that the
/// failure is reported as a dangling pointer).
struct LogMap<'a> {
    map: FrameMap<'a>,
    dead: &'a Dead,
    shift: u32,
    dangling: Cell<bool>,
}

impl LogMap<'_> {
    fn check(&self, paddr: u64) -> std::result::Result<(), String> {
        if self.dead.contains(paddr, self.shift) {
            self.dangling.set(true);
            return Err(format!(
                "a pointer to persistent address {paddr:#x}, where an object of a \
                 transaction that did not commit was: committed, it would lead to \
                 whatever a later session places there"
            ));
        }
        Ok(())
    }
}

impl LogMap<'_> {
    /// The error for a block `head` that could not be unswizzled.
    fn error(&self, head: PageNo, e: String) -> Error {
        let what = format!("page {head}: {e}");
        if self.dangling.get() {
            Error::dangling(what)
        } else {
            Error::invalid(what)
        }
    }
}

impl AddrMap for LogMap<'_> {
    fn home(&self) -> crate::format::home::Home {
        self.map.home()
    }

    fn to_va(&self, paddr: u64, pages: u32) -> std::result::Result<u64, String> {
        self.map.to_va(paddr, pages)
    }

    fn to_paddr(&self, va: u64) -> std::result::Result<u64, String> {
        let pa = self.map.to_paddr(va)?;
        self.check(pa)?;
        Ok(pa)
    }

    fn check_paddr(&self, paddr: u64) -> std::result::Result<(), String> {
        self.check(paddr)
    }
}

impl Tx<'_> {
    /// The clean version of a block, unswizzled: empty if allocated now; else
    /// assembled from the recovery buffer when every written frame of the
    /// block has its copy there (unwritten frames are unchanged); else the
    /// committed image read back from the store.
    pub(crate) fn clean_image(
        &self,
        head: PageNo,
        frame: FrameNo,
        run: u32,
        written: &BTreeSet<FrameNo>,
    ) -> Result<Vec<u8>> {
        let ps = self.page_size;
        if let Some(spill) = self.pager.spills().get(&head) {
            return spill.image(self.source, head, run, ps);
        }
        if self.session.tx.new_blocks.contains_key(&head) {
            let mut img = vec![0u8; run as usize * ps];
            page::format(&mut img, BlockKind::Data, head, run);
            return Ok(img);
        }
        if let Some(b) = self.pager.rbuf.get() {
            let mut img = vec![0u8; run as usize * ps];
            let mut complete = true;
            for i in 0..run {
                let f = frame + i;
                let dst = &mut img[i as usize * ps..(i as usize + 1) * ps];
                match b.copy_of(f) {
                    Some(c) => dst.copy_from_slice(&c),
                    None if written.contains(&f) => {
                        complete = false;
                        break;
                    }
                    None => self
                        .fs
                        .copy_out(f, 0, dst)
                        .map_err(|e| e.into_error(self.source.name(), &format!("reading page {head}")))?,
                }
            }
            if complete {
                self.unswizzle(head, &mut img)?;
                return Ok(img);
            }
        }
        self.source.read_block(head)
    }

    /// Converts a block image in memory form to persistent form. A pointer
    /// into dead space is `Error::Dangling`; one that leads outside this
    /// database (taken from another one) is misuse.
    fn unswizzle(&self, head: PageNo, img: &mut [u8]) -> Result<()> {
        let types = self.registry.snapshot();
        let map = self.log_map();
        convert_block(img, self.page_size, &types, &map, Direction::Unswizzle)
            .map_err(|e| map.error(head, e))
    }

    /// Copies block `head` out of memory in persistent form.
    pub(crate) fn dirty_image(&self, head: PageNo, frame: FrameNo, run: u32) -> Result<Vec<u8>> {
        let mut img = vec![0u8; run as usize * self.page_size];
        self.fs
            .copy_out(frame, 0, &mut img)
            .map_err(|e| e.into_error(self.source.name(), &format!("reading page {head}")))?;
        self.unswizzle(head, &mut img)?;
        Ok(img)
    }

    /// The changed regions of a block, merged by the minimal-log rule for
    /// records carrying `images` images per byte. `used` and the object
    /// area are logical content; the header bytes between them are the
    /// store's, so the two never share a record.
    ///
    /// `within`: the block-relative ranges a software detection scheme
    /// recorded (ascending, disjoint); only they are diffed. `None`: the
    /// whole block.
    pub(crate) fn changes(
        clean: &[u8],
        dirty: &[u8],
        images: usize,
        within: Option<&[(usize, usize)]>,
        stats: &mut CommitStats,
    ) -> Vec<Region> {
        let whole = [(0, dirty.len())];
        let within = within.unwrap_or(&whole);
        let mut used: Vec<Region> = Vec::new();
        let used_field = USED_OFFSET..USED_OFFSET + 4;
        if within
            .iter()
            .any(|&(s, e)| s < used_field.end && used_field.start < e)
        {
            diff_into(&clean[used_field.clone()], &dirty[used_field], USED_OFFSET, &mut used);
        }
        let mut body: Vec<Region> = Vec::new();
        for &(s, e) in within {
            let (s, e) = (s.max(HEADER_SIZE), e.min(dirty.len()));
            if s < e {
                diff_into(&clean[s..e], &dirty[s..e], s, &mut body);
            }
        }
        let mut out = Vec::new();
        for regions in [used, body] {
            stats.changed_bytes += regions.iter().map(|r| r.len() as u64).sum::<u64>();
            out.extend(Self::coalesced(&regions, images, stats));
        }
        out
    }

    /// `regions` merged by the minimal-log rule for records carrying
    /// `images` images per byte; what the ranges cost in their records
    /// counted in `stats` (the records' own bytes are the batch's:
    /// [`record_bytes`]).
    pub(crate) fn coalesced(regions: &[Region], images: usize, stats: &mut CommitStats) -> Vec<Region> {
        let merged = coalesce(regions, ENTRY, images);
        stats.minimal_log_bytes += ranges_cost(&merged, images) as u64;
        merged
    }

    /// Converts one object image (`e` locates it in `buf`) of block `head`
    /// from memory form to persistent form, as [`unswizzle`] does a block.
    ///
    /// [`unswizzle`]: Self::unswizzle
    pub(crate) fn unswizzle_object(&self, head: PageNo, buf: &mut [u8], e: &ObjectEntry) -> Result<()> {
        let types = self.registry.snapshot();
        let map = self.log_map();
        convert_object(buf, e, self.page_size, &types, &map, Direction::Unswizzle)
            .map_err(|err| map.error(head, err))
    }

    fn log_map(&self) -> LogMap<'_> {
        LogMap {
            map: FrameMap::new(self.fs, self.source.home()),
            dead: &self.pager.dead,
            shift: self.page_size.trailing_zeros(),
            dangling: Cell::new(false),
        }
    }

    /// Logs the changes of the page in `frame` now, with before-images taken
    /// from its recovery-buffer copy `clean` (the recovery buffer was full),
    /// and keeps them (`Spill`): the commit, or a spill, diffs the page
    /// against them. Without a cache budget the page stays writable: write-
    /// protected again, its next write took a fresh copy and so logged the
    /// page once per write once a transaction's written pages outnumbered
    /// the buffer (OO7's T3b on medium: 401 MB a commit). Under a budget it
    /// is write-protected again, so that it may be evicted like a clean
    /// page (it faults back with its changes) rather than only spilled:
    /// left writable, OO7's T3b under 9 MiB took seven times as long.
    pub(crate) fn log_early(&mut self, frame: FrameNo, mut clean: Vec<u8>) -> Result<()> {
        let Some((head, _, run)) = self.fs.page_of(frame) else {
            return Ok(());
        };
        // A multi-page block or a new block is simply left for the commit,
        // which then diffs it against the committed (or empty) image.
        if run != 1 || self.session.tx.new_blocks.contains_key(&head) {
            return Ok(());
        }
        self.unswizzle(head, &mut clean)?;
        let dirty = self.dirty_image(head, frame, 1)?;
        let mut stats = CommitStats::default();
        let regions = Self::changes(&clean, &dirty, 2, None, &mut stats);
        let base = head * self.page_size as u64;
        stats.minimal_log_bytes += record_bytes(spans(&regions, base));
        let stx = self.stx()?;
        for r in &regions {
            stx.write_with_before(
                base + r.start as u64,
                &clean[r.start..r.end],
                &dirty[r.start..r.end],
            )?;
        }
        stx.log_early()?;
        // Its changes are only in the log: should it leave memory, it must
        // fault back with them, and later diffs of it start from them.
        self.remember_changes(head, &regions, &dirty);
        if self.pager.budget().is_some() {
            self.fs.write_protect(frame, 1).map_err(|e| {
                e.into_error(self.source.name(), &format!("re-protecting page {head}"))
            })?;
            self.pager.requeue(frame);
        }
        self.early_stats.minimal_log_bytes += stats.minimal_log_bytes;
        self.early_stats.changed_bytes += stats.changed_bytes;
        Ok(())
    }

    /// Keeps changes of block `head` that were logged early but are not in
    /// the store's committed image, so that the block faults back in with
    /// them if it is dropped before the transaction ends (`Spill`), and so
    /// that later diffs of it start from them.
    pub(crate) fn remember_changes(&mut self, head: PageNo, regions: &[Region], dirty: &[u8]) {
        let new_block = self.session.tx.new_blocks.contains_key(&head);
        let mut spills = self.pager.spills();
        let s = spills
            .entry(head)
            .or_insert_with(|| super::pager::Spill::new(new_block, (dirty.len() / self.page_size) as u32));
        for r in regions {
            s.record(r.start, &dirty[r.start..r.end], dirty.len());
        }
    }

    /// Commits: returns once the changes are durable. On an error nothing
    /// of the transaction is in the store, and memory is back at the
    /// committed state (or, where a page's committed image cannot be read,
    /// the page is dropped from memory: its next touch reports why).
    pub fn commit(mut self) -> Result<CommitStats> {
        match self.commit_inner() {
            Ok(s) => {
                if let Some(a) = self.auto {
                    // The log's write and sync are the same under either
                    // scheme (the same records): left out, with their noise.
                    let took = a.armed.elapsed().saturating_sub(s.write);
                    self.session.auto.observe(a.arm, took, a.switch, s.blocks);
                }
                Ok(s)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    fn commit_inner(&mut self) -> Result<CommitStats> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let t0 = Instant::now();
        let mut barrier = self.access.take_barrier();
        let result = self.commit_with(&mut barrier, t0);
        if let Some(b) = barrier {
            self.access.set_barrier(Some(b));
        }
        result
    }

    /// The commit, with the barrier (if any) taken out of the accessor so
    /// that its records can be read beside it.
    fn commit_with(&mut self, barrier: &mut Option<Box<dyn Barrier>>, t0: Instant) -> Result<CommitStats> {
        let mut stats = CommitStats {
            strategy: self.strategy,
            ..CommitStats::default()
        };
        let mut software = barrier
            .as_mut()
            .and_then(|b| b.as_any_mut().downcast_mut::<Software>());
        let detected = software.as_mut().map(|sw| self.take_detected(sw));
        let frames = self
            .fs
            .take_written()
            .map_err(|e| e.into_error(self.source.name(), "listing written pages"))?;
        let blocks = self.parts().blocks_of(&frames);
        // From here the backend no longer lists these blocks as written:
        // should the commit fail, the rollback finds them here.
        self.session.tx.taken.extend(blocks.iter().map(|(&h, &b)| (h, b)));
        stats.detect = t0.elapsed();
        stats.blocks = blocks.len() as u64;
        let t1 = Instant::now();
        let written: BTreeSet<FrameNo> = frames.into_iter().collect();
        let copies = software.as_ref().map(|sw| &sw.copies).filter(|c| !c.overflowed);
        let generator = loggen::generator(self.strategy.log);
        // Each block's records go to the store as they are made, and under
        // a cache budget are logged early once they hold a quarter of it:
        // the store keeps the bytes they leave per block, not the records,
        // so a commit larger than the budget is not held whole three times
        // (records, buffered ops, the log's buffer).
        let early_limit = (self.pager.budget())
            .map(|b| (b as usize * self.page_size / 4).max(1 << 20));
        let (mut unlogged, mut write) = (0usize, Duration::ZERO);
        let mut records = Vec::new();
        // The addresses of the diffed ranges of the batch being gathered
        // (the minimal log counts the records they need: `record_bytes`).
        let mut diffed = Vec::new();
        let ships_pages = self.stx()?.ships_pages();
        for (&head, &(frame, run)) in &blocks {
            let block = Written {
                head,
                frame,
                run,
                within: detected
                    .as_ref()
                    .map(|r| self.block_ranges(r, frame, run as usize * self.page_size)),
                frames: &written,
                copies,
            };
            generator.block(self, &block, &mut records, &mut stats)?;
            let dirty = match ships_pages {
                true => self.dirty_pages(head, frame, run, &records)?,
                false => Vec::new(),
            };
            let tw = Instant::now();
            let stx = self.stx()?;
            for (page, image) in dirty {
                stx.ship_page(page, &image)?;
            }
            for r in records.drain(..) {
                match r {
                    Record::Diffed(addr, data) => {
                        unlogged += data.len();
                        diffed.push((addr, addr + data.len() as u64));
                        stx.write(addr, &data)?
                    }
                    Record::Range(addr, data) => {
                        unlogged += data.len();
                        stx.write(addr, &data)?
                    }
                    Record::Page(page, image) => {
                        unlogged += image.len();
                        stx.write_page(page, &image)?
                    }
                    Record::Counted(start, end) => diffed.push((start, end)),
                }
            }
            if early_limit.is_some_and(|l| unlogged > l) {
                stx.log_early()?;
                unlogged = 0;
                stats.minimal_log_bytes += record_bytes(diffed.drain(..));
            }
            write += tw.elapsed();
        }
        stats.minimal_log_bytes += record_bytes(diffed);
        // Every record is made: the spilled changes served faults and diffs
        // and are let go before the store applies the commit (which holds
        // its own copy of them until then). Nothing faults in between, and
        // should the commit fail, a spilled block faults back committed.
        self.pager.spills().clear();
        stats.minimal_log_bytes += self.early_stats.minimal_log_bytes;
        stats.changed_bytes += self.early_stats.changed_bytes;
        stats.diff = t1.elapsed().saturating_sub(write);
        let t2 = Instant::now();
        let mut stx = self
            .stx
            .take()
            .ok_or_else(|| Error::invalid("transaction already finished"))?;
        if let Some(frames) = self.access.take_reads() {
            stx.set_reads(self.pages_of(&frames));
        }
        let info = stx.commit()?;
        stats.write = write + t2.elapsed();
        stats.log_bytes = info.log_bytes;
        stats.data_pages_shipped = info.data_pages_shipped;
        stats.log_pages_shipped = info.log_pages_shipped;
        self.finish_committed();
        self.drop_changed();
        Ok(stats)
    }

    /// The after-images of the pages of block `head` that `records` change
    /// (its dirty pages, in persistent form), which an ESM scheme ships to
    /// the server beside the records (docs/design.md §11.7).
    fn dirty_pages(&self, head: PageNo, frame: FrameNo, run: u32, records: &[Record]) -> Result<Vec<(PageNo, Vec<u8>)>> {
        let ps = self.page_size as u64;
        let mut pages = BTreeSet::new();
        for r in records {
            if let Record::Diffed(addr, data) | Record::Range(addr, data) = r
                && !data.is_empty()
            {
                pages.extend(addr / ps..=(addr + data.len() as u64 - 1) / ps);
            }
        }
        if pages.is_empty() {
            return Ok(Vec::new());
        }
        let dirty = self.dirty_image(head, frame, run)?;
        let page = |p: PageNo| dirty[((p - head) * ps) as usize..][..ps as usize].to_vec();
        Ok(pages.into_iter().map(|p| (p, page(p))).collect())
    }

    /// Under a software detection scheme, the ranges its barrier recorded
    /// (virtual addresses, ascending, merged); `None` under page
    /// protection.
    fn take_detected(&mut self, sw: &mut Software) -> Ranges {
        let pager = self.pager;
        let resident = || pager.resident_blocks();
        sw.take(&mut Scan {
            access: self.access,
            fs: self.fs,
            resident: &resident,
        })
    }

    /// The parts of `ranges` in the block at `frame` (`len` bytes), as
    /// offsets in the block.
    fn block_ranges(&self, ranges: &Ranges, frame: FrameNo, len: usize) -> Vec<(usize, usize)> {
        let lo = self.fs.frame_addr(frame) as u64;
        let hi = lo + len as u64;
        let first = ranges.partition_point(|&(_, e)| e <= lo);
        ranges[first..]
            .iter()
            .take_while(|&&(s, _)| s < hi)
            .map(|&(s, e)| ((s.max(lo) - lo) as usize, (e.min(hi) - lo) as usize))
            .collect()
    }

    /// The pages held by `frames` (ascending): a read set's, for the
    /// server. Frames never change pages while the frame space lives.
    fn pages_of(&self, frames: &[FrameNo]) -> Vec<PageNo> {
        let mut pages: Vec<PageNo> = (frames.iter())
            .filter_map(|&f| self.fs.page_of(f))
            .map(|(head, index, _)| head + u64::from(index))
            .collect();
        pages.sort_unstable();
        pages.dedup();
        pages
    }

    /// Bookkeeping once the store has the transaction.
    fn finish_committed(&mut self) {
        self.registry.commit();
        self.pager.spills().clear();
        if let Some(b) = self.pager.rbuf.get() {
            b.clear();
        }
        self.session.tx = Default::default();
        self.fs.set_writers(false);
        self.pager.release_held();
    }

    /// Drops what others changed, when the commit (or its refusal) moved a
    /// server's snapshot. The transaction has ended either way, so a
    /// failure here cannot be the commit's: it leaves the session broken,
    /// as a failed rollback does, and the next `begin` reports it.
    fn drop_changed(&mut self) {
        let changed = self.source.take_changed();
        if let Err(e) = super::reader::apply_changed(&self.parts(), changed) {
            self.session.broken = Some(format!("dropping blocks others changed: {e}"));
        }
    }

    /// Abandons the transaction: memory returns to the committed state.
    pub fn abort(mut self) -> Result<()> {
        self.rollback();
        match &self.session.broken {
            Some(why) => Err(Error::Poisoned { cause: why.clone() }),
            None => Ok(()),
        }
    }

    /// Rolls the transaction back (`session.rs`), unless it has ended.
    pub(crate) fn rollback(&mut self) {
        if !self.session.tx.active {
            return;
        }
        self.access.take_reads();
        if let Some(stx) = self.stx.take() {
            stx.abandon();
        }
        let parts = super::session::Parts {
            source: self.source,
            fs: self.fs,
            pager: self.pager,
            registry: self.registry,
        };
        let session = &mut *self.session;
        if let Some(why) = session::rollback(&parts, &mut session.tx, &mut session.current) {
            session.broken = Some(format!("a rollback could not restore memory: {why}"));
        }
        self.drop_changed();
    }
}

/// The bytes of the ranges records a batch of ranges needs beyond what its
/// ranges cost (`wal::coalesce::batch_cost`): [`RECORD`] per record. The
/// ranges are `(start, end)` addresses, in the order they are logged.
pub(crate) fn record_bytes(spans: impl IntoIterator<Item = (u64, u64)>) -> u64 {
    (RECORD * records_needed(spans)) as u64
}

/// The addresses of `regions` of the block at address `base`.
pub(crate) fn spans(regions: &[Region], base: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
    regions
        .iter()
        .map(move |r| (base + r.start as u64, base + r.end as u64))
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        self.rollback();
    }
}
