//! What `amber bench checkpoint` measured, as JSON and as a table.

use std::fmt::Write as _;

use serde::Serialize;

use crate::storage::measure::env_lines;
use crate::storage::{Environment, summarize};

pub(super) const METHOD: &str = "a database of cold pages (one object each) and 104-byte hot objects, copied afresh per case; \
opened with one page per fault; random hot objects rewritten (--per-tx per commit, one fdatasync each) until the log holds --log-mib \
of committed changes not yet checkpointed; a reader thread faults one cold page in every --pause-us in a random order, timing each \
fault; explicit case: Db::checkpoint on the main thread after --before-ms; automatic case: the log threshold is --log-mib and the \
main thread commits until one commit crosses it, then polls Db::stats every ms until the superblock generation changes. \
A fault overlapping the checkpoint's interval counts as during it. Medians over --runs runs of each figure";

/// Fault latencies of a part of a case.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FaultStats {
    /// Faults timed.
    pub faults: usize,
    /// The longest, µs.
    pub max_us: f64,
    /// The median, µs.
    pub median_us: f64,
}

impl FaultStats {
    pub(super) fn of(us: &[f64]) -> Option<FaultStats> {
        (!us.is_empty()).then(|| FaultStats {
            faults: us.len(),
            max_us: us.iter().copied().fold(0.0, f64::max),
            median_us: summarize(us).median,
        })
    }
}

/// One run of one case.
#[derive(Clone, Debug, Serialize)]
pub struct CaseRun {
    /// `explicit` (`Db::checkpoint` while the reader faults) or `automatic`
    /// (the commit that crosses the log threshold, the reader faulting after
    /// it returns).
    pub case: &'static str,
    pub backend: String,
    /// The log since the last checkpoint when the checkpoint began, MiB.
    pub log_mib: f64,
    /// Blocks with changes to install.
    pub pending_blocks: u64,
    /// The checkpoint's duration, ms (explicit: the call; automatic: from
    /// the triggering commit's start until the new superblock was seen).
    pub checkpoint_ms: f64,
    /// Automatic case: the latency of the commit that crossed the threshold, ms.
    pub trigger_commit_ms: Option<f64>,
    /// Median latency of the commits that filled the log, ms.
    pub commit_ms: f64,
    /// Faults served while the reader ran (`db.stats()`).
    pub faults: u64,
    /// Blocks fetched by them.
    pub fetched: u64,
    /// Faults overlapping the checkpoint; `None` when none did.
    pub during: Option<FaultStats>,
    /// The other faults.
    pub outside: Option<FaultStats>,
}

/// One case on one backend, medians over its runs.
#[derive(Clone, Debug, Serialize)]
pub struct CaseSummary {
    pub case: &'static str,
    pub backend: String,
    pub runs: usize,
    pub log_mib: f64,
    pub pending_blocks: u64,
    pub checkpoint_ms: f64,
    pub trigger_commit_ms: Option<f64>,
    pub commit_ms: f64,
    /// Faults during the checkpoint (median over runs).
    pub faults_during: f64,
    /// The longest fault during the checkpoint, ms (median over runs of
    /// each run's longest); `None` when no fault overlapped it.
    pub max_fault_during_ms: Option<f64>,
    /// The median fault during it, µs.
    pub median_fault_during_us: Option<f64>,
    /// The longest fault outside it, ms.
    pub max_fault_outside_ms: Option<f64>,
    /// The median fault outside it, µs.
    pub median_fault_outside_us: Option<f64>,
}

/// Median of the present values; `None` when there are none.
fn median_of(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = v.flatten().collect();
    (!v.is_empty()).then(|| summarize(&v).median)
}

impl CaseSummary {
    /// Summarizes the runs of one case (at least one).
    pub(super) fn of(runs: &[&CaseRun]) -> CaseSummary {
        let med = |f: &dyn Fn(&CaseRun) -> f64| {
            summarize(&runs.iter().map(|r| f(r)).collect::<Vec<_>>()).median
        };
        CaseSummary {
            case: runs[0].case,
            backend: runs[0].backend.clone(),
            runs: runs.len(),
            log_mib: med(&|r| r.log_mib),
            pending_blocks: med(&|r| r.pending_blocks as f64) as u64,
            checkpoint_ms: med(&|r| r.checkpoint_ms),
            trigger_commit_ms: median_of(runs.iter().map(|r| r.trigger_commit_ms)),
            commit_ms: med(&|r| r.commit_ms),
            faults_during: med(&|r| r.during.map_or(0.0, |d| d.faults as f64)),
            max_fault_during_ms: median_of(runs.iter().map(|r| r.during.map(|d| d.max_us / 1e3))),
            median_fault_during_us: median_of(runs.iter().map(|r| r.during.map(|d| d.median_us))),
            max_fault_outside_ms: median_of(runs.iter().map(|r| r.outside.map(|d| d.max_us / 1e3))),
            median_fault_outside_us: median_of(runs.iter().map(|r| r.outside.map(|d| d.median_us))),
        }
    }
}

/// The result of `amber bench checkpoint`.
#[derive(Clone, Debug, Serialize)]
pub struct StallReport {
    pub benchmark: &'static str,
    pub log_mib: u64,
    pub hot_mib: u64,
    pub cold_mib: u64,
    pub per_tx: u32,
    pub pause_us: u64,
    pub runs: usize,
    /// Per backend and case, medians over runs.
    pub summaries: Vec<CaseSummary>,
    /// Every run of every case.
    pub every_run: Vec<CaseRun>,
    pub method: &'static str,
    pub environment: Environment,
}

fn opt(v: Option<f64>, precision: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.precision$}"))
}

impl StallReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "fault stalls during a checkpoint of a {} MiB log ({} MiB of hot objects, {} per commit); \
             a cold fault every {} µs; medians of {} runs",
            self.log_mib, self.hot_mib, self.per_tx, self.pause_us, self.runs
        );
        let _ = writeln!(
            s,
            "  {:<8} {:<9} {:>7} {:>8} {:>9} {:>7} {:>12} {:>12} {:>12} {:>12}",
            "backend",
            "case",
            "blocks",
            "ckpt ms",
            "trig. ms",
            "during",
            "max in ms",
            "median in µs",
            "max out ms",
            "median out µs"
        );
        for c in &self.summaries {
            let _ = writeln!(
                s,
                "  {:<8} {:<9} {:>7} {:>8.1} {:>9} {:>7.0} {:>12} {:>12} {:>12} {:>12}",
                c.backend,
                c.case,
                c.pending_blocks,
                c.checkpoint_ms,
                opt(c.trigger_commit_ms, 1),
                c.faults_during,
                opt(c.max_fault_during_ms, 2),
                opt(c.median_fault_during_us, 1),
                opt(c.max_fault_outside_ms, 2),
                opt(c.median_fault_outside_us, 1),
            );
        }
        env_lines(&mut s, &self.environment);
        s
    }
}
