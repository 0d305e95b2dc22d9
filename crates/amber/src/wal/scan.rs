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
use super::record::{BadRecord, Record, checksum_ok, decode, decode_verified, record_len};

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
///
/// The records are found by walking their headers, their checksums checked
/// on all cores (checksumming is most of a scan's work), and the log ends at
/// the first record that fails.
pub fn scan(file: &[u8], base_lsn: u64, start_lsn: u64, page_size: usize) -> Scan<'_> {
    let body = file.get(RECORDS_START as usize..).unwrap_or(&[]);
    let start = (start_lsn.saturating_sub(base_lsn)) as usize;
    // Where each record would be, by its header; stops at the first header
    // that cannot be.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut off = start;
    while off < body.len() {
        match record_len(&body[off..], page_size) {
            Ok(n) => {
                spans.push((off, n));
                off += n;
            }
            Err(_) => break,
        }
    }
    let first_bad = first_bad_checksum(body, base_lsn, &spans);
    let good = &spans[..first_bad];
    let mut records = Vec::with_capacity(good.len());
    let mut end = start;
    for &(o, n) in good {
        match decode_verified(&body[o..], n) {
            Ok((r, _)) => records.push((base_lsn + o as u64, r)),
            Err(_) => break,
        }
        end = o + n;
    }
    let tail = if end >= body.len() {
        Tail::Clean
    } else {
        let lsn = base_lsn + end as u64;
        let what = decode(&body[end..], lsn, page_size)
            .err()
            .unwrap_or(BadRecord::Checksum);
        match durable_evidence(body, base_lsn, end, page_size) {
            Some(evidence) => Tail::Corrupt {
                at: lsn,
                what,
                evidence,
            },
            None => Tail::Torn {
                at: lsn,
                what,
                bytes: (body.len() - end) as u64,
            },
        }
    };
    Scan {
        end_lsn: base_lsn + end as u64,
        records,
        tail,
    }
}

/// Index of the first span whose checksum fails (`spans.len()` if none),
/// checked in parallel chunks.
fn first_bad_checksum(body: &[u8], base_lsn: u64, spans: &[(usize, usize)]) -> usize {
    let check = |chunk: &[(usize, usize)]| {
        chunk
            .iter()
            .position(|&(o, n)| !checksum_ok(&body[o..], n, base_lsn + o as u64))
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || spans.len() < 20_000 {
        return check(spans).unwrap_or(spans.len());
    }
    let per = spans.len().div_ceil(threads);
    let found: Vec<Option<usize>> = std::thread::scope(|sc| {
        let handles: Vec<_> = spans
            .chunks(per)
            .enumerate()
            .map(|(i, chunk)| sc.spawn(move || check(chunk).map(|j| i * per + j)))
            .collect();
        // A chunk whose thread failed counts as bad from its start: never
        // accept records that were not checked.
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| h.join().unwrap_or(Some(i * per)))
            .collect()
    });
    found.into_iter().flatten().min().unwrap_or(spans.len())
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
