//! `amber bench update`: the write path — what a commit of a hot OO1 update
//! traversal costs, split as Hosking et al. split it (`papers/000_*` §6.4,
//! Figs. 7–10), how many bytes it logs against the minimum, and what the first
//! store to a clean page costs.
//!
//! The database is OO1's (the generator of [`crate::oo1::database`], built by
//! Amber's OO1 engine [`crate::oo1::amber_engine`] with its schema and loader),
//! copied afresh for each backend and opened. For each update probability p
//! the update traversal of OO1's hot phase (the same root and the same
//! decisions as `amber bench oo1`'s `update p=… hot` rows, from the harness's
//! decision plan) runs `warmup` times untimed, so that every page it touches
//! is resident, then `iters` times, one commit each. Each commit reports
//! ([`CommitStats`]):
//!
//! - *detect*: listing the written pages (`PAGEMAP_SCAN`, which also
//!   write-protects them again, with userfaultfd; the pages that took a write
//!   fault with SIGSEGV) — Hosking's part of *other*;
//! - *diff*: copying each written block out, unswizzling it and diffing it
//!   against its clean version, coalescing by the minimal-log rule — Hosking's
//!   *old* (there are no new objects in an update);
//! - *write*: appending the records and the commit record and `fdatasync` —
//!   Hosking's *write*.
//!
//! The traversal itself (Hosking's *running*, including the first store to
//! each clean page) is timed apart.
//!
//! **Log bytes against the minimum.** `CommitStats::minimal_log_bytes` is what
//! the minimal-log rule (`docs/design.md` §1.3) demands for the bytes the diff
//! found changed: range headers plus changed bytes, after coalescing, *without*
//! the 16-byte commit record that every commit writes. `log_bytes` includes
//! it. So the comparison is records with records: `log_bytes − 16` against
//! `minimal_log_bytes` (and, for the record, `log_bytes` against
//! `minimal_log_bytes + 16`). Both of Amber's figures come from Amber's own
//! diff, so the benchmark also computes the minimum independently, from what
//! the traversal did: each changed part changed some bytes of its adjacent
//! `x` and `y` (8 bytes), which one range record of 20 header bytes plus the
//! span from the first to the last changed byte covers; two parts never share
//! a record (they lie at least 120 bytes apart, and merging costs a byte per
//! byte of gap, more than the 20-byte header saved). `log_bytes` is checked
//! against the bytes this process passed to `write` calls during the commit
//! (`wchar`).
//!
//! **First write per page.** M parts on M distinct pages, resident, clean and
//! write-protected (a commit re-protected them): one transaction reads them
//! (untimed, so that caches and TLB hold them), then increments a field of each
//! in a tight loop (each store is the first to its page: with userfaultfd the
//! kernel resolves the write-protect fault itself; with SIGSEGV the handler
//! copies the clean page into the recovery buffer and `mprotect`s it), then
//! does the same loop again (the pages are now writable: the loop's own cost),
//! and commits. (first loop − second loop) / M is the first-write cost.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber::PRef;
use amber::db::CommitStats;
use amber::vm::BackendChoice;
use amber::wal::RANGE_HEADER;
use amber::wal::record::COMMIT_SIZE;
use serde::Serialize;

use crate::backend::Backends;
use crate::hot::check_backend;
use crate::oo1::amber_engine::schema::Part;
use crate::oo1::amber_engine::{AmberFactory, AmberOo1};
use crate::oo1::args::DEFAULT_SEED;
use crate::oo1::ops::{Input, Job, Op, Protocol, inputs};
use crate::oo1::reference::Reference;
use crate::oo1::{
    Engine, EngineOptions, GenParams, GeneratedDb, PartId, TRAVERSAL_DEPTH, generate,
};
use crate::procfs::IoCounters;
use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};

/// The update probabilities measured (Hosking et al.'s Figs. 7–10).
pub const PROBABILITIES: [f64; 4] = [0.0, 0.05, 0.2, 1.0];

/// Target: the records logged are at most this multiple of the minimum.
pub const TARGET_LOG_VS_MINIMAL: f64 = 1.1;

/// Target: the first write to a clean page with userfaultfd, µs (median).
pub const TARGET_FIRST_WRITE_UFFD_US: f64 = 2.0;

/// Settings of `amber bench update`.
#[derive(Clone, Debug)]
pub struct UpdateConfig {
    /// OO1 parts (N).
    pub parts: u32,
    /// Backends to measure.
    pub backends: Backends,
    /// Timed commits per (backend, p).
    pub iters: usize,
    /// Untimed update traversals per (backend, p) before them.
    pub warmup: usize,
    /// Distinct pages of the first-write measurement (M).
    pub pages: usize,
    /// Seed of the database and of the inputs (as `amber bench oo1 --seed`).
    pub seed: u64,
    /// Directory for the database (default: the working directory).
    pub dir: Option<PathBuf>,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            parts: 20_000,
            backends: Backends::Both,
            iters: 15,
            warmup: 3,
            pages: 512,
            seed: DEFAULT_SEED,
            dir: None,
        }
    }
}

/// One (backend, p): medians over the timed commits.
#[derive(Clone, Debug, Serialize)]
pub struct UpdateRow {
    pub backend: String,
    pub p: f64,
    /// Timed commits.
    pub iters: usize,
    /// Parts whose x and y the traversal incremented (visits that
    /// incremented; a part visited twice may be incremented twice).
    pub increments: u64,
    /// Distinct parts changed.
    pub changed_parts: u64,
    /// `Tx::commit`, wall time, ms.
    pub commit_ms: f64,
    /// Finding the written pages, ms.
    pub detect_ms: f64,
    /// Copying out, unswizzling and diffing them, ms.
    pub diff_ms: f64,
    /// Appending the records and syncing the log, ms.
    pub write_ms: f64,
    /// The commit's wall time minus the three (bookkeeping), ms (median of
    /// the differences).
    pub other_ms: f64,
    /// The traversal with its stores, before the commit, ms.
    pub traverse_ms: f64,
    /// Log bytes written, commit record included.
    pub log_bytes: u64,
    /// Amber's minimal-log bytes for the changes, commit record excluded.
    pub minimal_log_bytes: u64,
    /// The commit record every non-empty commit adds (0 when nothing was
    /// logged).
    pub commit_record_bytes: u64,
    /// `(log_bytes − commit record) / minimal_log_bytes`: records against
    /// the minimum for them (1 when both are 0). Target ≤ 1.1.
    pub log_vs_minimal: f64,
    /// `log_bytes / (minimal_log_bytes + commit record)`.
    pub log_vs_minimal_with_commit: f64,
    /// The minimal records computed by the benchmark from the parts changed
    /// (independently of Amber's diff), commit record excluded.
    pub expected_minimal_log_bytes: u64,
    /// Bytes that differ from the committed state (Amber's diff).
    pub changed_bytes: u64,
    /// Blocks (pages) written per commit.
    pub blocks: u64,
    /// `wchar` of `/proc/self/io` around the commit: bytes passed to write
    /// calls.
    pub wchar: u64,
    /// The backend's first-write cost per page, µs (median).
    pub first_write_us: f64,
    /// Distributions, ms.
    pub commit_ms_summary: Summary,
    pub traverse_ms_summary: Summary,
}

/// The first-write measurement of one backend.
#[derive(Clone, Debug, Serialize)]
pub struct FirstWrite {
    pub backend: String,
    /// Distinct pages written per round (M).
    pub pages: usize,
    /// Timed rounds.
    pub rounds: usize,
    /// (first loop − second loop) / M, µs: median and distribution.
    pub first_write_us: f64,
    pub first_write_us_summary: Summary,
    /// The first loop (first store to each page) per page, µs, median.
    pub first_loop_us_per_page: f64,
    /// The second loop (pages already writable) per page, µs, median.
    pub second_loop_us_per_page: f64,
    /// Target (userfaultfd only) ≤ 2 µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_us: Option<f64>,
}

/// The result of `amber bench update`.
#[derive(Clone, Debug, Serialize)]
pub struct UpdateReport {
    pub benchmark: &'static str,
    pub parts: u32,
    pub seed: u64,
    /// The root part of every update traversal, per p.
    pub roots: BTreeMap<String, PartId>,
    pub iters: usize,
    pub warmup: usize,
    pub rows: Vec<UpdateRow>,
    pub first_write: Vec<FirstWrite>,
    pub target_log_vs_minimal: f64,
    pub target_first_write_uffd_us: f64,
    /// Range record header (H) and commit record sizes of the log format.
    pub range_header_bytes: usize,
    pub commit_record_bytes: usize,
    /// The Amber OO1 engine's summary (schema and options).
    pub engine: &'static str,
    /// `/proc/loadavg` before and after.
    pub loadavg_before: String,
    pub loadavg_after: String,
    pub method: &'static str,
    pub environment: Environment,
}

const METHOD: &str = "OO1 database (N parts, 3 connections each) built by Amber's OO1 engine, copied and opened per backend; \
per p in {0, 0.05, 0.2, 1}: OO1's hot update input (root and per-visit decisions of the harness: visit v increments x and y when u(seed, i, v) < p), \
warm-up traversals untimed, then iters traversals with one commit each, every answer checked against the reference evaluator; \
medians of CommitStats (detect / diff / write), Tx::commit wall time, log_bytes and minimal_log_bytes; \
log_vs_minimal compares records with records (log_bytes - 16-byte commit record vs minimal_log_bytes, which excludes it); \
expected_minimal_log_bytes = sum over changed parts of (20 + span of changed bytes in x,y); \
first write: M parts on distinct pages, resident and re-protected by a commit, read (untimed), then a field of each incremented twice in two tight loops \
in one transaction, (loop 1 - loop 2) / M, median over rounds";

/// The parts visited by an OO1 traversal from `root`, in visit order.
fn visit_order(db: &GeneratedDb, root: PartId) -> Vec<PartId> {
    fn walk(db: &GeneratedDb, id: PartId, depth: u32, out: &mut Vec<PartId>) {
        out.push(id);
        if depth < TRAVERSAL_DEPTH {
            for c in db.outgoing(id) {
                walk(db, c.to, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(db, root, 0, &mut out);
    out
}

/// What one update changes and the minimal records for it, from the parts'
/// current `x`, `y` (updated in place).
fn expected_changes(xy: &mut [(i32, i32)], order: &[PartId], increments: &[bool]) -> (u64, u64) {
    let mut count: HashMap<PartId, i32> = HashMap::new();
    for (&id, &inc) in order.iter().zip(increments) {
        if inc {
            *count.entry(id).or_default() += 1;
        }
    }
    let mut minimal = 0u64;
    for (&id, &k) in &count {
        let slot = &mut xy[id as usize - 1];
        let old = [slot.0.to_le_bytes(), slot.1.to_le_bytes()].concat();
        *slot = (slot.0 + k, slot.1 + k);
        let new = [slot.0.to_le_bytes(), slot.1.to_le_bytes()].concat();
        let differ: Vec<usize> = (0..8).filter(|&i| old[i] != new[i]).collect();
        if let (Some(first), Some(last)) = (differ.first(), differ.last()) {
            minimal += (RANGE_HEADER + last - first + 1) as u64;
        }
    }
    (count.len() as u64, minimal)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_u64(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), BenchError> {
    let err = |what: &str, p: &Path, e: std::io::Error| {
        BenchError::new(format!("{what} {}: {e}", p.display()))
    };
    fs::create_dir_all(to).map_err(|e| err("creating", to, e))?;
    for entry in fs::read_dir(from).map_err(|e| err("reading", from, e))? {
        let entry = entry.map_err(|e| err("reading", from, e))?;
        let dst = to.join(entry.file_name());
        fs::copy(entry.path(), &dst).map_err(|e| err("copying to", &dst, e))?;
        fs::File::open(&dst)
            .and_then(|f| f.sync_all())
            .map_err(|e| err("syncing", &dst, e))?;
    }
    Ok(())
}

/// The hot update input of OO1 for probability `p`.
fn hot_input(params: GenParams, p: f64) -> Result<(PartId, crate::oo1::UpdatePlan), BenchError> {
    let job = Job {
        op: Op::Update,
        p: Some(p),
    };
    match inputs(params, job, Protocol::OO1).pop() {
        Some(Input::Update { root, plan }) => Ok((root, plan)),
        _ => Err(BenchError::new("the harness gave no update input")),
    }
}

/// One timed update.
struct Sample {
    traverse: Duration,
    commit: Duration,
    stats: CommitStats,
    /// Distinct parts changed, and the minimal records for them, by the
    /// benchmark's own count.
    changed: u64,
    minimal: u64,
    /// Bytes passed to write calls around the update.
    wchar: u64,
}

/// Everything measured on one backend.
struct BackendRun {
    rows: Vec<UpdateRow>,
    first_write: FirstWrite,
}

fn run_backend(
    cfg: &UpdateConfig,
    generated: &GeneratedDb,
    dir: &Path,
    choice: BackendChoice,
) -> Result<BackendRun, BenchError> {
    let factory = AmberFactory::DEFAULT.with_backend(choice);
    let mut eng = factory
        .open_amber(dir, &EngineOptions::default())
        .map_err(|e| BenchError::new(format!("opening the OO1 database: {e}")))?;
    check_backend(choice, eng.db())?;
    let backend = eng.db().backend().to_string();
    let mut reference = Reference::new(generated);
    let mut xy: Vec<(i32, i32)> = generated.parts.iter().map(|p| (p.x, p.y)).collect();
    let mut rows = Vec::new();
    for p in PROBABILITIES {
        let (root, plan) = hot_input(generated.params, p)?;
        let order = visit_order(generated, root);
        let decisions: Vec<bool> = (0..order.len()).map(|v| plan.increment_at(v)).collect();
        let mut samples: Vec<Sample> = Vec::new();
        for i in 0..cfg.warmup + cfg.iters {
            let io0 = IoCounters::now();
            let (answer, cost) = eng
                .update_timed(root, &plan)
                .map_err(|e| BenchError::new(format!("{backend}: update p={p}: {e}")))?;
            let io1 = IoCounters::now();
            let want = reference
                .update(root, &plan)
                .map_err(|e| BenchError::new(format!("reference update: {e}")))?;
            if answer != want {
                return Err(BenchError::new(format!(
                    "{backend}: update p={p} iteration {i} answered {answer:?}, the reference {want:?}"
                )));
            }
            let (changed, minimal) = expected_changes(&mut xy, &order, &decisions);
            let wchar = io0.zip(io1).map_or(0, |(a, b)| a.delta(b).wchar);
            if i >= cfg.warmup {
                samples.push(Sample {
                    traverse: cost.traverse,
                    commit: cost.commit,
                    stats: cost.stats,
                    changed,
                    minimal,
                    wchar,
                });
            }
        }
        let med =
            |f: &dyn Fn(&Sample) -> f64| summarize(&samples.iter().map(f).collect::<Vec<_>>());
        let medu =
            |f: &dyn Fn(&Sample) -> u64| median_u64(&samples.iter().map(f).collect::<Vec<_>>());
        let commit = med(&|s| ms(s.commit));
        let traverse = med(&|s| ms(s.traverse));
        let detect_ms = med(&|s| ms(s.stats.detect)).median;
        let diff_ms = med(&|s| ms(s.stats.diff)).median;
        let write_ms = med(&|s| ms(s.stats.write)).median;
        let log_bytes = medu(&|s| s.stats.log_bytes);
        let minimal_log_bytes = medu(&|s| s.stats.minimal_log_bytes);
        let commit_record_bytes = if log_bytes > 0 { COMMIT_SIZE as u64 } else { 0 };
        let ratio = |num: u64, den: u64| {
            if num == 0 && den == 0 {
                1.0
            } else {
                num as f64 / den as f64
            }
        };
        rows.push(UpdateRow {
            backend: backend.clone(),
            p,
            iters: samples.len(),
            increments: plan.increments() as u64,
            changed_parts: medu(&|s| s.changed),
            commit_ms: commit.median,
            detect_ms,
            diff_ms,
            write_ms,
            other_ms: med(&|s| {
                ms(s.commit
                    .saturating_sub(s.stats.detect + s.stats.diff + s.stats.write))
            })
            .median,
            traverse_ms: traverse.median,
            log_bytes,
            minimal_log_bytes,
            commit_record_bytes,
            log_vs_minimal: ratio(log_bytes - commit_record_bytes, minimal_log_bytes),
            log_vs_minimal_with_commit: ratio(
                log_bytes,
                minimal_log_bytes
                    + if minimal_log_bytes > 0 {
                        COMMIT_SIZE as u64
                    } else {
                        0
                    },
            ),
            expected_minimal_log_bytes: medu(&|s| s.minimal),
            changed_bytes: medu(&|s| s.stats.changed_bytes),
            blocks: medu(&|s| s.stats.blocks),
            wchar: medu(&|s| s.wchar),
            first_write_us: f64::NAN,
            commit_ms_summary: commit,
            traverse_ms_summary: traverse,
        });
    }
    let first_write = first_write(cfg, &mut eng, &backend)?;
    for r in &mut rows {
        r.first_write_us = first_write.first_write_us;
    }
    Box::new(eng)
        .close()
        .map_err(|e| BenchError::new(format!("{backend}: closing: {e}")))?;
    Ok(BackendRun { rows, first_write })
}

/// Parts on `m` distinct pages (the first part of each page, in id order).
fn parts_on_distinct_pages(
    eng: &AmberOo1,
    parts: u32,
    m: usize,
) -> Result<Vec<PRef<Part>>, BenchError> {
    let shift = eng.db().page_size().trailing_zeros();
    let mut pages = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(m);
    for id in 1..=parts {
        if out.len() == m {
            break;
        }
        let p = eng
            .part(id)
            .map_err(|e| BenchError::new(format!("part {id}: {e}")))?;
        if pages.insert(p.addr() >> shift) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The first-write measurement (see the module documentation).
fn first_write(
    cfg: &UpdateConfig,
    eng: &mut AmberOo1,
    backend: &str,
) -> Result<FirstWrite, BenchError> {
    let parts = parts_on_distinct_pages(eng, cfg.parts, cfg.pages)?;
    let m = parts.len().max(1);
    let db = eng.db_mut();
    let (mut first, mut second, mut cost) = (Vec::new(), Vec::new(), Vec::new());
    // The first round makes the pages resident and, by its commit, clean and
    // write-protected; it is not timed.
    for round in 0..=cfg.iters.max(1) {
        let mut tx = db.begin()?;
        let mut sum = 0i64;
        for &p in &parts {
            sum += i64::from(tx.get(p).x);
        }
        black_box(sum);
        let t0 = Instant::now();
        for &p in &parts {
            tx.get_mut(black_box(p)).x += 1;
        }
        let t1 = Instant::now();
        for &p in &parts {
            tx.get_mut(black_box(p)).x -= 1;
        }
        let t2 = Instant::now();
        tx.commit()?;
        if round > 0 {
            let (a, b) = (t1 - t0, t2 - t1);
            first.push(a.as_secs_f64() * 1e6 / m as f64);
            second.push(b.as_secs_f64() * 1e6 / m as f64);
            cost.push((a.as_secs_f64() - b.as_secs_f64()) * 1e6 / m as f64);
        }
    }
    let s = summarize(&cost);
    Ok(FirstWrite {
        backend: backend.to_string(),
        pages: parts.len(),
        rounds: cost.len(),
        first_write_us: s.median,
        first_write_us_summary: s,
        first_loop_us_per_page: summarize(&first).median,
        second_loop_us_per_page: summarize(&second).median,
        target_us: (backend == "uffd").then_some(TARGET_FIRST_WRITE_UFFD_US),
    })
}

/// Runs `amber bench update`.
pub fn update(cfg: &UpdateConfig) -> Result<UpdateReport, BenchError> {
    if cfg.iters == 0 {
        return Err(BenchError::new("--iters must be at least 1"));
    }
    if cfg.pages == 0 {
        return Err(BenchError::new("--pages must be at least 1"));
    }
    let params = GenParams {
        parts: cfg.parts,
        seed: cfg.seed,
    };
    params.validate().map_err(BenchError::new)?;
    let loadavg_before = loadavg();
    let generated = generate(params).map_err(BenchError::new)?;
    let work = Workdir::new(cfg.dir.as_deref())?;
    let base = work.path().join("base");
    fs::create_dir_all(&base)
        .map_err(|e| BenchError::new(format!("creating {}: {e}", base.display())))?;
    let factory = AmberFactory::DEFAULT;
    crate::oo1::EngineFactory::build(&factory, &base, &generated, &EngineOptions::default())
        .map_err(|e| BenchError::new(format!("building the OO1 database: {e}")))?;
    let mut rows = Vec::new();
    let mut first_writes = Vec::new();
    for choice in cfg.backends.choices() {
        let dir = work.path().join(format!("run-{choice:?}"));
        copy_dir(&base, &dir)?;
        let run = run_backend(cfg, &generated, &dir, choice)?;
        rows.extend(run.rows);
        first_writes.push(run.first_write);
        fs::remove_dir_all(&dir)
            .map_err(|e| BenchError::new(format!("removing {}: {e}", dir.display())))?;
    }
    let mut roots = BTreeMap::new();
    for p in PROBABILITIES {
        roots.insert(format!("{p}"), hot_input(params, p)?.0);
    }
    Ok(UpdateReport {
        benchmark: "update",
        parts: cfg.parts,
        seed: cfg.seed,
        roots,
        iters: cfg.iters,
        warmup: cfg.warmup,
        rows,
        first_write: first_writes,
        target_log_vs_minimal: TARGET_LOG_VS_MINIMAL,
        target_first_write_uffd_us: TARGET_FIRST_WRITE_UFFD_US,
        range_header_bytes: RANGE_HEADER,
        commit_record_bytes: COMMIT_SIZE,
        engine: crate::oo1::EngineFactory::info(&factory).summary,
        loadavg_before,
        loadavg_after: loadavg(),
        method: METHOD,
        environment: environment(work.path()),
    })
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

impl UpdateReport {
    /// The result as a table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "update (write path): OO1, {} parts, hot update traversal (3280 visits), one commit each; medians of {} commits after {} warm-up traversals",
            self.parts, self.iters, self.warmup
        );
        let _ = writeln!(
            s,
            "  {:<8} {:>5} {:>6} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7}",
            "backend",
            "p",
            "parts",
            "blocks",
            "commit ms",
            "detect",
            "diff",
            "write",
            "other",
            "traverse",
            "log B",
            "min B",
            "indep B",
            "log/min",
            "wchar"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "  {:<8} {:>5} {:>6} {:>6} {:>9.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>8} {:>8} {:>8} {:>7.3} {:>7}",
                r.backend,
                r.p,
                r.changed_parts,
                r.blocks,
                r.commit_ms,
                r.detect_ms,
                r.diff_ms,
                r.write_ms,
                r.other_ms,
                r.traverse_ms,
                r.log_bytes,
                r.minimal_log_bytes,
                r.expected_minimal_log_bytes,
                r.log_vs_minimal,
                r.wchar
            );
        }
        let _ = writeln!(
            s,
            "  log/min = (log B - {} B commit record) / min B: records against Amber's minimal records (min B excludes the commit record); indep B = minimal records computed from the parts changed",
            self.commit_record_bytes
        );
        let worst = self
            .rows
            .iter()
            .map(|r| r.log_vs_minimal)
            .fold(0.0f64, f64::max);
        let _ = writeln!(
            s,
            "  log bytes <= {:.1} x minimal at every p: worst {:.3} ({})",
            self.target_log_vs_minimal,
            worst,
            verdict(worst <= self.target_log_vs_minimal)
        );
        let _ = writeln!(
            s,
            "  first write per page ({} pages resident, clean, write-protected; (loop 1 - loop 2) / pages, median of rounds):",
            self.first_write.first().map_or(0, |f| f.pages)
        );
        for f in &self.first_write {
            let target = f.target_us.map_or(String::new(), |t| {
                format!(" (target <= {t:.0} µs: {})", verdict(f.first_write_us <= t))
            });
            let _ = writeln!(
                s,
                "    {:<8} {:.3} µs{target}; loop 1 {:.3} µs/page, loop 2 {:.3} µs/page; p10..p90 {:.3}..{:.3}",
                f.backend,
                f.first_write_us,
                f.first_loop_us_per_page,
                f.second_loop_us_per_page,
                f.first_write_us_summary.p10,
                f.first_write_us_summary.p90
            );
        }
        let _ = writeln!(
            s,
            "  kernel {}; {}; {}; load {} -> {}",
            self.environment.kernel,
            self.environment.machine,
            self.environment.filesystem,
            self.loadavg_before,
            self.loadavg_after
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_has_the_keys_and_sane_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = update(&UpdateConfig {
            parts: 2_000,
            backends: Backends::Both,
            iters: 2,
            warmup: 1,
            pages: 16,
            seed: 5,
            dir: Some(dir.path().to_path_buf()),
        })
        .expect("update");
        let json = serde_json::to_value(&r).expect("json");
        let rows = json["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 2 * PROBABILITIES.len());
        for row in rows {
            for key in [
                "backend",
                "p",
                "commit_ms",
                "detect_ms",
                "diff_ms",
                "write_ms",
                "log_bytes",
                "minimal_log_bytes",
                "blocks",
                "first_write_us",
                "iters",
            ] {
                assert!(!row[key].is_null(), "row lacks {key}: {row}");
            }
        }
        for key in ["environment", "loadavg_before", "first_write"] {
            assert!(!json[key].is_null(), "report lacks {key}");
        }
        for row in &r.rows {
            let what = format!("{} p={}", row.backend, row.p);
            assert!(row.commit_ms.is_finite() && row.commit_ms >= 0.0, "{what}");
            assert!(
                row.detect_ms + row.diff_ms + row.write_ms <= row.commit_ms * 1.001 + 1e-3,
                "{what}: the parts exceed the commit"
            );
            assert!(row.first_write_us.is_finite(), "{what}");
            if row.p == 0.0 {
                assert_eq!(row.log_bytes, 0, "{what}: nothing changed, nothing logged");
                assert_eq!(row.blocks, 0, "{what}");
            } else {
                assert!(row.blocks > 0 && row.changed_parts > 0, "{what}");
                assert_eq!(
                    row.log_bytes,
                    row.minimal_log_bytes + COMMIT_SIZE as u64,
                    "{what}: the log holds the minimal records and the commit record"
                );
                assert_eq!(
                    row.minimal_log_bytes, row.expected_minimal_log_bytes,
                    "{what}: Amber's minimum is the one computed from the parts changed"
                );
                assert!(
                    row.wchar >= row.log_bytes,
                    "{what}: wrote less than it logged"
                );
            }
            assert!(row.log_vs_minimal <= TARGET_LOG_VS_MINIMAL, "{what}");
        }
        assert!(r.table().contains("first write"));
    }
}
