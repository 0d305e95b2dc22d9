//! `amber bench index`: a `PIndex<Record, String>` of N string keys against
//! a peer key-value store on the same keys (redb, from `amber-compare`, when
//! the CLI is built with `--features compare`).
//!
//! Keys: N distinct words of 12 to 20 lowercase letters (16 on average)
//! drawn from a seeded generator, plus 1,000 more for the single-insert
//! transactions. Each key maps to a record holding a u64 (its number): in
//! Amber an object `Record { v }` the index points to, in the peer a `u64`
//! value in a table keyed by the string.
//!
//! Measured, each on a fresh database of each engine, Amber first:
//! - `insert`: all N keys in one transaction (Amber: allocate the record and
//!   insert it; the peer: insert the pair), committed durably;
//! - `insert_tx`: 1,000 transactions inserting one new key each, every
//!   commit synced (Amber's log fsync, redb's `Durability::Immediate`),
//!   alternating between the engines (each key inserted into Amber and into
//!   the peer in turn, Amber first on even keys); the median time of one;
//! - `lookup`: batches of random lookups of present keys (a seeded sample),
//!   summing the records' values; one untimed batch per engine first makes
//!   everything resident (hot), then timed batches alternate between the
//!   engines; the median batch time.
//!
//! Ratios are Amber's median over the peer's, measured in the same run.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use amber::{CommitStats, Db, Options, PIndex, PRef, Persistent};
use serde::Serialize;

use crate::rng::Rng;
use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};

/// Targets of issue 12: lookups and the one-transaction load within 2× of
/// redb's time, single-insert transactions within 1.2×.
pub const TARGET_LOOKUP: f64 = 2.0;
pub const TARGET_INSERT: f64 = 2.0;
pub const TARGET_INSERT_TX: f64 = 1.2;

/// A record the index points to.
#[derive(Persistent)]
#[persistent(name = "bench_index::Record")]
#[repr(C)]
pub struct Record {
    pub v: u64,
}

/// The root object: the index.
#[derive(Persistent)]
#[persistent(name = "bench_index::Root")]
#[repr(C)]
pub struct Root {
    pub by_key: PIndex<Record, String>,
}

/// A key-value store the index is compared with.
pub trait IndexPeer {
    /// Its name in the report ("redb").
    fn name(&self) -> &'static str;
    /// How it makes a commit durable.
    fn durability(&self) -> &'static str;
    /// Creates a fresh store in directory `dir`.
    fn create(&mut self, dir: &Path) -> Result<(), BenchError>;
    /// Inserts every `(keys[i], i)` in one durable transaction.
    fn insert_all(&mut self, keys: &[String]) -> Result<(), BenchError>;
    /// Inserts `(key, v)` in a transaction of its own, durably.
    fn insert_one(&mut self, key: &str, v: u64) -> Result<(), BenchError>;
    /// Looks up every key of `keys`; the sum of their values (a key that is
    /// missing is an error).
    fn lookup(&mut self, keys: &[&str]) -> Result<u64, BenchError>;
}

/// Settings of `amber bench index`.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// Keys loaded.
    pub keys: usize,
    /// Single-insert transactions.
    pub tx_inserts: usize,
    /// Lookups per timed batch.
    pub lookups: usize,
    /// Timed lookup batches per engine.
    pub runs: usize,
    /// Seed of the keys and the lookup sample.
    pub seed: u64,
    /// Directory for the databases (default: the working directory).
    pub dir: Option<PathBuf>,
}

/// One engine's figures.
#[derive(Clone, Debug, Serialize)]
pub struct EngineIndex {
    pub engine: &'static str,
    pub durability: &'static str,
    /// All keys in one transaction, ms (one run).
    pub insert_ms: f64,
    /// One single-insert transaction, ms.
    pub insert_tx_ms: Summary,
    /// One batch of lookups, ms.
    pub lookup_ms: Summary,
    /// The median lookup, ns.
    pub lookup_ns: f64,
}

/// What Amber's single-insert commits wrote, on average.
#[derive(Clone, Debug, Serialize)]
pub struct AmberCommits {
    /// Blocks found written.
    pub blocks: f64,
    /// Log bytes (records and commit record).
    pub log_bytes: f64,
    /// Log `fdatasync` calls.
    pub log_syncs: f64,
    /// Time to find the written pages, ms.
    pub detect_ms: f64,
    /// Time to diff them, ms.
    pub diff_ms: f64,
    /// Time to write and sync the log, ms.
    pub write_ms: f64,
}

/// The result of `amber bench index`.
#[derive(Clone, Debug, Serialize)]
pub struct IndexReport {
    pub benchmark: &'static str,
    pub keys: usize,
    /// Average key length, bytes.
    pub key_bytes: f64,
    pub tx_inserts: usize,
    pub lookups: usize,
    pub runs: usize,
    pub seed: u64,
    pub amber: EngineIndex,
    /// What Amber's single-insert commits wrote.
    pub amber_commit: AmberCommits,
    /// The peer, when one is built in.
    pub peer: Option<EngineIndex>,
    /// Amber's median lookup batch over the peer's; target ≤ 2.
    pub lookup_vs_redb: Option<f64>,
    /// Amber's one-transaction load over the peer's; target ≤ 2.
    pub insert_vs_redb: Option<f64>,
    /// Amber's median single-insert transaction over the peer's; target ≤ 1.2.
    pub insert_tx_vs_redb: Option<f64>,
    pub method: &'static str,
    pub environment: Environment,
}

const METHOD: &str = "N distinct random words of 12-20 lowercase letters (seeded) mapped to records holding a u64 \
(Amber: PIndex<Record, String> to objects; the peer: a table &str -> u64); fresh databases; \
insert: all N in one durable transaction (Amber allocates each record too); \
insert_tx: 1,000 new keys, one durable transaction each, alternating between engines (median); \
lookup: batches of random present keys summing the values, after one untimed batch per engine (hot), batches alternating between engines (median); \
ratios are Amber's median over the peer's in the same run";

/// N distinct words and `extra` more, all distinct.
fn words(n: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::seed_from_u64(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = 12 + rng.below(9) as usize;
        let w: String = (0..len)
            .map(|_| char::from(b'a' + rng.below(26) as u8))
            .collect();
        if seen.insert(w.clone()) {
            out.push(w);
        }
    }
    out
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Amber's side: the database and its root.
struct AmberSide {
    db: Db,
    root: PRef<Root>,
}

impl AmberSide {
    fn create(dir: &Path) -> Result<AmberSide, BenchError> {
        let mut db = Db::create(dir.join("amber.db"), Options::default())?;
        let mut tx = db.begin()?;
        let root = tx.alloc(Root {
            by_key: PIndex::new(),
        })?;
        tx.set_root("index", root)?;
        tx.commit()?;
        Ok(AmberSide { db, root })
    }

    fn insert_all(&mut self, keys: &[String]) -> Result<(), BenchError> {
        let mut tx = self.db.begin()?;
        for (i, k) in keys.iter().enumerate() {
            let r = tx.alloc(Record { v: i as u64 })?;
            tx.index_insert(self.root, |o| &mut o.by_key, k.as_str(), r)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// One single-insert transaction; what its commit wrote.
    fn insert_one(&mut self, key: &str, v: u64) -> Result<CommitStats, BenchError> {
        let mut tx = self.db.begin()?;
        let r = tx.alloc(Record { v })?;
        tx.index_insert(self.root, |o| &mut o.by_key, key, r)?;
        Ok(tx.commit()?)
    }

    fn lookup(&self, keys: &[&str]) -> Result<u64, BenchError> {
        let idx = &self.db.get(self.root).by_key;
        let mut sum = 0u64;
        for k in keys {
            let r = self
                .db
                .index_get(idx, *k)?
                .ok_or_else(|| BenchError::new(format!("amber: key {k:?} missing")))?;
            sum = sum.wrapping_add(self.db.get(r).v);
        }
        Ok(sum)
    }
}

/// Runs `amber bench index` against `peer` (none: Amber's figures only).
pub fn index(
    cfg: &IndexConfig,
    mut peer: Option<Box<dyn IndexPeer>>,
) -> Result<IndexReport, BenchError> {
    if cfg.keys == 0 || cfg.lookups == 0 || cfg.runs == 0 || cfg.tx_inserts == 0 {
        return Err(BenchError::new(
            "keys, lookups, runs and tx inserts must be positive",
        ));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    if crate::sys::is_memory_fs(work.path()) {
        eprintln!(
            "amber bench index: warning: {} is on {}: fsync does nothing there, so the transaction figures say nothing about a disk",
            work.path().display(),
            crate::sys::filesystem(work.path())
        );
    }
    let all = words(cfg.keys + cfg.tx_inserts, cfg.seed);
    let (keys, extra) = all.split_at(cfg.keys);
    let key_bytes = keys.iter().map(String::len).sum::<usize>() as f64 / keys.len() as f64;
    let mut rng = Rng::seed_from_u64(cfg.seed ^ 0x100c);
    let sample: Vec<usize> = (0..cfg.lookups)
        .map(|_| rng.below(keys.len() as u64) as usize)
        .collect();
    let probe: Vec<&str> = sample.iter().map(|&i| keys[i].as_str()).collect();
    let want = sample
        .iter()
        .map(|&i| i as u64)
        .fold(0u64, u64::wrapping_add);

    // Loads, Amber first.
    let mut amber = AmberSide::create(work.path())?;
    let t = Instant::now();
    amber.insert_all(keys)?;
    let amber_insert = ms(t);
    let peer_insert = match peer.as_mut() {
        Some(p) => {
            p.create(work.path())?;
            let t = Instant::now();
            p.insert_all(keys)?;
            Some(ms(t))
        }
        None => None,
    };

    // Single-insert transactions, alternating between the engines (Amber
    // first on even keys), so that the disk's drift weighs on both alike.
    let (mut amber_tx, mut peer_tx) = (Vec::new(), Vec::new());
    let (mut blocks, mut log_bytes) = (0u64, 0u64);
    let mut parts = [0f64; 3];
    let syncs = amber.db.stats().store.log_syncs;
    for (i, k) in extra.iter().enumerate() {
        let v = (cfg.keys + i) as u64;
        for side in [i % 2, 1 - i % 2] {
            let t = Instant::now();
            match (side, peer.as_mut()) {
                (0, _) => {
                    let s = amber.insert_one(k, v)?;
                    amber_tx.push(ms(t));
                    blocks += s.blocks;
                    log_bytes += s.log_bytes;
                    for (p, d) in parts.iter_mut().zip([s.detect, s.diff, s.write]) {
                        *p += d.as_secs_f64() * 1e3;
                    }
                }
                (_, Some(p)) => {
                    p.insert_one(k, v)?;
                    peer_tx.push(ms(t));
                }
                (_, None) => {}
            }
        }
    }
    let n = extra.len() as f64;
    let amber_commit = AmberCommits {
        blocks: blocks as f64 / n,
        log_bytes: log_bytes as f64 / n,
        log_syncs: (amber.db.stats().store.log_syncs - syncs) as f64 / n,
        detect_ms: parts[0] / n,
        diff_ms: parts[1] / n,
        write_ms: parts[2] / n,
    };
    let peer_load = peer_insert.map(|load| (load, peer_tx));

    // Lookups: one untimed batch each, then alternating timed batches.
    let check = |who: &str, sum: u64| {
        if sum == want {
            Ok(())
        } else {
            Err(BenchError::new(format!(
                "{who}: lookups summed {sum}, expected {want}"
            )))
        }
    };
    check("amber", amber.lookup(&probe)?)?;
    if let Some(p) = peer.as_mut() {
        check(p.name(), p.lookup(&probe)?)?;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..cfg.runs {
        for side in [r % 2, 1 - r % 2] {
            let t = Instant::now();
            let sum = match (side, peer.as_mut()) {
                (0, _) => amber.lookup(black_box(&probe))?,
                (_, Some(p)) => p.lookup(black_box(&probe))?,
                (_, None) => continue,
            };
            let elapsed = ms(t);
            check(if side == 0 { "amber" } else { "peer" }, black_box(sum))?;
            if side == 0 { &mut a } else { &mut b }.push(elapsed);
        }
    }
    let engine = |name, durability, insert_ms, tx: &[f64], look: &[f64]| {
        let lookup_ms = summarize(look);
        EngineIndex {
            engine: name,
            durability,
            insert_ms,
            insert_tx_ms: summarize(tx),
            lookup_ns: lookup_ms.median * 1e6 / cfg.lookups as f64,
            lookup_ms,
        }
    };
    let amber_fig = engine(
        "amber",
        "the commit appends to the log and fsyncs it",
        amber_insert,
        &amber_tx,
        &a,
    );
    let peer_fig = match (peer.as_ref(), peer_load) {
        (Some(p), Some((load, times))) => Some(engine(p.name(), p.durability(), load, &times, &b)),
        _ => None,
    };
    let ratio = |f: fn(&EngineIndex) -> f64| peer_fig.as_ref().map(|p| f(&amber_fig) / f(p));
    Ok(IndexReport {
        benchmark: "index",
        keys: cfg.keys,
        key_bytes,
        tx_inserts: cfg.tx_inserts,
        lookups: cfg.lookups,
        runs: cfg.runs,
        seed: cfg.seed,
        lookup_vs_redb: ratio(|e| e.lookup_ms.median),
        insert_vs_redb: ratio(|e| e.insert_ms),
        insert_tx_vs_redb: ratio(|e| e.insert_tx_ms.median),
        amber: amber_fig,
        amber_commit,
        peer: peer_fig,
        method: METHOD,
        environment: environment(work.path()),
    })
}

impl IndexReport {
    /// The report as a table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "index: {} keys ({:.1} bytes on average), {} single-insert transactions, {} lookups per batch, {} batches",
            self.keys, self.key_bytes, self.tx_inserts, self.lookups, self.runs
        );
        let _ = writeln!(
            s,
            "{:<8} {:>12} {:>16} {:>16} {:>12}",
            "engine", "insert ms", "insert tx ms", "lookup batch ms", "lookup ns"
        );
        for e in std::iter::once(&self.amber).chain(self.peer.as_ref()) {
            let _ = writeln!(
                s,
                "{:<8} {:>12.1} {:>16.3} {:>16.2} {:>12.0}",
                e.engine, e.insert_ms, e.insert_tx_ms.median, e.lookup_ms.median, e.lookup_ns
            );
        }
        let c = &self.amber_commit;
        let _ = writeln!(
            s,
            "amber single-insert commit: {:.1} blocks, {:.0} log bytes, {:.2} log syncs; detect {:.3} ms, diff {:.3} ms, write {:.3} ms (means)",
            c.blocks, c.log_bytes, c.log_syncs, c.detect_ms, c.diff_ms, c.write_ms
        );
        let show = |r: Option<f64>, target: f64| match r {
            Some(r) => format!("{r:.2} (target <= {target})"),
            None => "no peer built in".to_string(),
        };
        let _ = writeln!(
            s,
            "lookup_vs_redb    {}",
            show(self.lookup_vs_redb, TARGET_LOOKUP)
        );
        let _ = writeln!(
            s,
            "insert_vs_redb    {}",
            show(self.insert_vs_redb, TARGET_INSERT)
        );
        let _ = writeln!(
            s,
            "insert_tx_vs_redb {}",
            show(self.insert_tx_vs_redb, TARGET_INSERT_TX)
        );
        let env = &self.environment;
        let _ = writeln!(s, "  kernel {}; {}", env.kernel, env.machine);
        let _ = writeln!(s, "  file system {} ({})", env.filesystem, env.dir);
        s
    }
}
