//! Byte-level formats of the page file: the superblock, the page header, the
//! object map inside data pages, and the metadata blobs. Every structure is
//! little-endian and fixed-offset; `docs/design.md` has the tables. Decoding
//! never panics on bad input: it reports what is wrong.

pub mod bytes;
pub mod home;
pub mod meta;
pub mod objects;
pub mod page;
pub mod slot;
pub mod superblock;

/// The smallest and largest page sizes a database may have.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Page sizes above this would not fit a page-relative offset in a range
/// record's 16-bit length field.
pub const MAX_PAGE_SIZE: usize = 32768;
/// The default page size.
pub const DEFAULT_PAGE_SIZE: usize = 4096;

/// The bytes of the file before the first page that can hold data: two
/// superblock copies, 4 KiB apart so that they never share a physical sector
/// of a 4K-sector disk.
pub const RESERVED_BYTES: u64 = 8192;

/// The host's virtual-memory page size.
pub fn host_page_size() -> usize {
    rustix::param::page_size()
}

/// Checks that `page_size` is a power of two in the supported range and at
/// least the host's page size (a page must map onto whole VM pages).
pub fn check_page_size(page_size: usize) -> Result<(), String> {
    if !page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(format!(
            "page size {page_size} is not a power of two between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}"
        ));
    }
    let host = host_page_size();
    if page_size < host {
        return Err(format!(
            "page size {page_size} is smaller than this host's VM page size {host}"
        ));
    }
    Ok(())
}

/// The first page number that can hold data for a page size: page numbers
/// below it cover the superblocks. Page 0 is never a data page, so persistent
/// address 0 can mean null.
pub fn first_data_page(page_size: usize) -> u64 {
    (RESERVED_BYTES / page_size as u64).max(1)
}

/// A persistent address: page number times page size plus offset. Null is 0.
pub type PAddr = u64;
/// A page number in the page file.
pub type PageNo = u64;

/// crc32c of `data`, the checksum of pages, superblocks and log records.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// crc32c continued over more data.
pub fn crc_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}
