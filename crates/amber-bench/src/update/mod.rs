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
//! ([`CommitStats`](amber::CommitStats)):
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
//! **Log bytes against the minimum.** The verdict compares each commit's
//! range records (`log_bytes` minus the commit record every commit
//! writes) with the least record bytes that can log what the traversal
//! changed, which the benchmark computes itself (module `minimal`): from its own
//! copy of every part's `x` and `y` it knows which bytes each commit changes
//! and, from the parts' addresses, where they lie; it then finds the
//! cheapest way to cover them with ranges records (per record a header,
//! per range an entry plus its span, a range within one page,
//! after-images only). Nothing of it comes from Amber's diff, so a diff
//! that logged unchanged bytes, missed a merge or merged too much would show
//! as a ratio above 1. The worst commit decides. Amber's own count of the
//! same minimum (`CommitStats::minimal_log_bytes`, computed by the commit
//! from the regions its diff found, and so equal to the records logged by
//! construction) is reported beside it. `log_bytes` is checked against the
//! bytes this process passed to `write` calls during the commit (`wchar`).
//!
//! **First write per page.** M parts on M distinct pages, resident, clean and
//! write-protected (a commit re-protected them): one transaction reads them
//! (untimed, so that caches and TLB hold them), then increments a field of each
//! in a tight loop (each store is the first to its page: with userfaultfd the
//! kernel resolves the write-protect fault itself; with SIGSEGV the handler
//! copies the clean page into the recovery buffer and `mprotect`s it), then
//! does the same loop again (the pages are now writable: the loop's own cost),
//! and commits. (first loop − second loop) / M is the first-write cost.
//!
//! The per-backend run of update traversals is in `run`, the first-write
//! measurement in `first_write`, and the result and its table in `report`.

mod first_write;
mod minimal;
mod report;
mod run;

pub use report::{FirstWrite, UpdateReport, UpdateRow};

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use amber::Strategy;
use amber::internals::wal::ranges;
use amber::internals::wal::record::COMMIT_SIZE;

use crate::backend::Backends;
use crate::oo1::amber_engine::AmberFactory;
use crate::oo1::args::DEFAULT_SEED;
use crate::oo1::ops::{Input, Job, Op, Protocol, inputs};
use crate::oo1::{EngineOptions, GenParams, PartId, generate};
use crate::storage::{BenchError, Workdir, environment};
use report::METHOD;
use run::SchemeRun;

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
    /// Update-detection schemes: page protection runs on each backend of
    /// `backends`, a software scheme on the first of them.
    pub schemes: Vec<Strategy>,
    /// Update probabilities.
    pub probabilities: Vec<f64>,
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
            schemes: vec![Strategy::DEFAULT],
            probabilities: PROBABILITIES.to_vec(),
        }
    }
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<(), BenchError> {
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
pub(crate) fn hot_input(
    params: GenParams,
    p: f64,
) -> Result<(PartId, crate::oo1::UpdatePlan), BenchError> {
    let job = Job {
        op: Op::Update,
        p: Some(p),
    };
    match inputs(params, job, Protocol::OO1).pop() {
        Some(Input::Update { root, plan }) => Ok((root, plan)),
        _ => Err(BenchError::new("the harness gave no update input")),
    }
}

/// Opens the OO1 database in `dir` with Amber's engine on backend `choice`,
/// under update strategy `strategy`.
pub(crate) fn open_engine(
    dir: &Path,
    choice: amber::BackendChoice,
    strategy: Strategy,
) -> Result<crate::oo1::amber_engine::AmberOo1, BenchError> {
    AmberFactory::DEFAULT
        .with_backend(choice)
        .with_strategy(strategy)
        .open_amber(dir, &EngineOptions::default())
        .map_err(|e| BenchError::new(format!("opening the OO1 database: {e}")))
}

/// Whether strategy `s` runs on each fault backend: page protection does
/// (the backends are two ways of detecting writes); a software barrier
/// and `auto` (whose page protection is the default backend's) run on the
/// first only.
pub(crate) fn on_every_backend(s: Strategy) -> bool {
    !s.is_auto() && !s.detect.is_software()
}

/// The name of strategy `s` in the rows (`scheme`): page protection with
/// differencing by its backend (`pages-uffd`, `pages-sigsegv`), another
/// strategy under page protection by its name and backend (`wpl-uffd`),
/// any other by its own name.
pub(crate) fn scheme_name(s: Strategy, backend: &str) -> String {
    if s == Strategy::DEFAULT {
        format!("pages-{backend}")
    } else if on_every_backend(s) {
        format!("{s}-{backend}")
    } else {
        s.to_string()
    }
}

/// The log generator of strategy `s`, as the rows name it: `diff`, `sl`
/// or `wpl` (`auto` diffs).
pub(crate) fn log_name(s: Strategy) -> &'static str {
    match s.log {
        amber::Log::SubPages => "sl",
        amber::Log::WholePages => "wpl",
        _ => "diff",
    }
}

/// The strategies commits ran under, counted: `"pages 2, remsets 8"`, in
/// order of first appearance.
pub(crate) fn ran_under(strategies: impl Iterator<Item = Strategy>) -> String {
    let mut counts: Vec<(Strategy, usize)> = Vec::new();
    for s in strategies {
        match counts.iter_mut().find(|(x, _)| *x == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Generates the OO1 database of `params` and builds it with Amber's
/// engine in `base` of a fresh working directory (under `dir`).
pub(crate) fn build_base(
    params: GenParams,
    dir: Option<&Path>,
) -> Result<(crate::oo1::GeneratedDb, Workdir, PathBuf), BenchError> {
    let generated = generate(params).map_err(BenchError::new)?;
    let work = Workdir::new(dir)?;
    let base = work.path().join("base");
    fs::create_dir_all(&base)
        .map_err(|e| BenchError::new(format!("creating {}: {e}", base.display())))?;
    crate::oo1::EngineFactory::build(
        &AmberFactory::DEFAULT,
        &base,
        &generated,
        &EngineOptions::default(),
    )
    .map_err(|e| BenchError::new(format!("building the OO1 database: {e}")))?;
    Ok((generated, work, base))
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
    let (generated, work, base) = build_base(params, cfg.dir.as_deref())?;
    let factory = AmberFactory::DEFAULT;
    let mut rows = Vec::new();
    let mut first_writes = Vec::new();
    let choices = cfg.backends.choices();
    let mut runs = Vec::new();
    for &strategy in &cfg.schemes {
        let on = if on_every_backend(strategy) {
            &choices[..]
        } else {
            &choices[..1]
        };
        for &choice in on {
            let dir = work.path().join(format!("run-{choice:?}-{strategy}"));
            copy_dir(&base, &dir)?;
            runs.push((SchemeRun::open(&generated, &dir, choice, strategy)?, dir));
        }
    }
    // Each p on every scheme in turn (`SchemeRun`).
    for &p in &cfg.probabilities {
        for (run, _) in &mut runs {
            run.measure(cfg, &generated, p)?;
        }
    }
    for (run, dir) in runs {
        let run = run.finish(cfg)?;
        rows.extend(run.rows);
        first_writes.push(run.first_write);
        fs::remove_dir_all(&dir)
            .map_err(|e| BenchError::new(format!("removing {}: {e}", dir.display())))?;
    }
    let mut roots = BTreeMap::new();
    for &p in &cfg.probabilities {
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
        ranges_record_bytes: ranges::RECORD,
        range_entry_bytes: ranges::ENTRY,
        commit_record_bytes: COMMIT_SIZE,
        engine: crate::oo1::EngineFactory::info(&factory).summary,
        loadavg_before,
        loadavg_after: loadavg(),
        method: METHOD,
        environment: environment(work.path()),
    })
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
            ..UpdateConfig::default()
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
                "log_vs_minimal",
                "log_vs_minimal_median",
                "engine_minimal_log_bytes",
                "log_vs_engine_minimal",
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
                    row.engine_minimal_log_bytes + COMMIT_SIZE as u64,
                    "{what}: the log holds Amber's minimal records and the commit record"
                );
                assert!(row.minimal_log_bytes > 0, "{what}");
                // Amber's diff and coalescing are exact: every commit's
                // records are the least the benchmark finds for its changes.
                assert_eq!(row.log_vs_minimal, 1.0, "{what}: {row:?}");
                assert_eq!(row.log_vs_minimal_median, 1.0, "{what}");
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
