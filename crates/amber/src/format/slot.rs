//! The framing shared by the superblock and the log header: a 512-byte slot
//! (one sector, written in one `pwrite`) that starts with an 8-byte magic and
//! a u32 format version and ends with the CRC-32C of everything before it.

use super::bytes::{Cursor, Short};
use super::crc;

/// Bytes of a slot.
pub const SLOT_SIZE: usize = 512;

/// Why a slot was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotError {
    /// The magic is wrong: not this kind of file (or a slot never written).
    BadMagic,
    /// A version this build does not read.
    Version(u32),
    /// Checksum mismatch.
    Checksum,
    /// A field is impossible.
    Invalid(String),
}

impl std::fmt::Display for SlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotError::BadMagic => f.write_str("bad magic"),
            SlotError::Version(v) => write!(f, "format version {v}, this build reads another"),
            SlotError::Checksum => f.write_str("checksum mismatch"),
            SlotError::Invalid(w) => f.write_str(w),
        }
    }
}

impl From<Short> for SlotError {
    fn from(_: Short) -> Self {
        SlotError::Invalid("slot truncated".into())
    }
}

/// Refuses a generation that no write could follow: the copy written next
/// must have a higher one (the newest copy is the one with the highest),
/// and one more than `u64::MAX` overflows. Only damage writes it.
pub fn check_generation(generation: u64) -> Result<(), SlotError> {
    if generation == u64::MAX {
        return Err(SlotError::Invalid(format!(
            "generation {generation} cannot be followed by a newer copy"
        )));
    }
    Ok(())
}

/// The generation of the copy written after one of `generation`, unless
/// that would be one [`check_generation`] refuses: a file at the last
/// generation a write can follow would otherwise be written into one no
/// open accepts. Only damage leads there (a generation goes up by one per
/// checkpoint or log recycling).
pub fn next_generation(generation: u64) -> Result<u64, String> {
    generation
        .checked_add(1)
        .filter(|&g| check_generation(g).is_ok())
        .ok_or_else(|| format!("generation {generation} leaves no room for a newer copy"))
}

/// A slot with `magic` and `version` written; the caller fills bytes 12.. and
/// then calls [`seal`].
pub fn new(magic: &[u8; 8], version: u32) -> [u8; SLOT_SIZE] {
    let mut b = [0u8; SLOT_SIZE];
    b[0..8].copy_from_slice(magic);
    b[8..12].copy_from_slice(&version.to_le_bytes());
    b
}

/// Writes the checksum into the slot's last four bytes.
pub fn seal(b: &mut [u8; SLOT_SIZE]) {
    let c = crc(&b[..SLOT_SIZE - 4]);
    b[SLOT_SIZE - 4..].copy_from_slice(&c.to_le_bytes());
}

/// Checks a slot's magic, checksum and version; returns a cursor on the
/// fields after the version.
pub fn open<'a>(b: &'a [u8], magic: &[u8; 8], version: u32) -> Result<Cursor<'a>, SlotError> {
    open_any(b, magic, &[version]).map(|(c, _)| c)
}

/// [`open`] for a slot of any of `versions`: also returns the one it has.
pub fn open_any<'a>(
    b: &'a [u8],
    magic: &[u8; 8],
    versions: &[u32],
) -> Result<(Cursor<'a>, u32), SlotError> {
    let b = b
        .get(..SLOT_SIZE)
        .ok_or(SlotError::Invalid("slot truncated".into()))?;
    let mut c = Cursor::new(b);
    if c.bytes(8)? != magic {
        return Err(SlotError::BadMagic);
    }
    let v = c.u32()?;
    let stored = u32::from_le_bytes([b[508], b[509], b[510], b[511]]);
    if crc(&b[..SLOT_SIZE - 4]) != stored {
        return Err(SlotError::Checksum);
    }
    if !versions.contains(&v) {
        return Err(SlotError::Version(v));
    }
    Ok((c, v))
}
