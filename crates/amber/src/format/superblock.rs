//! The superblock: where everything else is found.
//!
//! Two copies, at byte 0 and byte 4096 of the page file, each a 512-byte slot
//! (one sector, written in one `pwrite`). A checkpoint writes the copy that is
//! not the newest, syncs, then writes the other: a torn superblock write can
//! only damage the copy being written while the other is complete, and once
//! both are written either one alone suffices. Opening takes the valid copy
//! with the highest generation (copy 0 on a tie).
//!
//! ```text
//! offset size field
//!   0     8   magic           "AMBER-DB"
//!   8     4   version         1
//!  12     4   page_size
//!  16     8   generation      bumped by every superblock write
//!  24     8   checkpoint_lsn  everything logged before it is installed in the page file
//!  32     8   fsm_page        first page of the free-space map blob
//!  40     8   roots_page      first page of the root directory blob
//!  48     8   catalog_page    first page of the schema catalog blob
//!  56    16   db_id           random; the log header must carry the same
//!  72     8   next_txid       transaction ids continue from here after a restart
//!  80   428   zero
//! 508     4   crc32c of bytes [0, 508)
//! ```

use super::PageNo;
use super::slot;
pub use super::slot::SLOT_SIZE;
pub use super::slot::SlotError;

/// Byte offsets of the two copies.
pub const SLOT_OFFSETS: [u64; 2] = [0, 4096];
/// Magic bytes.
pub const MAGIC: &[u8; 8] = b"AMBER-DB";
/// Format version written and read by this build.
pub const VERSION: u32 = 1;

/// The decoded superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Page size in bytes.
    pub page_size: u32,
    /// Write generation.
    pub generation: u64,
    /// LSN up to which the log is installed.
    pub checkpoint_lsn: u64,
    /// First page of the free-space map blob.
    pub fsm_page: PageNo,
    /// First page of the root directory blob.
    pub roots_page: PageNo,
    /// First page of the schema catalog blob.
    pub catalog_page: PageNo,
    /// Identity shared with the log.
    pub db_id: [u8; 16],
    /// Next transaction id.
    pub next_txid: u64,
}

impl Superblock {
    /// Encodes into a slot.
    pub fn encode(&self) -> [u8; SLOT_SIZE] {
        let mut b = slot::new(MAGIC, VERSION);
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..32].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        b[32..40].copy_from_slice(&self.fsm_page.to_le_bytes());
        b[40..48].copy_from_slice(&self.roots_page.to_le_bytes());
        b[48..56].copy_from_slice(&self.catalog_page.to_le_bytes());
        b[56..72].copy_from_slice(&self.db_id);
        b[72..80].copy_from_slice(&self.next_txid.to_le_bytes());
        slot::seal(&mut b);
        b
    }

    /// Decodes a slot.
    pub fn decode(b: &[u8]) -> Result<Superblock, SlotError> {
        let mut c = slot::open(b, MAGIC, VERSION)?;
        let sb = Superblock {
            page_size: c.u32()?,
            generation: c.u64()?,
            checkpoint_lsn: c.u64()?,
            fsm_page: c.u64()?,
            roots_page: c.u64()?,
            catalog_page: c.u64()?,
            db_id: c.array()?,
            next_txid: c.u64()?,
        };
        super::check_page_size(sb.page_size as usize).map_err(SlotError::Invalid)?;
        slot::check_generation(sb.generation)?;
        if sb.checkpoint_lsn > crate::wal::header::MAX_LSN {
            return Err(SlotError::Invalid(format!(
                "checkpoint LSN {} is beyond the largest a log reaches ({})",
                sb.checkpoint_lsn,
                crate::wal::header::MAX_LSN
            )));
        }
        Ok(sb)
    }
}

/// Chooses the newest valid copy; `Err` carries both copies' problems.
pub fn choose(
    a: Result<Superblock, SlotError>,
    b: Result<Superblock, SlotError>,
) -> Result<(Superblock, u8), [Option<SlotError>; 2]> {
    match (a, b) {
        (Ok(x), Ok(y)) if y.generation > x.generation => Ok((y, 1)),
        (Ok(x), _) => Ok((x, 0)),
        (Err(_), Ok(y)) => Ok((y, 1)),
        (Err(e), Err(f)) => Err([Some(e), Some(f)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(generation: u64) -> Superblock {
        Superblock {
            page_size: 4096,
            generation,
            checkpoint_lsn: 77,
            fsm_page: 2,
            roots_page: 3,
            catalog_page: 4,
            db_id: [9; 16],
            next_txid: 5,
        }
    }

    #[test]
    fn round_trip_and_choice() {
        let a = sb(4);
        let e = a.encode();
        assert_eq!(Superblock::decode(&e), Ok(a));
        let mut torn = sb(5).encode();
        torn[30] ^= 0xff;
        assert_eq!(Superblock::decode(&torn), Err(SlotError::Checksum));
        let pick = choose(Superblock::decode(&e), Superblock::decode(&torn)).expect("one valid");
        assert_eq!(pick, (a, 0));
        let pick = choose(Superblock::decode(&e), Ok(sb(6))).expect("both valid");
        assert_eq!(pick.0.generation, 6);
        assert!(Superblock::decode(&[0u8; 512]) == Err(SlotError::BadMagic));
        let last = sb(u64::MAX).encode();
        assert!(matches!(Superblock::decode(&last), Err(SlotError::Invalid(_))));
    }
}
