//! Spilling dirty pages when a transaction outgrows the cache budget.
//!
//! The fault path evicts clean pages only; a transaction that has written
//! more pages than the budget holds leaves it unable to. Rather than fail,
//! the transaction spills: at its next call into Amber it logs the changes of
//! some written pages early (with before-images, ignored by recovery unless
//! it commits), keeps those changes in memory in persistent form (only the
//! changed bytes, not the pages), and drops the pages. A spilled page that is
//! touched again faults back in as its committed (or empty) image with the
//! transaction's changes laid over it. So a transaction may change more data
//! than fits in memory; what it keeps is proportional to the bytes it
//! changed. Commit logs only what changed after the spill; abort forgets the
//! spilled changes with the rest.

use super::strategy::Detect;
use super::tx::Tx;
use crate::format::objects::clear_marks;
use crate::format::page::PageHeader;
use crate::error::Result;
use crate::vm::FrameNo;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

impl Tx<'_> {
    /// Spills written pages until resident memory is back under the budget
    /// (with an eighth of headroom, so that spilling is not redone at every
    /// call). A failure is reported at commit.
    #[cold]
    pub(crate) fn spill_dirty(&mut self) {
        if let Err(e) = self.spill_inner()
            && self.failed.is_none()
        {
            self.failed = Some(e);
        }
    }

    fn spill_inner(&mut self) -> Result<()> {
        self.pager.pressure.store(false, Ordering::Release);
        let Some(budget) = self.pager.budget() else {
            return Ok(());
        };
        let resident = || self.pager.stats.resident.load(Ordering::Relaxed);
        if resident() <= budget {
            return Ok(());
        }
        // Peek, not take: the pages not spilled must stay marked written, or
        // the fault path would evict them as clean.
        let all = self
            .fs
            .peek_written()
            .map_err(|e| e.into_error(self.source.name(), "listing written pages"))?;
        let written: BTreeSet<FrameNo> = all.iter().copied().collect();
        let target = budget - budget / 8;
        let ps = self.page_size as u64;
        let mut spilled = false;
        // The addresses of the ranges spilled, for the minimal log's count
        // of the records they need.
        let mut spanned = Vec::new();
        for (head, (frame, run)) in self.parts().blocks_of(&all) {
            if self.pager.stats.resident.load(Ordering::Relaxed) <= target {
                break;
            }
            if !self.fs.is_resident(frame) {
                continue;
            }
            let clean = self.clean_image(head, frame, run, &written)?;
            let mut dirty = self.dirty_image(head, frame, run)?;
            if self.strategy.detect == Detect::Objects {
                // Marks are memory state: logged early, they would be stored.
                let used = PageHeader::read(&dirty).map_or(0, |h| h.used as usize);
                clear_marks(&mut dirty, used);
            }
            let mut stats = std::mem::take(&mut self.early_stats);
            let regions = Self::changes(&clean, &dirty, 2, None, &mut stats);
            self.early_stats = stats;
            spanned.extend(super::commit::spans(&regions, head * ps));
            let stx = self.stx()?;
            for r in &regions {
                stx.write_with_before(
                    head * ps + r.start as u64,
                    &clean[r.start..r.end],
                    &dirty[r.start..r.end],
                )?;
            }
            self.remember_changes(head, &regions, &dirty);
            if let Some(b) = self.pager.rbuf.get() {
                for i in 0..run {
                    b.forget(frame + i);
                }
            }
            self.pager.forget(frame);
            self.fs
                .evict(frame, run)
                .map_err(|e| e.into_error(self.source.name(), &format!("spilling page {head}")))?;
            self.session.tx.early_pages.insert(head, run);
            self.pager.stats.spilled.fetch_add(1, Ordering::Relaxed);
            spilled = true;
        }
        if spilled {
            self.early_stats.minimal_log_bytes += super::commit::record_bytes(spanned);
            self.stx()?.log_early()?;
        }
        Ok(())
    }
}
