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
//!
//! The log is streamed, not read whole: a log of tens of MiB read into one
//! fresh buffer costs a page fault per 4 KiB of it and a pass over memory
//! that no cache holds. [`scan`] reads it in chunks into a few buffers that
//! are reused (`readahead.rs`), checks each chunk's records
//! as it arrives, and hands the caller runs of whole, checked records while
//! the next chunk is being read and checked on another thread.

use super::header::RECORDS_START;
use super::readahead::{self, Source};
use super::record::{
    BadRecord, COMMIT_SIZE, K_COMMIT, Record, checksum_ok, decode, decode_verified,
    max_record_len, record_len,
};
use crate::io::IoFile;
use std::io;
use std::ops::ControlFlow;

/// Bytes read from the log at a time. Large enough that a read costs little
/// next to checking what it brought, small enough that a chunk is still in
/// the cache when the records in it are applied.
pub const CHUNK: usize = 1 << 20;

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

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanEnd {
    /// Valid records.
    pub records: u64,
    /// LSN just past the last valid record.
    pub end_lsn: u64,
    /// How the log ended.
    pub tail: Tail,
}

/// Scans the log `file`, whose record at byte [`RECORDS_START`] has LSN
/// `base_lsn`, from `start_lsn` (>= `base_lsn`) to its end.
///
/// `visit` is called, in log order, with runs of whole records whose lengths
/// and checksums have been checked, and the LSN of the first; [`records`]
/// decodes them. The bytes are only lent: the buffer is reused once `visit`
/// returns. When `visit` breaks it is not called again, but the scan still
/// goes on to find how the log ends, so that a damaged log is reported as
/// such whatever the visitor ran into. Errors are those of reading the file.
pub fn scan(
    file: &dyn IoFile,
    base_lsn: u64,
    start_lsn: u64,
    page_size: usize,
    visit: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> io::Result<ScanEnd> {
    scan_in_chunks(file, base_lsn, start_lsn, page_size, CHUNK, visit)
}

/// [`scan`] reading `chunk` bytes at a time (tests use tiny chunks, so that
/// records and the evidence search straddle many chunk boundaries).
pub(crate) fn scan_in_chunks(
    file: &dyn IoFile,
    base_lsn: u64,
    start_lsn: u64,
    page_size: usize,
    chunk: usize,
    visit: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> io::Result<ScanEnd> {
    let size = file.size()?;
    let start = RECORDS_START.saturating_add(start_lsn.saturating_sub(base_lsn));
    let mut checker = Checker {
        file,
        size,
        base_lsn,
        page_size,
        chunk: chunk.max(1),
        next: start,
        carry: Vec::new(),
        records: 0,
        end: start,
        bad: None,
        tail: None,
    };
    if start >= size {
        checker.tail = Some(Tail::Clean);
        return Ok(checker.end());
    }
    let left = size - start;
    // A log that fits in one chunk needs no carry-over room and no thread.
    let buf_len = if left <= checker.chunk as u64 {
        left as usize
    } else {
        checker.chunk + max_record_len(page_size)
    };
    let checker = readahead::run(checker, buf_len, left > chunk as u64, visit)?;
    Ok(checker.end())
}

/// Decodes the records of a run that [`scan`] handed over, whose first record
/// is at `lsn`, with their LSNs. An error means the bytes were not a run from
/// a scan.
pub fn records(
    lsn: u64,
    bytes: &[u8],
    page_size: usize,
) -> impl Iterator<Item = Result<(u64, Record<'_>), BadRecord>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let rec = record_len(&bytes[at..], page_size)
            .and_then(|n| decode_verified(&bytes[at..], n))
            .map(|(r, n)| {
                let here = lsn + at as u64;
                at += n;
                (here, r)
            });
        if rec.is_err() {
            at = bytes.len();
        }
        Some(rec)
    })
}

/// Finds the valid records and how the log ends, a chunk at a time: the
/// reading side of a scan, which runs on the read-ahead thread.
struct Checker<'f> {
    file: &'f dyn IoFile,
    size: u64,
    base_lsn: u64,
    page_size: usize,
    chunk: usize,
    /// File offset of the next byte to read.
    next: u64,
    /// Bytes at the end of the last chunk still to be looked at (a record the
    /// chunk's end cut, or the last positions of the evidence search): they
    /// go at the start of the next buffer.
    carry: Vec<u8>,
    /// Valid records so far.
    records: u64,
    /// File offset just past the last valid record.
    end: u64,
    /// The first bad record: its file offset and what was wrong.
    bad: Option<(u64, BadRecord)>,
    /// How the log ended, once known.
    tail: Option<Tail>,
}

impl Checker<'_> {
    fn lsn(&self, off: u64) -> u64 {
        self.base_lsn + (off - RECORDS_START)
    }

    fn end(&self) -> ScanEnd {
        ScanEnd {
            records: self.records,
            end_lsn: self.lsn(self.end),
            tail: self.tail.clone().unwrap_or(Tail::Clean),
        }
    }

    /// Walks the records of `buf` (which starts at file offset `pos`) from
    /// its start, checking each; returns how many bytes of whole valid records
    /// it holds. Sets `bad` at the first invalid one, or keeps a record cut by
    /// the end of the buffer for the next.
    fn walk(&mut self, buf: &[u8], pos: u64, eof: bool) -> usize {
        let mut p = 0;
        while p < buf.len() {
            let at = pos + p as u64;
            match record_len(&buf[p..], self.page_size) {
                Ok(n) if checksum_ok(&buf[p..], n, self.lsn(at)) => {
                    p += n;
                    self.records += 1;
                }
                Ok(_) => {
                    self.bad = Some((at, BadRecord::Checksum));
                    break;
                }
                Err(BadRecord::Truncated) if !eof => {
                    self.carry.extend_from_slice(&buf[p..]);
                    break;
                }
                Err(what) => {
                    self.bad = Some((at, what));
                    break;
                }
            }
        }
        self.end = pos + p as u64;
        if self.bad.is_none() && eof && p == buf.len() {
            self.tail = Some(Tail::Clean);
        }
        p
    }

    /// Looks in `buf` (at file offset `pos`) for a valid commit record after
    /// the bad one whose `synced_delta` shows the log was durable past the bad
    /// bytes when it was written: proof of damage rather than a torn tail.
    fn search(&mut self, buf: &[u8], pos: u64, eof: bool) {
        let Some((bad, what)) = self.bad else {
            return;
        };
        let bad_lsn = self.lsn(bad);
        let from = (bad + 1).saturating_sub(pos) as usize;
        // A commit record is COMMIT_SIZE bytes: positions closer to the end
        // than that are looked at with the next chunk.
        let last = buf.len().saturating_sub(COMMIT_SIZE - 1);
        let found = (from..last).filter(|&o| buf[o + 4] == K_COMMIT).find_map(|o| {
            let lsn = self.lsn(pos + o as u64);
            match decode(&buf[o..], lsn, self.page_size) {
                // A durable end before LSN 0 is no evidence: the record
                // is damaged behind a valid checksum.
                Ok((Record::Commit { synced_delta, .. }, _))
                    if synced_delta != u32::MAX
                        && lsn
                            .checked_sub(u64::from(synced_delta))
                            .is_some_and(|durable| durable > bad_lsn) =>
                {
                    Some(lsn)
                }
                _ => None,
            }
        });
        if let Some(evidence) = found {
            self.tail = Some(Tail::Corrupt {
                at: bad_lsn,
                what,
                evidence,
            });
        } else if eof {
            self.tail = Some(Tail::Torn {
                at: bad_lsn,
                what,
                bytes: self.size - bad,
            });
        } else {
            self.carry.extend_from_slice(&buf[from.max(last)..]);
        }
    }
}

impl Source for Checker<'_> {
    fn step(&mut self, buf: &mut [u8]) -> io::Result<Option<(u64, usize)>> {
        let c = self.carry.len();
        let pos = self.next - c as u64;
        buf[..c].copy_from_slice(&self.carry);
        self.carry.clear();
        let n = (self.size - self.next).min(self.chunk as u64) as usize;
        self.file.read_exact_at(&mut buf[c..c + n], self.next)?;
        self.next += n as u64;
        let eof = self.next == self.size;
        let buf = &buf[..c + n];
        let mut valid = 0;
        if self.bad.is_none() {
            valid = self.walk(buf, pos, eof);
        }
        if self.bad.is_some() {
            self.search(buf, pos, eof);
        }
        Ok((valid > 0).then(|| (self.lsn(pos), valid)))
    }

    fn done(&self) -> bool {
        self.tail.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::crash::CrashVfs;
    use crate::io::{OpenMode, Vfs};
    use crate::wal::record::Record;
    use std::path::Path;

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

    /// Scans `bytes` as a log file with `chunk`-byte reads; the records
    /// handed over (LSN, record encoded again) and the end.
    fn scan_bytes(bytes: &[u8], chunk: usize) -> (Vec<(u64, Vec<u8>)>, ScanEnd) {
        let vfs = CrashVfs::new();
        let f = vfs
            .open(Path::new("/log"), OpenMode::CreateNew)
            .expect("create");
        f.write_all_at(bytes, 0).expect("write");
        let mut got = Vec::new();
        let end = scan_in_chunks(&*f, 100, 100, 4096, chunk, &mut |lsn, run| {
            for r in records(lsn, run, 4096) {
                let (lsn, r) = r.expect("decodes");
                let mut enc = Vec::new();
                r.encode(lsn, &mut enc);
                got.push((lsn, enc));
            }
            ControlFlow::Continue(())
        })
        .expect("scans");
        (got, end)
    }

    /// The same answer whatever the chunk size: records and the evidence
    /// search straddle chunk boundaries, and the large chunk sizes run
    /// without the read-ahead thread.
    fn scan_all_chunks(bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, ScanEnd) {
        let want = scan_bytes(bytes, 1 << 20);
        for chunk in [1, 3, 7, 16, 17, 40, 100] {
            assert_eq!(scan_bytes(bytes, chunk), want, "chunk {chunk}");
        }
        want
    }

    #[test]
    fn clean_torn_and_corrupt() {
        let (a, b, c) = (tx(1), tx(2), tx(3));
        let file = log_of(&[&a, &b, &c], 100);
        let (recs, end) = scan_all_chunks(&file);
        assert_eq!(recs.len(), 6);
        assert_eq!(end.records, 6);
        assert_eq!(end.tail, Tail::Clean);
        assert_eq!(end.end_lsn, 100 + (file.len() as u64 - RECORDS_START));

        // Cut inside the last batch: torn.
        let cut = &file[..file.len() - 5];
        let (recs, end) = scan_all_chunks(cut);
        assert_eq!(recs.len(), 5);
        assert!(
            matches!(
                end.tail,
                Tail::Torn {
                    what: BadRecord::Truncated,
                    bytes: 15,
                    ..
                }
            ),
            "{:?}",
            end.tail
        );

        // Damage in the first batch, with later durable commits: corrupt.
        let mut bad = file.clone();
        bad[RECORDS_START as usize + 25] ^= 1;
        let (recs, end) = scan_all_chunks(&bad);
        assert_eq!(recs.len(), 0);
        assert!(
            matches!(
                end.tail,
                Tail::Corrupt {
                    at: 100,
                    evidence: 188,
                    ..
                }
            ),
            "{:?}",
            end.tail
        );

        // Damage in the last batch only: indistinguishable from a torn tail.
        let mut last = file.clone();
        let n = last.len();
        last[n - 24] ^= 1;
        let (recs, end) = scan_all_chunks(&last);
        assert!(matches!(end.tail, Tail::Torn { .. }));
        assert_eq!(recs.len(), 4);
    }

    /// After a bad record, a commit record (valid) claiming the log was
    /// durable before LSN 0 is no evidence of damage, and no overflow
    /// (the fuzz input `open_and_read-commit-durable-before-lsn-0.bin`,
    /// kept as a test of the scan itself since log format 2 re-framed it).
    #[test]
    fn a_durable_end_before_lsn_0_is_no_evidence() {
        let a = tx(1);
        let mut file = log_of(&[&a], 100);
        let lsn = 100 + (file.len() as u64 - RECORDS_START);
        let mut body = Vec::new();
        Record::Commit {
            txid: 2,
            synced_delta: (lsn + 1000) as u32,
        }
        .encode(lsn, &mut body);
        file.extend_from_slice(&body);
        file[RECORDS_START as usize + 25] ^= 1;
        let (recs, end) = scan_all_chunks(&file);
        assert_eq!(recs.len(), 0);
        assert!(matches!(end.tail, Tail::Torn { .. }), "{:?}", end.tail);
    }

    #[test]
    fn starts_at_the_checkpoint_and_past_the_end() {
        let (a, b) = (tx(1), tx(2));
        let file = log_of(&[&a, &b], 100);
        // From the second transaction on.
        let second = 100 + 54;
        let vfs = CrashVfs::new();
        let f = vfs
            .open(Path::new("/log"), OpenMode::CreateNew)
            .expect("create");
        f.write_all_at(&file, 0).expect("write");
        let mut n = 0;
        let end = scan_in_chunks(&*f, 100, second, 4096, 5, &mut |lsn, run| {
            assert!(n > 0 || lsn == second);
            n += records(lsn, run, 4096).count();
            ControlFlow::Continue(())
        })
        .expect("scans");
        assert_eq!((n, end.records, end.tail), (2, 2, Tail::Clean));
        // A start past the end of the file: nothing, clean.
        let end = scan(&*f, 100, 100_000, 4096, &mut |_, _| unreachable!()).expect("scans");
        assert_eq!(end.end_lsn, 100_000);
        assert_eq!(end.tail, Tail::Clean);
    }

    #[test]
    fn a_visitor_that_stops_still_learns_the_tail() {
        let (a, b, c) = (tx(1), tx(2), tx(3));
        let mut bad = log_of(&[&a, &b, &c], 100);
        bad[RECORDS_START as usize + 80] ^= 1;
        let vfs = CrashVfs::new();
        let f = vfs
            .open(Path::new("/log"), OpenMode::CreateNew)
            .expect("create");
        f.write_all_at(&bad, 0).expect("write");
        let mut calls = 0;
        let end = scan_in_chunks(&*f, 100, 100, 4096, 20, &mut |_, _| {
            calls += 1;
            ControlFlow::Break(())
        })
        .expect("scans");
        assert_eq!(calls, 1);
        assert!(matches!(end.tail, Tail::Corrupt { .. }), "{:?}", end.tail);
    }
}
