//! The whole-file targets: a database's two files, mutated, opened and read
//! back (`Db::open` and every object through `try_get`), deep-verified, and
//! recovered (and collected and migrated, `rewrite.rs`).
//!
//! A target's input is a [`Bundle`]: a flags byte, the page file's length,
//! the page file, then the log. With [`Bundle::reseal`] set, every
//! checksum the mutation broke is made valid again before the files are
//! opened (the superblock and log header copies, every block whose header
//! still says where it ends, every record of the log up to the first whose
//! header is impossible), so that the mutation reaches the decoders behind
//! the checksums instead of stopping at them: the cheap half of a
//! structure-aware mutator.
//!
//! What is checked of what is read back depends on it. Without resealing,
//! every byte the mutation changed is covered by a checksum that now fails
//! (or lies where nothing reads), so every node read back must be one that
//! was committed: its bytes agree with its id and version (`seeds.rs`).
//! With resealing, a mutated block is indistinguishable from one written
//! that way ("checksums catch damage, not a page written to deceive",
//! docs/design.md §4.1), and only the absence of panics, aborts, hangs and
//! unbounded allocations is checked.

use super::Content;
use super::seeds;
use crate::format::bytes::get_u32;
use crate::format::page::{self, PageHeader};
use crate::format::slot::SLOT_SIZE;
use crate::format::superblock::SLOT_OFFSETS;
use crate::format::{check_page_size, first_data_page};
use crate::io::crash::CrashVfs;
use crate::io::{OpenMode, Vfs};
use crate::store::{Store, StoreOptions, wal_path};
use crate::wal::header::{LogHeader, RECORDS_START};
use crate::wal::record::{Record, decode_verified, record_len};
use std::sync::Arc;

/// A database's two files, as a whole-file target takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The page file.
    pub page_file: Vec<u8>,
    /// The log.
    pub log: Vec<u8>,
    /// Whether checksums are made valid again before opening.
    pub reseal: bool,
}

/// The most fresh blocks a whole-file target lets a log allocate (64 MiB,
/// 200 times a seed): recovery holds a fresh block's whole image, as the
/// transaction that wrote it held it, so a log allocating gigabytes
/// (within the format's 4 GiB per block) makes it hold gigabytes — a cap,
/// not a bound by the input (docs/design.md §9), on which the fuzzers would
/// stop again and again. Such inputs are skipped.
pub const FRESH_MAX: u64 = 64 << 20;

/// Bytes before the page file in an encoded bundle.
const BUNDLE_HEADER: usize = 5;

impl Bundle {
    /// The target input: flags (bit 0: reseal), page file length u32, page
    /// file, log.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(BUNDLE_HEADER + self.page_file.len() + self.log.len());
        v.push(u8::from(self.reseal));
        v.extend_from_slice(&(self.page_file.len() as u32).to_le_bytes());
        v.extend_from_slice(&self.page_file);
        v.extend_from_slice(&self.log);
        v
    }

    /// Splits a target input (any bytes: a length past the end takes what
    /// there is).
    pub fn decode(data: &[u8]) -> Bundle {
        let reseal = data.first().is_some_and(|f| f & 1 == 1);
        let len = get_u32(data, 1).unwrap_or(0) as usize;
        let rest = data.get(BUNDLE_HEADER..).unwrap_or(&[]);
        let (pf, log) = rest.split_at(len.min(rest.len()));
        Bundle {
            page_file: pf.to_vec(),
            log: log.to_vec(),
            reseal,
        }
    }

    /// [`decode`](Self::decode), unless the log allocates more than
    /// [`FRESH_MAX`] of fresh blocks.
    pub fn within_cap(data: &[u8]) -> Option<Bundle> {
        let b = Bundle::decode(data);
        (b.fresh_bytes() <= FRESH_MAX).then_some(b)
    }

    /// The page size its superblock (copy 0, else 1) states, or 4096.
    pub fn page_size(&self) -> usize {
        SLOT_OFFSETS
            .iter()
            .filter_map(|&o| get_u32(&self.page_file, o as usize + 12))
            .map(|p| p as usize)
            .find(|&p| check_page_size(p).is_ok())
            .unwrap_or(4096)
    }

    /// The schema catalog blob's payload, if the current superblock leads
    /// to one.
    pub fn catalog(&self) -> Option<Vec<u8>> {
        use crate::format::meta::{MetaKind, read_blob};
        use crate::format::superblock::{Superblock, choose};
        let slot = |o: usize| Superblock::decode(self.page_file.get(o..).unwrap_or(&[]));
        let (sb, _) = choose(slot(0), slot(4096)).ok()?;
        let ps = sb.page_size as usize;
        let at = usize::try_from(sb.catalog_page).ok()?.checked_mul(ps)?;
        let first = self.page_file.get(at..)?;
        let run = PageHeader::read(first)?.run_len as usize;
        let block = first.get(..run.checked_mul(ps)?)?;
        read_blob(block, MetaKind::Catalog).ok().map(<[u8]>::to_vec)
    }

    /// The bytes of the fresh blocks its log's allocation records ask for
    /// (those recovery would accept: no longer than the largest block),
    /// checksums or not: what recovery would hold for them.
    pub fn fresh_bytes(&self) -> u64 {
        let ps = self.page_size();
        let mut at = RECORDS_START as usize;
        let mut sum = 0u64;
        while let Some(n) = self.log.get(at..).and_then(|b| record_len(b, ps).ok()) {
            if let Ok((Record::Alloc { count, .. }, _)) = decode_verified(&self.log[at..], n)
                && count <= page::max_run_len(ps)
            {
                sum = sum.saturating_add(u64::from(count) * ps as u64);
            }
            at += n;
        }
        sum
    }

    /// Makes every checksum valid again (see the module's comment).
    pub fn reseal_checksums(&mut self) {
        let ps = self.page_size();
        for o in SLOT_OFFSETS {
            reseal_slot(&mut self.page_file, o as usize);
            reseal_slot(&mut self.log, o as usize);
        }
        let pf = &mut self.page_file;
        let mut at = first_data_page(ps) as usize * ps;
        while at + ps <= pf.len() {
            let run = PageHeader::read(&pf[at..]).map_or(1, |h| h.run_len as usize);
            let pages = if (1..=(pf.len() - at) / ps).contains(&run) {
                let lsn = get_lsn(&pf[at..]);
                page::seal(&mut pf[at..at + run * ps], lsn);
                run
            } else {
                1
            };
            at += pages * ps;
        }
        let base = [0usize, 4096]
            .iter()
            .filter_map(|&o| LogHeader::decode_versioned(self.log.get(o..)?).ok())
            .max_by_key(|(h, _)| h.generation)
            .map(|(h, _)| h.base_lsn);
        if let Some(base) = base {
            let mut at = RECORDS_START as usize;
            while let Some(n) = self.log.get(at..).and_then(|b| record_len(b, ps).ok()) {
                let lsn = base.wrapping_add((at - RECORDS_START as usize) as u64);
                crate::wal::record::seal(&mut self.log[at..at + n], lsn);
                at += n;
            }
        }
    }

    /// The files in an in-memory file system, resealed if asked.
    pub fn materialize(&self) -> CrashVfs {
        let mut b = self.clone();
        if b.reseal {
            b.reseal_checksums();
        }
        let vfs = CrashVfs::new();
        for (path, bytes) in [
            (seeds::db_path().to_path_buf(), &b.page_file),
            (wal_path(seeds::db_path()), &b.log),
        ] {
            let written = vfs
                .open(&path, OpenMode::CreateNew)
                .and_then(|f| f.write_all_at(bytes, 0).and_then(|()| f.sync_data()));
            if let Err(e) = written {
                panic!("the in-memory file system refused a write: {e}");
            }
        }
        vfs
    }
}

fn get_lsn(block: &[u8]) -> u64 {
    crate::format::bytes::get_u64(block, 24).unwrap_or(0)
}

/// Reseals the superblock or log header slot at `at`, if it is there.
fn reseal_slot(file: &mut [u8], at: usize) {
    if let Some(s) = file.get_mut(at..at + SLOT_SIZE) {
        let c = crate::format::crc(&s[..SLOT_SIZE - 4]);
        s[SLOT_SIZE - 4..].copy_from_slice(&c.to_le_bytes());
    }
}

/// Opens the files of `data` (a [`Bundle`]) as a database and has `C`
/// read every root and every object back with `try_get` and its kin.
/// Contract: no panic, no abort, bounded time and memory; without
/// resealing, every object read back is one that was committed
/// ([`Content::read`] checks it).
pub fn open_and_read<C: Content>(data: &[u8]) {
    let Some(bundle) = Bundle::within_cap(data) else {
        return;
    };
    let vfs: Arc<dyn Vfs> = Arc::new(bundle.materialize());
    let opts = seeds::options(bundle.page_size());
    if let Ok(db) = seeds::open(vfs, opts) {
        C::read(&db, !bundle.reseal);
    }
}

/// Deep verification (and the plain verify before it, as `amber verify
/// --deep` runs them) of the files of `data`, then every block decoded as
/// `amber inspect` shows it. Contract: no panic, no abort,
/// bounded time and memory; a report or an error.
pub fn verify_deep(data: &[u8]) {
    let Some(bundle) = Bundle::within_cap(data) else {
        return;
    };
    let vfs: Arc<dyn Vfs> = Arc::new(bundle.materialize());
    let _ = crate::store::verify::verify(vfs.clone(), seeds::db_path());
    let opts = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    if let Ok(store) = Store::open(vfs, seeds::db_path(), opts) {
        let _ = crate::inspect::deep::verified_map(&store);
        // And what `amber inspect` shows: every block, its objects decoded
        // field by field by the catalog.
        let inspector = crate::inspect::Inspector::of(store);
        let _ = inspector.catalog();
        for b in inspector.blocks() {
            let _ = inspector.block(b.start);
        }
    }
}

/// Recovery of the files of `data`: a writable open (recovery, then the
/// checkpoint installing what it found), then a second open, which must
/// find the same committed state (recovery is idempotent, and what a
/// checkpoint installed reads back). Contract: no panic, no abort, bounded
/// time and memory, and that agreement.
pub fn recovery(data: &[u8]) {
    let Some(bundle) = Bundle::within_cap(data) else {
        return;
    };
    let vfs = bundle.materialize();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let opts = StoreOptions::default();
    let Ok(store) = Store::open(v.clone(), seeds::db_path(), opts.clone()) else {
        return;
    };
    let first = state_of(&store);
    if store.close().is_err() {
        return;
    }
    match Store::open(v, seeds::db_path(), opts) {
        Ok(again) => {
            let second = state_of(&again);
            assert!(
                first == second,
                "a second recovery found another state:\n{first:?}\n{second:?}"
            );
        }
        Err(e) => panic!("a database recovered and checkpointed does not open again: {e}"),
    }
}

/// What a store holds, committed: roots, catalog, and each block's logical
/// bytes (or why it cannot be read).
#[derive(Debug, PartialEq, Eq)]
struct Committed {
    roots: Vec<crate::format::meta::RootEntry>,
    types: Vec<(u32, Vec<u8>)>,
    blocks: Vec<(u64, Result<Vec<u8>, String>)>,
}

fn state_of(s: &Store) -> Committed {
    let sb = s.superblock();
    let meta = [sb.fsm_page, sb.roots_page, sb.catalog_page];
    let blocks = s
        .blocks()
        .into_iter()
        .filter(|(h, _)| !meta.contains(h))
        .map(|(h, _)| {
            let img = s
                .read_block(h)
                .map(|mut b| {
                    // Physical fields: rewritten by every installation.
                    b[..4].fill(0);
                    b[24..32].fill(0);
                    b
                })
                .map_err(|e| e.to_string());
            (h, img)
        })
        .collect();
    Committed {
        roots: s.roots(),
        types: s.types(),
        blocks,
    }
}
