//! `amber bench detect`: Hosking et al.'s comparison of update-detection
//! schemes (`papers/000_*` §4–6) on the OO1 database, every scheme on one
//! engine: object marking, remembered sets, card marking at 16 to 4096
//! bytes, and page protection on both fault backends.
//!
//! This first part is the hot update experiment (the paper's Figs. 7–10):
//! `amber bench update`'s measurement (the same database, roots, decisions,
//! warm-up and independent minimal log, `update.rs`) run once per scheme,
//! at p ∈ {0, 0.05, 0.10, 0.15, 0.20, 0.50, 1.00}, each row split into the
//! paper's phases:
//!
//! - *running*: the traversal with its stores, barriers included;
//! - *old*: finding the modified old objects (the scheme's commit scan, or
//!   listing written pages) and diffing them (`detect_ms` + `diff_ms`);
//! - *new*: new objects (none in an update: 0);
//! - *write*: appending the records and syncing the log;
//! - *other*: the rest of the commit.
//!
//! Every scheme must give the same log: `log_bytes` and the independent
//! `minimal_log_bytes` are reported per row. The verdict of the issue's
//! second target is computed here: at p = 0.05 the best software scheme's
//! detect + diff against page protection's (userfaultfd), both from this
//! run.
//!
//! Then, on fresh copies of the database per scheme, the lookups and
//! traversals (`reads.rs`: 1 cold and 9 warm iterations), and the long
//! transactions (`long.rs`): k traversals per commit, with the fit
//! y = a + b·k per scheme and p. `auto` is not built yet.

pub mod auto;
mod long;
mod reads;

pub use long::{FitRow, LongRow};
pub use reads::ReadRow;

use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

use amber::{BackendChoice, Detect, Strategy};

use crate::backend::Backends;
use crate::olsim::plot::{Series, line_chart};
use crate::oo1::GenParams;
use crate::storage::BenchError;
use crate::update::{
    UpdateConfig, UpdateReport, build_base, copy_dir, on_every_backend, scheme_name, update,
};

/// Every scheme, in the order rows are reported.
pub fn all_schemes() -> Vec<Strategy> {
    let mut v = vec![Detect::Pages, Detect::Objects, Detect::Remsets];
    v.extend([16, 64, 256, 1024, 4096].map(|bytes| Detect::Cards { bytes }));
    let mut v: Vec<Strategy> = v.into_iter().map(Strategy::detect).collect();
    v.push(Strategy::AUTO);
    v
}

/// The update probabilities of Hosking's figures.
pub const PROBABILITIES: [f64; 7] = [0.0, 0.05, 0.10, 0.15, 0.20, 0.50, 1.00];

/// Settings of `amber bench detect`.
#[derive(Clone, Debug)]
pub struct DetectConfig {
    /// OO1 parts.
    pub parts: u32,
    /// Schemes to measure.
    pub schemes: Vec<Strategy>,
    /// Timed commits per (scheme, p).
    pub iters: usize,
    /// Untimed traversals before them.
    pub warmup: usize,
    /// Seed of the database and inputs.
    pub seed: u64,
    /// Directory for the databases.
    pub dir: Option<PathBuf>,
    /// Traversals per transaction of the long-transaction experiment
    /// (empty: not run).
    pub long_ks: Vec<usize>,
    /// Its update probabilities.
    pub long_ps: Vec<f64>,
    /// Its timed transactions per (scheme, p, k).
    pub long_iters: usize,
}

/// Hosking's k (traversals per transaction).
pub const LONG_KS: [usize; 8] = [50, 100, 150, 200, 400, 600, 800, 1000];

/// Hosking's p for the long transactions.
pub const LONG_PS: [f64; 5] = [0.0, 0.05, 0.2, 0.5, 1.0];

/// One row of the JSON's `results`.
#[derive(Clone, Debug, Serialize)]
pub struct DetectRow {
    pub scheme: String,
    pub op: &'static str,
    pub phase: &'static str,
    pub p: f64,
    /// Running plus the commit, ms (medians summed).
    pub ms: f64,
    pub running_ms: f64,
    pub old_ms: f64,
    pub new_ms: f64,
    pub write_ms: f64,
    pub other_ms: f64,
    /// The two parts of `old_ms`.
    pub detect_ms: f64,
    pub diff_ms: f64,
    pub log_bytes: u64,
    /// The independent count of the least log (commit record excluded).
    pub minimal_log_bytes: u64,
    /// The commit record every non-empty commit adds.
    pub commit_record_bytes: u64,
    /// Bytes the scheme said may have been written (what the commit diffed).
    pub noted_bytes: u64,
    pub blocks: u64,
    /// The strategies the timed commits ran under, counted.
    pub ran_under: String,
    /// The log generator (`diff`, `sl`, `wpl`), and the worst commit's
    /// records over the independent minimal count: 1 for `diff`, larger by
    /// design for `sl` and `wpl`.
    pub log: &'static str,
    pub log_vs_minimal: f64,
}

/// What `amber bench detect` reports.
#[derive(Clone, Debug, Serialize)]
pub struct DetectReport {
    pub benchmark: &'static str,
    pub parts: u32,
    pub results: Vec<DetectRow>,
    /// Lookups and traversals per scheme: cold and warm.
    pub reads: Vec<ReadRow>,
    /// The long transactions' rows.
    pub long: Vec<LongRow>,
    /// y = a + b·k per (scheme, p), ms.
    pub fits: Vec<FitRow>,
    /// Whether every differencing scheme logged the same bytes at every (p, k).
    pub same_long_log_everywhere: bool,
    /// At p = 0.05: the best software scheme, its detect + diff over
    /// pages-uffd's (target ≤ 1/3).
    pub best_software_at_0_05: Option<String>,
    pub detect_diff_vs_pages_at_0_05: Option<f64>,
    /// Whether every differencing scheme logged the same bytes at every p.
    pub same_log_everywhere: bool,
    /// `auto` against the best fixed scheme on every hot-update and
    /// long-transaction row, and the worst ratio (target ≤ 1.10).
    pub auto: Vec<auto::AutoRow>,
    pub auto_worst_ratio: Option<f64>,
    /// The measurement underneath (its rows, environment and method).
    pub update: UpdateReport,
}

/// Runs `amber bench detect`.
pub fn detect(cfg: &DetectConfig) -> Result<DetectReport, BenchError> {
    let r = update(&UpdateConfig {
        parts: cfg.parts,
        backends: Backends::Both,
        iters: cfg.iters,
        warmup: cfg.warmup,
        pages: 64,
        seed: cfg.seed,
        dir: cfg.dir.clone(),
        schemes: cfg.schemes.clone(),
        probabilities: PROBABILITIES.to_vec(),
    })?;
    let results: Vec<DetectRow> = r
        .rows
        .iter()
        .map(|u| DetectRow {
            scheme: u.scheme.clone(),
            op: "update",
            phase: "hot",
            p: u.p,
            ms: u.traverse_ms + u.commit_ms,
            running_ms: u.traverse_ms,
            old_ms: u.detect_ms + u.diff_ms,
            new_ms: 0.0,
            write_ms: u.write_ms,
            other_ms: u.other_ms,
            detect_ms: u.detect_ms,
            diff_ms: u.diff_ms,
            log_bytes: u.log_bytes,
            minimal_log_bytes: u.minimal_log_bytes,
            commit_record_bytes: u.commit_record_bytes,
            noted_bytes: u.noted_bytes,
            blocks: u.blocks,
            ran_under: u.ran_under.clone(),
            log: u.log,
            log_vs_minimal: u.log_vs_minimal,
        })
        .collect();
    let at = |scheme: &str| {
        results
            .iter()
            .find(|r| r.scheme == scheme && r.p == 0.05)
            .map(|r| r.old_ms)
    };
    let best = results
        .iter()
        .filter(|r| {
            r.p == 0.05 && r.log == "diff" && !r.scheme.starts_with("pages") && r.scheme != "auto"
        })
        .min_by(|a, b| a.old_ms.total_cmp(&b.old_ms));
    let ratio = best.and_then(|b| at("pages-uffd").map(|pages| b.old_ms / pages));
    let same_log_everywhere = PROBABILITIES.iter().all(|&p| {
        let logs: Vec<u64> = results
            .iter()
            .filter(|r| r.p == p && r.log == "diff")
            .map(|r| r.log_bytes)
            .collect();
        logs.windows(2).all(|w| w[0] == w[1])
    });
    let (reads, long) = per_scheme(cfg)?;
    let same_long_log_everywhere = long.iter().filter(|r| r.log == "diff").all(|r| {
        long.iter()
            .filter(|x| x.p == r.p && x.k == r.k && x.log == "diff")
            .all(|x| x.log_bytes == r.log_bytes)
    });
    let auto = auto::compare(&results, &long);
    Ok(DetectReport {
        benchmark: "detect",
        auto_worst_ratio: auto.iter().map(|a| a.ratio).max_by(f64::total_cmp),
        auto,
        fits: long::fits(&long),
        reads,
        long,
        same_long_log_everywhere,
        parts: cfg.parts,
        best_software_at_0_05: best.map(|b| b.scheme.clone()),
        detect_diff_vs_pages_at_0_05: ratio,
        same_log_everywhere,
        results,
        update: r,
    })
}

/// The read rows and the long-transaction experiment, on every scheme.
fn per_scheme(cfg: &DetectConfig) -> Result<(Vec<ReadRow>, Vec<LongRow>), BenchError> {
    let params = GenParams {
        parts: cfg.parts,
        seed: cfg.seed,
    };
    let (generated, work, base) = build_base(params, cfg.dir.as_deref())?;
    let mut reads = Vec::new();
    let mut long_schemes = Vec::new();
    for &strategy in &cfg.schemes {
        let choices: &[BackendChoice] = if on_every_backend(strategy) {
            &[BackendChoice::Uffd, BackendChoice::Sigsegv]
        } else {
            &[BackendChoice::Uffd]
        };
        for &choice in choices {
            let backend = if choice == BackendChoice::Sigsegv {
                "sigsegv"
            } else {
                "uffd"
            };
            let scheme = scheme_name(strategy, backend);
            let dir = work.path().join(format!("reads-{scheme}"));
            copy_dir(&base, &dir)?;
            reads.extend(reads::run_scheme(
                &generated, &dir, choice, strategy, &scheme,
            )?);
            std::fs::remove_dir_all(&dir)
                .map_err(|e| BenchError::new(format!("removing {}: {e}", dir.display())))?;
            if cfg.long_ks.is_empty() {
                continue;
            }
            let dir = work.path().join(format!("long-{scheme}"));
            copy_dir(&base, &dir)?;
            long_schemes.push(long::LongScheme {
                scheme,
                choice,
                strategy,
                dir,
            });
        }
    }
    let rows = if long_schemes.is_empty() {
        Vec::new()
    } else {
        long::run(
            &generated,
            &long_schemes,
            &cfg.long_ps,
            &cfg.long_ks,
            cfg.long_iters.max(1),
            cfg.seed,
        )?
    };
    for s in &long_schemes {
        std::fs::remove_dir_all(&s.dir)
            .map_err(|e| BenchError::new(format!("removing {}: {e}", s.dir.display())))?;
    }
    Ok((reads, rows))
}

impl DetectReport {
    /// The figures as SVG line charts, `(name, svg)`: `hot` (detect + diff
    /// against p, Figs. 7–10) and `long` (ms per transaction against k at
    /// each p of the long transactions, Figs. 13–14).
    pub fn plots(&self) -> Vec<(String, String)> {
        let schemes: Vec<&str> = self.results.iter().fold(Vec::new(), |mut v, r| {
            if !v.contains(&r.scheme.as_str()) {
                v.push(&r.scheme);
            }
            v
        });
        let hot: Vec<Series> = schemes
            .iter()
            .map(|&sc| {
                let pts = self
                    .results
                    .iter()
                    .filter(|r| r.scheme == sc)
                    .map(|r| (r.p, r.old_ms));
                (sc.to_string(), pts.collect())
            })
            .collect();
        let mut out = vec![(
            "hot".to_string(),
            line_chart(
                "Hot update: detect + diff per commit (OO1)",
                "p (update probability)",
                "ms",
                &hot,
                false,
            ),
        )];
        let mut ps: Vec<f64> = self.long.iter().map(|r| r.p).collect();
        ps.dedup();
        ps.sort_by(f64::total_cmp);
        ps.dedup();
        for p in ps {
            let series: Vec<Series> = schemes
                .iter()
                .map(|&sc| {
                    let pts = self
                        .long
                        .iter()
                        .filter(|r| r.scheme == sc && r.p == p)
                        .map(|r| (r.k as f64, r.ms));
                    (sc.to_string(), pts.collect())
                })
                .filter(|(_, pts): &Series| !pts.is_empty())
                .collect();
            out.push((
                format!("long-p{p}"),
                line_chart(
                    &format!("Long transactions at p = {p}: ms per transaction"),
                    "k (traversals per transaction)",
                    "ms",
                    &series,
                    false,
                ),
            ));
        }
        out
    }

    /// The table printed by the command.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "detect: OO1, {} parts, hot update traversal, one commit each (medians); phases as Hosking et al.",
            self.parts
        );
        let _ = writeln!(
            s,
            "  {:<13} {:>5} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}",
            "scheme",
            "p",
            "ms",
            "running",
            "detect",
            "diff",
            "write",
            "other",
            "noted B",
            "log B",
            "min B",
            "log/min"
        );
        for r in &self.results {
            let _ = writeln!(
                s,
                "  {:<13} {:>5} {:>9.3} {:>9.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9} {:>9} {:>9} {:>7.3}",
                r.scheme,
                r.p,
                r.ms,
                r.running_ms,
                r.detect_ms,
                r.diff_ms,
                r.write_ms,
                r.other_ms,
                r.noted_bytes,
                r.log_bytes,
                r.minimal_log_bytes,
                r.log_vs_minimal
            );
        }
        if let (Some(b), Some(x)) = (
            &self.best_software_at_0_05,
            self.detect_diff_vs_pages_at_0_05,
        ) {
            let _ = writeln!(
                s,
                "  p = 0.05: best software scheme {b}: detect + diff = {x:.3} of pages-uffd's (target <= 0.333)"
            );
        }
        let _ = writeln!(
            s,
            "  every scheme logged the same bytes at every p: {}",
            self.same_log_everywhere
        );
        if !self.auto.is_empty() {
            let _ = writeln!(
                s,
                "auto against the best fixed scheme (target <= {})",
                auto::AUTO_BOUND
            );
            for a in &self.auto {
                let k = a.k.map_or(String::new(), |k| format!(" k={k}"));
                let _ = writeln!(
                    s,
                    "  {:<5} p={:<5}{k:<7} auto {:>9.3} ms, best {:<13} {:>9.3} ms: {:.3} ({})",
                    a.phase, a.p, a.auto_ms, a.best_scheme, a.best_ms, a.ratio, a.ran_under
                );
            }
        }
        if !self.reads.is_empty() {
            let _ = writeln!(s, "lookups and traversals (1 cold, median of 9 warm), ms:");
            for r in &self.reads {
                let _ = writeln!(
                    s,
                    "  {:<13} {:<9} {:<5} {:>9.3}",
                    r.scheme, r.op, r.phase, r.ms
                );
            }
        }
        if !self.fits.is_empty() {
            let _ = writeln!(
                s,
                "long transactions: k traversals per commit, ms = a + b*k (least squares); same log at every (p, k): {}",
                self.same_long_log_everywhere
            );
            let _ = writeln!(
                s,
                "  {:<13} {:>5} {:>10} {:>10} {:>7}",
                "scheme", "p", "a ms", "b ms", "r2"
            );
            for f in &self.fits {
                let _ = writeln!(
                    s,
                    "  {:<13} {:>5} {:>10.3} {:>10.4} {:>7.4}",
                    f.scheme, f.p, f.a_ms, f.b_ms, f.r2
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_every_scheme_logs_the_minimum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = detect(&DetectConfig {
            parts: 2_000,
            schemes: all_schemes(),
            iters: 2,
            warmup: 1,
            seed: 5,
            dir: Some(dir.path().to_path_buf()),
            long_ks: vec![1, 3],
            long_ps: vec![0.0, 0.2],
            long_iters: 1,
        })
        .expect("detect");
        // Page protection on two backends, seven software schemes, auto.
        assert_eq!(r.long.len(), 10 * 2 * 2);
        assert_eq!(r.reads.len(), 10 * 2 * 2);
        assert!(r.reads.iter().all(|x| x.ms > 0.0));
        assert_eq!(r.fits.len(), 10 * 2);
        assert!(r.same_long_log_everywhere);
        let plots = r.plots();
        assert_eq!(plots.len(), 1 + 2, "hot, and one per long p");
        assert!(
            plots
                .iter()
                .all(|(_, svg)| svg.starts_with("<svg") && svg.contains("remsets"))
        );
        assert_eq!(r.results.len(), 10 * PROBABILITIES.len());
        // auto against the best fixed scheme on every hot and long row.
        assert_eq!(r.auto.len(), PROBABILITIES.len() + 2 * 2);
        assert!(
            r.auto
                .iter()
                .all(|a| a.ratio > 0.0 && !a.ran_under.is_empty())
        );
        let json = serde_json::to_value(&r).expect("json");
        for row in json["results"].as_array().expect("results") {
            for key in [
                "scheme",
                "op",
                "phase",
                "p",
                "ms",
                "running_ms",
                "old_ms",
                "new_ms",
                "write_ms",
                "other_ms",
                "log_bytes",
                "minimal_log_bytes",
            ] {
                assert!(!row[key].is_null(), "row lacks {key}: {row}");
            }
        }
        for row in &r.results {
            let what = format!("{} p={}", row.scheme, row.p);
            // The independent minimum, exactly, under every scheme.
            assert_eq!(
                row.log_bytes - row.commit_record_bytes,
                row.minimal_log_bytes,
                "{what}"
            );
            if row.p > 0.0 && !row.scheme.starts_with("pages") {
                let pages = r
                    .results
                    .iter()
                    .find(|x| x.scheme == "pages-uffd" && x.p == row.p)
                    .expect("pages-uffd row");
                assert!(row.noted_bytes <= pages.noted_bytes, "{what}");
            }
        }
        assert!(r.same_log_everywhere);
        assert!(r.detect_diff_vs_pages_at_0_05.is_some());
    }
}
