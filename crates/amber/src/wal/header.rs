//! The log file header: where the log's records begin, in LSNs.
//!
//! Two 512-byte copies at byte 0 and byte 4096 of the log file, alternated
//! like the superblock's; records start at byte 8192. A log is recycled by
//! writing a new header whose `base_lsn` is the checkpoint LSN: the record at
//! file offset 8192 then has LSN `base_lsn`, and stale records left further on
//! fail their LSN-seeded checksums.
//!
//! ```text
//!   0  8  magic        "AMBERLOG"
//!   8  4  version      3 (2: no ranges records; 1: records without the
//!                      length trailer; see `record.rs`, and `store/open.rs`
//!                      for what opening an older log does)
//!  12  4  page_size
//!  16  8  generation
//!  24  8  base_lsn     LSN of the record at file offset 8192
//!  32 16  db_id        must equal the superblock's
//!  48  8  prev_base_lsn base LSN of the epoch before this one (0: none)
//!  56  1  closed       1: written by a clean close; the epoch is empty and
//!                      every byte after byte 8192 belongs to older epochs
//!  57 451 zero
//! 508  4  crc32c of bytes [0, 508)
//! ```

pub use crate::format::slot::SLOT_SIZE;
use crate::format::slot::{self, SlotError};

/// Log header magic.
pub const MAGIC: &[u8; 8] = b"AMBERLOG";
/// Format version: 3 since ranges records (kind 9, `ranges.rs`).
pub const VERSION: u32 = 3;
/// The version before ranges records: its records are this version's
/// (kind 1 is still read), so such a log is read as it is, and its header
/// rewritten as version 3 before the first record is appended (an older
/// build refuses the log from then on: it reads no version-3 header).
pub const VERSION_SINGLE_RANGES: u32 = 2;
/// The version whose records have no trailer: its header has the same
/// fields, so it is decoded (by [`LogHeader::decode_versioned`]) for the
/// open to say what to do with it.
pub const VERSION_NO_TRAILER: u32 = 1;
/// Byte offsets of the two copies.
pub const SLOT_OFFSETS: [u64; 2] = [0, 4096];
/// File offset of the first record.
pub const RECORDS_START: u64 = 8192;

/// The largest LSN a log header may carry: 2^62 bytes of log, far beyond
/// any log written, leaving room to add any file offset without overflow.
pub const MAX_LSN: u64 = 1 << 62;

/// A decoded log header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    /// Page size of the database.
    pub page_size: u32,
    /// Write generation.
    pub generation: u64,
    /// LSN of the first record slot.
    pub base_lsn: u64,
    /// Database identity.
    pub db_id: [u8; 16],
    /// Base LSN of the previous epoch (0: none).
    pub prev_base_lsn: u64,
    /// Written by a clean close: this epoch holds no record yet.
    pub closed: bool,
}

impl LogHeader {
    /// Encodes a copy.
    pub fn encode(&self) -> [u8; SLOT_SIZE] {
        let mut b = slot::new(MAGIC, VERSION);
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..32].copy_from_slice(&self.base_lsn.to_le_bytes());
        b[32..48].copy_from_slice(&self.db_id);
        b[48..56].copy_from_slice(&self.prev_base_lsn.to_le_bytes());
        b[56] = u8::from(self.closed);
        slot::seal(&mut b);
        b
    }

    /// Decodes a copy of this version, or says what is wrong with it. A
    /// base LSN above `MAX_LSN` is refused as damage: LSNs are log bytes
    /// written, and the scan adds file offsets to them.
    pub fn decode(b: &[u8]) -> Result<LogHeader, String> {
        match Self::decode_versioned(b)? {
            (h, VERSION) => Ok(h),
            (_, v) => Err(SlotError::Version(v).to_string()),
        }
    }

    /// Decodes a copy of this version, of `VERSION_SINGLE_RANGES` or of
    /// `VERSION_NO_TRAILER`; returns it with its version.
    pub fn decode_versioned(b: &[u8]) -> Result<(LogHeader, u32), String> {
        let version = match crate::format::bytes::get_u32(b, 8) {
            Some(v @ (VERSION_NO_TRAILER | VERSION_SINGLE_RANGES)) => v,
            _ => VERSION,
        };
        let read = || -> Result<LogHeader, SlotError> {
            let mut c = slot::open(b, MAGIC, version)?;
            let h = LogHeader {
                page_size: c.u32()?,
                generation: c.u64()?,
                base_lsn: c.u64()?,
                db_id: c.array()?,
                prev_base_lsn: c.u64()?,
                closed: c.u8()? == 1,
            };
            slot::check_generation(h.generation)?;
            if h.base_lsn > MAX_LSN || h.prev_base_lsn > MAX_LSN {
                return Err(SlotError::Invalid(format!(
                    "base LSN {} (previous {}) is beyond the largest a log reaches ({MAX_LSN}): \
                     an LSN plus a file offset would overflow",
                    h.base_lsn, h.prev_base_lsn
                )));
            }
            Ok(h)
        };
        read().map(|h| (h, version)).map_err(|e| e.to_string())
    }
}

/// The version of a copy that is sound (magic and checksum right) but of
/// a format version later than this build's: a log a newer build wrote,
/// which this one must neither read nor replace.
pub fn newer_version(b: &[u8]) -> Option<u32> {
    let v = crate::format::bytes::get_u32(b, 8).filter(|&v| v > VERSION)?;
    slot::open(b, MAGIC, v).is_ok().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = LogHeader {
            page_size: 4096,
            generation: 3,
            base_lsn: 12345,
            db_id: [1; 16],
            prev_base_lsn: 77,
            closed: true,
        };
        assert_eq!(LogHeader::decode(&h.encode()), Ok(h));
        let mut e = h.encode();
        e[25] ^= 1;
        assert!(LogHeader::decode(&e).is_err());
        let last = LogHeader {
            generation: u64::MAX,
            ..h
        };
        assert!(LogHeader::decode(&last.encode()).is_err());
        let far = LogHeader {
            base_lsn: MAX_LSN + 1,
            ..h
        };
        assert!(LogHeader::decode(&far.encode()).unwrap_err().contains("beyond"));
        // A version-1 or version-2 copy decodes with its version, and only
        // so; a later one not at all.
        for v in [VERSION_NO_TRAILER, VERSION_SINGLE_RANGES] {
            let mut old = h.encode();
            old[8..12].copy_from_slice(&v.to_le_bytes());
            crate::format::slot::seal(&mut old);
            assert_eq!(LogHeader::decode_versioned(&old), Ok((h, v)));
            assert!(LogHeader::decode(&old).unwrap_err().contains(&format!("version {v}")));
        }
        let mut new = h.encode();
        new[8..12].copy_from_slice(&4u32.to_le_bytes());
        crate::format::slot::seal(&mut new);
        assert!(LogHeader::decode_versioned(&new).unwrap_err().contains("version 4"));
        assert_eq!(newer_version(&new), Some(4));
        assert_eq!(newer_version(&h.encode()), None);
        new[30] ^= 1;
        assert_eq!(newer_version(&new), None, "damaged");
    }
}
