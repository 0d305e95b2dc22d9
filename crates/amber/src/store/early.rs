//! The range records a transaction logged early, kept for its commit to
//! apply.
//!
//! A transaction larger than the cache budget logs the changes of the
//! blocks it spills before it commits (`StoreTx::log_early`), and may spill
//! the same block again and again: an index leaf toggled under a full
//! budget was spilled, refetched and spilled hundreds of thousands of times
//! in one OO7 T3b transaction, and keeping every record it logged (with
//! before-images) held 460 MiB. What the commit applies of those records
//! is only the bytes they leave, so they are kept as that: per block a
//! [`Patch`] (the changed bytes in a block-sized buffer, newest over
//! oldest), at most the block's size however often it changed. The
//! records themselves are in the log, which recovery replays.
//!
//! Applying the overlay where the records were is the same as applying
//! them one by one, because the only records a range record does not
//! commute with are those of its own block: its allocation comes before it
//! (it is applied before the overlay), a free of the block drops the
//! block's overlay, and a whole-page record closes the overlay — every
//! record after it, early or not, is kept and applied in order after the
//! overlay.

use super::pending::Patch;
use super::state::State;
use super::tx::Op;
use crate::format::PageNo;
use crate::wal::{Record, TxId};
use std::collections::BTreeMap;

/// The bytes the early range records of one transaction leave, per block.
#[derive(Debug, Default)]
pub(crate) struct Early {
    blocks: BTreeMap<PageNo, Patch>,
    /// Set once a record that does not commute with range records (a page
    /// image) was logged early: from then on records are kept as they are.
    closed: bool,
}

impl Early {
    /// Whether no range record was taken in.
    pub(crate) fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Takes the range records of `logged` (just logged early, with their
    /// LSNs) into the overlay and returns the others, in order, with the
    /// place among them before which the overlay applies if it was closed
    /// by one of them.
    pub(crate) fn absorb(
        &mut self,
        st: &State,
        logged: Vec<(Op, u64)>,
    ) -> (Vec<(Op, u64)>, Option<usize>) {
        let mut kept = Vec::new();
        let mut closed_at = None;
        for (op, lsn) in logged {
            if self.closed {
                kept.push((op, lsn));
                continue;
            }
            match op {
                Op::Range { addr, after, .. } => match st.locate(addr) {
                    Some((head, run, off)) => {
                        let block_len = run as usize * st.page_size;
                        (self.blocks.entry(head))
                            .or_insert_with(|| Patch::over_file(run))
                            .write(off, &after, 0, block_len);
                    }
                    // Checked when it was written; kept for the apply to
                    // report.
                    None => kept.push((
                        Op::Range {
                            addr,
                            after,
                            before: None,
                        },
                        lsn,
                    )),
                },
                Op::Free { page, .. } => {
                    self.blocks.remove(&page);
                    kept.push((op, lsn));
                }
                Op::Page { .. } => {
                    self.closed = true;
                    closed_at = Some(kept.len());
                    kept.push((op, lsn));
                }
                op => kept.push((op, lsn)),
            }
        }
        (kept, closed_at)
    }

    /// Applies the overlay to the committed state, as the records it
    /// holds would be (`State::apply`), for transaction `txid` committed
    /// at `commit_lsn`.
    pub(crate) fn apply(&mut self, st: &mut State, txid: TxId, commit_lsn: u64) -> Result<(), String> {
        let shift = st.page_size.trailing_zeros();
        // Each block's overlay is let go once applied: the committed state
        // grows as the overlay shrinks.
        for (head, mut patch) in std::mem::take(&mut self.blocks) {
            for (off, after) in patch.runs() {
                let rec = Record::Range {
                    txid,
                    addr: (head << shift) + off as u64,
                    after,
                    before: None,
                };
                st.apply(&rec, 0, commit_lsn, false)?;
            }
        }
        Ok(())
    }
}
