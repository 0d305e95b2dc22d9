//! The page header: the first 32 bytes of every block.
//!
//! A block is the unit of allocation, checksumming and installation: a single
//! page, or a run of contiguous pages holding one large object (the run is
//! mapped contiguously in memory, so only its first page has a header).
//!
//! ```text
//! offset size field
//!  0     4    checksum    crc32c of bytes [4, block length)
//!  4     1    kind        0 never written, 1 data, 2 metadata blob, 3 raw
//!  5     3    reserved    zero
//!  8     4    run_len     pages in this block (>= 1)
//! 12     4    used        data blocks: end of the object area (see objects.rs)
//! 16     8    page_no     the block's own first page number (catches misplaced writes)
//! 24     8    lsn         LSN of the last log record installed into the block
//! ```
//!
//! `checksum` and `lsn` are physical: set when the block is written to the
//! page file. The other fields are logical content, written at allocation and
//! (for `used`) by transactions through ordinary range records.

use super::bytes::{get_u32, get_u64, put_u32, put_u64};
use super::{PageNo, crc, crc_append};

/// Bytes of the page header.
pub const HEADER_SIZE: usize = 32;

/// Offset of the `used` field, written by the object layer.
pub const USED_OFFSET: usize = 12;

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockKind {
    /// Persistent objects, walkable through the object map.
    Data = 1,
    /// A metadata blob (free-space map, root directory, schema catalog).
    Meta = 2,
    /// Opaque bytes with no object map (storage-level users and tests).
    Raw = 3,
}

impl BlockKind {
    /// The kind for a stored byte, if valid.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(BlockKind::Data),
            2 => Some(BlockKind::Meta),
            3 => Some(BlockKind::Raw),
            _ => None,
        }
    }
}

/// The decoded header of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// Stored checksum.
    pub checksum: u32,
    /// Raw kind byte.
    pub kind: u8,
    /// Pages in the block.
    pub run_len: u32,
    /// End of the object area (data blocks).
    pub used: u32,
    /// The block's first page number.
    pub page_no: PageNo,
    /// LSN of the last installed change.
    pub lsn: u64,
}

impl PageHeader {
    /// Decodes the header at the start of `block` (at least 32 bytes).
    pub fn read(block: &[u8]) -> Option<Self> {
        Some(PageHeader {
            checksum: get_u32(block, 0)?,
            kind: *block.get(4)?,
            run_len: get_u32(block, 8)?,
            used: get_u32(block, 12)?,
            page_no: get_u64(block, 16)?,
            lsn: get_u64(block, 24)?,
        })
    }
}

/// The longest block the format holds, in pages: one object, whose size
/// field is 32 bits, behind its block and object headers.
pub fn max_run_len(page_size: usize) -> u32 {
    let bytes = (HEADER_SIZE + super::objects::OBJECT_HEADER) as u64 + u64::from(u32::MAX);
    bytes.div_ceil(page_size as u64) as u32
}

/// Fills `block` as a freshly allocated, empty block.
pub fn format(block: &mut [u8], kind: BlockKind, page_no: PageNo, run_len: u32) {
    block.fill(0);
    format_zeroed(block, kind, page_no, run_len);
}

/// [`format`] for a block known to be all zero (freshly allocated memory,
/// whose pages the system hands out only as they are written).
pub fn format_zeroed(block: &mut [u8], kind: BlockKind, page_no: PageNo, run_len: u32) {
    block[4] = kind as u8;
    put_u32(block, 8, run_len);
    put_u32(
        block,
        USED_OFFSET,
        if kind == BlockKind::Data {
            HEADER_SIZE as u32
        } else {
            0
        },
    );
    put_u64(block, 16, page_no);
}

/// The checksum a block should carry.
pub fn compute_checksum(block: &[u8]) -> u32 {
    crc(block.get(4..).unwrap_or(&[]))
}

/// Stamps the physical fields (LSN and checksum) before a block is written.
pub fn seal(block: &mut [u8], lsn: u64) {
    put_u64(block, 24, lsn);
    let c = compute_checksum(block);
    put_u32(block, 0, c);
}

/// Why a block read from disk was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockError {
    /// Stored and computed checksums differ.
    Checksum {
        /// Stored.
        stored: u32,
        /// Computed.
        computed: u32,
    },
    /// The block names another page as its own.
    WrongPage(PageNo),
    /// The run length differs from what the allocator recorded.
    WrongRunLen(u32),
    /// Unknown kind byte.
    BadKind(u8),
    /// The block was never written (all zeroes).
    NeverWritten,
}

impl std::fmt::Display for BlockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            BlockError::WrongPage(p) => write!(f, "header names page {p} (misplaced write)"),
            BlockError::WrongRunLen(n) => {
                write!(f, "header says {n} pages, the allocator says otherwise")
            }
            BlockError::BadKind(k) => write!(f, "unknown block kind {k}"),
            BlockError::NeverWritten => f.write_str("allocated but never written (all zero)"),
        }
    }
}

/// Checks a block read from disk: checksum, kind, self page number, run
/// length.
pub fn verify(block: &[u8], page_no: PageNo, run_len: u32) -> Result<PageHeader, BlockError> {
    let h = PageHeader::read(block).ok_or(BlockError::NeverWritten)?;
    if h.checksum == 0 && h.kind == 0 && block.iter().all(|&b| b == 0) {
        return Err(BlockError::NeverWritten);
    }
    let computed = compute_checksum(block);
    if computed != h.checksum {
        return Err(BlockError::Checksum {
            stored: h.checksum,
            computed,
        });
    }
    if BlockKind::from_u8(h.kind).is_none() {
        return Err(BlockError::BadKind(h.kind));
    }
    if h.page_no != page_no {
        return Err(BlockError::WrongPage(h.page_no));
    }
    if h.run_len != run_len {
        return Err(BlockError::WrongRunLen(h.run_len));
    }
    Ok(h)
}

/// Checksum of an image whose LSN field would be `lsn`, without modifying it
/// (used to check a repaired block against a checkpoint's intent).
pub fn checksum_with_lsn(block: &[u8], lsn: u64) -> u32 {
    let mut c = crc(&block[4..24]);
    c = crc_append(c, &lsn.to_le_bytes());
    crc_append(c, &block[32..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify() {
        let mut b = vec![0u8; 8192];
        format(&mut b, BlockKind::Data, 7, 2);
        b[100] = 42;
        seal(&mut b, 99);
        let h = verify(&b, 7, 2).expect("valid");
        assert_eq!(h.lsn, 99);
        assert_eq!(h.used, HEADER_SIZE as u32);
        assert_eq!(checksum_with_lsn(&b, 99), h.checksum);
        b[5000] ^= 1;
        assert!(matches!(verify(&b, 7, 2), Err(BlockError::Checksum { .. })));
        b[5000] ^= 1;
        assert_eq!(verify(&b, 8, 2), Err(BlockError::WrongPage(7)));
        assert_eq!(verify(&b, 7, 1), Err(BlockError::WrongRunLen(2)));
        assert_eq!(verify(&[0u8; 4096], 3, 1), Err(BlockError::NeverWritten));
    }
}
