//! Whole-page logging (QuickStore's WPL, `papers/002_*` §3.4): every page
//! written is logged as its whole after-image, in persistent form. No
//! clean version is needed and nothing is diffed; the log is larger by
//! design (a page per written page, whatever changed in it), and the store
//! keeps the latest image of such pages in the log rather than in memory.
//!
//! The minimal log of the same changes is still counted
//! (`CommitStats::minimal_log_bytes`, as for a diffing scheme): the block
//! is diffed against its clean version for the count only, so that a
//! whole-page row's log can be set beside the least one for the same
//! transaction. That diff is the one client cost WPL pays here that
//! QuickStore's did not (the clean version itself is the recovery
//! buffer's copy, taken at the first write whatever the generator).
//!
//! Under page protection the written pages are those the fault backend
//! listed; under a software scheme, those the recorded ranges touch (every
//! page of a block allocated by the transaction: the barrier does not see
//! its formatting).

use super::{LogGenerator, Record, Written};
use crate::db::tx::{CommitStats, Tx};
use crate::error::Result;

/// The whole-page log generator.
pub(crate) struct WholePage;

impl LogGenerator for WholePage {
    fn block(&self, tx: &Tx<'_>, b: &Written<'_>, out: &mut Vec<Record>, stats: &mut CommitStats) -> Result<()> {
        let ps = tx.page_size;
        let dirty = tx.dirty_image(b.head, b.frame, b.run)?;
        let new_block = tx.session.tx.new_blocks.contains_key(&b.head);
        let mut pages = Vec::new();
        for i in 0..b.run as usize {
            let page = i * ps..(i + 1) * ps;
            let written = match &b.within {
                None => b.frames.contains(&(b.frame + i as u32)),
                Some(w) => new_block || w.iter().any(|&(s, e)| s < page.end && page.start < e),
            };
            if written {
                pages.push(page);
            }
        }
        let clean = tx.clean_image(b.head, b.frame, b.run, b.frames)?;
        let base = b.head * ps as u64;
        for r in Tx::changes(&clean, &dirty, 1, None, stats) {
            out.push(Record::Counted(base + r.start as u64, base + r.end as u64));
        }
        #[cfg(debug_assertions)]
        {
            let logged: Vec<(usize, &[u8])> = pages.iter().map(|p| (p.start, &dirty[p.clone()])).collect();
            super::check_covers(tx, b.head, &clean, &dirty, &logged)?;
        }
        for page in pages {
            stats.noted_bytes += ps as u64;
            out.push(Record::Page(b.head + (page.start / ps) as u64, dirty[page].to_vec()));
        }
        Ok(())
    }
}
