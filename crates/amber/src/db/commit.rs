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
use std::collections::BTreeMap;
use std::time::Instant;

impl Tx<'_> {
    /// The written blocks, as (head page, first frame, pages).
    fn written_blocks(&self) -> Result<BTreeMap<PageNo, (FrameNo, u32)>> {
        let frames = self
            .fs
            .take_written()
            .map_err(|e| Error::invalid(format!("listing written pages: {e}")))?;
        let mut blocks = BTreeMap::new();
        for f in frames {
            if let Some((head, idx, run)) = self.fs.page_of(f) {
                blocks.insert(head, (f - idx, run));
            }
        }
        Ok(blocks)
    }

    /// The clean version of a block: empty if allocated now, else committed.
    fn clean_image(&self, head: PageNo, run: u32) -> Result<Vec<u8>> {
        if self.new_blocks.contains_key(&head) {
            let mut img = vec![0u8; run as usize * self.page_size];
            page::format(&mut img, BlockKind::Data, head, run);
            return Ok(img);
        }
        self.stx
            .as_ref()
            .ok_or_else(|| Error::invalid("transaction already finished"))?
            .store()
            .read_block(head)
    }

    /// Copies block `head` out of memory in persistent form.
    fn dirty_image(&self, head: PageNo, frame: FrameNo, run: u32) -> Result<Vec<u8>> {
        let mut img = vec![0u8; run as usize * self.page_size];
        self.fs
            .copy_out(frame, 0, &mut img)
            .map_err(|e| Error::invalid(format!("reading page {head}: {e}")))?;
        let types = self.registry.snapshot();
        let map = super::pager::FrameMap {
            fs: self.fs,
            shift: self.shift,
        };
        convert_block(&mut img, self.page_size, &types, &map, Direction::Unswizzle)
            .map_err(|e| Error::invalid(format!("page {head}: {e}")))?;
        Ok(img)
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
        let mut stats = CommitStats::default();
        let t0 = Instant::now();
        let blocks = self.written_blocks()?;
        stats.detect = t0.elapsed();
        stats.blocks = blocks.len() as u64;
        let t1 = Instant::now();
        let ps = self.page_size as u64;
        let mut writes: Vec<(u64, Vec<u8>)> = Vec::new();
        for (&head, &(frame, run)) in &blocks {
            let clean = self.clean_image(head, run)?;
            let dirty = self.dirty_image(head, frame, run)?;
            // Only `used` and the object area are logical content; the header
            // bytes between them are the store's, so the two never share a
            // record.
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
            for regions in [used, body] {
                stats.changed_bytes += regions.iter().map(|r| r.len() as u64).sum::<u64>();
                let merged = coalesce(&regions, RANGE_HEADER, 1);
                stats.minimal_log_bytes += log_cost(&merged, RANGE_HEADER, 1) as u64;
                for r in merged {
                    writes.push((head * ps + r.start as u64, dirty[r.start..r.end].to_vec()));
                }
            }
        }
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
        let mut slots = self.pager.slots();
        for (k, pa) in self.freed.drain(..) {
            slots.entry(k).or_default().push(pa);
        }
        drop(slots);
        self.taken.clear();
        self.new_blocks.clear();
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
        if let Err(e) = self.restore() {
            self.heap.broken = Some(format!("an abort could not restore memory: {e}"));
        }
        self.registry.abort();
        let mut slots = self.pager.slots();
        for (k, pa) in self.taken.drain(..) {
            slots.entry(k).or_default().push(pa);
        }
        drop(slots);
        self.freed.clear();
        self.heap.current = None;
        if let Some(stx) = self.stx.take() {
            stx.abort();
        }
    }

    fn restore(&mut self) -> Result<()> {
        let blocks = self.written_blocks()?;
        let types = self.registry.snapshot();
        for (&head, &(frame, run)) in &blocks {
            if self.new_blocks.contains_key(&head) {
                continue;
            }
            let mut img = self
                .stx
                .as_ref()
                .ok_or_else(|| Error::invalid("transaction already finished"))?
                .store()
                .read_block(head)?;
            let map = super::pager::FrameMap {
                fs: self.fs,
                shift: self.shift,
            };
            convert_block(&mut img, self.page_size, &types, &map, Direction::Swizzle)
                .map_err(|e| Error::invalid(format!("page {head}: {e}")))?;
            self.fs
                .copy_in(frame, 0, &img)
                .and_then(|()| self.fs.write_protect(frame, run))
                .map_err(|e| Error::invalid(format!("restoring page {head}: {e}")))?;
        }
        let news: Vec<(PageNo, u32)> = self.new_blocks.drain().collect();
        for (head, run) in news {
            if let Some(f) = self.fs.lookup(head) {
                self.pager.forget(f);
                self.fs
                    .evict(f, run)
                    .map_err(|e| Error::invalid(format!("dropping new page {head}: {e}")))?;
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
