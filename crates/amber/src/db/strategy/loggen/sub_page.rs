//! Sub-page logging (QuickStore's SL, `papers/002_*` §3.3): what the
//! barrier recorded — each run of dirty cards (QuickStore's sub-page
//! blocks), or each marked or remembered object — is logged whole, in
//! persistent form, without a clean version and without diffing. The log
//! is larger than the minimal one by design: by the unchanged bytes of
//! every recorded block.
//!
//! A block allocated by the transaction, or one not resident as a single
//! page, is diffed as [`Differencing`] does (against its empty or committed
//! image): the barrier does not see a new block's formatting, and a
//! multi-page block would be unswizzled whole either way.
//!
//! [`Differencing`]: super::Differencing

use super::{Differencing, LogGenerator, Record, Written};
use crate::db::tx::{CommitStats, Tx};
use crate::error::Result;

/// The sub-page log generator.
pub(crate) struct SubPage;

impl LogGenerator for SubPage {
    fn block(&self, tx: &Tx<'_>, b: &Written<'_>, out: &mut Vec<Record>, stats: &mut CommitStats) -> Result<()> {
        let Some(within) = b.within.as_deref().filter(|_| b.run == 1 && !tx.session.tx.new_blocks.contains_key(&b.head))
        else {
            return Differencing.block(tx, b, out, stats);
        };
        stats.noted_bytes += within.iter().map(|&(s, e)| e - s).sum::<usize>() as u64;
        let ranges = tx.recorded_ranges(b.head, b.frame, within)?;
        #[cfg(debug_assertions)]
        {
            let dirty = tx.dirty_image(b.head, b.frame, b.run)?;
            let clean = tx.clean_image(b.head, b.frame, b.run, b.frames)?;
            let logged: Vec<(usize, &[u8])> = ranges.iter().map(|(s, d)| (*s, &d[..])).collect();
            super::check_covers(tx, b.head, &clean, &dirty, &logged)?;
        }
        let base = b.head * tx.page_size as u64;
        out.extend(ranges.into_iter().map(|(s, d)| Record::Range(base + s as u64, d)));
        Ok(())
    }
}
