//! A deterministic mutator for the stable-toolchain runs of the fuzz
//! targets (`tests/fuzz_*.rs`): libFuzzer's kinds of change (bit flips,
//! bytes and "interesting" integers written, ranges copied, removed,
//! inserted, the input cut short), placed half the time at offsets where
//! the formats keep their lengths, counts and kinds (headers of the
//! superblock, the log header, blocks, records, metadata blobs), where a
//! random offset rarely lands.

use super::files::Bundle;
use crate::format::superblock::SLOT_OFFSETS;
use crate::io::crash::SplitMix;
use crate::wal::header::RECORDS_START;
use crate::wal::record::{K_RANGES, record_len};

/// Values that sit at the edges of what length and count fields allow.
const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    7,
    8,
    0x7f,
    0xff,
    0x100,
    0x1000,
    0x4000,
    0x7fff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0xffff_ffff,
    u64::MAX,
];

/// Offsets in `data`, an input of target `target`, where the formats keep
/// their headers: the first 64 bytes of the input and of every page, and
/// for a bundle those of its superblock copies, log header copies and
/// every record of its log.
pub fn hot_offsets(target: &str, data: &[u8]) -> Vec<usize> {
    let mut hot: Vec<usize> = (0..64.min(data.len())).collect();
    if target == "log_records" {
        // The records after the page-size code, the flags and the base LSN.
        let ps = super::decoders::page_size_of(data);
        record_offsets(data, LOG_RECORDS_START, ps, &mut hot);
    }
    if !super::FILE_TARGETS.contains(&target) {
        hot.extend((4096..data.len()).step_by(4096).flat_map(|p| p..p + 64));
        hot.retain(|&o| o < data.len());
        return hot;
    }
    let b = Bundle::decode(data);
    let ps = b.page_size();
    let pf = 5;
    let log = pf + b.page_file.len();
    for o in SLOT_OFFSETS {
        hot.extend((0..80).map(|i| pf + o as usize + i));
        hot.extend((0..64).map(|i| log + o as usize + i));
    }
    hot.extend(
        (0..b.page_file.len())
            .step_by(ps)
            .flat_map(|p| (0..64).map(move |i| pf + p + i)),
    );
    let mut in_log = Vec::new();
    record_offsets(&b.log, RECORDS_START as usize, ps, &mut in_log);
    hot.extend(in_log.into_iter().map(|o| log + o));
    hot.retain(|&o| o < data.len());
    hot
}

/// Where a log_records input's records start.
const LOG_RECORDS_START: usize = 10;

/// Adds the offsets of the headers of the records in `log` from `at`: 24
/// bytes of each, and of a ranges record the first 64 bytes of its body
/// too (the lengths and gaps of its first ranges).
fn record_offsets(log: &[u8], mut at: usize, ps: usize, hot: &mut Vec<usize>) {
    while let Some(n) = log.get(at..).and_then(|r| record_len(r, ps).ok()) {
        let head = if log.get(at + 4) == Some(&K_RANGES) {
            84
        } else {
            24
        };
        hot.extend((0..head.min(n)).map(|i| at + i));
        at += n;
    }
}

/// Applies 1 to 4 random changes to `data`, keeping it at most `max_len`
/// bytes long.
pub fn mutate(rng: &mut SplitMix, data: &mut Vec<u8>, hot: &[usize], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len() as u64;
        let at = if !hot.is_empty() && rng.below(2) == 0 {
            hot[rng.below(hot.len() as u64) as usize]
        } else if len > 0 {
            rng.below(len) as usize
        } else {
            0
        };
        match rng.below(8) {
            0 | 1 if at < data.len() => data[at] ^= 1 << rng.below(8),
            2 if at < data.len() => data[at] = rng.next_u64() as u8,
            3 | 4 => {
                let v = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
                let v = if rng.below(4) == 0 {
                    v.wrapping_add(rng.below(3)).wrapping_sub(1)
                } else {
                    v
                };
                let width = [1usize, 2, 4, 8][rng.below(4) as usize];
                let end = (at + width).min(data.len());
                if at < end {
                    data[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
                }
            }
            5 if len > 0 => {
                // Copy a range over another.
                let from = rng.below(len) as usize;
                let n = (rng.below(64) as usize + 1)
                    .min(data.len() - from)
                    .min(data.len() - at.min(data.len()));
                let chunk = data[from..from + n].to_vec();
                if at + n <= data.len() {
                    data[at..at + n].copy_from_slice(&chunk);
                }
            }
            6 if at < data.len() => {
                let n = (rng.below(64) as usize + 1).min(data.len() - at);
                data.drain(at..at + n);
            }
            7 if data.len() < max_len => {
                let n = (rng.below(16) as usize + 1).min(max_len - data.len());
                let fill: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                let at = at.min(data.len());
                data.splice(at..at, fill);
            }
            _ => {
                // Cut short.
                if len > 1 && rng.below(4) == 0 {
                    data.truncate(rng.below(len) as usize);
                }
            }
        }
    }
}
