//! `amber bench checkpoint`: how long a page fault stalls while a checkpoint
//! installs a large log.
//!
//! The database (built once, then copied afresh for every case) holds a cold
//! region, one object per page listed in a directory, and small hot objects.
//! Each case opens a copy with one page per fault (`fetch_cluster` 1, not
//! adaptive), rewrites random hot objects in transactions of `--per-tx`
//! objects until the log holds `--log-mib` of committed changes not yet
//! checkpointed (the automatic checkpoint's log threshold is set so that it
//! does not run earlier), and then checkpoints while a reader thread faults
//! cold pages in, one every `--pause-us`, in a random order, timing each
//! fault. Two cases:
//!
//! - `explicit`: the reader runs `--before-ms`, the main thread calls
//!   `Db::checkpoint`, the reader runs `--after-ms` more. The checkpoint's
//!   duration is that call's.
//! - `automatic`: the log threshold is `--log-mib`; the reader runs
//!   `--before-ms` (no transaction can be open meanwhile: a transaction
//!   borrows the database exclusively), then the main thread commits until
//!   a commit crosses the threshold (its latency is `trigger_commit_ms`),
//!   and the reader runs again, while the main thread polls `Db::stats`
//!   every millisecond until the superblock generation changes (the
//!   checkpoint's end), and `--after-ms` more. The checkpoint is counted
//!   from the triggering commit's start to that poll.
//!
//! A fault whose interval overlaps the checkpoint's counts as during it;
//! the rest as outside. Per case: the longest and the median fault latency
//! during and outside, the checkpoint's duration, the triggering commit's
//! latency; medians over `--runs` runs. The result and its table are in
//! `report`, the database and the updates in `build`.

mod build;
mod report;

use build::Cold;
pub use report::{CaseRun, CaseSummary, FaultStats, StallReport};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use amber::{BackendChoice, Db, Options, PRef, StoreOptions};

use crate::backend::Backends;
use crate::hot::check_backend;
use crate::rng::Rng;
use crate::storage::measure::warn_if_memory_fs;
use crate::storage::{BenchError, Result, Workdir, environment, summarize};
use build::{check_one_per_page, copy_db, fill_log, lists, log_since_checkpoint, update};
use report::METHOD;

/// Settings of `amber bench checkpoint`.
#[derive(Clone, Debug)]
pub struct StallConfig {
    /// Committed changes in the log when the checkpoint runs, MiB.
    pub log_mib: u64,
    /// Hot objects' total size, MiB (the blocks the checkpoint installs).
    pub hot_mib: u64,
    /// Cold pages the reader can fault in, MiB (one fault per page).
    pub cold_mib: u64,
    /// Hot objects rewritten per transaction.
    pub per_tx: u32,
    /// The reader's pause between faults, µs.
    pub pause_us: u64,
    /// The reader's time before the checkpoint, ms.
    pub before_ms: u64,
    /// The reader's time after it, ms.
    pub after_ms: u64,
    /// Runs of each case.
    pub runs: usize,
    /// Backends to measure.
    pub backends: Backends,
    /// Seed of the updates and of the reader's order.
    pub seed: u64,
    /// Directory to work in (a temporary directory is made inside it).
    pub dir: Option<PathBuf>,
}

impl Default for StallConfig {
    fn default() -> Self {
        StallConfig {
            log_mib: 64,
            hot_mib: 16,
            cold_mib: 64,
            per_tx: 256,
            pause_us: 200,
            before_ms: 300,
            after_ms: 300,
            runs: 3,
            backends: Backends::Both,
            seed: 1,
            dir: None,
        }
    }
}

/// Bytes of a hot object as allocated.
const HOT_BYTES: u64 = 104;

/// The two cases.
const CASES: [&str; 2] = ["explicit", "automatic"];

/// Runs `amber bench checkpoint`.
pub fn stall(cfg: &StallConfig) -> Result<StallReport> {
    if cfg.runs == 0 || cfg.log_mib == 0 || cfg.hot_mib == 0 || cfg.cold_mib == 0 {
        return Err(BenchError::new(
            "--runs, --log-mib, --hot-mib and --cold-mib must be at least 1",
        ));
    }
    if cfg.per_tx == 0 {
        return Err(BenchError::new("--per-tx must be at least 1"));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    warn_if_memory_fs(work.path());
    let base = work.path().join("base.amber");
    let mut db = Db::create(&base, Options::default())?;
    let page_size = db.page_size() as u64;
    let cold_pages = (cfg.cold_mib << 20) / page_size;
    build::build(&mut db, cold_pages, (cfg.hot_mib << 20) / HOT_BYTES)?;
    db.close()?;
    let case_path = work.path().join("case.amber");
    let mut runs = Vec::new();
    for choice in cfg.backends.choices() {
        for run in 0..cfg.runs {
            for case in CASES {
                copy_db(&base, &case_path)?;
                let seed = cfg.seed ^ (run as u64) << 32;
                runs.push(run_case(cfg, &case_path, choice, case, seed)?);
            }
        }
    }
    let mut summaries = Vec::new();
    for r in &runs {
        if !summaries
            .iter()
            .any(|s: &CaseSummary| s.backend == r.backend && s.case == r.case)
        {
            let same: Vec<&CaseRun> = runs
                .iter()
                .filter(|x| x.backend == r.backend && x.case == r.case)
                .collect();
            summaries.push(CaseSummary::of(&same));
        }
    }
    Ok(StallReport {
        benchmark: "checkpoint",
        log_mib: cfg.log_mib,
        hot_mib: cfg.hot_mib,
        cold_mib: cfg.cold_mib,
        per_tx: cfg.per_tx,
        pause_us: cfg.pause_us,
        runs: cfg.runs,
        summaries,
        every_run: runs,
        method: METHOD,
        environment: environment(work.path()),
    })
}

/// The options of a case: one page per fault, and the automatic
/// checkpoint's log threshold at `log_trigger` (pending memory never
/// triggers it; no cache budget, which would).
fn options(backend: BackendChoice, log_trigger: u64) -> Options {
    Options {
        backend,
        fetch_cluster: 1,
        fetch_adaptive: false,
        store: StoreOptions {
            checkpoint_log_bytes: log_trigger,
            checkpoint_pending_bytes: usize::MAX,
            ..StoreOptions::default()
        },
        ..Options::default()
    }
}

/// One fault the reader timed.
#[derive(Clone, Copy, Debug)]
struct Fault {
    /// When it started, ms since the case's clock started.
    at_ms: f64,
    /// How long it took, µs.
    us: f64,
}

/// The reader: faults the cold pages in, in `order` from `cursor` on, one
/// every `pause`, until `stop` is set.
struct Reader<'a> {
    db: &'a Db,
    cold: &'a [PRef<Cold>],
    order: Vec<u32>,
    cursor: usize,
    pause: Duration,
    clock: Instant,
}

impl Reader<'_> {
    fn read_until(&mut self, stop: &AtomicBool) -> Result<Vec<Fault>> {
        let mut out = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let Some(&i) = self.order.get(self.cursor) else {
                return Err(BenchError::new(format!(
                    "the reader ran out of cold pages after {} faults: raise --cold-mib or --pause-us",
                    self.cursor
                )));
            };
            self.cursor += 1;
            let t0 = Instant::now();
            let v = self.db.get(self.cold[i as usize]).value;
            let us = t0.elapsed().as_secs_f64() * 1e6;
            if v != u64::from(i) {
                return Err(BenchError::new(format!(
                    "cold object {i} reads {v}: the benchmark's database is wrong"
                )));
            }
            out.push(Fault {
                at_ms: t0.duration_since(self.clock).as_secs_f64() * 1e3,
                us,
            });
            std::thread::sleep(self.pause);
        }
        Ok(out)
    }

    /// Reads on a scoped thread while `main` runs; stops the reader when
    /// `main` returns.
    fn alongside<T>(&mut self, main: impl FnOnce() -> Result<T>) -> Result<(Vec<Fault>, T)> {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| self.read_until(&stop));
            let got = main();
            stop.store(true, Ordering::Release);
            let faults = reader
                .join()
                .map_err(|_| BenchError::new("the reader thread panicked"))?;
            Ok((faults?, got?))
        })
    }
}

/// Runs one case on a fresh copy of the database at `path`.
fn run_case(
    cfg: &StallConfig,
    path: &Path,
    backend: BackendChoice,
    case: &'static str,
    seed: u64,
) -> Result<CaseRun> {
    let target = cfg.log_mib << 20;
    let automatic = case == "automatic";
    let trigger = if automatic { target } else { u64::MAX };
    let mut db = Db::open(path, options(backend, trigger))?;
    check_backend(backend, &db)?;
    let (cold, hot) = lists(&db)?;
    check_one_per_page(&cold, db.page_size())?;
    let mut rng = Rng::seed_from_u64(seed);
    // Fill the log; the automatic case stops a few commits short of its
    // threshold.
    let before = log_since_checkpoint(&db);
    let mut commits = vec![update(&mut db, &hot, cfg.per_tx, &mut rng)?];
    let per_commit = log_since_checkpoint(&db) - before;
    let fill_to = if automatic {
        target.saturating_sub(3 * per_commit)
    } else {
        target
    };
    commits.extend(fill_log(&mut db, &hot, cfg.per_tx, fill_to, &mut rng)?);
    let mut order: Vec<u32> = (0..cold.len() as u32).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let generation = db.stats().store.generation;
    let log_bytes = log_since_checkpoint(&db);
    let pending_blocks = db.stats().store.pending_blocks;
    let s0 = db.stats();
    let clock = Instant::now();
    let since = |t: Instant| t.duration_since(clock).as_secs_f64() * 1e3;
    let mut reader = Reader {
        db: &db,
        cold: &cold,
        order,
        cursor: 0,
        pause: Duration::from_micros(cfg.pause_us),
        clock,
    };
    let before_ms = Duration::from_millis(cfg.before_ms);
    let after_ms = Duration::from_millis(cfg.after_ms);
    let (faults, window, trigger_commit_ms) = if automatic {
        let (mut faults, ()) = reader.alongside(|| {
            std::thread::sleep(before_ms);
            Ok(())
        })?;
        // The commit that crosses the threshold.
        let cursor = reader.cursor;
        let order = std::mem::take(&mut reader.order);
        let mut trigger_ms = 0.0;
        let mut start = Instant::now();
        // When the checkpoint was seen to have ended: at once, if the
        // triggering commit ran it.
        let mut ended = None;
        let mut crossed = false;
        while !crossed {
            start = Instant::now();
            trigger_ms = update(&mut db, &hot, cfg.per_tx, &mut rng)?;
            let s = db.stats().store;
            if s.generation != generation {
                ended = Some(Instant::now());
            }
            crossed = ended.is_some() || s.end_lsn.saturating_sub(s.checkpoint_lsn) > target;
        }
        let mut reader = Reader {
            db: &db,
            cold: &cold,
            order,
            cursor,
            pause: Duration::from_micros(cfg.pause_us),
            clock,
        };
        let (more, end) = reader.alongside(|| {
            let end = match ended {
                Some(t) => t,
                None => wait_for_generation(&db, generation)?,
            };
            std::thread::sleep(after_ms);
            Ok(end)
        })?;
        faults.extend(more);
        (faults, (since(start), since(end)), Some(trigger_ms))
    } else {
        let (faults, window) = reader.alongside(|| {
            std::thread::sleep(before_ms);
            let start = Instant::now();
            db.checkpoint()?;
            let end = Instant::now();
            std::thread::sleep(after_ms);
            Ok((since(start), since(end)))
        })?;
        (faults, window, None)
    };
    let s1 = db.stats();
    if s1.store.generation == generation {
        return Err(BenchError::new("no checkpoint ran"));
    }
    let backend_name = db.backend().to_string();
    db.close()?;
    let (during, outside): (Vec<Fault>, Vec<Fault>) = faults
        .iter()
        .partition(|f| f.at_ms <= window.1 && f.at_ms + f.us / 1e3 >= window.0);
    Ok(CaseRun {
        case,
        backend: backend_name,
        log_mib: log_bytes as f64 / f64::from(1 << 20),
        pending_blocks,
        checkpoint_ms: window.1 - window.0,
        trigger_commit_ms,
        commit_ms: summarize(&commits).median,
        faults: s1.faults - s0.faults,
        fetched: s1.fetched - s0.fetched,
        during: FaultStats::of(&during.iter().map(|f| f.us).collect::<Vec<_>>()),
        outside: FaultStats::of(&outside.iter().map(|f| f.us).collect::<Vec<_>>()),
    })
}

/// Polls the database every millisecond until its superblock generation is
/// no longer `generation` (a checkpoint finished); returns when it saw it.
fn wait_for_generation(db: &Db, generation: u64) -> Result<Instant> {
    let give_up = Instant::now() + Duration::from_secs(600);
    while db.stats().store.generation == generation {
        if Instant::now() > give_up {
            return Err(BenchError::new(
                "the automatic checkpoint did not finish within 10 minutes",
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(Instant::now())
}
