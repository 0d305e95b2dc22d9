//! Differencing (QuickStore's PD and SD, `papers/002_*` §3.2–3.3, and
//! every scheme of Hosking et al.): each written block is diffed against
//! its clean version, within what the detection scheme recorded, and the
//! differences are coalesced by the minimal-log rule, so every detection
//! scheme yields the same log.
//!
//! The clean version is the barrier's copies when they serve (a one-page
//! block that was there before the transaction, diffed object by object:
//! `strategy/diff.rs`), else the block's clean image (`Tx::clean_image`:
//! the recovery buffer's copy, the committed image, or an empty block).

use super::{LogGenerator, Record, Written};
use crate::db::tx::{CommitStats, Tx};
use crate::error::Result;
use crate::format::PageNo;
#[cfg(debug_assertions)]
use crate::wal::coalesce::Region;

/// The differencing log generator.
pub(crate) struct Differencing;

impl LogGenerator for Differencing {
    fn block(&self, tx: &Tx<'_>, b: &Written<'_>, out: &mut Vec<Record>, stats: &mut CommitStats) -> Result<()> {
        let base = b.head * tx.page_size as u64;
        if let (Some(copies), Some(within)) = (b.copies, &b.within)
            && copies_serve(tx, b.head, b.run, within)
        {
            stats.noted_bytes += within.iter().map(|&(s, e)| e - s).sum::<usize>() as u64;
            let found = tx.changes_from_copies(b.head, b.frame, within, copies, stats)?;
            #[cfg(debug_assertions)]
            {
                let dirty = tx.dirty_image(b.head, b.frame, b.run)?;
                let clean = tx.clean_image(b.head, b.frame, b.run, b.frames)?;
                let regions: Vec<Region> = found
                    .iter()
                    .map(|(s, d)| Region { start: *s, end: s + d.len() })
                    .collect();
                check_barrier(tx, b.head, &clean, &dirty, &regions)?;
                let logged: Vec<(usize, &[u8])> = found.iter().map(|(s, d)| (*s, &d[..])).collect();
                super::check_covers(tx, b.head, &clean, &dirty, &logged)?;
            }
            out.extend(found.into_iter().map(|(s, d)| Record::Diffed(base + s as u64, d)));
            stats.copy_diffed_blocks += 1;
            return Ok(());
        }
        let dirty = tx.dirty_image(b.head, b.frame, b.run)?;
        let clean = tx.clean_image(b.head, b.frame, b.run, b.frames)?;
        // A block allocated now is diffed whole, whatever was noted: the
        // barrier does not see its formatting.
        let within = b
            .within
            .as_deref()
            .filter(|_| !tx.session.tx.new_blocks.contains_key(&b.head));
        stats.noted_bytes += within.map_or(dirty.len(), |w| w.iter().map(|&(s, e)| e - s).sum::<usize>()) as u64;
        let regions = Tx::changes(&clean, &dirty, 1, within, stats);
        #[cfg(debug_assertions)]
        if within.is_some() {
            check_barrier(tx, b.head, &clean, &dirty, &regions)?;
        }
        for r in regions {
            out.push(Record::Diffed(base + r.start as u64, dirty[r.start..r.end].to_vec()));
        }
        Ok(())
    }
}

/// Whether the barrier's clean copies are the clean version of block
/// `head`: a one-page block that was there before the transaction, none
/// of whose changes were logged early (its committed image plus those
/// changes is its clean version then: `clean_image`). A page most of which
/// was noted is diffed whole instead, against its committed image: object
/// by object it would cost more.
fn copies_serve(tx: &Tx<'_>, head: PageNo, run: u32, within: &[(usize, usize)]) -> bool {
    let noted: usize = within.iter().map(|&(s, e)| e - s).sum();
    run == 1
        && noted <= tx.page_size / 2
        && !tx.session.tx.new_blocks.contains_key(&head)
        && !tx.session.tx.early_pages.contains_key(&head)
        && !tx.pager.spills().contains_key(&head)
}

/// Debug builds: a block's log under a software scheme must be the
/// whole-block diff's, or a write bypassed the barrier (and would be
/// lost).
#[cfg(debug_assertions)]
fn check_barrier(tx: &Tx<'_>, head: PageNo, clean: &[u8], dirty: &[u8], got: &[Region]) -> Result<()> {
    let full = Tx::changes(clean, dirty, 1, None, &mut CommitStats::default());
    if full.as_slice() != got {
        return Err(crate::error::Error::internal(format!(
            "page {head}: bytes changed outside what the {} barrier recorded \
             (logged {got:?}, changed {full:?})",
            tx.strategy.detect
        )));
    }
    Ok(())
}
