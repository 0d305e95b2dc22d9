//! Whole-page logging's restart: the WPL table rebuilt by one backward scan
//! of the log, from its end towards the checkpoint (QuickStore, 002 §3.4.3;
//! docs/design.md §3.2) — to the checkpoint, or to the first run of records
//! holding a page record if that is later: nothing before it is one.
//!
//! The scan needs a trusted end. The recovery pass (`recovery.rs`) finds
//! it as it always has — streaming the log forward, checking every record,
//! and telling a torn tail from damage in the middle by `synced_delta` —
//! replaying records meanwhile, up to the first run of records that holds
//! a page record; from there it only verifies. Then, going backward, a commit record comes before every record of its transaction,
//! so the committed-transaction list (CTL) is complete for each record when
//! it is met: a page record of a committed transaction is its page's
//! latest image unless one that applies later was met already. "Later" is
//! the order the running store applied them in — commit order, then log
//! order within a transaction — which is log order but for records logged
//! early, so the table keeps, per page, the page record with the highest
//! (commit LSN, LSN).
//!
//! The rest of the forward redo (from where the first pass stopped
//! replaying) then applies only what the table has not superseded: of the page records, only each page's latest
//! (as a table entry, or into a block whose whole image is in memory), and
//! no range record that lies wholly on pages whose latest image comes after
//! it. Everything else is replayed in commit order as before, so a page
//! with both page and range records comes out as the running store had it.
//! A log without page records costs what it did: one pass.

use super::corrupt;
use super::recovery::LogSource;
use crate::error::{Error, FileKind, Location, Result};
use crate::fasthash::IntMap;
use crate::format::PageNo;
use crate::io::IoFile;
use crate::wal::backward::scan_backward;
use crate::wal::{Record, TxId};
use std::ops::ControlFlow;

/// When a committed record took effect: its commit record's LSN, then its
/// own LSN.
pub(crate) type Applied = (u64, u64);

/// What the backward scan rebuilt.
#[derive(Debug, Default)]
pub(crate) struct WplTable {
    /// Per page, when its latest committed page record took effect.
    pub latest: IntMap<PageNo, Applied>,
    /// Records the backward scan read.
    pub records: u64,
}

impl WplTable {
    /// Whether a record that took effect at `at` and changes pages
    /// `first..=last` is wholly superseded by later page images.
    pub(crate) fn supersedes(&self, first: PageNo, last: PageNo, at: Applied) -> bool {
        (first..=last).all(|p| self.latest.get(&p).is_some_and(|&l| l > at))
    }

    /// Whether the page record of `page` that took effect at `at` is that
    /// page's latest image.
    pub(crate) fn is_latest(&self, page: PageNo, at: Applied) -> bool {
        self.latest.get(&page) == Some(&at)
    }
}

/// The backward scan of the log `f` (read as `log` says) from `end` (a
/// record boundary the forward pass verified) to `from` (a record boundary
/// with no page record before it since the checkpoint): the WPL table.
/// Empty when the log is not one a backward scan can trust: transaction
/// records after an interrupted checkpoint's intent record, which no writer
/// appends (the redo then applies every record, which is right whatever
/// the log holds, only slower).
pub(crate) fn backward(
    f: &dyn IoFile,
    log: &LogSource<'_>,
    from: u64,
    end: u64,
    page_size: usize,
) -> Result<WplTable> {
    let mut table = WplTable::default();
    let mut ctl: IntMap<TxId, u64> = IntMap::default();
    let (mut tx_after, mut intent_before_tx) = (false, false);
    let walked = scan_backward(f, log.base_lsn, from, end, page_size, &mut |lsn, r| {
        match r {
            Record::Commit { txid, .. } => {
                ctl.insert(txid, lsn);
            }
            Record::Page { txid, page, .. } => {
                if let Some(&c) = ctl.get(&txid) {
                    let l = table.latest.entry(page).or_insert((c, lsn));
                    *l = (*l).max((c, lsn));
                }
            }
            Record::Intent { .. } => intent_before_tx |= tx_after,
            _ => {}
        }
        tx_after |= r.txid().is_some();
        ControlFlow::Continue(())
    })
    .map_err(|e| Error::io("read log", log.path, e))?;
    match walked {
        Ok(n) => table.records = n,
        Err(bad) => {
            return Err(corrupt(
                log.path,
                FileKind::Log,
                Location::Lsn(bad.end),
                format!(
                    "reading the log backward, the record that ends here is bad ({}), though the \
                     forward scan had checked it: the log is damaged or changed during recovery",
                    bad.what
                ),
            ));
        }
    }
    if intent_before_tx {
        table.latest.clear();
    }
    Ok(table)
}
