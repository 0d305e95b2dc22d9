//! The crashed database the recovery benchmark opens: installed pages and a
//! log of committed transactions after the checkpoint, left as a crash
//! leaves them, built without syncs and synced once.

use super::RecoveryConfig;
use crate::storage::{Result, io_err};
use amber::internals::format::page::{self, BlockKind, HEADER_SIZE};
use amber::internals::io::crash::SplitMix;
use amber::internals::io::real::RealVfs;
use amber::internals::io::{IoFile, OpenMode, Vfs};
use amber::internals::store::{Store, StoreOptions, StoreTx, wal_path};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The real file system with `fdatasync` skipped, for building the
/// benchmark's files quickly: the bytes written are the same as with syncs,
/// and the finished files are synced once.
#[derive(Debug)]
struct NoSyncVfs;

#[derive(Debug)]
struct NoSyncFile(Box<dyn IoFile>);

impl Vfs for NoSyncVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn IoFile>> {
        Ok(Box::new(NoSyncFile(RealVfs.open(path, mode)?)))
    }

    fn exists(&self, path: &Path) -> bool {
        RealVfs.exists(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        RealVfs.remove(path)
    }
}

impl IoFile for NoSyncFile {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, off)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write_all_at(buf, off)
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        self.0.size()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        self.0.try_lock_exclusive()
    }

    fn unlock(&self) -> io::Result<()> {
        self.0.unlock()
    }
}

/// The workload's shape, counted while building it.
#[derive(Debug, Default)]
pub(crate) struct Built {
    pub(crate) transactions: u64,
    pub(crate) ranges: u64,
    pub(crate) range_bytes: u64,
    /// Whole page images logged.
    pub(crate) pages: u64,
}

/// Builds a database of `cfg.pages` installed pages and a log of about
/// `cfg.wal_mib` MiB of committed transactions after its checkpoint, then
/// leaves both as a crash would (no close).
pub(crate) fn build(cfg: &RecoveryConfig, db: &Path) -> Result<Built> {
    build_with(cfg, db, |tx, heads, ps, rng, built| {
        // A few ranges (1 to 5) of 20 to 200 bytes, anywhere after the page
        // header of any page.
        let mut buf = [0u8; 200];
        for _ in 0..1 + rng.below(5) {
            let len = 20 + rng.below(181) as usize;
            let off = HEADER_SIZE as u64 + rng.below((ps - HEADER_SIZE - len + 1) as u64);
            let page = heads[rng.below(heads.len() as u64) as usize];
            for b in &mut buf[..len] {
                *b = rng.next_u64() as u8;
            }
            tx.write(page * ps as u64 + off, &buf[..len])?;
            built.ranges += 1;
            built.range_bytes += len as u64;
        }
        Ok(())
    })
}

/// As [`build`], with whole-page logging's records: each transaction logs
/// the whole images (`StoreTx::write_page`) of 1 to 8 of the pages, each
/// its formatted header and random bytes after it, as a WPL client ships
/// them (docs/design.md §11.7).
pub(crate) fn build_pages(cfg: &RecoveryConfig, db: &Path) -> Result<Built> {
    build_with(cfg, db, |tx, heads, ps, rng, built| {
        let mut img = vec![0u8; ps];
        for _ in 0..1 + rng.below(8) {
            let page = heads[rng.below(heads.len() as u64) as usize];
            page::format(&mut img, BlockKind::Raw, page, 1);
            for b in &mut img[HEADER_SIZE..] {
                *b = rng.next_u64() as u8;
            }
            tx.write_page(page, &img)?;
            built.pages += 1;
        }
        Ok(())
    })
}

fn build_with(
    cfg: &RecoveryConfig,
    db: &Path,
    mut fill: impl FnMut(
        &mut StoreTx<'_>,
        &[u64],
        usize,
        &mut SplitMix,
        &mut Built,
    ) -> amber::Result<()>,
) -> Result<Built> {
    let opts = StoreOptions {
        checkpoint_log_bytes: u64::MAX,
        checkpoint_pending_bytes: usize::MAX,
        checkpoint_on_close: false,
        ..StoreOptions::default()
    };
    let store = Store::create(Arc::new(NoSyncVfs), db, opts)?;
    let ps = store.page_size();
    let mut heads = Vec::with_capacity(cfg.pages as usize);
    while (heads.len() as u64) < cfg.pages {
        let mut tx = store.begin()?;
        for _ in 0..(cfg.pages - heads.len() as u64).min(512) {
            heads.push(tx.alloc(1, BlockKind::Raw)?);
        }
        tx.commit()?;
    }
    // Install the formatted pages: the log now starts empty.
    store.checkpoint()?;
    let target = cfg.wal_mib << 20;
    let mut rng = SplitMix::new(cfg.seed);
    let mut built = Built::default();
    let mut logged = 0u64;
    while logged < target {
        let mut tx = store.begin()?;
        fill(&mut tx, &heads, ps, &mut rng, &mut built)?;
        logged += tx.commit()?.log_bytes;
        built.transactions += 1;
    }
    // No close: the log stays as a crash leaves it. Then make the files
    // durable once (the build skipped every sync).
    drop(store);
    for p in [db.to_path_buf(), wal_path(db)] {
        File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(io_err("sync", &p))?;
    }
    Ok(built)
}
