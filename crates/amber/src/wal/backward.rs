//! Reading the log backward: from a trusted end to a start LSN, newest
//! record first (the restart of whole-page logging, `store/recovery.rs`).
//!
//! Each record ends with its length (`record.rs`), so the record that ends
//! at a position starts that many bytes before it, and its checksum,
//! seeded with the LSN it starts at and covering the trailer, says whether
//! it is a record there. The end must be trusted — found by the forward
//! scan (`scan.rs`), which also tells a torn tail from damage: stale bytes
//! of a recycled log after the end would not verify, but nothing backward
//! from the end of the file says where the last record ends. Between the
//! start and that end every byte was verified by the forward scan, so a
//! record that does not verify here is damage (or a file that changed
//! under the scan), reported as such.
//!
//! The file is read a chunk at a time, from the end towards the start, into
//! one buffer that always holds at least one whole record.

use super::header::RECORDS_START;
use super::record::{
    BadRecord, MIN_RECORD, Record, checksum_ok, decode_verified, max_record_len, record_len,
    trailer_len,
};
use super::scan::CHUNK;
use crate::io::IoFile;
use std::io;
use std::ops::ControlFlow;

/// A record the backward walk could not take: its end's LSN and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadEnd {
    /// LSN just past the record that is bad.
    pub end: u64,
    /// What was wrong.
    pub what: BadRecord,
}

/// Walks the records of the log `file` (whose record at byte
/// [`RECORDS_START`] has LSN `base_lsn`) backward, from the record that
/// ends at `end_lsn` to the one that starts at `start_lsn`, calling `visit`
/// with each record and its LSN, newest first. Stops early when `visit`
/// breaks. Returns the records visited, or the first that was bad.
pub fn scan_backward(
    file: &dyn IoFile,
    base_lsn: u64,
    start_lsn: u64,
    end_lsn: u64,
    page_size: usize,
    visit: &mut dyn FnMut(u64, Record<'_>) -> ControlFlow<()>,
) -> io::Result<Result<u64, BadEnd>> {
    scan_backward_in_chunks(file, base_lsn, start_lsn, end_lsn, page_size, CHUNK, visit)
}

/// [`scan_backward`] reading `chunk` bytes at a time (or the longest
/// record, if longer); tests use tiny chunks.
pub(crate) fn scan_backward_in_chunks(
    file: &dyn IoFile,
    base_lsn: u64,
    start_lsn: u64,
    end_lsn: u64,
    page_size: usize,
    chunk: usize,
    visit: &mut dyn FnMut(u64, Record<'_>) -> ControlFlow<()>,
) -> io::Result<Result<u64, BadEnd>> {
    let off = |lsn: u64| RECORDS_START + (lsn - base_lsn);
    let lsn = |off: u64| base_lsn + (off - RECORDS_START);
    let (stop, mut end) = (off(start_lsn.max(base_lsn)), off(end_lsn.max(base_lsn)));
    let longest = max_record_len(page_size);
    let mut buf = Vec::new();
    let mut records = 0;
    while end > stop {
        let want = (end - stop).min(chunk.max(longest) as u64) as usize;
        let from = end - want as u64;
        buf.resize(want, 0);
        file.read_exact_at(&mut buf, from)?;
        // `e`: the end, in `buf`, of the next record to take.
        let mut e = want;
        while from + (e as u64) > stop {
            let bad = |what| {
                Ok(Err(BadEnd {
                    end: lsn(from + e as u64),
                    what,
                }))
            };
            let Some(n) = trailer_len(&buf[..e]) else {
                if from == stop {
                    return bad(BadRecord::Length);
                }
                break;
            };
            if n < MIN_RECORD || n > longest || from + (e as u64) - stop < n as u64 {
                return bad(BadRecord::Length);
            }
            if n > e {
                // It starts before this chunk: read the next one ending here.
                break;
            }
            let s = e - n;
            let rec = &buf[s..e];
            let at = lsn(from + s as u64);
            match record_len(rec, page_size) {
                Ok(len) if len == n && checksum_ok(rec, n, at) => {}
                Ok(_) => return bad(BadRecord::Checksum),
                Err(what) => return bad(what),
            }
            let Ok((r, _)) = decode_verified(rec, n) else {
                return bad(BadRecord::Truncated);
            };
            records += 1;
            if visit(at, r).is_break() {
                return Ok(Ok(records));
            }
            e = s;
        }
        // A chunk is at least as long as the longest record (or reaches
        // the start), so at least one record was taken from it.
        end = from + e as u64;
    }
    Ok(Ok(records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::crash::CrashVfs;
    use crate::io::{OpenMode, Vfs};
    use std::path::Path;

    /// A log file of `n` assorted records from LSN 100, and their LSNs.
    fn log(n: usize) -> (Vec<u8>, Vec<u64>) {
        static IMG: [u8; 4096] = [9u8; 4096];
        let mut body = Vec::new();
        let mut lsns = Vec::new();
        for i in 0..n {
            let lsn = 100 + body.len() as u64;
            lsns.push(lsn);
            let r = match i % 3 {
                0 => Record::Page {
                    txid: i as u32,
                    page: i as u64,
                    image: &IMG,
                },
                1 => Record::Range {
                    txid: i as u32,
                    addr: 9000 + i as u64,
                    after: b"abcdefg",
                    before: None,
                },
                _ => Record::Commit {
                    txid: i as u32,
                    synced_delta: 0,
                },
            };
            r.encode(lsn, &mut body);
        }
        let mut file = vec![0u8; RECORDS_START as usize];
        file.extend_from_slice(&body);
        (file, lsns)
    }

    fn walk(bytes: &[u8], start: u64, end: u64, chunk: usize) -> (Vec<u64>, Result<u64, BadEnd>) {
        let vfs = CrashVfs::new();
        let f = vfs
            .open(Path::new("/log"), OpenMode::CreateNew)
            .expect("create");
        f.write_all_at(bytes, 0).expect("write");
        let mut seen = Vec::new();
        let r = scan_backward_in_chunks(&*f, 100, start, end, 4096, chunk, &mut |lsn, _| {
            seen.push(lsn);
            ControlFlow::Continue(())
        })
        .expect("reads");
        (seen, r)
    }

    #[test]
    fn every_record_newest_first_whatever_the_chunk() {
        let (file, lsns) = log(10);
        let end = 100 + (file.len() as u64 - RECORDS_START);
        let want: Vec<u64> = lsns.iter().rev().copied().collect();
        for chunk in [1, 30, 4000, 1 << 20] {
            assert_eq!(walk(&file, 100, end, chunk), (want.clone(), Ok(10)), "chunk {chunk}");
        }
        // From the fourth record on only.
        let (seen, r) = walk(&file, lsns[3], end, 1);
        assert_eq!((seen, r), (want[..7].to_vec(), Ok(7)));
    }

    #[test]
    fn a_damaged_record_is_named_by_its_end() {
        let (file, lsns) = log(6);
        let end = 100 + (file.len() as u64 - RECORDS_START);
        // A flipped byte in the image of record 3 (a page record).
        let mut bad = file.clone();
        bad[(RECORDS_START + lsns[3] - 100) as usize + 100] ^= 1;
        let (seen, r) = walk(&bad, 100, end, 50);
        assert_eq!(seen, vec![lsns[5], lsns[4]]);
        assert_eq!(
            r,
            Err(BadEnd {
                end: lsns[4],
                what: BadRecord::Checksum
            })
        );
        // A trailer longer than the log before it.
        let mut long = file.clone();
        let n = long.len();
        long[n - 4..].copy_from_slice(&(1u32 << 20).to_le_bytes());
        assert_eq!(walk(&long, 100, end, 50).1.map_err(|b| b.what), Err(BadRecord::Length));
    }

    /// The shortest record the decoder takes, an intent with no entries,
    /// walks back like any other (found by the `log_records` fuzz target:
    /// the bound on a trailer once said a commit record was the shortest).
    #[test]
    fn empty_intents_walk_back() {
        let mut body = Vec::new();
        for lsn in [100, 116] {
            Record::Intent { entries: &[] }.encode(lsn, &mut body);
        }
        assert_eq!(body.len(), 2 * MIN_RECORD);
        let mut file = vec![0u8; RECORDS_START as usize];
        file.extend_from_slice(&body);
        for chunk in [1, 16, 1 << 20] {
            assert_eq!(walk(&file, 100, 132, chunk), (vec![116, 100], Ok(2)));
        }
    }
}
