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
//! by the minimal-log rule (after-images only, so 1 · gap ≤ H) and logged as
//! range records; pointers are in persistent form because the dirty copy was
//! unswizzled. Then one commit record and one sync.
//!
//! Abort: each written block is restored from the store's committed image,
//! swizzled again, and write-protected; blocks the transaction allocated are
//! dropped from memory and their pages returned.

use super::tx::{CommitStats, Tx};
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use crate::translate::swizzle::{Direction, convert_block};
use crate::vm::FrameNo;
use crate::wal::RANGE_HEADER;
use crate::wal::coalesce::{Region, coalesce, diff_into, log_cost};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

impl Tx<'_> {
    /// Frames written since the transaction began (re-protected).
    fn written_frames(&self) -> Result<Vec<FrameNo>> {
        self.fs
            .take_written()
            .map_err(|e| e.into_error(self.pager.store.path(), "listing written pages"))
    }

    /// The blocks of `frames`, as head page → (first frame, pages).
    pub(crate) fn blocks_of(&self, frames: &[FrameNo]) -> BTreeMap<PageNo, (FrameNo, u32)> {
        let mut blocks = BTreeMap::new();
        for &f in frames {
            if let Some((head, idx, run)) = self.fs.page_of(f) {
                blocks.insert(head, (f - idx, run));
            }
        }
        blocks
    }

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
            return spill.image(self.stx_ref()?.store(), head, run, ps);
        }
        if self.new_blocks.contains_key(&head) {
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
                        .map_err(|e| e.into_error(self.pager.store.path(), "reading a page"))?,
                }
            }
            if complete {
                self.unswizzle(head, &mut img)?;
                return Ok(img);
            }
        }
        self.stx_ref()?.store().read_block(head)
    }

    /// Converts a block image in memory form to persistent form.
    fn unswizzle(&self, head: PageNo, img: &mut [u8]) -> Result<()> {
        let types = self.registry.snapshot();
        let map = super::fetch::FrameMap::new(self.fs);
        convert_block(img, self.page_size, &types, &map, Direction::Unswizzle)
            .map(drop)
            .map_err(|e| Error::invalid(format!("page {head}: {e}")))
    }

    /// Copies block `head` out of memory in persistent form.
    pub(crate) fn dirty_image(&self, head: PageNo, frame: FrameNo, run: u32) -> Result<Vec<u8>> {
        let mut img = vec![0u8; run as usize * self.page_size];
        self.fs
            .copy_out(frame, 0, &mut img)
            .map_err(|e| e.into_error(self.pager.store.path(), "reading a page"))?;
        self.unswizzle(head, &mut img)?;
        Ok(img)
    }

    /// The changed regions of a block, merged by the minimal-log rule for
    /// records carrying `images` images per byte. `used` and the object
    /// area are logical content; the header bytes between them are the
    /// store's, so the two never share a record.
    pub(crate) fn changes(
        clean: &[u8],
        dirty: &[u8],
        images: usize,
        stats: &mut CommitStats,
    ) -> Vec<Region> {
        let mut used: Vec<Region> = Vec::new();
        diff_into(
            &clean[USED_OFFSET..USED_OFFSET + 4],
            &dirty[USED_OFFSET..USED_OFFSET + 4],
            USED_OFFSET,
            &mut used,
        );
        let mut body: Vec<Region> = Vec::new();
        diff_into(
            &clean[HEADER_SIZE..],
            &dirty[HEADER_SIZE..],
            HEADER_SIZE,
            &mut body,
        );
        let mut out = Vec::new();
        for regions in [used, body] {
            stats.changed_bytes += regions.iter().map(|r| r.len() as u64).sum::<u64>();
            let merged = coalesce(&regions, RANGE_HEADER, images);
            stats.minimal_log_bytes += log_cost(&merged, RANGE_HEADER, images) as u64;
            out.extend(merged);
        }
        out
    }

    /// Logs the changes of the page in `frame` now, with before-images taken
    /// from its recovery-buffer copy `clean`, and write-protects it again so
    /// that its next write takes a fresh copy (the recovery buffer was full).
    pub(crate) fn log_early(&mut self, frame: FrameNo, mut clean: Vec<u8>) -> Result<()> {
        let Some((head, _, run)) = self.fs.page_of(frame) else {
            return Ok(());
        };
        // A multi-page block or a new block is simply left for the commit,
        // which then diffs it against the committed (or empty) image.
        if run != 1 || self.new_blocks.contains_key(&head) {
            return Ok(());
        }
        self.unswizzle(head, &mut clean)?;
        let dirty = self.dirty_image(head, frame, 1)?;
        let mut stats = CommitStats::default();
        let regions = Self::changes(&clean, &dirty, 2, &mut stats);
        let base = head * self.page_size as u64;
        let stx = self.stx()?;
        for r in &regions {
            stx.write_with_before(
                base + r.start as u64,
                &clean[r.start..r.end],
                &dirty[r.start..r.end],
            )?;
        }
        stx.log_early()?;
        self.fs
            .write_protect(frame, 1)
            .map_err(|e| e.into_error(self.pager.store.path(), "re-protecting a page"))?;
        // Clean-looking now, but its changes are only in the log: should it
        // be evicted, it must fault back with them.
        self.remember_changes(head, &regions, &dirty);
        self.early_stats.minimal_log_bytes += stats.minimal_log_bytes;
        self.early_stats.changed_bytes += stats.changed_bytes;
        Ok(())
    }

    /// Keeps changes of block `head` that were logged early but are not in
    /// the store's committed image, so that the block faults back in with
    /// them if it is dropped before the transaction ends (`Spill`), and so
    /// that later diffs of it start from them.
    pub(crate) fn remember_changes(&mut self, head: PageNo, regions: &[Region], dirty: &[u8]) {
        let new_block = self.new_blocks.contains_key(&head);
        let mut spills = self.pager.spills();
        let s = spills.entry(head).or_insert_with(|| super::pager::Spill {
            new_block,
            changes: Vec::new(),
        });
        s.changes.extend(
            regions
                .iter()
                .map(|r| (r.start, dirty[r.start..r.end].to_vec())),
        );
    }

    /// Commits: returns once the changes are durable.
    pub fn commit(mut self) -> Result<CommitStats> {
        match self.commit_inner() {
            Ok(s) => Ok(s),
            Err(e) => {
                // Nothing of this transaction is in the committed state:
                // bring memory back to it.
                self.rollback();
                Err(e)
            }
        }
    }

    fn commit_inner(&mut self) -> Result<CommitStats> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut stats = CommitStats::default();
        let t0 = Instant::now();
        let frames = self.written_frames()?;
        let blocks = self.blocks_of(&frames);
        stats.detect = t0.elapsed();
        stats.blocks = blocks.len() as u64;
        let t1 = Instant::now();
        let ps = self.page_size as u64;
        let written: BTreeSet<FrameNo> = frames.into_iter().collect();
        let mut writes: Vec<(u64, Vec<u8>)> = Vec::new();
        for (&head, &(frame, run)) in &blocks {
            let dirty = self.dirty_image(head, frame, run)?;
            let clean = self.clean_image(head, frame, run, &written)?;
            for r in Self::changes(&clean, &dirty, 1, &mut stats) {
                writes.push((head * ps + r.start as u64, dirty[r.start..r.end].to_vec()));
            }
        }
        stats.minimal_log_bytes += self.early_stats.minimal_log_bytes;
        stats.changed_bytes += self.early_stats.changed_bytes;
        stats.diff = t1.elapsed();
        let t2 = Instant::now();
        let mut stx = self
            .stx
            .take()
            .ok_or_else(|| Error::invalid("transaction already finished"))?;
        for (addr, data) in &writes {
            stx.write(*addr, data)?;
        }
        let info = stx.commit()?;
        stats.write = t2.elapsed();
        stats.log_bytes = info.log_bytes;
        self.finish_committed();
        Ok(stats)
    }

    /// Bookkeeping once the store has the transaction.
    fn finish_committed(&mut self) {
        self.registry.commit();
        self.pager
            .freed_now
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let mut slots = self.pager.slots();
        for (k, pa) in self.freed.drain(..) {
            slots.add(k, pa);
        }
        drop(slots);
        self.taken.clear();
        self.new_blocks.clear();
        self.early_pages.clear();
        self.pager.spills().clear();
        if let Some(b) = self.pager.rbuf.get() {
            b.clear();
        }
        self.fs.set_writers(false);
        self.done = true;
    }

    /// Abandons the transaction: memory returns to the committed state.
    pub fn abort(mut self) -> Result<()> {
        self.rollback();
        match &self.heap.broken {
            Some(why) => Err(Error::Poisoned { cause: why.clone() }),
            None => Ok(()),
        }
    }

    /// Restores every written block, drops new ones, returns reused slots.
    pub(crate) fn rollback(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.pager.spills().clear();
        if let Err(e) = self.restore() {
            self.heap.broken = Some(format!("an abort could not restore memory: {e}"));
        }
        self.registry.abort();
        let mut slots = self.pager.slots();
        for (k, pa) in self.taken.drain(..) {
            slots.add(k, pa);
        }
        drop(slots);
        self.freed.clear();
        self.pager
            .freed_now
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.early_pages.clear();
        if let Some(b) = self.pager.rbuf.get() {
            b.clear();
        }
        self.heap.current = None;
        if let Some(stx) = self.stx.take() {
            stx.abort();
        }
        self.fs.set_writers(false);
    }

    fn restore(&mut self) -> Result<()> {
        let frames = self.written_frames()?;
        let mut blocks = self.blocks_of(&frames);
        // Pages logged early were write-protected again, so they may not be
        // listed as written; they hold this transaction's changes all the same.
        for (&head, &run) in &self.early_pages {
            if let Some(f) = self.fs.lookup(head) {
                blocks.insert(head, (f, run));
            }
        }
        // Spilled pages that were not faulted back hold nothing of ours.
        blocks.retain(|_, (f, _)| self.fs.is_resident(*f));
        let types = self.registry.snapshot();
        for (&head, &(frame, run)) in &blocks {
            if self.new_blocks.contains_key(&head) {
                continue;
            }
            let mut img = self.stx_ref()?.store().read_block(head)?;
            let map = super::fetch::FrameMap::new(self.fs);
            convert_block(&mut img, self.page_size, &types, &map, Direction::Swizzle)
                .map_err(|e| Error::invalid(format!("page {head}: {e}")))?;
            self.fs
                .copy_in(frame, 0, &img)
                .and_then(|()| self.fs.write_protect(frame, run))
                .map_err(|e| e.into_error(self.pager.store.path(), "restoring a page"))?;
        }
        let news: Vec<(PageNo, u32)> = self.new_blocks.drain().collect();
        for (head, run) in news {
            if let Some(f) = self.fs.lookup(head) {
                self.pager.forget(f);
                self.fs
                    .evict(f, run)
                    .map_err(|e| e.into_error(self.pager.store.path(), "dropping a new page"))?;
            }
        }
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        self.rollback();
    }
}
