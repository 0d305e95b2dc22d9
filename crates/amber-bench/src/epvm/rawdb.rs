//! The database the call-interface baselines read: OO1's parts as records
//! on raw store pages, addressed by OID, and an array of OIDs as the index
//! (White & DeWitt's ESM database, §4.2), built and read through Amber's
//! store alone (`internals::store`: transactions, range writes, block
//! reads), below the object layer.
//!
//! Every page is a one-page raw block (no object map: the store checks its
//! checksum and lays committed changes over it, nothing else). After the
//! store's 32-byte header a page holds an 8-byte magic naming its kind,
//! then its records:
//!
//! | page | magic | then |
//! |---|---|---|
//! | directory | `EPVMROOT` | parts u64, index pages u64, then the index pages' numbers, u64 each |
//! | parts | `EPVMPART` | up to [`PARTS_PER_PAGE`] part records of [`PART_SIZE`] bytes |
//! | index | `EPVMINDX` | up to [`OIDS_PER_PAGE`] OIDs, part `id` at entry `(id − 1) % OIDS_PER_PAGE` of index page `(id − 1) / OIDS_PER_PAGE` |
//!
//! A part record (little-endian, the layout of `texas::schema`'s parts):
//! id u32 @0, kind [u8; 10] @4, 2 bytes of padding, x i32 @16, y i32 @20,
//! build i64 @24, then 3 connections of 24 bytes @32: target OID u64,
//! kind [u8; 10], 2 bytes of padding, length i32.
//!
//! An OID is a persistent address: page × page size + offset of the record
//! (8 bytes; E's were 16: a 12-byte OID and a 4-byte offset). The root
//! named [`ROOT`] holds the directory's address. Parts are laid out in id
//! order, 39 to a page, as Amber's allocator lays out objects added in
//! order.

use std::path::Path;
use std::sync::Arc;

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};

use crate::oo1::database::{GeneratedDb, Kind, PartId};
use crate::oo1::engine::{EngineError, ResultExt};

/// The database file in the baselines' directory.
pub const FILE: &str = "epvm.amber";

/// The root naming the directory page.
pub const ROOT: &str = "epvm";

/// Bytes of a part record.
pub const PART_SIZE: usize = 104;

/// Where records start on a page: after the store's header and the magic.
pub const RECORDS_AT: usize = HEADER_SIZE + 8;

/// Page size of the database.
pub const PAGE: usize = 4096;

/// Part records per page.
pub const PARTS_PER_PAGE: usize = (PAGE - RECORDS_AT) / PART_SIZE;

/// OIDs per index page.
pub const OIDS_PER_PAGE: usize = (PAGE - RECORDS_AT) / 8;

/// Offsets of a record's fields.
pub mod field {
    pub const ID: usize = 0;
    pub const KIND: usize = 4;
    pub const X: usize = 16;
    pub const Y: usize = 20;
    pub const OUT: usize = 32;
    /// Bytes of one connection.
    pub const OUT_SIZE: usize = 24;
}

const MAGIC_ROOT: &[u8; 8] = b"EPVMROOT";
const MAGIC_PART: &[u8; 8] = b"EPVMPART";
const MAGIC_INDEX: &[u8; 8] = b"EPVMINDX";

/// The kinds of page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    Directory,
    Parts,
    Index,
}

impl PageKind {
    fn magic(self) -> &'static [u8; 8] {
        match self {
            PageKind::Directory => MAGIC_ROOT,
            PageKind::Parts => MAGIC_PART,
            PageKind::Index => MAGIC_INDEX,
        }
    }

    /// Records on a page of this kind, and their size.
    fn slots(self) -> (usize, usize) {
        match self {
            PageKind::Directory => (OIDS_PER_PAGE, 8),
            PageKind::Parts => (PARTS_PER_PAGE, PART_SIZE),
            PageKind::Index => (OIDS_PER_PAGE, 8),
        }
    }
}

/// Checks that `page`'s image is a page of `kind`.
pub fn check_page(page: u64, image: &[u8], kind: PageKind) -> Result<(), EngineError> {
    match image.get(HEADER_SIZE..RECORDS_AT) {
        Some(m) if m == kind.magic() => Ok(()),
        _ => Err(EngineError::corrupt(format!(
            "page {page} is not a {kind:?} page of the baselines' database (its magic is {:?})",
            image.get(HEADER_SIZE..RECORDS_AT)
        ))),
    }
}

/// Splits an OID into its page and the offset of its record, checking that
/// it names a record slot of a page of `kind`.
pub fn split(oid: u64, kind: PageKind) -> Result<(u64, usize), EngineError> {
    let (page, off) = (oid / PAGE as u64, (oid % PAGE as u64) as usize);
    let (slots, size) = kind.slots();
    let ok = off >= RECORDS_AT
        && (off - RECORDS_AT).is_multiple_of(size)
        && (off - RECORDS_AT) / size < slots;
    if ok && page > 0 {
        Ok((page, off))
    } else {
        Err(EngineError::corrupt(format!(
            "OID {oid:#x} does not name a {kind:?} record (page {page}, offset {off})"
        )))
    }
}

/// A little-endian u64 at `at` of `b`.
#[inline]
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A little-endian i32 at `at` of `b`.
#[inline]
pub fn i32_at(b: &[u8], at: usize) -> i32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    i32::from_le_bytes(w)
}

/// A little-endian u32 at `at` of `b`.
#[inline]
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// A part's kind in its record `r`.
#[inline]
pub fn kind_of(r: &[u8]) -> &Kind {
    r[field::KIND..field::KIND + 10]
        .try_into()
        .expect("a record holds a 10-byte kind")
}

/// The connection target of slot `i` in record `r`.
#[inline]
pub fn target(r: &[u8], i: usize) -> u64 {
    u64_at(r, field::OUT + i * field::OUT_SIZE)
}

/// The directory: where the index pages are.
#[derive(Clone, Debug)]
pub struct Directory {
    pub parts: u64,
    pub index_pages: Vec<u64>,
}

impl Directory {
    /// Reads the directory through the root.
    pub fn read(store: &Store) -> Result<Directory, EngineError> {
        let root = store
            .root(ROOT)
            .ok_or_else(|| EngineError::corrupt(format!("no root named {ROOT:?}")))?;
        let page = root.addr / PAGE as u64;
        let image = store.read_block(page).ctx("reading the directory")?;
        check_page(page, &image, PageKind::Directory)?;
        let parts = u64_at(&image, RECORDS_AT);
        let n = u64_at(&image, RECORDS_AT + 8) as usize;
        if n > OIDS_PER_PAGE - 2 || (parts as usize).div_ceil(OIDS_PER_PAGE) != n {
            return Err(EngineError::corrupt(format!(
                "the directory says {parts} parts in {n} index pages"
            )));
        }
        let index_pages = (0..n)
            .map(|i| u64_at(&image, RECORDS_AT + 16 + 8 * i))
            .collect();
        Ok(Directory { parts, index_pages })
    }

    /// The index page and entry offset holding part `id`'s OID.
    pub fn entry(&self, id: PartId) -> Result<(u64, usize), EngineError> {
        let i = (id as usize)
            .checked_sub(1)
            .filter(|&i| (i as u64) < self.parts)
            .ok_or(EngineError::MissingPart { id })?;
        let page = self.index_pages[i / OIDS_PER_PAGE];
        Ok((page, RECORDS_AT + 8 * (i % OIDS_PER_PAGE)))
    }
}

/// The largest database the directory can describe.
pub fn max_parts() -> u64 {
    ((OIDS_PER_PAGE - 2) * OIDS_PER_PAGE) as u64
}

/// Pages of a database of `parts` parts: parts, index, directory.
pub fn pages(parts: u64) -> u64 {
    (parts as usize).div_ceil(PARTS_PER_PAGE) as u64
        + (parts as usize).div_ceil(OIDS_PER_PAGE) as u64
        + 1
}

/// Opens the store of the database in `dir`.
pub fn open(dir: &Path) -> Result<Store, EngineError> {
    let path = dir.join(FILE);
    Store::open(Arc::new(RealVfs), &path, StoreOptions::default())
        .ctx(&format!("opening {}", path.display()))
}

/// Builds the database of `data` in the empty directory `dir`; returns the
/// file's pages.
pub fn build(dir: &Path, data: &GeneratedDb) -> Result<u64, EngineError> {
    let n = data.parts.len();
    if n as u64 > max_parts() {
        return Err(EngineError::bad_input(format!(
            "{n} parts: the baselines' directory describes at most {}",
            max_parts()
        )));
    }
    let path = dir.join(FILE);
    let store = Store::create(Arc::new(RealVfs), &path, StoreOptions::default())
        .ctx(&format!("creating {}", path.display()))?;
    let ps = store.page_size();
    if ps != PAGE {
        return Err(EngineError::bad_input(format!(
            "the store's pages are {ps} bytes, the baselines' format needs {PAGE}"
        )));
    }
    let mut tx = store.begin().ctx("beginning the build")?;
    let part_pages: Vec<u64> = (0..n.div_ceil(PARTS_PER_PAGE))
        .map(|_| tx.alloc(1, BlockKind::Raw))
        .collect::<Result<_, _>>()
        .ctx("allocating part pages")?;
    let oid = |id: PartId| {
        let i = id as usize - 1;
        part_pages[i / PARTS_PER_PAGE] * PAGE as u64
            + (RECORDS_AT + PART_SIZE * (i % PARTS_PER_PAGE)) as u64
    };
    for (chunk, &page) in data.parts.chunks(PARTS_PER_PAGE).zip(&part_pages) {
        let mut image = Vec::with_capacity(PAGE - HEADER_SIZE);
        image.extend_from_slice(MAGIC_PART);
        for p in chunk {
            let mut r = [0u8; PART_SIZE];
            r[field::ID..field::ID + 4].copy_from_slice(&p.id.to_le_bytes());
            r[field::KIND..field::KIND + 10].copy_from_slice(&p.kind);
            r[field::X..field::X + 4].copy_from_slice(&p.x.to_le_bytes());
            r[field::Y..field::Y + 4].copy_from_slice(&p.y.to_le_bytes());
            r[24..32].copy_from_slice(&p.build.to_le_bytes());
            for (i, c) in data.outgoing(p.id).iter().enumerate() {
                let at = field::OUT + i * field::OUT_SIZE;
                r[at..at + 8].copy_from_slice(&oid(c.to).to_le_bytes());
                r[at + 8..at + 18].copy_from_slice(&c.kind);
                r[at + 20..at + 24].copy_from_slice(&c.length.to_le_bytes());
            }
            image.extend_from_slice(&r);
        }
        tx.write(page * PAGE as u64 + HEADER_SIZE as u64, &image)
            .ctx("writing a part page")?;
    }
    let ids: Vec<PartId> = data.parts.iter().map(|p| p.id).collect();
    let mut index_pages = Vec::new();
    for chunk in ids.chunks(OIDS_PER_PAGE) {
        let page = tx
            .alloc(1, BlockKind::Raw)
            .ctx("allocating an index page")?;
        let mut image = MAGIC_INDEX.to_vec();
        for &id in chunk {
            image.extend_from_slice(&oid(id).to_le_bytes());
        }
        tx.write(page * PAGE as u64 + HEADER_SIZE as u64, &image)
            .ctx("writing an index page")?;
        index_pages.push(page);
    }
    let dir_page = tx
        .alloc(1, BlockKind::Raw)
        .ctx("allocating the directory")?;
    let mut image = MAGIC_ROOT.to_vec();
    image.extend_from_slice(&(n as u64).to_le_bytes());
    image.extend_from_slice(&(index_pages.len() as u64).to_le_bytes());
    for p in &index_pages {
        image.extend_from_slice(&p.to_le_bytes());
    }
    let dir_addr = dir_page * PAGE as u64 + RECORDS_AT as u64;
    tx.write(dir_page * PAGE as u64 + HEADER_SIZE as u64, &image)
        .ctx("writing the directory")?;
    tx.set_root(ROOT, dir_addr, 0).ctx("naming the directory")?;
    tx.commit().ctx("committing the build")?;
    store.checkpoint().ctx("checkpointing the build")?;
    let pages = store.page_count();
    store.close().ctx("closing the database")?;
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        assert_eq!(PARTS_PER_PAGE, 39);
        assert_eq!(RECORDS_AT + PARTS_PER_PAGE * PART_SIZE, PAGE);
        assert_eq!(OIDS_PER_PAGE, 507);
        assert!(max_parts() >= 200_000);
    }

    #[test]
    fn oids_are_checked() {
        let oid = 7 * PAGE as u64 + (RECORDS_AT + 2 * PART_SIZE) as u64;
        assert_eq!(
            split(oid, PageKind::Parts).expect("a record"),
            (7, RECORDS_AT + 2 * PART_SIZE)
        );
        assert!(split(oid + 8, PageKind::Parts).is_err());
        assert!(split(7 * PAGE as u64 + 8, PageKind::Parts).is_err());
        assert!(
            split(RECORDS_AT as u64, PageKind::Parts).is_err(),
            "page 0 is the superblock's"
        );
        let image = vec![0u8; PAGE];
        assert!(check_page(3, &image, PageKind::Index).is_err());
    }
}
