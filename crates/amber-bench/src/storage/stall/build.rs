//! The stall benchmark's database and its log: pages of cold objects (one
//! object per page, listed in a directory) that the reader faults in one at
//! a time, and small hot objects that the updates change until the log holds
//! the asked-for amount of committed changes not yet checkpointed.

use std::path::Path;

use amber::internals::store::wal_path;
use amber::{Db, PRef, PVec, Persistent};

use crate::rng::Rng;
use crate::storage::{BenchError, Result};

/// Words of a cold object's body: 2,408 bytes in all, more than half of a
/// 4 KiB page, so each cold object has a page of its own and touching one
/// faults exactly that page in.
const COLD_WORDS: usize = 300;

/// An object of the cold region.
#[derive(Persistent)]
#[persistent(name = "stall::Cold")]
#[repr(C)]
pub struct Cold {
    /// Its index in the directory (checked when read).
    pub value: u64,
    /// Filler.
    pub body: [u64; COLD_WORDS],
}

/// An object the updates change: 104 bytes, an update rewrites all of it.
#[derive(Persistent)]
#[persistent(name = "stall::Hot")]
#[repr(C)]
pub struct Hot {
    /// How often it was updated.
    pub value: u64,
    /// Rewritten by each update.
    pub payload: [u64; 12],
}

/// The directory of both regions.
#[derive(Persistent)]
#[persistent(name = "stall::Dirs")]
#[repr(C)]
pub struct Dirs {
    /// Every cold object, in allocation (page) order.
    pub cold: PVec<PRef<Cold>>,
    /// Every hot object.
    pub hot: PVec<PRef<Hot>>,
}

/// Objects allocated per transaction while building.
const BUILD_BATCH: u64 = 4096;

/// Fills the new database `db` with `cold_pages` cold objects and
/// `hot_objects` hot ones.
pub(super) fn build(db: &mut Db, cold_pages: u64, hot_objects: u64) -> Result<()> {
    let mut tx = db.begin()?;
    let dirs = tx.alloc(Dirs {
        cold: PVec::new(),
        hot: PVec::new(),
    })?;
    tx.set_root("dirs", dirs)?;
    tx.commit()?;
    let mut done = 0;
    while done < hot_objects {
        let mut tx = db.begin()?;
        for i in done..(done + BUILD_BATCH).min(hot_objects) {
            let h = tx.alloc(Hot {
                value: 0,
                payload: [i; 12],
            })?;
            tx.push(dirs, |d| &mut d.hot, h)?;
        }
        tx.commit()?;
        done += BUILD_BATCH;
    }
    let mut done = 0;
    while done < cold_pages {
        let mut tx = db.begin()?;
        for i in done..(done + BUILD_BATCH).min(cold_pages) {
            let c = tx.alloc(Cold {
                value: i,
                body: [i; COLD_WORDS],
            })?;
            tx.push(dirs, |d| &mut d.cold, c)?;
        }
        tx.commit()?;
        done += BUILD_BATCH;
    }
    Ok(())
}

/// The cold objects and the hot ones.
pub(super) type Lists = (Vec<PRef<Cold>>, Vec<PRef<Hot>>);

/// The directory's two lists (reading them faults in the directory's own
/// pages and gives every cold page a frame, so that the reader's faults
/// afterwards are one page each).
pub(super) fn lists(db: &Db) -> Result<Lists> {
    let dirs: PRef<Dirs> = db
        .root("dirs")?
        .ok_or_else(|| BenchError::new("no root \"dirs\""))?;
    let d = db.get(dirs);
    Ok((db.slice(&d.cold).to_vec(), db.slice(&d.hot).to_vec()))
}

/// Checks that every cold object has a page of its own.
pub(super) fn check_one_per_page(cold: &[PRef<Cold>], page_size: usize) -> Result<()> {
    let mut pages: Vec<u64> = cold.iter().map(|c| c.addr() / page_size as u64).collect();
    pages.sort_unstable();
    pages.dedup();
    if pages.len() != cold.len() {
        return Err(BenchError::new(format!(
            "{} cold objects share {} pages: the benchmark needs one per page (4 KiB pages)",
            cold.len(),
            pages.len()
        )));
    }
    Ok(())
}

/// The log since the last checkpoint, bytes.
pub(super) fn log_since_checkpoint(db: &Db) -> u64 {
    let s = db.stats().store;
    s.end_lsn.saturating_sub(s.checkpoint_lsn)
}

/// Commits one update transaction: `per_tx` random hot objects rewritten.
/// Returns the commit's time, ms.
pub(super) fn update(db: &mut Db, hot: &[PRef<Hot>], per_tx: u32, rng: &mut Rng) -> Result<f64> {
    if hot.is_empty() {
        return Err(BenchError::new("no hot objects"));
    }
    let mut tx = db.begin()?;
    for _ in 0..per_tx {
        let h = hot[rng.below(hot.len() as u64) as usize];
        let word = rng.next_u64();
        let o = tx.get_mut(h);
        o.value += 1;
        o.payload = [word; 12];
    }
    let t = std::time::Instant::now();
    tx.commit()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Updates until the log since the checkpoint holds at least `bytes`;
/// returns the commits' times, ms.
pub(super) fn fill_log(
    db: &mut Db,
    hot: &[PRef<Hot>],
    per_tx: u32,
    bytes: u64,
    rng: &mut Rng,
) -> Result<Vec<f64>> {
    let mut times = Vec::new();
    while log_since_checkpoint(db) < bytes {
        times.push(update(db, hot, per_tx, rng)?);
    }
    Ok(times)
}

/// Copies the built database (page file and log) to `to`.
pub(super) fn copy_db(from: &Path, to: &Path) -> Result<()> {
    for (a, b) in [
        (from.to_path_buf(), to.to_path_buf()),
        (wal_path(from), wal_path(to)),
    ] {
        std::fs::copy(&a, &b).map_err(|e| {
            BenchError::new(format!("copy {} to {}: {e}", a.display(), b.display()))
        })?;
    }
    Ok(())
}
