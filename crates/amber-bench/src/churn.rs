//! `amber bench churn`: what deleting costs in file size, and what a
//! collection gives back (issue 12's reclamation targets).
//!
//! A root holds a vector of pointers to items, each an object with a
//! 200-byte text (a `PBytes` field). Round 1 allocates 10,000 items; each
//! of the next rounds frees the previous round's items (and empties the
//! vector) and allocates 10,000 new ones — five rounds of allocation in
//! all, four of them freeing. The page file is measured (after a
//! checkpoint, so it holds everything committed) after round 1's
//! allocations and after the last round; then [`Db::collect`] runs, and
//! the file is measured again: `size_after_collect_vs_first_round` (target
//! ≤ 1.5). Then everything is freed — every item, the root object, and its
//! name removed — and the database collected once more: its size against a
//! new, empty database's (`empty_after_collect_vs_new`, target ≤ 2).
//!
//! **(choice)** The last round's items stay live for the first collection,
//! so that the two ratios measure different things: the first that space
//! freed among live objects comes back (the live data compacted to what
//! round 1 occupied), the second that an emptied database shrinks to the
//! size of a new one. `free` of this version may or may not release an
//! item's text buffer; the collection reclaims it either way (it is
//! unreachable once its item is freed).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use amber::{CollectStats, Db, Options, PBytes, PRef, PVec, Persistent};
use serde::Serialize;

use crate::storage::{BenchError, Environment, Workdir, environment};

/// Target of `size_after_collect_vs_first_round`.
pub const TARGET_AFTER_COLLECT_VS_FIRST_ROUND: f64 = 1.5;
/// Target of `empty_after_collect_vs_new`.
pub const TARGET_EMPTY_VS_NEW: f64 = 2.0;

/// An item: an id and its text.
#[derive(Persistent)]
#[persistent(name = "churn::Item")]
#[repr(C)]
pub struct Item {
    pub id: u64,
    pub text: PBytes,
}

/// The root: every live item.
#[derive(Persistent)]
#[persistent(name = "churn::Items")]
#[repr(C)]
pub struct Items {
    pub items: PVec<PRef<Item>>,
}

/// Settings of `amber bench churn`.
#[derive(Clone, Debug)]
pub struct ChurnConfig {
    /// Items allocated per round.
    pub objects: u64,
    /// Bytes of each item's text.
    pub text_bytes: usize,
    /// Rounds of allocation (each but the first frees the previous one's).
    pub rounds: u32,
    /// Directory for the database (default: the working directory).
    pub dir: Option<PathBuf>,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        ChurnConfig {
            objects: 10_000,
            text_bytes: 200,
            rounds: 5,
            dir: None,
        }
    }
}

/// What one collection did.
#[derive(Clone, Debug, Serialize)]
pub struct Collected {
    /// Wall time of `Db::collect` (close, collect, reopen), ms.
    pub ms: f64,
    /// Live objects kept (item, text buffers, the vector's buffer, the root).
    pub objects_live: u64,
    /// Objects reclaimed.
    pub objects_reclaimed: u64,
    /// Bytes reclaimed (headers and padding included).
    pub bytes_reclaimed: u64,
    /// Pages before and after.
    pub pages_before: u64,
    pub pages_after: u64,
    /// Page file bytes before and after.
    pub file_bytes_before: u64,
    pub file_bytes_after: u64,
    /// Log file bytes before and after.
    pub log_bytes_before: u64,
    pub log_bytes_after: u64,
}

impl Collected {
    fn new(ms: f64, s: &CollectStats) -> Collected {
        Collected {
            ms,
            objects_live: s.objects_live,
            objects_reclaimed: s.objects_reclaimed,
            bytes_reclaimed: s.bytes_reclaimed,
            pages_before: s.pages_before,
            pages_after: s.pages_after,
            file_bytes_before: s.file_bytes_before,
            file_bytes_after: s.file_bytes_after,
            log_bytes_before: s.log_bytes_before,
            log_bytes_after: s.log_bytes_after,
        }
    }
}

/// The result (JSON keys as the issue names them).
#[derive(Clone, Debug, Serialize)]
pub struct ChurnReport {
    pub objects: u64,
    pub text_bytes: usize,
    pub rounds: u32,
    /// Page file bytes after round 1's allocations.
    pub first_round_bytes: u64,
    /// ... after the last round, before collecting.
    pub before_collect_bytes: u64,
    /// ... after collecting (the last round's items live).
    pub after_collect_bytes: u64,
    /// ... after freeing everything (items and root) and collecting.
    pub empty_after_collect_bytes: u64,
    /// A new, empty database's page file.
    pub new_db_bytes: u64,
    /// `after_collect_bytes / first_round_bytes` (target ≤ 1.5).
    pub size_after_collect_vs_first_round: f64,
    /// `empty_after_collect_bytes / new_db_bytes` (target ≤ 2).
    pub empty_after_collect_vs_new: f64,
    /// The collection with the last round live.
    pub collect: Collected,
    /// The collection of the emptied database.
    pub collect_empty: Collected,
    pub environment: Environment,
}

fn file_len(path: &Path) -> Result<u64, BenchError> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| BenchError::new(format!("{}: {e}", path.display())))
}

/// Items allocated per transaction.
const PER_TX: u64 = 1000;

/// Allocates `n` items with texts, ids from `first`, listed in the root.
fn allocate(db: &mut Db, root: PRef<Items>, first: u64, n: u64, text: usize) -> amber::Result<()> {
    let mut id = first;
    while id < first + n {
        let mut tx = db.begin()?;
        for _ in 0..PER_TX.min(first + n - id) {
            let p = tx.alloc(Item {
                id,
                text: PBytes::new(),
            })?;
            let t: Vec<u8> = (0..text).map(|i| (id as usize + i) as u8).collect();
            tx.set_bytes(p, |it| &mut it.text, &t)?;
            tx.push(root, |r| &mut r.items, p)?;
            id += 1;
        }
        tx.commit()?;
    }
    Ok(())
}

/// Frees every listed item and empties the list.
fn free_all(db: &mut Db, root: PRef<Items>) -> amber::Result<()> {
    let items = db.slice(&db.get(root).items).to_vec();
    let mut tx = db.begin()?;
    for p in items {
        tx.free(p)?;
        tx.pop(root, |r| &mut r.items);
    }
    tx.commit().map(|_| ())
}

/// Runs `amber bench churn`.
pub fn churn(cfg: &ChurnConfig) -> Result<ChurnReport, BenchError> {
    if cfg.objects == 0 || cfg.rounds == 0 {
        return Err(BenchError::new("--objects and --rounds must be at least 1"));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    let new_path = work.path().join("new.amber");
    Db::create(&new_path, Options::default())?.close()?;
    let new_db_bytes = file_len(&new_path)?;

    let path = work.path().join("churn.amber");
    let mut db = Db::create(&path, Options::default())?;
    let root = {
        let mut tx = db.begin()?;
        let r = tx.alloc(Items { items: PVec::new() })?;
        tx.set_root("items", r)?;
        tx.commit()?;
        r
    };
    let mut first_round_bytes = 0;
    for round in 0..cfg.rounds {
        if round > 0 {
            free_all(&mut db, root)?;
        }
        let first = u64::from(round) * cfg.objects;
        allocate(&mut db, root, first, cfg.objects, cfg.text_bytes)?;
        if round == 0 {
            db.checkpoint()?;
            first_round_bytes = file_len(&path)?;
        }
    }
    db.checkpoint()?;
    let before_collect_bytes = file_len(&path)?;
    let t = Instant::now();
    let (mut db, s1) = db.collect()?;
    let collect = Collected::new(t.elapsed().as_secs_f64() * 1e3, &s1);
    let after_collect_bytes = file_len(&path)?;
    let root: PRef<Items> = db
        .root("items")?
        .ok_or_else(|| BenchError::new("the root is gone after collect"))?;
    let live = db.slice(&db.get(root).items).len() as u64;
    if live != cfg.objects {
        return Err(BenchError::new(format!(
            "{live} items after collect, {} expected",
            cfg.objects
        )));
    }
    free_all(&mut db, root)?;
    let mut tx = db.begin()?;
    tx.remove_root("items")?;
    tx.free(root)?;
    tx.commit()?;
    let t = Instant::now();
    let (db, s2) = db.collect()?;
    let collect_empty = Collected::new(t.elapsed().as_secs_f64() * 1e3, &s2);
    db.close()?;
    let empty_after_collect_bytes = file_len(&path)?;
    Ok(ChurnReport {
        objects: cfg.objects,
        text_bytes: cfg.text_bytes,
        rounds: cfg.rounds,
        first_round_bytes,
        before_collect_bytes,
        after_collect_bytes,
        empty_after_collect_bytes,
        new_db_bytes,
        size_after_collect_vs_first_round: after_collect_bytes as f64 / first_round_bytes as f64,
        empty_after_collect_vs_new: empty_after_collect_bytes as f64 / new_db_bytes as f64,
        collect,
        collect_empty,
        environment: environment(work.path()),
    })
}

impl ChurnReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let kib = |b: u64| b as f64 / 1024.0;
        let _ = writeln!(
            s,
            "churn: {} items with {}-byte texts, {} rounds of allocation (each after the first frees the previous one's), then collect",
            self.objects, self.text_bytes, self.rounds
        );
        let _ = writeln!(
            s,
            "  page file after round 1 {:.0} KiB, after round {} {:.0} KiB, after collect {:.0} KiB ({} objects reclaimed, {:.1} ms)",
            kib(self.first_round_bytes),
            self.rounds,
            kib(self.before_collect_bytes),
            kib(self.after_collect_bytes),
            self.collect.objects_reclaimed,
            self.collect.ms
        );
        let _ = writeln!(
            s,
            "  size_after_collect_vs_first_round {:.3} (target <= {TARGET_AFTER_COLLECT_VS_FIRST_ROUND})",
            self.size_after_collect_vs_first_round
        );
        let _ = writeln!(
            s,
            "  everything freed and collected {:.0} KiB, a new database {:.0} KiB: empty_after_collect_vs_new {:.3} (target <= {TARGET_EMPTY_VS_NEW})",
            kib(self.empty_after_collect_bytes),
            kib(self.new_db_bytes),
            self.empty_after_collect_vs_new
        );
        let _ = writeln!(
            s,
            "  log file {:.0} KiB before the first collect, {:.0} KiB after",
            kib(self.collect.log_bytes_before),
            kib(self.collect.log_bytes_after)
        );
        let _ = writeln!(
            s,
            "  kernel {}; {}; {}",
            self.environment.kernel, self.environment.machine, self.environment.filesystem
        );
        s
    }
}
