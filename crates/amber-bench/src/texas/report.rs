//! The report of `amber bench texas`: one JSON row per granularity, size,
//! fetch window and traversal (medians over the rounds), a summary per
//! traversal set, the paper's crossing as measured, and the printed table.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::child::ChildRun;
use super::{Fetch, Granularity, TexasConfig};
use crate::oo1::ops::{Phase, Protocol};
use crate::storage::{Environment, environment, median, median_u64, range};

/// Traversals whose cumulative CPU the paper compares ("the first 15 or
/// so traversals", §6.3).
pub const FIRST: usize = 15;

/// A database as built.
#[derive(Clone, Debug, Serialize)]
pub struct Build {
    pub granularity: Granularity,
    pub parts: u32,
    pub build_ms: f64,
    /// Pages of the database file.
    pub pages: u64,
}

/// One traversal of one set: medians over the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub granularity: Granularity,
    pub parts: u32,
    /// Pages per fault: `1` or `adaptive`.
    pub fetch: Fetch,
    /// 1..=45.
    pub traversal: usize,
    pub phase: Phase,
    /// Parts visited (3,280), and a checksum of what was read: every
    /// granularity's must be the reference evaluator's.
    pub count: u64,
    pub checksum: u64,
    /// User + system CPU of the process during the traversal.
    pub cpu_ms: f64,
    /// Sum of `cpu_ms` over traversals 1..=this one.
    pub cumulative_cpu_ms: f64,
    pub wall_ms: f64,
    /// Amber's fault counter.
    pub faults: u64,
    /// Frames assigned (address space reserved for pages).
    pub pages_reserved: u64,
    /// Blocks fetched, faulting ones and neighbours.
    pub blocks_fetched: u64,
    /// Pages touched by no earlier traversal of the set.
    pub pages_touched_first: u64,
    /// Pointers the fault handler swizzled (computed, see the module
    /// documentation of `texas`); `null` where it cannot be attributed.
    pub pointers_swizzled: Option<u64>,
}

/// A traversal set in figures: medians over rounds, and the spread.
#[derive(Clone, Debug, Serialize)]
pub struct SetSummary {
    pub granularity: Granularity,
    pub parts: u32,
    pub fetch: Fetch,
    pub rounds: usize,
    pub open_ms: f64,
    pub cold_cpu_ms: f64,
    /// Cumulative CPU of the first [`FIRST`] traversals: median over rounds.
    pub first_cpu_ms: f64,
    /// Their smallest and largest round.
    pub first_cpu_ms_range: (f64, f64),
    /// Mean CPU of a hot traversal: median over rounds.
    pub hot_cpu_ms: f64,
    pub hot_cpu_ms_range: (f64, f64),
    /// All traversals of the set: median over rounds.
    pub total_cpu_ms: f64,
    pub faults: u64,
    pub blocks_fetched: u64,
    pub pages_reserved: u64,
    /// Over the set, when every traversal's could be computed.
    pub pointers_swizzled: Option<u64>,
    pub backend: String,
}

/// The paper's crossing on one database and fetch window, as measured.
#[derive(Clone, Debug, Serialize)]
pub struct Crossing {
    pub parts: u32,
    pub fetch: Fetch,
    /// All-raw's and all-smart's cumulative CPU over the first traversals.
    pub raw_first_cpu_ms: f64,
    pub smart_first_cpu_ms: f64,
    /// All-raw minus all-smart: positive when all-smart is cheaper, as in
    /// the paper.
    pub first_difference_ms: f64,
    /// Rounds (paired by number) in which all-smart's was below all-raw's.
    pub first_rounds_smart_below: usize,
    /// All-raw's and all-smart's mean hot traversal.
    pub raw_hot_cpu_ms: f64,
    pub smart_hot_cpu_ms: f64,
    /// All-smart minus all-raw: positive when all-raw is cheaper, as in the
    /// paper.
    pub hot_difference_ms: f64,
    pub hot_rounds_raw_below: usize,
    /// The all-raw database traversed with `try_get` (fetches made by the
    /// dereferences, no page faults), where it was measured: its first
    /// traversals' cumulative CPU and its mean hot traversal.
    pub raw_try_get_first_cpu_ms: Option<f64>,
    pub raw_try_get_hot_cpu_ms: Option<f64>,
    /// All-lazy (swizzling upon discovery), where it was measured: its
    /// first traversals' cumulative CPU and its mean hot traversal, which
    /// lazy swizzling should bring to all-raw's once the fields it follows
    /// are rewritten.
    pub lazy_first_cpu_ms: Option<f64>,
    pub lazy_hot_cpu_ms: Option<f64>,
    pub rounds: usize,
    /// Both halves hold (medians).
    pub crossing: bool,
}

/// Everything `amber bench texas` reports.
#[derive(Clone, Debug, Serialize)]
pub struct TexasReport {
    pub bench: &'static str,
    pub parts: Vec<u32>,
    pub rounds: usize,
    pub protocol: Protocol,
    pub seed: u64,
    /// Load average (1 minute) before and after the run.
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
    pub environment: Environment,
    /// How the CPU time is measured.
    pub cpu_clock: &'static str,
    /// What `pointers_swizzled` is.
    pub pointers_swizzled: &'static str,
    pub builds: Vec<Build>,
    pub summaries: Vec<SetSummary>,
    pub crossings: Vec<Crossing>,
    pub rows: Vec<Row>,
}

/// A child's run, labelled: granularity, fetch, parts, round.
pub type Labelled = (Granularity, Fetch, u32, usize, ChildRun);

impl TexasReport {
    pub(super) fn new(
        config: &TexasConfig,
        builds: &[Build],
        runs: &[Labelled],
        load_before: Option<f64>,
        load_after: Option<f64>,
        dir: &Path,
    ) -> TexasReport {
        let protocol = config.protocol();
        let mut rows = Vec::new();
        let mut summaries = Vec::new();
        for &parts in &config.parts {
            for &fetch in &config.fetches {
                for &g in &config.granularities {
                    let set: Vec<&ChildRun> = runs
                        .iter()
                        .filter(|r| r.0 == g && r.1 == fetch && r.2 == parts)
                        .map(|r| &r.4)
                        .collect();
                    if set.is_empty() {
                        continue;
                    }
                    let first = rows.len();
                    rows.extend(set_rows(g, parts, fetch, protocol, &set));
                    summaries.push(summary(g, parts, fetch, protocol, &set, &rows[first..]));
                }
            }
        }
        let crossings = crossings(config, runs, protocol);
        TexasReport {
            bench: "texas",
            parts: config.parts.clone(),
            rounds: config.rounds,
            protocol,
            seed: config.seed,
            load_before,
            load_after,
            environment: environment(dir),
            cpu_clock: "CLOCK_PROCESS_CPUTIME_ID around each traversal: user + system time of every thread of the process (the fault handler thread included), exact to the nanosecond; the kernel does not split user from system at this resolution",
            pointers_swizzled: "not counted by the core: computed as the non-null PRef fields of the objects on the pages a traversal touched first, which is what the fault handler converts when it fetches them; given only with one page per fault and when those pages are exactly the blocks Amber fetched (null otherwise). all-lazy: the Lazy fields the traversal rewrote upon discovery, found by walking its path again without rewriting (a field rewritten and not seen rewritten by an earlier traversal), their sum checked against the rewritten fields of the whole database after the set; given for both fetch windows",
            builds: builds.to_vec(),
            summaries,
            crossings,
            rows,
        }
    }

    /// The summary of one set.
    pub fn summary(&self, g: Granularity, parts: u32, fetch: Fetch) -> Option<&SetSummary> {
        self.summaries
            .iter()
            .find(|s| s.granularity == g && s.parts == parts && s.fetch == fetch)
    }

    /// The rows of one set, in traversal order.
    pub fn set(&self, g: Granularity, parts: u32, fetch: Fetch) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.granularity == g && r.parts == parts && r.fetch == fetch)
            .collect()
    }

    /// The printed table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Texas traversal sets (Kakkad & Wilson, COOTS 1999, §6): {} cold + {} warm + {} hot OO1 traversals per set, medians of {} rounds; CPU = user + system, every thread",
            1, self.protocol.warm, self.protocol.hot, self.rounds
        );
        let _ = writeln!(
            s,
            "  load average before {} after {}; kernel {}; {}",
            fmt_load(self.load_before),
            fmt_load(self.load_after),
            self.environment.kernel,
            self.environment.machine
        );
        let _ = writeln!(s, "  file system {}", self.environment.filesystem);
        for b in &self.builds {
            let _ = writeln!(
                s,
                "  built {:>7} parts {:<11} {:>5} pages in {:.0} ms",
                b.parts, b.granularity, b.pages, b.build_ms
            );
        }
        let mut keys: Vec<(u32, Fetch)> =
            self.summaries.iter().map(|x| (x.parts, x.fetch)).collect();
        keys.dedup();
        for (parts, fetch) in keys {
            self.set_table(&mut s, parts, fetch);
        }
        let _ = writeln!(
            s,
            "\nThe paper's crossing (all-smart cheaper over the first {FIRST} traversals, all-raw cheaper hot), measured:"
        );
        for c in &self.crossings {
            let _ = writeln!(
                s,
                "  {:>7} parts, fetch {:<8} first {FIRST}: all-raw {:.3} ms, all-smart {:.3} ms, all-raw − all-smart {:+.3} ms ({} of {} rounds all-smart lower); hot: all-raw {:.4} ms, all-smart {:.4} ms, all-smart − all-raw {:+.4} ms ({} of {} rounds all-raw lower); crossing: {}",
                c.parts,
                c.fetch.name(),
                c.raw_first_cpu_ms,
                c.smart_first_cpu_ms,
                c.first_difference_ms,
                c.first_rounds_smart_below,
                c.rounds,
                c.raw_hot_cpu_ms,
                c.smart_hot_cpu_ms,
                c.hot_difference_ms,
                c.hot_rounds_raw_below,
                c.rounds,
                if c.crossing { "yes" } else { "no" }
            );
            if let (Some(first), Some(hot)) = (c.raw_try_get_first_cpu_ms, c.raw_try_get_hot_cpu_ms)
            {
                let _ = writeln!(
                    s,
                    "  {:>7} parts, fetch {:<8} all-raw-try-get (the all-raw database, pages fetched by the dereferences instead of page faults): first {FIRST} {first:.3} ms, hot {hot:.4} ms; of all-raw − all-smart over the first {FIRST}, {:+.3} ms is the fault mechanism (all-raw − all-raw-try-get) and {:+.3} ms the rest (all-raw-try-get − all-smart: swizzling at fetch against translation at each use)",
                    c.parts,
                    c.fetch.name(),
                    c.raw_first_cpu_ms - first,
                    first - c.smart_first_cpu_ms
                );
            }
            if let (Some(first), Some(hot)) = (c.lazy_first_cpu_ms, c.lazy_hot_cpu_ms) {
                let _ = writeln!(
                    s,
                    "  {:>7} parts, fetch {:<8} all-lazy (swizzled upon discovery): first {FIRST} {first:.3} ms (all-lazy − all-raw {:+.3} ms, all-lazy − all-smart {:+.3} ms); hot {hot:.4} ms ({:.2} × all-raw's, {:.2} × all-smart's)",
                    c.parts,
                    c.fetch.name(),
                    first - c.raw_first_cpu_ms,
                    first - c.smart_first_cpu_ms,
                    hot / c.raw_hot_cpu_ms,
                    hot / c.smart_hot_cpu_ms
                );
            }
        }
        let _ = writeln!(s, "  pointers swizzled: {}", self.pointers_swizzled);
        s
    }

    fn set_table(&self, s: &mut String, parts: u32, fetch: Fetch) {
        let sums: Vec<&SetSummary> = self
            .summaries
            .iter()
            .filter(|x| x.parts == parts && x.fetch == fetch)
            .collect();
        let _ = writeln!(
            s,
            "\n{parts} parts, {} per fault (backend {}):",
            if fetch == Fetch::OnePage {
                "one page"
            } else {
                "adaptive window"
            },
            sums.first().map_or("?", |x| x.backend.as_str())
        );
        let _ = writeln!(
            s,
            "  {:<15} {:>9} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9} {:>10}",
            "granularity",
            "open ms",
            "cold ms",
            "first15 ms",
            "hot ms",
            "total ms",
            "faults",
            "fetched",
            "reserved",
            "swizzled"
        );
        for x in &sums {
            let _ = writeln!(
                s,
                "  {:<15} {:>9.3} {:>9.3} {:>10.3} {:>10.4} {:>10.3} {:>8} {:>8} {:>9} {:>10}",
                x.granularity.name(),
                x.open_ms,
                x.cold_cpu_ms,
                x.first_cpu_ms,
                x.hot_cpu_ms,
                x.total_cpu_ms,
                x.faults,
                x.blocks_fetched,
                x.pages_reserved,
                x.pointers_swizzled
                    .map_or_else(|| "-".to_string(), |p| p.to_string())
            );
        }
        let sets: Vec<Vec<&Row>> = sums
            .iter()
            .map(|x| self.set(x.granularity, parts, fetch))
            .collect();
        let _ = write!(s, "  {:>3} {:<5}", "#", "phase");
        for x in &sums {
            let _ = write!(
                s,
                " | {:>29}",
                format!("{}: cpu (cum) flt swz", x.granularity.name())
            );
        }
        let _ = writeln!(s);
        let n = sets.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..n {
            let Some(first) = sets.iter().find_map(|set| set.get(i)) else {
                continue;
            };
            let _ = write!(s, "  {:>3} {:<5}", first.traversal, first.phase.name());
            for set in &sets {
                match set.get(i) {
                    Some(r) => {
                        let _ = write!(
                            s,
                            " | {:>7.3} ({:>8.2}) {:>4} {:>6}",
                            r.cpu_ms,
                            r.cumulative_cpu_ms,
                            r.faults,
                            r.pointers_swizzled
                                .map_or_else(|| "-".to_string(), |p| p.to_string())
                        );
                    }
                    None => {
                        let _ = write!(s, " | {:>29}", "");
                    }
                }
            }
            let _ = writeln!(s);
        }
    }
}

fn fmt_load(l: Option<f64>) -> String {
    l.map_or_else(|| "?".to_string(), |l| format!("{l:.2}"))
}

/// The rows of one set: per traversal, the median over rounds.
fn set_rows(
    g: Granularity,
    parts: u32,
    fetch: Fetch,
    protocol: Protocol,
    set: &[&ChildRun],
) -> Vec<Row> {
    let n = set.iter().map(|r| r.samples.len()).min().unwrap_or(0);
    let mut cumulative = 0.0;
    (0..n)
        .map(|i| {
            let f = |m: fn(&super::Sample) -> f64| {
                median(&set.iter().map(|r| m(&r.samples[i])).collect::<Vec<_>>())
            };
            let u = |m: fn(&super::Sample) -> u64| {
                median_u64(&set.iter().map(|r| m(&r.samples[i])).collect::<Vec<_>>())
            };
            let cpu_ms = f(|s| s.cpu_ms);
            cumulative += cpu_ms;
            let swizzled: Option<Vec<u64>> =
                set.iter().map(|r| r.samples[i].pointers_swizzled).collect();
            Row {
                granularity: g,
                parts,
                fetch,
                traversal: i + 1,
                phase: protocol.phase(i),
                count: set[0].samples[i].answer.count,
                checksum: set[0].samples[i].answer.checksum,
                cpu_ms,
                cumulative_cpu_ms: cumulative,
                wall_ms: f(|s| s.wall_ms),
                faults: u(|s| s.faults),
                pages_reserved: u(|s| s.pages_reserved),
                blocks_fetched: u(|s| s.blocks_fetched),
                pages_touched_first: u(|s| s.pages_touched_first),
                pointers_swizzled: swizzled.map(|v| median_u64(&v)),
            }
        })
        .collect()
}

/// Per round: the cumulative CPU of the first traversals, and the mean hot
/// traversal.
fn per_round(run: &ChildRun, protocol: Protocol) -> (f64, f64) {
    let first = run.samples.iter().take(FIRST).map(|s| s.cpu_ms).sum();
    let hot: Vec<f64> = run
        .samples
        .iter()
        .enumerate()
        .filter(|(i, _)| protocol.phase(*i) == Phase::Hot)
        .map(|(_, s)| s.cpu_ms)
        .collect();
    (first, hot.iter().sum::<f64>() / hot.len().max(1) as f64)
}

fn summary(
    g: Granularity,
    parts: u32,
    fetch: Fetch,
    protocol: Protocol,
    set: &[&ChildRun],
    rows: &[Row],
) -> SetSummary {
    let (first, hot): (Vec<f64>, Vec<f64>) = set.iter().map(|r| per_round(r, protocol)).unzip();
    let totals: Vec<f64> = set
        .iter()
        .map(|r| r.samples.iter().map(|s| s.cpu_ms).sum())
        .collect();
    SetSummary {
        granularity: g,
        parts,
        fetch,
        rounds: set.len(),
        open_ms: median(&set.iter().map(|r| r.open_ms).collect::<Vec<_>>()),
        cold_cpu_ms: rows.first().map_or(f64::NAN, |r| r.cpu_ms),
        first_cpu_ms: median(&first),
        first_cpu_ms_range: range(&first),
        hot_cpu_ms: median(&hot),
        hot_cpu_ms_range: range(&hot),
        total_cpu_ms: median(&totals),
        faults: rows.iter().map(|r| r.faults).sum(),
        blocks_fetched: rows.iter().map(|r| r.blocks_fetched).sum(),
        pages_reserved: rows.iter().map(|r| r.pages_reserved).sum(),
        pointers_swizzled: rows.iter().map(|r| r.pointers_swizzled).sum(),
        backend: set.first().map_or_else(String::new, |r| r.backend.clone()),
    }
}

fn crossings(config: &TexasConfig, runs: &[Labelled], protocol: Protocol) -> Vec<Crossing> {
    let mut out = Vec::new();
    for &parts in &config.parts {
        for &fetch in &config.fetches {
            let of = |g: Granularity| -> Vec<(usize, (f64, f64))> {
                runs.iter()
                    .filter(|r| r.0 == g && r.1 == fetch && r.2 == parts)
                    .map(|r| (r.3, per_round(&r.4, protocol)))
                    .collect()
            };
            let (raw, smart) = (of(Granularity::AllRaw), of(Granularity::AllSmart));
            let try_get = of(Granularity::AllRawTryGet);
            let lazy = of(Granularity::AllLazy);
            if raw.is_empty() || smart.is_empty() {
                continue;
            }
            let med = |v: &[(usize, (f64, f64))], pick: fn(&(f64, f64)) -> f64| {
                median(&v.iter().map(|(_, x)| pick(x)).collect::<Vec<_>>())
            };
            let paired = |lower: fn(&(f64, f64), &(f64, f64)) -> bool| {
                raw.iter()
                    .filter(|(round, r)| smart.iter().any(|(sr, s)| sr == round && lower(r, s)))
                    .count()
            };
            let raw_first = med(&raw, |x| x.0);
            let smart_first = med(&smart, |x| x.0);
            let raw_hot = med(&raw, |x| x.1);
            let smart_hot = med(&smart, |x| x.1);
            out.push(Crossing {
                parts,
                fetch,
                raw_first_cpu_ms: raw_first,
                smart_first_cpu_ms: smart_first,
                first_difference_ms: raw_first - smart_first,
                first_rounds_smart_below: paired(|r, s| s.0 < r.0),
                raw_hot_cpu_ms: raw_hot,
                smart_hot_cpu_ms: smart_hot,
                hot_difference_ms: smart_hot - raw_hot,
                hot_rounds_raw_below: paired(|r, s| r.1 < s.1),
                raw_try_get_first_cpu_ms: (!try_get.is_empty()).then(|| med(&try_get, |x| x.0)),
                raw_try_get_hot_cpu_ms: (!try_get.is_empty()).then(|| med(&try_get, |x| x.1)),
                lazy_first_cpu_ms: (!lazy.is_empty()).then(|| med(&lazy, |x| x.0)),
                lazy_hot_cpu_ms: (!lazy.is_empty()).then(|| med(&lazy, |x| x.1)),
                rounds: raw.len().min(smart.len()),
                crossing: smart_first < raw_first && raw_hot < smart_hot,
            });
        }
    }
    out
}
