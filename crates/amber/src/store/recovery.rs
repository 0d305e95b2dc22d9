//! The recovery pass: rebuilds the committed state from the last checkpoint
//! and the log.
//!
//! Redo-only: the page file holds exactly the state as of the checkpoint LSN
//! (nothing uncommitted is ever written to it), so recovery replays, in log
//! order, every record after the checkpoint that belongs to a transaction
//! whose commit record made it to the log, and nothing else. Replaying
//! physical after-images is idempotent, so a crash during recovery (or during
//! the checkpoint that ends it) is recovered by running it again.
//!
//! A crash during a checkpoint can leave blocks half-written. Every block the
//! checkpoint writes is listed, with the checksum it will have, in an intent
//! record made durable before the first block write. At that record the
//! replay has rebuilt each listed block as of the checkpoint; its checksum
//! must equal the intent's. A torn block therefore comes back whole (each of
//! its sectors was either the old image, which the replayed records turn into
//! the new one, or already the new one), and a block that does not match is
//! reported as damaged rather than trusted.

use super::pending::Base;
use super::{State, corrupt, read_block_raw};
use crate::error::{FileKind, Location, Result};
use crate::fasthash::IntMap;
use crate::format::page;
use crate::io::IoFile;
use crate::wal::Record;
use crate::wal::record::intent_entries;
use crate::wal::scan::{Scan, Tail};
use std::path::Path;

/// What the recovery pass found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// LSN the scan started from (the checkpoint LSN).
    pub from_lsn: u64,
    /// LSN just past the last valid record.
    pub end_lsn: u64,
    /// Valid records found.
    pub records: u64,
    /// Transactions with a commit record.
    pub committed: u64,
    /// Transactions without one (ignored).
    pub uncommitted: u64,
    /// Records replayed.
    pub redone: u64,
    /// Blocks found torn by an interrupted checkpoint and rebuilt.
    pub repaired: Vec<u64>,
    /// How the log ended.
    pub tail: Tail,
}

impl Default for RecoveryReport {
    fn default() -> Self {
        RecoveryReport {
            from_lsn: 0,
            end_lsn: 0,
            records: 0,
            committed: 0,
            uncommitted: 0,
            redone: 0,
            repaired: Vec::new(),
            tail: Tail::Clean,
        }
    }
}

/// Replays `scan` into `st`.
pub(crate) fn redo(
    st: &mut State,
    scan: &Scan<'_>,
    file: &dyn IoFile,
    path: &Path,
) -> Result<RecoveryReport> {
    let mut commits: IntMap<u32, u64> = IntMap::default();
    let mut seen: IntMap<u32, ()> = IntMap::default();
    let mut max_txid = 0u32;
    let mut last = None;
    for (lsn, r) in &scan.records {
        if let Some(t) = r.txid()
            && last != Some(t)
        {
            // A transaction's records are mostly contiguous: one insert each.
            last = Some(t);
            seen.insert(t, ());
            max_txid = max_txid.max(t);
        }
        if let Record::Commit { txid, .. } = r {
            commits.insert(*txid, *lsn);
        }
    }
    let mut report = RecoveryReport {
        from_lsn: st.sb.checkpoint_lsn,
        end_lsn: scan.end_lsn,
        records: scan.records.len() as u64,
        committed: commits.len() as u64,
        uncommitted: (seen.len() - commits.len()) as u64,
        tail: scan.tail.clone(),
        ..RecoveryReport::default()
    };
    for (lsn, r) in &scan.records {
        match r {
            Record::Intent { entries } => {
                check_intent(st, entries, file, path, *lsn, &mut report.repaired)?;
            }
            Record::Commit { .. } => {}
            _ => {
                let Some(&commit_lsn) = r.txid().and_then(|t| commits.get(&t)) else {
                    continue;
                };
                st.apply(r, commit_lsn, true)
                    .map_err(|what| corrupt(path, FileKind::Log, Location::Lsn(*lsn), what))?;
                report.redone += 1;
            }
        }
    }
    st.next_txid = st.next_txid.max(u64::from(max_txid) + 1);
    Ok(report)
}

/// At an interrupted checkpoint's intent record: rebuild each listed block
/// from its page-file image and the replayed changes, and check it against
/// the checksum the checkpoint was about to write.
fn check_intent(
    st: &mut State,
    entries: &[u8],
    file: &dyn IoFile,
    path: &Path,
    lsn: u64,
    repaired: &mut Vec<u64>,
) -> Result<()> {
    let ps = st.page_size;
    for (head, want) in intent_entries(entries) {
        // Blocks without pending changes are metadata blobs of the
        // interrupted checkpoint, which the old superblock does not use.
        let Some(patch) = st.pending.get_mut(&head) else {
            continue;
        };
        if let Base::File = patch.base {
            let mut img = vec![0u8; patch.run_len as usize * ps].into_boxed_slice();
            read_block_raw(file, path, head, ps, &mut img)?;
            let torn = page::verify(&img, head, patch.run_len).is_err();
            patch.materialize(img);
            if torn {
                repaired.push(head);
            }
        }
        let Base::Image(img) = &patch.base else {
            continue;
        };
        let got = page::checksum_with_lsn(img, patch.lsn);
        if got != want {
            return Err(corrupt(
                path,
                FileKind::PageFile,
                Location::Page(head),
                format!(
                    "rebuilt from the log it does not match what the checkpoint at LSN {lsn} wrote \
                     (checksum {got:#010x}, expected {want:#010x}): the page is damaged"
                ),
            ));
        }
    }
    Ok(())
}
