//! The report of `amber bench epvm`: JSON rows (medians over rounds), and
//! the paper's Tables 1–6 and Figures 7–10 and 12–13 as tables, each with
//! the paper's figures and conclusion beside what was measured here.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::child::{ChildRun, Iteration};
use super::paper::{self, ColdWarm, said};
use super::{EpvmConfig, Experiment, FIGURE_11_P, Labelled, Version, schema};
use crate::storage::{Environment, environment, median, median_u64, range};

/// A database as built.
#[derive(Clone, Debug, Serialize)]
pub struct Build {
    /// `baselines` (raw pages), `mapped` (Amber's objects, OO1's part) or
    /// `fig11` (Amber's objects, Figure 11's part).
    pub database: &'static str,
    pub parts: u32,
    pub pages: u64,
    pub build_ms: f64,
}

/// One cell: medians over rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub version: Version,
    pub parts: u32,
    /// `traversal`, `traversal+random` (a random draw per visit, Table 3's
    /// first column) or `update`.
    pub op: &'static str,
    /// `single` (one transaction) or `per-iteration`.
    pub tx: &'static str,
    /// `cold`, `warm` (the tenth iteration), `hot` (the mean hot
    /// iteration), `total` (every iteration and commit of an update run) or
    /// `sweep` (1 cold and `iterations` hot, commit included).
    pub phase: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// Hot iterations of a sweep; iterations of an update run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    pub ms: f64,
    /// The smallest and largest round.
    pub ms_range: (f64, f64),
    /// User + system CPU of the process over the same span (median): on a
    /// shared machine the steadier measure of work that does not wait.
    pub cpu_ms: f64,
    /// Parts visited.
    pub count: u64,
    /// Parts updated.
    pub changed: u64,
    /// Pages read from below (the paper's I/Os), where the version can tell.
    pub reads: Option<u64>,
    /// Objects copied into the object cache (the copy versions): per
    /// iteration of the phase, or over the run for `total` and `sweep`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied: Option<u64>,
    /// Log bytes written by the run's commits (`total` and `sweep` rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
    /// Figure 11 (`op` = `fig11`): integers of the part's 19 each update
    /// changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ints: Option<usize>,
    pub rounds: usize,
}

/// Everything `amber bench epvm` reports.
#[derive(Clone, Debug, Serialize)]
pub struct EpvmReport {
    pub bench: &'static str,
    pub parts: Vec<u32>,
    pub rounds: usize,
    pub seed: u64,
    /// Buffer pool (baselines) and cache budget (mapped).
    pub pool_pages: usize,
    pub pool: String,
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
    pub environment: Environment,
    pub backend: Option<String>,
    /// The versions of the issue not built yet.
    pub not_built: &'static str,
    pub builds: Vec<Build>,
    pub rows: Vec<Row>,
}

/// A cell of one run: ms, CPU ms, parts visited, parts changed, reads,
/// objects copied.
type Cell = (f64, f64, u64, u64, Option<u64>, Option<u64>);

/// A phase of a run: the mean of `its` iterations' times, their visits,
/// changes, reads and copies.
fn phase(its: &[Iteration]) -> Cell {
    let n = its.len().max(1) as f64;
    let mean = |v: Option<Vec<u64>>| v.map(|r| r.iter().sum::<u64>() / r.len().max(1) as u64);
    (
        its.iter().map(|i| i.ms).sum::<f64>() / n,
        its.iter().map(|i| i.cpu_ms).sum::<f64>() / n,
        its.first().map_or(0, |i| i.answer.count),
        its.first().map_or(0, |i| i.answer.changed),
        mean(its.iter().map(|i| i.reads).collect()),
        mean(its.iter().map(|i| i.copied).collect()),
    )
}

impl EpvmReport {
    pub(super) fn new(
        config: &EpvmConfig,
        builds: &[Build],
        runs: &[Labelled],
        load_before: Option<f64>,
        load_after: Option<f64>,
        dir: &Path,
    ) -> EpvmReport {
        let mut rows = Vec::new();
        for &parts in &config.parts {
            for e in config.experiments_for(parts) {
                for &v in &config.versions {
                    let set: Vec<&ChildRun> = runs
                        .iter()
                        .filter(|r| r.0 == v && r.1 == parts && r.2 == e)
                        .map(|r| &r.4)
                        .collect();
                    if !set.is_empty() {
                        rows.extend(rows_of(v, parts, e, &set));
                    }
                }
            }
        }
        EpvmReport {
            bench: "epvm",
            parts: config.parts.clone(),
            rounds: config.rounds,
            seed: config.seed,
            pool_pages: config.pool_pages,
            pool: format!(
                "{} pages of 4 KiB ({:.2} MiB): the buffer pool of cesm, epvm1 and epvm1-no and the cache budget of mapped, oc, oc-no and oc-eager (the paper's 5 MB); oc-small-pool, pc and pc-no get a fifth, {} pages (the paper's 1 MB), and an object cache without bound; the paper's 5 MB pool held its 3.8 MB small database with a third to spare and a fifth of its large one, and {} pages stand in the same ratio to the baselines' 20,000-part database ({} pages)",
                config.pool_pages,
                (config.pool_pages * 4096) as f64 / f64::from(1 << 20),
                super::copying::pool_pages(Version::Pc, config.pool_pages),
                super::scaled_pool_pages(),
                super::rawdb::pages(u64::from(super::SMALL_MAX)),
            ),
            load_before,
            load_after,
            environment: environment(dir),
            backend: runs.iter().find_map(|r| r.4.backend.clone()),
            not_built: "the C row of Table 3 (a transient program) and the paper's client-server setting (every version reads this machine's store)",
            builds: builds.to_vec(),
            rows,
        }
    }

    /// The cell of these coordinates.
    #[allow(clippy::too_many_arguments)]
    pub fn cell(
        &self,
        v: Version,
        parts: u32,
        op: &str,
        tx: &str,
        phase: &str,
        p: Option<f64>,
        iterations: Option<usize>,
    ) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.version == v
                && r.parts == parts
                && r.op == op
                && r.tx == tx
                && r.phase == phase
                && (p.is_none() || r.p == p)
                && (iterations.is_none() || r.iterations == iterations)
        })
    }

    fn versions(&self) -> Vec<Version> {
        let mut v: Vec<Version> = self.rows.iter().map(|r| r.version).collect();
        v.sort();
        v.dedup();
        v
    }

    /// The printed tables.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "White & DeWitt, VLDB 1992, on Amber's store: OO1, medians of {} rounds, milliseconds (the paper: seconds on a 1992 client and server)",
            self.rounds
        );
        let _ = writeln!(
            s,
            "  load average before {} after {}; kernel {}; {}; file system {}; Amber's backend {}",
            fmt_opt(self.load_before),
            fmt_opt(self.load_after),
            self.environment.kernel,
            self.environment.machine,
            self.environment.filesystem,
            self.backend.as_deref().unwrap_or("-")
        );
        let _ = writeln!(s, "  pool: {}", self.pool);
        for b in &self.builds {
            let _ = writeln!(
                s,
                "  built {:>7} parts, {:<9} database: {:>5} pages in {:.0} ms",
                b.parts, b.database, b.pages, b.build_ms
            );
        }
        let small: Vec<u32> = self
            .parts
            .iter()
            .copied()
            .filter(|&p| p <= super::SMALL_MAX)
            .collect();
        let large: Vec<u32> = self
            .parts
            .iter()
            .copied()
            .filter(|&p| p > super::SMALL_MAX)
            .collect();
        for &parts in &small {
            self.cold_warm(
                &mut s,
                "Table 1",
                parts,
                "single",
                &paper::TABLE_1,
                &[said::TABLE_1_COLD, said::TABLE_1_WARM],
            );
            self.cold_warm(
                &mut s,
                "Table 2 (EPVM 2.0's versions)",
                parts,
                "single",
                &paper::TABLE_2,
                &[said::TABLE_2],
            );
            self.eager(&mut s, parts);
            self.hot(&mut s, parts);
            self.cold_warm(
                &mut s,
                "Table 4",
                parts,
                "per-iteration",
                &paper::TABLE_4,
                &[said::TABLE_4],
            );
            self.updates(&mut s, "Figure 7", parts, "single", said::FIGURE_7);
            self.updates(&mut s, "Figure 8", parts, "per-iteration", said::FIGURE_8);
            self.sweep(&mut s, "Figure 9", parts, 0.0, said::FIGURE_9);
            self.sweep(&mut s, "Figure 10", parts, 0.01, said::FIGURE_10);
            self.figure_11(&mut s, parts);
        }
        for &parts in &large {
            self.cold_warm(
                &mut s,
                "Table 5",
                parts,
                "single",
                &paper::TABLE_5,
                &[said::TABLE_5],
            );
            self.cold_warm(
                &mut s,
                "Table 6 (EPVM 2.0's versions)",
                parts,
                "single",
                &paper::TABLE_6,
                &[said::TABLE_6],
            );
            self.eager(&mut s, parts);
            self.cold_warm(
                &mut s,
                "(Table 5, a transaction per iteration)",
                parts,
                "per-iteration",
                &[],
                &[],
            );
            self.updates(&mut s, "Figure 12", parts, "single", said::FIGURE_12);
            self.updates(&mut s, "Figure 13", parts, "per-iteration", said::FIGURE_13);
        }
        let _ = writeln!(s, "\nnot built: {}", self.not_built);
        s
    }

    fn cold_warm(
        &self,
        s: &mut String,
        title: &str,
        parts: u32,
        tx: &str,
        paper: &[ColdWarm],
        said: &[&str],
    ) {
        let versions = self.versions();
        let cell = |v, phase| self.cell(v, parts, "traversal", tx, phase, None, None);
        if !versions.iter().any(|&v| cell(v, "cold").is_some()) {
            return;
        }
        let _ = writeln!(
            s,
            "\n{title}: {parts} parts, traversal without updates, {}; ms (CPU ms)",
            if tx == "single" {
                "one transaction (begin and commit not timed)"
            } else {
                "a transaction per iteration (commit timed)"
            }
        );
        let _ = writeln!(
            s,
            "  {:<10} {:>19} {:>6} {:>19} {:>6}   | {:<9} {:>8} {:>5} {:>8} {:>9}",
            "version", "cold", "I/Os", "warm", "I/Os", "paper", "cold s", "I/Os", "warm s", "I/Os"
        );
        let theirs = |name: &str| {
            paper
                .iter()
                .find(|r| r.0 == name)
                .map(|(name, cold, cio, warm, wio)| {
                    format!("{name:<9} {cold:>8.3} {cio:>5} {warm:>8.3} {wio:>9}")
                })
        };
        for &v in &versions {
            let (c, w) = (cell(v, "cold"), cell(v, "warm"));
            let _ = writeln!(
                s,
                "  {:<10} {:>19} {:>6} {:>19} {:>6}   | {}",
                v.name(),
                fmt_cell(c),
                c.map_or("-".into(), |r| fmt_reads(r.reads)),
                fmt_cell(w),
                w.map_or("-".into(), |r| fmt_reads(r.reads)),
                theirs(v.paper_name()).unwrap_or_default()
            );
        }
        for (name, ..) in paper {
            if !versions.iter().any(|v| v.paper_name() == *name) {
                let _ = writeln!(
                    s,
                    "  {:<10} {:>19} {:>6} {:>19} {:>6}   | {}",
                    "-",
                    "",
                    "",
                    "",
                    "",
                    theirs(name).unwrap_or_default()
                );
            }
        }
        for line in said {
            let _ = writeln!(s, "  paper: {line}");
        }
        for phase in ["cold", "warm"] {
            let _ = writeln!(
                s,
                "  here ({phase}, by CPU): {}",
                self.ranking(parts, "traversal", tx, phase, None, None, Measure::Cpu)
            );
        }
    }

    /// Objects copied by the object-caching versions, and eager swizzling
    /// against lazy beside the paper's Figure 4b.
    fn eager(&self, s: &mut String, parts: u32) {
        let cell = |v, phase| self.cell(v, parts, "traversal", "single", phase, None, None);
        let copied = |v, phase| cell(v, phase).and_then(|r| r.copied);
        let versions: Vec<Version> = self
            .versions()
            .into_iter()
            .filter(|&v| copied(v, "cold").is_some())
            .collect();
        if versions.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "\nObjects copied into the object cache: {parts} parts, one transaction, per iteration"
        );
        let _ = writeln!(
            s,
            "  {:<14} {:>8} {:>8} {:>8}",
            "version", "cold", "warm", "hot"
        );
        for &v in &versions {
            let n = |phase| copied(v, phase).map_or("-".into(), |c: u64| c.to_string());
            let _ = writeln!(
                s,
                "  {:<14} {:>8} {:>8} {:>8}",
                v.name(),
                n("cold"),
                n("warm"),
                n("hot")
            );
        }
        let (eager, lazy) = paper::FIGURE_4B;
        let _ = writeln!(s, "  paper: {}", said::FIGURE_4B);
        for phase in ["cold", "warm"] {
            let (Some(e), Some(l)) = (cell(Version::OcEager, phase), cell(Version::Oc, phase))
            else {
                continue;
            };
            let (Some(ec), Some(lc)) = (e.copied, l.copied) else {
                continue;
            };
            let _ = writeln!(
                s,
                "  here ({phase}): oc-eager copied {ec} objects against oc's {lc} ({:.2}x; the paper's Figure 4b {eager} against {lazy}, {:.1}x), {} against {} I/Os, CPU {:.2}x oc's",
                ec as f64 / lc.max(1) as f64,
                f64::from(eager) / f64::from(lazy),
                fmt_reads(e.reads),
                fmt_reads(l.reads),
                e.cpu_ms / l.cpu_ms
            );
        }
    }

    fn hot(&self, s: &mut String, parts: u32) {
        let versions = self.versions();
        let hot = |v| self.cell(v, parts, "traversal", "single", "hot", None, None);
        if !versions.iter().any(|&v| hot(v).is_some()) {
            return;
        }
        let _ = writeln!(
            s,
            "\nTable 3: {parts} parts, hot traversal, one transaction; ms (CPU ms)"
        );
        let _ = writeln!(
            s,
            "  {:<10} {:>19} {:>19}   | {:<9} {:>8} {:>13}",
            "version", "hot", "w/o random", "paper", "hot s", "w/o random s"
        );
        let theirs = |name: &str| {
            paper::TABLE_3
                .iter()
                .find(|r| r.0 == name)
                .map(|(name, hot, wo)| format!("{name:<9} {hot:>8.3} {wo:>13.3}"))
        };
        let cell = |v, op| self.cell(v, parts, op, "single", "hot", None, None);
        for &v in &versions {
            let _ = writeln!(
                s,
                "  {:<10} {:>19} {:>19}   | {}",
                v.name(),
                fmt_cell(cell(v, "traversal+random")),
                fmt_cell(cell(v, "traversal")),
                theirs(v.paper_name()).unwrap_or_default()
            );
        }
        for (name, ..) in paper::TABLE_3 {
            if !versions.iter().any(|v| v.paper_name() == name) {
                let _ = writeln!(
                    s,
                    "  {:<10} {:>19} {:>19}   | {}",
                    "-",
                    "",
                    "",
                    theirs(name).unwrap_or_default()
                );
            }
        }
        let _ = writeln!(s, "  paper: {}", said::TABLE_3);
        for (label, op) in [
            ("w/o random", "traversal"),
            ("with random", "traversal+random"),
        ] {
            let _ = writeln!(
                s,
                "  here ({label}, by CPU): {}",
                self.ranking(parts, op, "single", "hot", None, None, Measure::Cpu)
            );
        }
        let ratio = |a: Version, b: Version| {
            Some(cell(a, "traversal")?.cpu_ms / cell(b, "traversal")?.cpu_ms)
        };
        let facts: Vec<String> = [
            (Version::Cesm, Version::Epvm1),
            (Version::Cesm, Version::Mapped),
            (Version::Epvm1, Version::Mapped),
            (Version::Epvm1No, Version::Epvm1),
        ]
        .into_iter()
        .filter_map(|(a, b)| ratio(a, b).map(|r| format!("{a} / {b} {r:.2}")))
        .collect();
        let _ = writeln!(s, "  here (w/o random, CPU): {}", facts.join(", "));
    }

    fn updates(&self, s: &mut String, title: &str, parts: u32, tx: &str, said: &str) {
        let rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.parts == parts && r.op == "update" && r.tx == tx && r.phase == "total")
            .collect();
        let mut ps: Vec<f64> = rows.iter().filter_map(|r| r.p).collect();
        ps.sort_by(f64::total_cmp);
        ps.dedup();
        let (Some(&first), Some(&last)) = (ps.first(), ps.last()) else {
            return;
        };
        let iterations = rows.first().and_then(|r| r.iterations).unwrap_or(0);
        let _ = writeln!(
            s,
            "\n{title}: {parts} parts, {iterations} iterations (1 cold, 9 warm, {} hot) updating with probability p, {}; commits included",
            iterations.saturating_sub(10),
            if tx == "single" {
                "one transaction"
            } else {
                "a transaction per iteration"
            }
        );
        let xs: Vec<String> = ps.iter().map(f64::to_string).collect();
        let cell = |v, x: &str| {
            let p = x.parse::<f64>().ok()?;
            self.cell(v, parts, "update", tx, "total", Some(p), None)
        };
        self.grid(s, "p", &xs, &cell);
        let _ = writeln!(s, "  paper: {said}");
        for p in [first, last] {
            for m in [Measure::Wall, Measure::Cpu] {
                let _ = writeln!(
                    s,
                    "  here (p = {p}, by {}): {}",
                    m.name(),
                    self.ranking(parts, "update", tx, "total", Some(p), None, m)
                );
            }
        }
    }

    fn sweep(&self, s: &mut String, title: &str, parts: u32, p: f64, said: &str) {
        let versions = self.versions();
        let mut ns: Vec<usize> = self
            .rows
            .iter()
            .filter(|r| r.parts == parts && r.phase == "sweep" && r.p == Some(p))
            .filter_map(|r| r.iterations)
            .collect();
        ns.sort_unstable();
        ns.dedup();
        let Some(&last) = ns.last() else {
            return;
        };
        let _ = writeln!(
            s,
            "\n{title}: {parts} parts, 1 cold + N hot iterations in one transaction, p = {p}; commit included"
        );
        let cell = |v, n: usize| self.cell(v, parts, "update", "single", "sweep", Some(p), Some(n));
        let xs: Vec<String> = ns.iter().map(usize::to_string).collect();
        self.grid(s, "N", &xs, &|v, x: &str| cell(v, x.parse().ok()?));
        let _ = writeln!(s, "  paper: {said}");
        for m in [Measure::Wall, Measure::Cpu] {
            let best: Vec<String> = ns
                .iter()
                .map(|&n| {
                    let b = versions
                        .iter()
                        .filter_map(|&v| cell(v, n).map(|r| (v, m.of(r))))
                        .min_by(|a, b| a.1.total_cmp(&b.1));
                    format!(
                        "{n}: {}",
                        b.map_or("-".into(), |(v, _)| v.name().to_string())
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  here, fastest by {} at N = {}",
                m.name(),
                best.join(", ")
            );
            if let Some(mapped) = cell(Version::Mapped, last) {
                let vs: Vec<String> = versions
                    .iter()
                    .filter(|&&v| v != Version::Mapped)
                    .filter_map(|&v| {
                        cell(v, last).map(|r| {
                            format!(
                                "{:.0}% less than {v}",
                                (1.0 - m.of(mapped) / m.of(r)) * 100.0
                            )
                        })
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "  here at N = {last}, by {}: mapped {}",
                    m.name(),
                    vs.join(", ")
                );
            }
            if let (Some(a), Some(b)) = (cell(Version::Epvm1, last), cell(Version::Epvm1No, last)) {
                let _ = writeln!(
                    s,
                    "  here at N = {last}, by {}: epvm1-no / epvm1 {:.2}",
                    m.name(),
                    m.of(b) / m.of(a)
                );
            }
        }
    }

    /// Figure 11: the total of Figure 7's iterations at p = 0.3 against the
    /// share of the part's array each update changes.
    fn figure_11(&self, s: &mut String, parts: u32) {
        let rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.parts == parts && r.op == "fig11")
            .collect();
        let mut ints: Vec<usize> = rows.iter().filter_map(|r| r.ints).collect();
        ints.sort_unstable();
        ints.dedup();
        let (Some(&first), Some(&last)) = (ints.first(), ints.last()) else {
            return;
        };
        let iterations = rows.first().and_then(|r| r.iterations).unwrap_or(0);
        let _ = writeln!(
            s,
            "\nFigure 11: {parts} parts, {iterations} iterations in one transaction updating with probability {FIGURE_11_P} the part of {} integers ({} bytes), each update changing the first k of them (k as a share of the array); commit included",
            schema::INTS,
            schema::INTS * 4
        );
        let cell = |v, x: &str| {
            let k: usize = ints.iter().copied().find(|&k| share(k) == x)?;
            rows.iter()
                .copied()
                .find(|r| r.version == v && r.ints == Some(k))
        };
        let xs: Vec<String> = ints.iter().map(|&k| share(k)).collect();
        self.grid(s, "k", &xs, &cell);
        let _ = write!(s, "  {:<14}", "k (log KiB)");
        for x in &xs {
            let _ = write!(s, " {x:>9}");
        }
        let _ = writeln!(s);
        for v in self.versions() {
            let _ = write!(s, "  {:<14}", v.name());
            for x in &xs {
                let kib = cell(v, x)
                    .and_then(|r| r.log_bytes)
                    .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1024.0));
                let _ = write!(s, " {kib:>9}");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "  paper: {}", said::FIGURE_11);
        let logs: Vec<String> = self
            .versions()
            .into_iter()
            .filter_map(|v| {
                let at = |k| rows.iter().find(|r| r.version == v && r.ints == Some(k));
                let (a, b) = (at(first)?.log_bytes?, at(last)?.log_bytes?);
                Some(format!("{v} {:.2}x", b as f64 / a.max(1) as f64))
            })
            .collect();
        let _ = writeln!(
            s,
            "  here, log bytes: {} over {} of the array: {}",
            share(last),
            share(first),
            logs.join(", ")
        );
        for m in [Measure::Wall, Measure::Cpu] {
            let growth: Vec<String> = self
                .versions()
                .into_iter()
                .filter_map(|v| {
                    let a = rows
                        .iter()
                        .find(|r| r.version == v && r.ints == Some(first))?;
                    let b = rows
                        .iter()
                        .find(|r| r.version == v && r.ints == Some(last))?;
                    Some(format!("{v} {:.2}x", m.of(b) / m.of(a)))
                })
                .collect();
            let _ = writeln!(
                s,
                "  here, by {}: {} over {} of the array: {}",
                m.name(),
                share(last),
                share(first),
                growth.join(", ")
            );
        }
    }

    /// A table of every version's cells along `xs`: ms, then CPU ms.
    fn grid<'a>(
        &'a self,
        s: &mut String,
        x: &str,
        xs: &[String],
        cell: &dyn Fn(Version, &str) -> Option<&'a Row>,
    ) {
        for m in [Measure::Wall, Measure::Cpu] {
            let _ = write!(s, "  {:<14}", format!("{x} ({} ms)", m.name()));
            for x in xs {
                let _ = write!(s, " {x:>9}");
            }
            let _ = writeln!(s);
            for v in self.versions() {
                let _ = write!(s, "  {:<14}", v.name());
                for x in xs {
                    let _ = write!(
                        s,
                        " {:>9}",
                        cell(v, x).map_or("-".into(), |r| fmt_ms(m.of(r)))
                    );
                }
                let _ = writeln!(s);
            }
        }
    }

    /// The versions from fastest to slowest in one cell kind, with each
    /// one's time relative to the fastest.
    #[allow(clippy::too_many_arguments)]
    fn ranking(
        &self,
        parts: u32,
        op: &str,
        tx: &str,
        phase: &str,
        p: Option<f64>,
        n: Option<usize>,
        m: Measure,
    ) -> String {
        let mut cells: Vec<(Version, f64)> = self
            .versions()
            .into_iter()
            .filter_map(|v| {
                self.cell(v, parts, op, tx, phase, p, n)
                    .map(|r| (v, m.of(r)))
            })
            .collect();
        cells.sort_by(|a, b| a.1.total_cmp(&b.1));
        let Some(&(_, best)) = cells.first() else {
            return "-".into();
        };
        cells
            .iter()
            .map(|(v, ms)| format!("{v} {:.2}x", ms / best))
            .collect::<Vec<_>>()
            .join(" < ")
    }
}

/// Which time a ranking compares.
#[derive(Clone, Copy)]
enum Measure {
    /// Elapsed time, as the paper measured (commits wait for the disk).
    Wall,
    /// CPU time of the process: steadier on a shared machine.
    Cpu,
}

impl Measure {
    fn name(self) -> &'static str {
        match self {
            Measure::Wall => "wall",
            Measure::Cpu => "CPU",
        }
    }

    fn of(self, r: &Row) -> f64 {
        match self {
            Measure::Wall => r.ms,
            Measure::Cpu => r.cpu_ms,
        }
    }
}

/// `k` integers of the Figure 11 part's array, as a share of it.
fn share(k: usize) -> String {
    format!("{:.0}%", k as f64 * 100.0 / schema::INTS as f64)
}

/// `ms (CPU ms)` of a cell.
fn fmt_cell(r: Option<&Row>) -> String {
    r.map_or("-".into(), |r| {
        format!("{} ({})", fmt_ms(r.ms), fmt_ms(r.cpu_ms))
    })
}

fn fmt_opt(l: Option<f64>) -> String {
    l.map_or_else(|| "?".into(), |l| format!("{l:.2}"))
}

fn fmt_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.3}")
    } else {
        format!("{ms:.4}")
    }
}

fn fmt_reads(r: Option<u64>) -> String {
    r.map_or("-".into(), |r| r.to_string())
}

/// The rows of one version, size and experiment.
fn rows_of(v: Version, parts: u32, e: Experiment, set: &[&ChildRun]) -> Vec<Row> {
    let row = |op: &'static str,
               tx: &'static str,
               phase_name: &'static str,
               pick: &dyn Fn(&ChildRun) -> Cell,
               p: Option<f64>,
               iterations: Option<usize>| {
        let cells: Vec<Cell> = set.iter().map(|r| pick(r)).collect();
        let ms: Vec<f64> = cells.iter().map(|c| c.0).collect();
        let reads: Option<Vec<u64>> = cells.iter().map(|c| c.4).collect();
        let copied: Option<Vec<u64>> = cells.iter().map(|c| c.5).collect();
        let cpu: Vec<f64> = cells.iter().map(|c| c.1).collect();
        Row {
            version: v,
            parts,
            op,
            tx,
            phase: phase_name,
            p,
            iterations,
            ms: median(&ms),
            ms_range: range(&ms),
            cpu_ms: median(&cpu),
            count: cells.first().map_or(0, |c| c.2),
            changed: cells.first().map_or(0, |c| c.3),
            reads: reads.map(|r| median_u64(&r)),
            copied: copied.map(|r| median_u64(&r)),
            ints: None,
            log_bytes: None,
            rounds: set.len(),
        }
    };
    let logged = |mut r: Row| {
        let bytes: Vec<u64> = set.iter().map(|c| c.log_bytes).collect();
        r.log_bytes = Some(median_u64(&bytes));
        r
    };
    let total = |r: &ChildRun| {
        (
            r.total_ms,
            r.total_cpu_ms,
            r.iterations.iter().map(|i| i.answer.count).sum(),
            r.iterations.iter().map(|i| i.answer.changed).sum(),
            Some(r.reads),
            r.copied,
        )
    };
    match e {
        Experiment::Single | Experiment::PerIteration => {
            let tx = if e == Experiment::Single {
                "single"
            } else {
                "per-iteration"
            };
            let mut rows = vec![
                row(
                    "traversal",
                    tx,
                    "cold",
                    &|r| phase(r.iterations.get(..1).unwrap_or(&[])),
                    None,
                    None,
                ),
                row(
                    "traversal",
                    tx,
                    "warm",
                    &|r| phase(r.iterations.get(9..10).unwrap_or(&[])),
                    None,
                    None,
                ),
                row(
                    "traversal",
                    tx,
                    "hot",
                    &|r| phase(r.iterations.get(10..).unwrap_or(&[])),
                    None,
                    None,
                ),
            ];
            if e == Experiment::Single {
                rows.push(row(
                    "traversal+random",
                    tx,
                    "hot",
                    &|r| phase(&r.random),
                    None,
                    None,
                ));
            }
            rows
        }
        Experiment::Update {
            p, per_iteration, ..
        } => {
            let n = set.first().map_or(0, |r| r.iterations.len());
            let tx = if per_iteration {
                "per-iteration"
            } else {
                "single"
            };
            vec![logged(row("update", tx, "total", &total, Some(p), Some(n)))]
        }
        Experiment::Sweep { p, hot } => {
            vec![logged(row(
                "update",
                "single",
                "sweep",
                &total,
                Some(p),
                Some(hot),
            ))]
        }
        Experiment::Figure11 { ints } => {
            let n = set.first().map_or(0, |r| r.iterations.len());
            let mut r = logged(row(
                "fig11",
                "single",
                "total",
                &total,
                Some(FIGURE_11_P),
                Some(n),
            ));
            r.ints = Some(ints);
            vec![r]
        }
    }
}
