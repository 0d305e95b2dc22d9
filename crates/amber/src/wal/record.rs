//! Log records, byte by byte (log format version 3).
//!
//! Every record starts with the same 8 bytes and ends with a 4-byte trailer:
//!
//! ```text
//!     0  4  crc     crc32c of (the record's LSN as 8 LE bytes) ++ bytes [4, record end)
//!     4  1  kind
//!     5  1  flags
//!     6  2  len     payload length (meaning per kind)
//!     …             the rest of the header and the payload, per kind (below)
//! end-4  4  total   the record's length in bytes, this trailer included
//! ```
//!
//! The trailer makes the log readable backward (`backward.rs`): from the end
//! of a record, its length says where it starts, and its checksum (which
//! covers the trailer) says whether it is a record at that LSN. Version 1
//! had no trailer; `store/open.rs` says what becomes of a version-1 log.
//!
//! Seeding the checksum with the record's own LSN binds a record to its
//! position: a stale record left in the file by an earlier use of the same
//! bytes (before the log was recycled) never verifies, so the first record
//! that fails is the end of the log (or damage; see `scan.rs`).
//!
//! | kind | name   | rest of header (bytes from 0, trailer excluded)  | payload |
//! |------|--------|--------------------------------------------------|---------|
//! | 1    | range  | txid u32, addr u64 (20 bytes in all = H)         | `len` after-image bytes, then `len` before-image bytes if flag BEFORE |
//! | 2    | page   | txid u32, page u64 (20)                          | one page image (page-size bytes) |
//! | 3    | alloc  | txid u32, page u64, count u32 (24); flags = block kind | none |
//! | 4    | free   | txid u32, page u64, count u32 (24)               | none |
//! | 5    | commit | txid u32, synced_delta u32 (16)                  | none |
//! | 6    | root   | txid u32, addr u64, type_id u32 (24)             | `len` name bytes |
//! | 7    | type   | txid u32, type_id u32 (16)                       | `len` descriptor bytes |
//! | 8    | intent | count u32 (12); `len` unused                     | count × (page u64, checksum u32) |
//! | 9    | ranges | txid u32, addr u64 (20); `len` = body bytes      | the ranges, `ranges.rs` |
//!
//! Version 3 added kind 9, and writes ranges only so (`ranges.rs` says
//! why); kind 1 is read for the records of a version-2 log.
//!
//! `synced_delta` in a commit record is the distance back from the commit
//! record to the end of the log that was known durable when the record was
//! written (saturating at u32::MAX). Recovery uses it to tell a torn tail from
//! damage in the middle of the log.

use super::ranges;
use crate::format::bytes::Cursor;
use crate::format::{PAddr, PageNo, crc, crc_append};

/// What a range record of version 2 (kind 1, one range) costs beyond its
/// images: its 20-byte header and its 4-byte trailer. Version 3 writes
/// ranges records instead (`ranges.rs`: [`ranges::RECORD`] per record,
/// [`ranges::ENTRY`] per range).
pub const RANGE_HEADER: usize = RANGE_AFTER + TRAILER;
/// Offset of a range record's after-image in the record, and of a ranges
/// record's body.
pub const RANGE_AFTER: usize = 20;
/// Bytes of the trailer that ends every record: its length.
pub const TRAILER: usize = 4;
/// Offset of a page record's image in the record.
pub const PAGE_IMAGE: usize = 20;
/// Bytes of a commit record.
pub const COMMIT_SIZE: usize = 16 + TRAILER;
/// The shortest record any header decodes to: an intent record with no
/// entries (the store never writes one, but the decoder takes it, so the
/// backward walk must too).
pub const MIN_RECORD: usize = 12 + TRAILER;
/// Largest after-image one range record (kind 1) carries.
pub const MAX_RANGE: usize = u16::MAX as usize;
/// Most entries in one intent record.
pub const MAX_INTENT: usize = 4096;

/// The range record carries a before-image too (written before commit).
pub const FLAG_BEFORE: u8 = 1;

const K_RANGE: u8 = 1;
const K_PAGE: u8 = 2;
const K_ALLOC: u8 = 3;
const K_FREE: u8 = 4;
/// The kind byte (at offset 4) of a commit record: what scans looking for
/// commit records after damage filter on.
pub const K_COMMIT: u8 = 5;
const K_ROOT: u8 = 6;
const K_TYPE: u8 = 7;
const K_INTENT: u8 = 8;
/// The kind byte of a ranges record (`ranges.rs`).
pub const K_RANGES: u8 = 9;

/// A transaction id, unique within the live part of the log.
pub type TxId = u32;

/// A decoded (or to-be-encoded) log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    /// After-image (and optionally before-image) of a byte range.
    Range {
        /// Transaction.
        txid: TxId,
        /// First byte changed.
        addr: PAddr,
        /// New bytes.
        after: &'a [u8],
        /// Old bytes, when logged before commit.
        before: Option<&'a [u8]>,
    },
    /// A whole page image (whole-page logging).
    Page {
        /// Transaction.
        txid: TxId,
        /// Page number.
        page: PageNo,
        /// The page.
        image: &'a [u8],
    },
    /// Pages allocated and formatted as an empty block.
    Alloc {
        /// Transaction.
        txid: TxId,
        /// First page.
        page: PageNo,
        /// Pages in the block.
        count: u32,
        /// Block kind byte.
        kind: u8,
    },
    /// A block freed.
    Free {
        /// Transaction.
        txid: TxId,
        /// First page.
        page: PageNo,
        /// Pages in the block.
        count: u32,
    },
    /// The transaction committed.
    Commit {
        /// Transaction.
        txid: TxId,
        /// Distance back to the durable end of the log when written.
        synced_delta: u32,
    },
    /// A named root set (addr 0 removes it).
    Root {
        /// Transaction.
        txid: TxId,
        /// Name bytes (UTF-8).
        name: &'a [u8],
        /// Address.
        addr: PAddr,
        /// Type id.
        type_id: u32,
    },
    /// A type descriptor registered in the schema catalog.
    Type {
        /// Transaction.
        txid: TxId,
        /// Assigned type id.
        type_id: u32,
        /// Opaque descriptor bytes.
        desc: &'a [u8],
    },
    /// Several byte ranges (log format 3; `ranges.rs`): after-images, and
    /// before-images too if `before`.
    Ranges {
        /// Transaction.
        txid: TxId,
        /// Address of the first range.
        addr: PAddr,
        /// Whether each range carries its before-image.
        before: bool,
        /// The encoded ranges ([`ranges::iter`] reads them).
        body: &'a [u8],
    },
    /// A checkpoint is about to install these blocks with these checksums.
    Intent {
        /// Raw entries: count × (page u64, checksum u32).
        entries: &'a [u8],
    },
}

impl Record<'_> {
    /// The transaction a record belongs to (none for intents).
    pub fn txid(&self) -> Option<TxId> {
        match *self {
            Record::Range { txid, .. }
            | Record::Ranges { txid, .. }
            | Record::Page { txid, .. }
            | Record::Alloc { txid, .. }
            | Record::Free { txid, .. }
            | Record::Commit { txid, .. }
            | Record::Root { txid, .. }
            | Record::Type { txid, .. } => Some(txid),
            Record::Intent { .. } => None,
        }
    }

    /// Encoded size in bytes, trailer included.
    pub fn encoded_len(&self) -> usize {
        TRAILER
            + match self {
                Record::Range { after, before, .. } => {
                    RANGE_AFTER + after.len() + before.map_or(0, <[u8]>::len)
                }
                Record::Ranges { body, .. } => RANGE_AFTER + body.len(),
                Record::Page { image, .. } => PAGE_IMAGE + image.len(),
                Record::Alloc { .. } | Record::Free { .. } => 24,
                Record::Commit { .. } => 16,
                Record::Root { name, .. } => 24 + name.len(),
                Record::Type { desc, .. } => 16 + desc.len(),
                Record::Intent { entries } => 12 + entries.len(),
            }
    }

    /// Appends the encoding of this record, placed at `lsn`, to `out`.
    pub fn encode(&self, lsn: u64, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0u8; 4]);
        let (kind, flags, len) = match self {
            Record::Range { after, before, .. } => (
                K_RANGE,
                if before.is_some() { FLAG_BEFORE } else { 0 },
                after.len() as u16,
            ),
            Record::Ranges { before, body, .. } => {
                (K_RANGES, if *before { FLAG_BEFORE } else { 0 }, body.len() as u16)
            }
            Record::Page { .. } => (K_PAGE, 0, 0),
            Record::Alloc { kind, .. } => (K_ALLOC, *kind, 0),
            Record::Free { .. } => (K_FREE, 0, 0),
            Record::Commit { .. } => (K_COMMIT, 0, 0),
            Record::Root { name, .. } => (K_ROOT, 0, name.len() as u16),
            Record::Type { desc, .. } => (K_TYPE, 0, desc.len() as u16),
            Record::Intent { .. } => (K_INTENT, 0, 0),
        };
        out.push(kind);
        out.push(flags);
        out.extend_from_slice(&len.to_le_bytes());
        match self {
            Record::Range {
                txid,
                addr,
                after,
                before,
            } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&addr.to_le_bytes());
                out.extend_from_slice(after);
                if let Some(b) = before {
                    out.extend_from_slice(b);
                }
            }
            Record::Ranges {
                txid, addr, body, ..
            } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&addr.to_le_bytes());
                out.extend_from_slice(body);
            }
            Record::Page { txid, page, image } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&page.to_le_bytes());
                out.extend_from_slice(image);
            }
            Record::Alloc {
                txid, page, count, ..
            }
            | Record::Free { txid, page, count } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&page.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
            }
            Record::Commit { txid, synced_delta } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&synced_delta.to_le_bytes());
            }
            Record::Root {
                txid,
                name,
                addr,
                type_id,
            } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&addr.to_le_bytes());
                out.extend_from_slice(&type_id.to_le_bytes());
                out.extend_from_slice(name);
            }
            Record::Type {
                txid,
                type_id,
                desc,
            } => {
                out.extend_from_slice(&txid.to_le_bytes());
                out.extend_from_slice(&type_id.to_le_bytes());
                out.extend_from_slice(desc);
            }
            Record::Intent { entries } => {
                out.extend_from_slice(&((entries.len() / 12) as u32).to_le_bytes());
                out.extend_from_slice(entries);
            }
        }
        let total = (out.len() - start + TRAILER) as u32;
        out.extend_from_slice(&total.to_le_bytes());
        let c = record_crc(lsn, &out[start + 4..]);
        out[start..start + 4].copy_from_slice(&c.to_le_bytes());
    }
}

/// Why bytes at an LSN are not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRecord {
    /// The buffer ends inside the record (or before it).
    Truncated,
    /// Unknown kind byte (zeroes are the usual end of a log).
    Kind(u8),
    /// Lengths that cannot be.
    Length,
    /// Checksum mismatch.
    Checksum,
}

impl std::fmt::Display for BadRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRecord::Truncated => f.write_str("record truncated"),
            BadRecord::Kind(k) => write!(f, "unknown record kind {k}"),
            BadRecord::Length => f.write_str("impossible record length"),
            BadRecord::Checksum => f.write_str("checksum mismatch"),
        }
    }
}

/// The longest record a log of `page_size`-byte pages can hold: a range
/// record of the longest after-image with its before-image, or a page image.
pub fn max_record_len(page_size: usize) -> usize {
    TRAILER
        + (RANGE_AFTER + 2 * MAX_RANGE)
            .max(PAGE_IMAGE + page_size)
            .max(24 + u16::MAX as usize)
            .max(12 + 12 * MAX_INTENT)
}

/// The length of the record at the start of `buf` as its header says,
/// without checking its checksum (for walking a log before verifying it).
/// A ranges record whose body is malformed (`ranges::check`) is
/// [`BadRecord::Length`], so that no scan accepts one, whatever its
/// checksum.
#[inline]
pub fn record_len(buf: &[u8], page_size: usize) -> Result<usize, BadRecord> {
    let h = buf.get(..8).ok_or(BadRecord::Truncated)?;
    let (kind, flags) = (h[4], h[5]);
    let len = u16::from_le_bytes([h[6], h[7]]) as usize;
    let total = match kind {
        K_RANGE => {
            if len == 0 {
                return Err(BadRecord::Length);
            }
            RANGE_AFTER + len * if flags & FLAG_BEFORE != 0 { 2 } else { 1 }
        }
        K_PAGE => PAGE_IMAGE + page_size,
        K_ALLOC | K_FREE => 24,
        K_COMMIT => 16,
        K_ROOT => 24 + len,
        K_TYPE => 16 + len,
        K_RANGES => {
            let total = RANGE_AFTER + len + TRAILER;
            let rec = buf.get(..total).ok_or(BadRecord::Truncated)?;
            let addr = u64::from_le_bytes(rec[12..20].try_into().map_err(|_| BadRecord::Truncated)?);
            if !ranges::check(addr, flags & FLAG_BEFORE != 0, &rec[RANGE_AFTER..RANGE_AFTER + len]) {
                return Err(BadRecord::Length);
            }
            RANGE_AFTER + len
        }
        K_INTENT => {
            let n = buf
                .get(8..12)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or(BadRecord::Truncated)?;
            if n > MAX_INTENT {
                return Err(BadRecord::Length);
            }
            12 + n * 12
        }
        k => return Err(BadRecord::Kind(k)),
    } + TRAILER;
    if total > buf.len() {
        return Err(BadRecord::Truncated);
    }
    Ok(total)
}

/// Whether the record at the start of `buf` is a page record (by its kind
/// byte alone).
#[inline]
pub fn is_page_record(buf: &[u8]) -> bool {
    buf.get(4) == Some(&K_PAGE)
}

/// The length a record ending at the end of `buf` says it has (its
/// trailer), if `buf` is long enough to hold a trailer.
#[inline]
pub fn trailer_len(buf: &[u8]) -> Option<usize> {
    let t = buf.get(buf.len().checked_sub(TRAILER)?..)?;
    Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as usize)
}

/// Makes `rec` (one whole record's bytes, as its header says) a valid
/// record at `lsn` whatever its trailer and checksum held: the fuzz
/// targets' resealing, which lets mutations reach the decoders behind the
/// checksums.
pub fn seal(rec: &mut [u8], lsn: u64) {
    let n = rec.len();
    rec[n - TRAILER..].copy_from_slice(&(n as u32).to_le_bytes());
    let c = record_crc(lsn, &rec[4..]);
    rec[..4].copy_from_slice(&c.to_le_bytes());
}

/// Whether the `len`-byte record at the start of `buf`, placed at `lsn`,
/// carries the right checksum (which covers its trailer: a length the
/// header and the trailer disagree on never verifies).
pub fn checksum_ok(buf: &[u8], len: usize, lsn: u64) -> bool {
    if trailer_len(&buf[..len]) != Some(len) {
        return false;
    }
    let stored = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    record_crc(lsn, &buf[4..len]) == stored
}

/// Bytes of a record, after its checksum, short enough to be checksummed
/// from a copy.
const SHORT: usize = 248;

/// A record's checksum: CRC-32C of `lsn` as 8 bytes followed by `rest` (the
/// record from byte 4 on).
///
/// A short record (most are) is copied behind the LSN into an 8-aligned
/// buffer and checksummed in one call: the hardware CRC takes 8 bytes at a
/// time only from 8-aligned addresses, records sit at any address, and a
/// second call costs as much as a few of their bytes. About a fifth less
/// time for a log of 100-byte changes, where checksums are most of a scan.
#[inline]
fn record_crc(lsn: u64, rest: &[u8]) -> u32 {
    #[repr(C, align(8))]
    struct Aligned([u8; 8 + SHORT]);
    if rest.len() > SHORT {
        return crc_append(crc(&lsn.to_le_bytes()), rest);
    }
    let mut a = Aligned([0u8; 8 + SHORT]);
    a.0[..8].copy_from_slice(&lsn.to_le_bytes());
    a.0[8..8 + rest.len()].copy_from_slice(rest);
    crc(&a.0[..8 + rest.len()])
}

/// Decodes the record at the start of `buf`, which sits at `lsn` in a log of
/// `page_size`-byte pages. Returns the record and its length.
pub fn decode(buf: &[u8], lsn: u64, page_size: usize) -> Result<(Record<'_>, usize), BadRecord> {
    let total = record_len(buf, page_size)?;
    if !checksum_ok(buf, total, lsn) {
        return Err(BadRecord::Checksum);
    }
    decode_verified(buf, total)
}

/// Decodes a record whose length and checksum were already checked.
#[inline]
pub fn decode_verified(buf: &[u8], total: usize) -> Result<(Record<'_>, usize), BadRecord> {
    let t = |_| BadRecord::Truncated;
    let mut c = Cursor::new(&buf[..total]);
    let _stored = c.u32().map_err(t)?;
    let kind = c.u8().map_err(t)?;
    let flags = c.u8().map_err(t)?;
    let len = c.u16().map_err(t)? as usize;
    let page_size = total.saturating_sub(PAGE_IMAGE + TRAILER);
    let rec = match kind {
        K_RANGE => {
            let txid = c.u32().map_err(t)?;
            let addr = c.u64().map_err(t)?;
            let after = c.bytes(len).map_err(t)?;
            let before = if flags & FLAG_BEFORE != 0 {
                Some(c.bytes(len).map_err(t)?)
            } else {
                None
            };
            Record::Range {
                txid,
                addr,
                after,
                before,
            }
        }
        K_RANGES => Record::Ranges {
            txid: c.u32().map_err(t)?,
            addr: c.u64().map_err(t)?,
            before: flags & FLAG_BEFORE != 0,
            body: c.bytes(len).map_err(t)?,
        },
        K_PAGE => Record::Page {
            txid: c.u32().map_err(t)?,
            page: c.u64().map_err(t)?,
            image: c.bytes(page_size).map_err(t)?,
        },
        K_ALLOC => Record::Alloc {
            txid: c.u32().map_err(t)?,
            page: c.u64().map_err(t)?,
            count: c.u32().map_err(t)?,
            kind: flags,
        },
        K_FREE => Record::Free {
            txid: c.u32().map_err(t)?,
            page: c.u64().map_err(t)?,
            count: c.u32().map_err(t)?,
        },
        K_COMMIT => Record::Commit {
            txid: c.u32().map_err(t)?,
            synced_delta: c.u32().map_err(t)?,
        },
        K_ROOT => {
            let txid = c.u32().map_err(t)?;
            let addr = c.u64().map_err(t)?;
            let type_id = c.u32().map_err(t)?;
            Record::Root {
                txid,
                name: c.bytes(len).map_err(t)?,
                addr,
                type_id,
            }
        }
        K_TYPE => Record::Type {
            txid: c.u32().map_err(t)?,
            type_id: c.u32().map_err(t)?,
            desc: c.bytes(len).map_err(t)?,
        },
        _ => {
            let n = c.u32().map_err(t)? as usize;
            Record::Intent {
                entries: c.bytes(n * 12).map_err(t)?,
            }
        }
    };
    Ok((rec, total))
}

/// Iterates the `(page, checksum)` entries of an intent record.
pub fn intent_entries(entries: &[u8]) -> impl Iterator<Item = (PageNo, u32)> + '_ {
    entries.chunks_exact(12).map(|e| {
        let mut p = [0u8; 8];
        p.copy_from_slice(&e[..8]);
        (
            u64::from_le_bytes(p),
            u32::from_le_bytes([e[8], e[9], e[10], e[11]]),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Record<'static>> {
        static IMG: [u8; 4096] = [7u8; 4096];
        vec![
            Record::Range {
                txid: 1,
                addr: 8200,
                after: b"hello",
                before: None,
            },
            Record::Range {
                txid: 1,
                addr: 8200,
                after: b"new",
                before: Some(b"old"),
            },
            Record::Page {
                txid: 2,
                page: 9,
                image: &IMG,
            },
            Record::Alloc {
                txid: 3,
                page: 4,
                count: 2,
                kind: 1,
            },
            Record::Free {
                txid: 3,
                page: 4,
                count: 2,
            },
            Record::Commit {
                txid: 3,
                synced_delta: 99,
            },
            Record::Root {
                txid: 4,
                name: b"parts",
                addr: 8232,
                type_id: 5,
            },
            Record::Type {
                txid: 4,
                type_id: 5,
                desc: b"desc",
            },
            Record::Intent {
                entries: &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0],
            },
            // "ab" at 8200, "c" three bytes after it.
            Record::Ranges {
                txid: 5,
                addr: 8200,
                before: false,
                body: &[2, 0, b'a', b'b', 3, 0, 1, 0, b'c'],
            },
            Record::Ranges {
                txid: 5,
                addr: 8200,
                before: true,
                body: &[1, 0, b'n', b'o', 9, 0, 1, 0, b'N', b'O'],
            },
        ]
    }

    #[test]
    fn a_malformed_ranges_body_is_no_record() {
        for body in [&[][..], &[2, 0, b'a'], &[0, 0], &[1, 0, b'a', 0]] {
            let mut buf = Vec::new();
            Record::Ranges {
                txid: 1,
                addr: 8200,
                before: false,
                body,
            }
            .encode(64, &mut buf);
            assert_eq!(decode(&buf, 64, 4096), Err(BadRecord::Length), "{body:?}");
            assert_eq!(record_len(&buf, 4096), Err(BadRecord::Length));
        }
        // A body cut by the end of the buffer is truncated, not malformed.
        let mut buf = Vec::new();
        all()[9].encode(64, &mut buf);
        assert_eq!(record_len(&buf[..buf.len() - 1], 4096), Err(BadRecord::Truncated));
    }

    #[test]
    fn round_trip_every_kind() {
        let mut lsn = 1000;
        for r in all() {
            let mut buf = Vec::new();
            r.encode(lsn, &mut buf);
            assert_eq!(buf.len(), r.encoded_len());
            let (d, n) = decode(&buf, lsn, 4096).expect("decodes");
            assert_eq!(d, r);
            assert_eq!(n, buf.len());
            // Bound to its position.
            assert_eq!(decode(&buf, lsn + 1, 4096), Err(BadRecord::Checksum));
            // Any flipped byte is caught.
            for i in (0..buf.len().min(64)).chain(buf.len() - TRAILER..buf.len()) {
                let mut b = buf.clone();
                b[i] ^= 0x40;
                assert!(decode(&b, lsn, 4096).is_err(), "flip at {i} of {r:?}");
            }
            // The trailer says the length, and where the record starts.
            assert_eq!(trailer_len(&buf), Some(buf.len()));
            lsn += n as u64;
        }
    }

    #[test]
    fn seal_makes_any_trailer_and_checksum_valid() {
        let mut buf = Vec::new();
        let r = Record::Commit {
            txid: 5,
            synced_delta: 7,
        };
        r.encode(300, &mut buf);
        let n = buf.len();
        buf[n - 1] ^= 0x10;
        buf[0] ^= 1;
        assert_eq!(decode(&buf, 300, 4096), Err(BadRecord::Checksum));
        seal(&mut buf, 300);
        assert_eq!(decode(&buf, 300, 4096), Ok((r, n)));
    }

    #[test]
    fn checksum_from_a_copy_is_the_checksum() {
        let bytes: Vec<u8> = (0..410u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in (0..=SHORT + 20).chain([399]) {
            for at in [0, 1, 5] {
                let rest = &bytes[at..at + n];
                let lsn = 0x0102_0304_0506_0708 + n as u64;
                assert_eq!(
                    record_crc(lsn, rest),
                    crc_append(crc(&lsn.to_le_bytes()), rest),
                    "{n} bytes at {at}"
                );
            }
        }
    }

    #[test]
    fn header_size_is_small() {
        let r = Record::Range {
            txid: 1,
            addr: 1,
            after: &[0u8; 100],
            before: None,
        };
        assert_eq!(r.encoded_len(), 100 + RANGE_HEADER);
        const { assert!(RANGE_HEADER <= 24) };
    }
}
