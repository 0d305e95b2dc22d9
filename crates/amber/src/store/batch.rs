//! A transaction's changes as log records: its ranges gathered into ranges
//! records (`wal/ranges.rs`), every other change one record.
//!
//! Consecutive range changes share a record while each follows the one
//! before (ascending, within a u16 gap, the same images) and the record has
//! room: what the minimal-log rule (`wal/coalesce.rs`) counts on, so a
//! commit whose ranges come in address order (the object layer's: blocks
//! in order, each block's regions in order) costs exactly the minimum.
//! Ranges out of order are still right, only dearer: a new record where
//! one cannot follow.

use super::tx::Op;
use crate::error::{Error, Result};
use crate::wal::ranges::Body;
use crate::wal::{Record, TxId};

/// One record of a batch: an op on its own, or several range ops.
enum Group {
    /// The op at this index.
    Op(usize),
    /// `body.count` range ops, in order.
    Ranges { body: Body },
}

/// The records of a run of ops, before they are borrowed as [`Record`]s.
pub(crate) struct Batch {
    groups: Vec<Group>,
}

impl Batch {
    /// Gathers `ops`. Every range op fits a ranges record alone (`StoreTx`
    /// cuts longer writes), so an error here is a bug.
    pub(crate) fn new(ops: &[Op]) -> Result<Batch> {
        let mut groups: Vec<Group> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let Op::Range {
                addr,
                after,
                before,
            } = op
            else {
                groups.push(Group::Op(i));
                continue;
            };
            let before = before.as_deref();
            if let Some(Group::Ranges { body, .. }) = groups.last_mut()
                && body.push(*addr, after, before)
            {
                continue;
            }
            let body = Body::new(*addr, after, before).ok_or_else(|| {
                Error::internal(format!(
                    "a range of {} bytes at address {addr} fits no ranges record",
                    after.len()
                ))
            })?;
            groups.push(Group::Ranges { body });
        }
        Ok(Batch { groups })
    }

    /// The records, in order, of `ops` (the ops [`new`](Self::new) was
    /// given), for transaction `txid`.
    pub(crate) fn records<'a>(&'a self, ops: &'a [Op], txid: TxId) -> Vec<Record<'a>> {
        (self.groups.iter())
            .map(|g| match g {
                Group::Op(i) => ops[*i].record(txid),
                Group::Ranges { body, .. } => Record::Ranges {
                    txid,
                    addr: body.addr,
                    before: body.before,
                    body: &body.bytes,
                },
            })
            .collect()
    }

    /// The LSN of each op's record, the batch's records appended one after
    /// the other from `first` (`records` are [`records`](Self::records)).
    pub(crate) fn op_lsns(&self, first: u64, records: &[Record<'_>]) -> Vec<u64> {
        let mut out = Vec::new();
        let mut at = first;
        for (g, r) in self.groups.iter().zip(records) {
            let ops = match g {
                Group::Op(_) => 1,
                Group::Ranges { body, .. } => body.count,
            };
            out.extend(std::iter::repeat_n(at, ops));
            at += r.encoded_len() as u64;
        }
        out
    }

    /// Log bytes of the batch's records.
    pub(crate) fn bytes(records: &[Record<'_>]) -> u64 {
        records.iter().map(|r| r.encoded_len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::page::BlockKind;

    fn range(addr: u64, n: usize) -> Op {
        Op::Range {
            addr,
            after: vec![1; n],
            before: None,
        }
    }

    #[test]
    fn ranges_in_order_share_a_record() {
        let ops = vec![
            Op::Alloc {
                page: 9,
                count: 1,
                kind: BlockKind::Data,
            },
            range(8200, 4),
            range(8300, 1),
            range(8301, 2),
            range(100_000, 3), // more than a u16 after the last
            range(100_010, 1),
            range(50, 1), // descends
        ];
        let b = Batch::new(&ops).expect("gathers");
        let recs = b.records(&ops, 7);
        let kinds: Vec<&str> = recs
            .iter()
            .map(|r| match r {
                Record::Ranges { .. } => "ranges",
                Record::Alloc { .. } => "alloc",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["alloc", "ranges", "ranges", "ranges"]);
        let lsns = b.op_lsns(1000, &recs);
        let l1 = 1000 + recs[0].encoded_len() as u64;
        let l2 = l1 + recs[1].encoded_len() as u64;
        let l3 = l2 + recs[2].encoded_len() as u64;
        assert_eq!(lsns, [1000, l1, l1, l1, l2, l2, l3]);
        // 26 bytes for a record with one range, 4 for each more.
        assert_eq!(recs[1].encoded_len(), 26 + 4 + 2 * 4 + 1 + 2);
        assert_eq!(Batch::bytes(&recs), (lsns[6] - 1000) + recs[3].encoded_len() as u64);
    }
}
