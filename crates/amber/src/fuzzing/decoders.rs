//! One target per decoder of bytes read from a file: each takes any bytes,
//! decodes them the way the store does, and checks the contract (module
//! comment of `fuzzing`) plus what can be said of the result — a decoded
//! value encodes back to what decodes to it, a walk stays inside its
//! buffer, two ways of reading the same log agree.
//!
//! Inputs that carry a page size start with a page-size code (0: 4 KiB,
//! 1: 8 KiB, 2: 16 KiB, anything else 4 KiB) and a flags byte whose bit 0
//! asks for the checksums to be made valid first, so that mutations reach
//! the decoding behind them.

use crate::format::bytes::get_u32;
use crate::format::meta::{self, FsmImage};
use crate::format::objects::{self, OBJECT_HEADER};
use crate::format::page::{self, BlockKind, HEADER_SIZE, PageHeader};
use crate::format::slot::SLOT_SIZE;
use crate::format::superblock::Superblock;
use crate::format::{crc, first_data_page};
use crate::io::crash::CrashVfs;
use crate::io::{OpenMode, Vfs};
use crate::schema::desc::StoredType;
use crate::schema::layout::Layout;
use crate::schema::registry::Registry;
use crate::store::alloc::FreeSpace;
use crate::translate::swizzle::{AddrMap, Direction, convert_block};
use crate::wal::backward;
use crate::wal::header::{LogHeader, RECORDS_START};
use crate::wal::record::record_len;
use crate::wal::scan::{self, CHUNK, ScanEnd};
use std::ops::ControlFlow;
use std::path::Path;

/// The page size a code stands for.
fn page_size(code: u8) -> usize {
    match code {
        1 => 8192,
        2 => 16384,
        _ => 4096,
    }
}

/// `(page size, reseal, rest)` of an input with the two-byte prefix.
fn prefix(data: &[u8]) -> (usize, bool, &[u8]) {
    let ps = page_size(data.first().copied().unwrap_or(0));
    let reseal = data.get(1).is_some_and(|f| f & 1 == 1);
    (ps, reseal, data.get(2..).unwrap_or(&[]))
}

/// The page size a decoder target's input asks for.
pub(super) fn page_size_of(data: &[u8]) -> usize {
    prefix(data).0
}

/// A 512-byte slot from the start of `data` (zero-padded), resealed when
/// byte 512 of the input has bit 0 set.
fn slot(data: &[u8]) -> [u8; SLOT_SIZE] {
    let mut s = [0u8; SLOT_SIZE];
    let n = data.len().min(SLOT_SIZE);
    s[..n].copy_from_slice(&data[..n]);
    if data.get(SLOT_SIZE).is_some_and(|f| f & 1 == 1) {
        let c = crc(&s[..SLOT_SIZE - 4]);
        s[SLOT_SIZE - 4..].copy_from_slice(&c.to_le_bytes());
    }
    s
}

/// The superblock: a slot decodes, or says what is wrong; what decodes
/// encodes back to the same superblock; the choice between two copies is
/// one of them.
pub fn superblock(data: &[u8]) {
    let s = slot(data);
    let _ = Superblock::decode(data);
    let got = Superblock::decode(&s);
    if let Ok(sb) = &got {
        assert_eq!(Superblock::decode(&sb.encode()).as_ref(), Ok(sb));
    }
    let other = Superblock::decode(data.get(SLOT_SIZE + 1..).unwrap_or(&[]));
    if let Ok((sb, copy)) = crate::format::superblock::choose(got.clone(), other.clone()) {
        let picked = if copy == 0 { got } else { other };
        assert_eq!(picked, Ok(sb));
    }
}

/// The log header, as the superblock.
pub fn log_header(data: &[u8]) {
    let s = slot(data);
    let _ = LogHeader::decode(data);
    if let Ok(h) = LogHeader::decode(&s) {
        assert_eq!(LogHeader::decode(&h.encode()), Ok(h));
    }
}

/// Makes the checksum of every record of `records` (a log's bytes from
/// [`RECORDS_START`], the first at `base`) valid, up to the first whose
/// header is impossible.
pub fn reseal_records(records: &mut [u8], base: u64, page_size: usize) {
    let mut at = 0;
    while let Some(n) = records
        .get(at..)
        .and_then(|b| record_len(b, page_size).ok())
    {
        crate::wal::record::seal(&mut records[at..at + n], base.wrapping_add(at as u64));
        at += n;
    }
}

/// What a scan saw: each run's LSN and records, and how the log ended.
type Scanned = (Vec<(u64, usize)>, ScanEnd);

/// Recovery's scan of a log: input is the page-size code, flags (bit 0
/// reseal; the rest pick a small chunk size), the base LSN (u64), then the
/// records. The log is scanned whole and in small chunks (records, and the
/// search for evidence of damage, straddling chunk boundaries): both must
/// hand over the same records and find the same end, and every record
/// handed over must decode.
pub fn log_records(data: &[u8]) {
    let (ps, reseal, rest) = prefix(data);
    let flags = data.get(1).copied().unwrap_or(0);
    // The scan's base LSN comes from a decoded log header, which refuses
    // one above `MAX_LSN` (`wal/header.rs`): the target draws it likewise.
    let base =
        crate::format::bytes::get_u64(rest, 0).unwrap_or(0) % (crate::wal::header::MAX_LSN + 1);
    let mut file = vec![0u8; RECORDS_START as usize];
    file.extend_from_slice(rest.get(8..).unwrap_or(&[]));
    if reseal {
        reseal_records(&mut file[RECORDS_START as usize..], base, ps);
    }
    let vfs = CrashVfs::new();
    let path = Path::new("/log");
    let f = match vfs
        .open(path, OpenMode::CreateNew)
        .and_then(|f| f.write_all_at(&file, 0).map(|()| f))
    {
        Ok(f) => f,
        Err(e) => panic!("the in-memory file system refused a write: {e}"),
    };
    let run = |chunk: usize| -> Option<Scanned> {
        let mut runs = Vec::new();
        let end = scan::scan_in_chunks(&*f, base, base, ps, chunk, &mut |lsn, bytes| {
            let mut n = 0;
            for r in scan::records(lsn, bytes, ps) {
                if let Err(e) = r {
                    panic!("a record the scan accepted at run LSN {lsn} does not decode: {e}");
                }
                n += 1;
            }
            runs.push((lsn, n));
            ControlFlow::Continue(())
        })
        .ok()?;
        Some((runs, end))
    };
    let whole = run(CHUNK);
    let small = run(usize::from(flags >> 1) * 13 + 16);
    if let (Some((a, ea)), Some((b, eb))) = (whole, small) {
        assert_eq!(ea, eb, "the scan's end depends on its chunk size");
        let count = |v: &[(u64, usize)]| v.iter().map(|r| r.1).sum::<usize>();
        assert_eq!(
            count(&a),
            count(&b),
            "the records handed over depend on the chunk size"
        );
        assert_eq!(count(&a) as u64, ea.records);
        // Read backward from the end the forward scan found, the same
        // records come back, newest first.
        let mut back = 0u64;
        let walked = backward::scan_backward(&*f, base, base, ea.end_lsn, ps, &mut |_, _| {
            back += 1;
            ControlFlow::Continue(())
        });
        match walked {
            Ok(Ok(n)) => assert_eq!((n, back), (ea.records, ea.records)),
            Ok(Err(bad)) => panic!("a record the forward scan accepted is bad backward: {bad:?}"),
            Err(_) => {}
        }
    }
}

/// A block: input is the page-size code, flags (bit 0 reseal), then the
/// block's bytes (as many whole pages as there are, at least one,
/// zero-padded). Its checksum is checked as the store checks it; a data
/// block's object map is walked, and every object must lie inside the
/// object area, in order.
pub fn page(data: &[u8]) {
    let (ps, reseal, rest) = prefix(data);
    let pages = (rest.len() / ps).max(1);
    let mut block = vec![0u8; pages * ps];
    let n = rest.len().min(block.len());
    block[..n].copy_from_slice(&rest[..n]);
    let Some(h) = PageHeader::read(&block) else {
        panic!("a block of {} bytes has no header", block.len());
    };
    if reseal {
        page::seal(&mut block, h.lsn);
    }
    let run = h.run_len;
    let Ok(h) = page::verify(&block, h.page_no, run) else {
        // Checked whatever the checksum says: the walk is what swizzling,
        // deep verification and inspection do with a block they are given.
        walk_objects(&block, h.used as usize);
        return;
    };
    assert_eq!(page::checksum_with_lsn(&block, h.lsn), h.checksum);
    if h.kind == BlockKind::Data as u8 {
        walk_objects(&block, h.used as usize);
    }
}

/// Walks a block's object map, checking each entry lies inside it.
fn walk_objects(block: &[u8], used: usize) {
    let mut last_end = HEADER_SIZE;
    let mut n = 0usize;
    for e in objects::walk(block, used) {
        let Ok(e) = e else { break };
        assert!(e.header == last_end && e.body == e.header + OBJECT_HEADER);
        assert!(e.end() <= used && used <= block.len() && e.type_id != 0);
        last_end = e.end();
        n += 1;
    }
    assert!(n <= block.len() / OBJECT_HEADER);
}

/// A schema catalog entry (a type descriptor): what decodes encodes to
/// bytes that decode and encode to themselves (the same type, for a
/// version-2 entry: a version-1 one is written back as version 2, its
/// pointers of unknown nullability as nullable), and its swizzling layout
/// is computed, at each page size.
pub fn catalog_entry(data: &[u8]) {
    let Ok(t) = StoredType::decode(data) else {
        return;
    };
    let bytes = t.encode();
    let again = StoredType::decode(&bytes);
    assert_eq!(again.as_ref().map(StoredType::encode), Ok(bytes));
    if data.first() == Some(&2) {
        assert_eq!(again, Ok(t.clone()));
    }
    for ps in [4096, 8192, 16384] {
        let l = Layout::of(&t, ps);
        assert!(l.slots.windows(2).all(|w| w[0].offset <= w[1].offset));
    }
}

/// The schema catalog blob: its entries, decoded into the registry a
/// database opens with (descriptors and layouts by type id).
pub fn catalog_blob(data: &[u8]) {
    let Ok(entries) = meta::decode_catalog(data) else {
        return;
    };
    assert_eq!(
        meta::decode_catalog(&meta::encode_catalog(&entries)),
        Ok(entries.clone())
    );
    for ps in [4096, 16384] {
        if let Ok(r) = Registry::load(ps, &entries) {
            let _ = r.all();
        }
    }
}

/// The free-space map blob: its image decodes, encodes back, and loads
/// into the allocator's map (whose blocks are then listed, a bounded
/// number of them).
pub fn free_space_map(data: &[u8]) {
    let (ps, _, rest) = prefix(data);
    let Ok(img) = FsmImage::decode(rest) else {
        return;
    };
    assert_eq!(FsmImage::decode(&img.encode()).as_ref(), Ok(&img));
    let Ok(fs) = FreeSpace::from_image(&img, first_data_page(ps)) else {
        return;
    };
    for (h, len) in fs.blocks().take(4096) {
        assert_eq!(fs.block_of(h), Some((h, len)));
    }
    let _ = fs.image();
}

/// The root directory blob: decodes, and encodes back.
pub fn root_directory(data: &[u8]) {
    if let Ok(r) = meta::decode_roots(data) {
        assert_eq!(meta::decode_roots(&meta::encode_roots(&r)), Ok(r));
    }
}

/// An address mapping that tags a persistent address to make a "virtual"
/// one, refusing what it cannot invert.
struct Tagging;

const TAG: u64 = 1 << 62;

impl AddrMap for Tagging {
    /// A home, so that the round trip covers the stored encoding too.
    fn home(&self) -> crate::format::home::Home {
        crate::format::home::Home::pick(7)
    }
    fn to_va(&self, paddr: u64, pages: u32) -> Result<u64, String> {
        if paddr & TAG != 0 || pages == 0 {
            return Err(format!("{paddr:#x} ({pages} pages) cannot be mapped"));
        }
        Ok(paddr | TAG)
    }
    fn to_paddr(&self, va: u64) -> Result<u64, String> {
        if va & TAG == 0 {
            return Err(format!("{va:#x} is no virtual address"));
        }
        Ok(va & !TAG)
    }
}

/// Swizzling a block with a catalog: input is the page-size code, flags,
/// the catalog blob's length (u32) and payload, then the block. The block
/// is swizzled with the types the catalog decodes to, as the fault handler
/// does; when that succeeds and no two pointer slots of a type overlap,
/// unswizzling must give back the block's bytes.
pub fn swizzle(data: &[u8]) {
    let (ps, _, rest) = prefix(data);
    let cat_len = get_u32(rest, 0).unwrap_or(0) as usize;
    let rest = rest.get(4..).unwrap_or(&[]);
    let (cat, block_bytes) = rest.split_at(cat_len.min(rest.len()));
    let Ok(entries) = meta::decode_catalog(cat) else {
        return;
    };
    let Ok(registry) = Registry::load(ps, &entries) else {
        return;
    };
    let types = registry.snapshot();
    let pages = (block_bytes.len() / ps).max(1);
    let mut block = vec![0u8; pages * ps];
    let n = block_bytes.len().min(block.len());
    block[..n].copy_from_slice(&block_bytes[..n]);
    let before = block.clone();
    if convert_block(&mut block, ps, &types, &Tagging, Direction::Swizzle).is_err() {
        return;
    }
    // Slots that overlap, or lie past their object (or array element),
    // convert some bytes twice: only a catalog written to deceive has them.
    let disjoint = types.iter().flatten().all(|t| {
        let s = &t.layout.slots;
        s.windows(2)
            .all(|w| u64::from(w[0].offset) + 8 <= u64::from(w[1].offset))
            && s.last()
                .is_none_or(|l| u64::from(l.offset) + 8 <= u64::from(t.layout.size))
    });
    if disjoint {
        let back = convert_block(&mut block, ps, &types, &Tagging, Direction::Unswizzle);
        assert_eq!(back, Ok(()), "a swizzled block does not unswizzle");
        assert!(
            block == before,
            "swizzling then unswizzling changed the block"
        );
    }
}
