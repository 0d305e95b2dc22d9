//! The seed corpus: small real databases of known content ([`Content`]),
//! written through the public API at 4, 8 and 16 KiB pages, and the pieces
//! of them each decoder target starts from (superblock and log header
//! slots, log records, blocks, catalog entries and blobs).

use super::Content;
use super::files::Bundle;
use crate::format::meta::{self, MetaKind};
use crate::format::page::{self, PageHeader};
use crate::format::superblock::SLOT_OFFSETS;
use crate::io::crash::CrashVfs;
use crate::io::{OpenMode, Vfs};
use crate::wal::header::{LogHeader, RECORDS_START};
use crate::{Db, Options, Result};
use std::path::Path;
use std::sync::Arc;

/// The database's path inside the in-memory file system.
pub fn db_path() -> &'static Path {
    Path::new("/fuzz.amber")
}

/// Options of the seed databases and of the targets' opens.
pub fn options(page_size: usize) -> Options {
    let mut o = Options {
        page_size,
        ..Options::default()
    };
    // Recovery seeds keep their log: no checkpoint until asked.
    o.store.checkpoint_log_bytes = u64::MAX;
    o.store.checkpoint_pending_bytes = usize::MAX;
    // A dropped database keeps its reservation of address space, made
    // inaccessible, for the life of the process (`vm/mod.rs`): at the
    // default 64 GiB, a fuzzing process can open some 2,000 databases, and
    // every open after that fails for want of address space, whatever the
    // input. 64 MiB (200 times a seed) allows two million.
    o.reserve_bytes = 64 << 20;
    o
}

/// Opens the database at [`db_path`] of `vfs`. The reservation of address
/// space failing is no answer to the input but the fuzzing process running
/// out of it (`options`): it panics, so that a run cannot go on reading
/// nothing back.
pub fn open(vfs: Arc<dyn Vfs>, opts: Options) -> Result<Db> {
    match Db::open_with(vfs, db_path(), opts) {
        Err(crate::Error::Vm {
            what,
            source: Some(e),
        }) => panic!("the fuzzing process cannot open a database: {what}: {e}"),
        r => r,
    }
}

/// The files of a seed database of `page_size`-byte pages: cleanly closed
/// (its log empty) or, with `crashed`, as a crash after its last commit
/// leaves them (the commits since the checkpoint in the log, for recovery).
pub fn database<C: Content>(page_size: usize, crashed: bool) -> Result<Bundle> {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let mut db = Db::create_with(v, db_path(), options(page_size))?;
    C::fill(&mut db, if crashed { C::REWRITES } else { 1 })?;
    let wal = crate::store::wal_path(db_path());
    if crashed {
        // What the disk holds: every commit was synced, nothing checkpointed.
        let bundle = Bundle {
            page_file: vfs.durable_image(db_path()).unwrap_or_default(),
            log: vfs.durable_image(&wal).unwrap_or_default(),
            reseal: false,
        };
        drop(db);
        return Ok(bundle);
    }
    db.close()?;
    let read = |p: &Path| -> Result<Vec<u8>> {
        let f = vfs
            .open(p, OpenMode::ReadOnly)
            .map_err(|e| crate::Error::io("read seed", p, e))?;
        let n = f.size().map_err(|e| crate::Error::io("read seed", p, e))?;
        let mut b = vec![0u8; n as usize];
        f.read_exact_at(&mut b, 0)
            .map_err(|e| crate::Error::io("read seed", p, e))?;
        Ok(b)
    };
    Ok(Bundle {
        page_file: read(db_path())?,
        log: read(&wal)?,
        reseal: false,
    })
}

/// The page sizes of the seeds.
pub const PAGE_SIZES: [usize; 3] = [4096, 8192, 16384];

/// Every seed database: each page size, closed and crashed; and the
/// crashed one of 4 KiB pages with its log as log format 2 wrote it
/// ([`as_version_2`]), for recovery of an older build's log.
pub fn databases<C: Content>() -> Result<Vec<Bundle>> {
    let mut out = Vec::new();
    for ps in PAGE_SIZES {
        for crashed in [false, true] {
            out.push(database::<C>(ps, crashed)?);
        }
    }
    let crashed = database::<C>(PAGE_SIZES[0], true)?;
    out.push(as_version_2(&crashed).ok_or_else(|| {
        crate::Error::internal("the crashed seed's log does not decode as it was written")
    })?);
    Ok(out)
}

/// `b` with its log as log format 2 writes the same records: each ranges
/// record as one range record (kind 1) per range, everything else as it
/// is, at the LSNs that follow, each commit record's durable point the end
/// of the commit record before it (a seed syncs every commit), and the
/// header copies of version 2. `None` if the log does not decode.
pub fn as_version_2(b: &Bundle) -> Option<Bundle> {
    use crate::wal::header::VERSION_SINGLE_RANGES;
    use crate::wal::ranges;
    use crate::wal::record::{Record, decode};
    let ps = b.page_size();
    let (h, _) = LogHeader::decode_versioned(b.log.get(..512)?).ok()?;
    let start = RECORDS_START as usize;
    let mut out = b.log.get(..start)?.to_vec();
    for o in crate::wal::header::SLOT_OFFSETS {
        let slot = out.get_mut(o as usize..o as usize + 512)?;
        slot[8..12].copy_from_slice(&VERSION_SINGLE_RANGES.to_le_bytes());
        let c = crate::format::crc(&slot[..508]);
        slot[508..].copy_from_slice(&c.to_le_bytes());
    }
    let (mut at, mut durable) = (start, h.base_lsn);
    let lsn = |out: &Vec<u8>| h.base_lsn + (out.len() - start) as u64;
    while at < b.log.len() {
        let Ok((r, n)) = decode(&b.log[at..], h.base_lsn + (at - start) as u64, ps) else {
            break;
        };
        match r {
            Record::Ranges {
                txid,
                addr,
                before,
                body,
            } => {
                for g in ranges::iter(addr, before, body) {
                    let one = Record::Range {
                        txid,
                        addr: g.addr,
                        after: g.after,
                        before: g.before,
                    };
                    one.encode(lsn(&out), &mut out);
                }
            }
            Record::Commit { txid, synced_delta } => {
                let here = lsn(&out);
                let delta = if synced_delta == u32::MAX {
                    u32::MAX
                } else {
                    u32::try_from(here - durable).ok()?
                };
                Record::Commit {
                    txid,
                    synced_delta: delta,
                }
                .encode(here, &mut out);
                durable = lsn(&out);
            }
            other => other.encode(lsn(&out), &mut out),
        }
        at += n;
    }
    // Nothing after the last record: what follows it in the source (a
    // torn tail, bytes of older epochs) belongs to other positions.
    Some(Bundle {
        page_file: b.page_file.clone(),
        log: out,
        reseal: b.reseal,
    })
}

/// [`databases`], built once per process and kept (for the targets that
/// open a seed database per input). A static in a generic function is
/// shared by every instance: a process fuzzes one `Content`.
pub fn cached<C: Content>() -> &'static [Bundle] {
    static DBS: std::sync::OnceLock<Vec<Bundle>> = std::sync::OnceLock::new();
    DBS.get_or_init(|| match databases::<C>() {
        Ok(d) => d,
        Err(e) => panic!("the seed databases cannot be written: {e}"),
    })
}

/// Seeds of each decoder target, cut from the seed databases, by target
/// name (as `DECODER_TARGETS` names them).
pub fn decoder_seeds(dbs: &[Bundle]) -> Vec<(&'static str, Vec<u8>)> {
    let mut out: Vec<(&'static str, Vec<u8>)> = every_kind()
        .map(|v| ("log_records", v))
        .into_iter()
        .collect();
    for b in dbs {
        let pf = &b.page_file;
        for off in SLOT_OFFSETS {
            if let Some(s) = pf.get(off as usize..off as usize + 512) {
                out.push(("superblock", s.to_vec()));
            }
            if let Some(s) = b.log.get(off as usize..off as usize + 512) {
                out.push(("log_header", s.to_vec()));
            }
        }
        let ps_code = page_size_code(b.page_size());
        // The log: its records as the record-stream target takes them.
        if let Some((h, _)) = b
            .log
            .get(..512)
            .and_then(|s| LogHeader::decode_versioned(s).ok())
            && b.log.len() > RECORDS_START as usize
        {
            let mut v = vec![ps_code, 0];
            v.extend_from_slice(&h.base_lsn.to_le_bytes());
            v.extend_from_slice(&b.log[RECORDS_START as usize..]);
            out.push(("log_records", v));
        }
        // Every block, with its page size, and the metadata blobs' payloads.
        let ps = b.page_size();
        let mut at = crate::format::first_data_page(ps) as usize * ps;
        while at + ps <= pf.len() {
            let Some(h) = PageHeader::read(&pf[at..]) else {
                break;
            };
            let run = (h.run_len.max(1) as usize).min((pf.len() - at) / ps);
            let block = &pf[at..at + run * ps];
            let mut v = vec![ps_code, 0];
            v.extend_from_slice(block);
            out.push(("page", v.clone()));
            if h.kind == page::BlockKind::Data as u8 {
                out.push(("swizzle", swizzle_seed(b, block)));
            }
            for (kind, target) in [
                (MetaKind::FreeSpace, "free_space_map"),
                (MetaKind::Roots, "root_directory"),
                (MetaKind::Catalog, "catalog_blob"),
            ] {
                if let Ok(p) = meta::read_blob(block, kind) {
                    out.push((target, p.to_vec()));
                    if kind == MetaKind::Catalog
                        && let Ok(entries) = meta::decode_catalog(p)
                    {
                        for (_, d) in entries {
                            out.push(("catalog_entry", d));
                        }
                    }
                }
            }
            at += run * ps;
        }
    }
    out
}

/// A log_records input holding a record of every kind, with and without
/// before-images (of 4 KiB pages, from LSN 1): version 2's range records
/// and the kinds the seed databases never write (before-images are logged
/// only when a transaction outgrows memory) reach the decoders too.
fn every_kind() -> Option<Vec<u8>> {
    use crate::wal::ranges::Body;
    use crate::wal::record::Record;
    let image = [0x5au8; 4096];
    let mut after = Body::new(8232, b"after", None)?;
    let mut both = Body::new(8232, b"new", Some(b"old"))?;
    if !(after.push(8300, b"more", None) && both.push(8240, b"N", Some(b"O"))) {
        return None;
    }
    let records = [
        Record::Range {
            txid: 1,
            addr: 8232,
            after: b"range",
            before: None,
        },
        Record::Range {
            txid: 1,
            addr: 8232,
            after: b"new",
            before: Some(b"old"),
        },
        Record::Ranges {
            txid: 1,
            addr: after.addr,
            before: false,
            body: &after.bytes,
        },
        Record::Ranges {
            txid: 1,
            addr: both.addr,
            before: true,
            body: &both.bytes,
        },
        Record::Page {
            txid: 1,
            page: 2,
            image: &image,
        },
        Record::Alloc {
            txid: 1,
            page: 3,
            count: 1,
            kind: 1,
        },
        Record::Free {
            txid: 1,
            page: 3,
            count: 1,
        },
        Record::Root {
            txid: 1,
            name: b"root",
            addr: 8232,
            type_id: 1,
        },
        Record::Type {
            txid: 1,
            type_id: 1,
            desc: b"descriptor",
        },
        Record::Commit {
            txid: 1,
            synced_delta: 0,
        },
        Record::Intent {
            entries: &[2, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4],
        },
    ];
    let mut v = vec![page_size_code(4096), 0];
    v.extend_from_slice(&1u64.to_le_bytes());
    let start = v.len();
    for r in records {
        r.encode(1 + (v.len() - start) as u64, &mut v);
    }
    Some(v)
}

/// The page-size code the decoder targets take in their first byte.
pub fn page_size_code(ps: usize) -> u8 {
    match ps {
        8192 => 1,
        16384 => 2,
        _ => 0,
    }
}

/// A swizzle target's input: the page size, the catalog blob's payload
/// (length-prefixed), then the block.
fn swizzle_seed(b: &Bundle, block: &[u8]) -> Vec<u8> {
    let catalog = b.catalog().unwrap_or_default();
    let mut v = vec![page_size_code(b.page_size()), 0];
    v.extend_from_slice(&(catalog.len() as u32).to_le_bytes());
    v.extend_from_slice(&catalog);
    v.extend_from_slice(block);
    v
}
