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
//!   8     4   version         1 or 2 (2: the database has a home)
//!  12     4   page_size
//!  16     8   generation      bumped by every superblock write
//!  24     8   checkpoint_lsn  everything logged before it is installed in the page file
//!  32     8   fsm_page        first page of the free-space map blob
//!  40     8   roots_page      first page of the root directory blob
//!  48     8   catalog_page    first page of the schema catalog blob
//!  56    16   db_id           random; the log header must carry the same
//!  72     8   next_txid       transaction ids continue from here after a restart
//!  80     8   home            version 2: the stored form of swizzled pointers is
//!                             the persistent address plus this (`home.rs`); version 1: zero
//!  88   420   zero
//! 508     4   crc32c of bytes [0, 508)
//! ```

use super::PageNo;
use super::home::Home;
use super::slot;
pub use super::slot::SLOT_SIZE;
pub use super::slot::SlotError;

/// Byte offsets of the two copies.
pub const SLOT_OFFSETS: [u64; 2] = [0, 4096];
/// Magic bytes.
pub const MAGIC: &[u8; 8] = b"AMBER-DB";
/// Format version of a database with a home; one without (created before
/// homes existed) keeps [`VERSION_NO_HOME`].
pub const VERSION: u32 = 2;
/// Format version of a database without a home: swizzled pointers stored
/// as persistent addresses.
pub const VERSION_NO_HOME: u32 = 1;

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
    /// Where the stored form of swizzled pointers is at home (version 2;
    /// [`Home::NONE`] for version 1).
    pub home: Home,
}

impl Superblock {
    /// Encodes into a slot.
    pub fn encode(&self) -> [u8; SLOT_SIZE] {
        let version = if self.home.is_some() {
            VERSION
        } else {
            VERSION_NO_HOME
        };
        let mut b = slot::new(MAGIC, version);
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..32].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        b[32..40].copy_from_slice(&self.fsm_page.to_le_bytes());
        b[40..48].copy_from_slice(&self.roots_page.to_le_bytes());
        b[48..56].copy_from_slice(&self.catalog_page.to_le_bytes());
        b[56..72].copy_from_slice(&self.db_id);
        b[72..80].copy_from_slice(&self.next_txid.to_le_bytes());
        b[80..88].copy_from_slice(&self.home.addr().to_le_bytes());
        slot::seal(&mut b);
        b
    }

    /// Decodes a slot.
    pub fn decode(b: &[u8]) -> Result<Superblock, SlotError> {
        let (mut c, version) = slot::open_any(b, MAGIC, &[VERSION_NO_HOME, VERSION])?;
        let mut sb = Superblock {
            page_size: c.u32()?,
            generation: c.u64()?,
            checkpoint_lsn: c.u64()?,
            fsm_page: c.u64()?,
            roots_page: c.u64()?,
            catalog_page: c.u64()?,
            db_id: c.array()?,
            next_txid: c.u64()?,
            home: Home::NONE,
        };
        // Version 1 wrote zeros here; a version 2 home is never zero.
        let home = Home::new(c.u64()?).map_err(SlotError::Invalid)?;
        match (version, home.is_some()) {
            (VERSION, false) => {
                return Err(SlotError::Invalid("version 2 without a home".into()));
            }
            (VERSION_NO_HOME, true) => {
                return Err(SlotError::Invalid(format!("version 1 with a home ({home})")));
            }
            _ => sb.home = home,
        }
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
            home: Home::new(0x1000 << 30).expect("aligned"),
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

    #[test]
    fn version_follows_the_home() {
        let with = sb(3);
        let e = with.encode();
        assert_eq!(u32::from_le_bytes([e[8], e[9], e[10], e[11]]), VERSION);
        let without = Superblock {
            home: Home::NONE,
            ..with
        };
        let e1 = without.encode();
        assert_eq!(u32::from_le_bytes([e1[8], e1[9], e1[10], e1[11]]), VERSION_NO_HOME);
        assert_eq!(Superblock::decode(&e1), Ok(without));
        // A version 1 copy with something at the home's offset, or a
        // version 2 copy without a home, is damage.
        let mut bad = e1;
        bad[80] = 0;
        bad[83] = 0x40;
        slot::seal(&mut bad);
        assert!(matches!(Superblock::decode(&bad), Err(SlotError::Invalid(_))));
        let mut bad = e;
        bad[80..88].fill(0);
        slot::seal(&mut bad);
        assert!(matches!(Superblock::decode(&bad), Err(SlotError::Invalid(_))));
    }
}
