//! Reading the log back: the records from a start LSN to the end, and how the
//! log ended.
//!
//! The log ends at the first position that does not hold a valid record. That
//! is normal after a crash (a torn tail: the last batch was being written), or
//! damage in the middle of the log. They are told apart by what follows: if a
//! valid commit record lies beyond the bad position and says that, when it was
//! written, the log was already durable past that position, then the bad bytes
//! had been synced — damage, and recovery must refuse rather than silently drop
//! the transactions after it. Otherwise the bad bytes belong to the last,
//! never-acknowledged batch, and everything from them on is discarded.

use super::header::RECORDS_START;
use super::record::{BadRecord, Record, decode};

/// How the scanned log ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// At the end of the file.
    Clean,
    /// A torn or garbage tail after the last valid record: discarded.
    Torn {
        /// LSN of the first bad byte.
        at: u64,
        /// What was wrong there.
        what: BadRecord,
        /// Bytes from there to the end of the file.
        bytes: u64,
    },
    /// A bad record followed by later durable commits: the log is damaged.
    Corrupt {
        /// LSN of the bad record.
        at: u64,
        /// What was wrong.
        what: BadRecord,
        /// LSN of a later commit record proving the bad bytes were durable.
        evidence: u64,
    },
}

/// The result of a scan.
#[derive(Debug)]
pub struct Scan<'a> {
    /// Valid records with their LSNs, in log order.
    pub records: Vec<(u64, Record<'a>)>,
    /// LSN just past the last valid record.
    pub end_lsn: u64,
    /// How the log ended.
    pub tail: Tail,
}

/// Scans `file` (the whole log file's bytes) whose first record slot has LSN
/// `base_lsn`, starting at `start_lsn` (>= `base_lsn`).
pub fn scan(file: &[u8], base_lsn: u64, start_lsn: u64, page_size: usize) -> Scan<'_> {
    let body = file.get(RECORDS_START as usize..).unwrap_or(&[]);
    let mut off = (start_lsn.saturating_sub(base_lsn)) as usize;
    let mut records = Vec::new();
    let tail = loop {
        if off >= body.len() {
            break Tail::Clean;
        }
        let lsn = base_lsn + off as u64;
        match decode(&body[off..], lsn, page_size) {
            Ok((r, n)) => {
                records.push((lsn, r));
                off += n;
            }
            Err(what) => {
                break match durable_evidence(body, base_lsn, off, page_size) {
                    Some(evidence) => Tail::Corrupt {
                        at: lsn,
                        what,
                        evidence,
                    },
                    None => Tail::Torn {
                        at: lsn,
                        what,
                        bytes: (body.len() - off) as u64,
                    },
                };
            }
        }
    };
    Scan {
        end_lsn: base_lsn + off.min(body.len()) as u64,
        records,
        tail,
    }
}

/// Looks past a bad record at `bad` for a valid commit record written when the
/// log was already durable beyond `bad`; returns its LSN.
fn durable_evidence(body: &[u8], base_lsn: u64, bad: usize, page_size: usize) -> Option<u64> {
    let bad_lsn = base_lsn + bad as u64;
    (bad + 1..body.len().saturating_sub(15))
        .filter(|&o| body[o + 4] == 5)
        .find_map(|o| {
            let lsn = base_lsn + o as u64;
            match decode(&body[o..], lsn, page_size) {
                Ok((Record::Commit { synced_delta, .. }, _))
                    if synced_delta != u32::MAX && lsn - u64::from(synced_delta) > bad_lsn =>
                {
                    Some(lsn)
                }
                _ => None,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::record::Record;

    fn log_of(batches: &[&[Record<'_>]], base: u64) -> Vec<u8> {
        // Each batch ends durable; commit records carry the durable point.
        let mut body = Vec::new();
        let mut durable = base;
        for b in batches {
            for r in *b {
                let lsn = base + body.len() as u64;
                let r = match r {
                    Record::Commit { txid, .. } => Record::Commit {
                        txid: *txid,
                        synced_delta: (lsn - durable) as u32,
                    },
                    other => other.clone(),
                };
                r.encode(lsn, &mut body);
            }
            durable = base + body.len() as u64;
        }
        let mut file = vec![0u8; RECORDS_START as usize];
        file.extend_from_slice(&body);
        file
    }

    fn tx(txid: u32) -> [Record<'static>; 2] {
        [
            Record::Range {
                txid,
                addr: 9000,
                after: b"0123456789",
                before: None,
            },
            Record::Commit {
                txid,
                synced_delta: 0,
            },
        ]
    }

    #[test]
    fn clean_torn_and_corrupt() {
        let (a, b, c) = (tx(1), tx(2), tx(3));
        let file = log_of(&[&a, &b, &c], 100);
        let s = scan(&file, 100, 100, 4096);
        assert_eq!(s.records.len(), 6);
        assert_eq!(s.tail, Tail::Clean);

        // Cut inside the last batch: torn.
        let cut = &file[..file.len() - 5];
        let s = scan(cut, 100, 100, 4096);
        assert_eq!(s.records.len(), 5);
        assert!(matches!(s.tail, Tail::Torn { .. }));

        // Damage in the first batch, with later durable commits: corrupt.
        let mut bad = file.clone();
        bad[RECORDS_START as usize + 25] ^= 1;
        let s = scan(&bad, 100, 100, 4096);
        assert_eq!(s.records.len(), 0);
        assert!(
            matches!(s.tail, Tail::Corrupt { at: 100, .. }),
            "{:?}",
            s.tail
        );

        // Damage in the last batch only: indistinguishable from a torn tail.
        let mut last = file.clone();
        let n = last.len();
        last[n - 20] ^= 1;
        let s = scan(&last, 100, 100, 4096);
        assert!(matches!(s.tail, Tail::Torn { .. }));
        assert_eq!(s.records.len(), 4);
    }
}
