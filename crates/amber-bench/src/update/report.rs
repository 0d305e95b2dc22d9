//! What `amber bench update` measured, as JSON and as a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::oo1::PartId;
use crate::storage::{Environment, Summary};

/// One (backend, p): medians over the timed commits.
#[derive(Clone, Debug, Serialize)]
pub struct UpdateRow {
    pub backend: String,
    /// The update-detection scheme (`amber bench detect`'s names:
    /// `pages-uffd`, `pages-sigsegv`, `objects`, `remsets`, `cards-N`).
    pub scheme: String,
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
    /// Bytes the scheme reported as possibly written, which the commit
    /// diffed (`CommitStats::noted_bytes`).
    pub noted_bytes: u64,
    /// The strategies the timed commits ran under, with their counts
    /// (`auto` chooses per transaction), e.g. `"pages 2, remsets 8"`.
    pub ran_under: String,
    /// The log generator (`diff`, `sl`, `wpl`): only `diff` must log the
    /// minimal count; the others log more by design (`log_vs_minimal`).
    pub log: &'static str,
    /// Log bytes written, commit record included.
    pub log_bytes: u64,
    /// The commit record every non-empty commit adds (0 when nothing was
    /// logged).
    pub commit_record_bytes: u64,
    /// The least record bytes that can log what the traversal changed,
    /// computed by the benchmark from the parts it changed and where their
    /// bytes lie, independently of Amber's diff (`update::minimal`); commit
    /// record excluded.
    pub minimal_log_bytes: u64,
    /// The verdict's ratio: each commit's records (log bytes − commit
    /// record) against its `minimal_log_bytes`, the worst commit (1 when
    /// both are 0). Target ≤ 1.1.
    pub log_vs_minimal: f64,
    /// The same ratio, median over the commits.
    pub log_vs_minimal_median: f64,
    /// Amber's own count of the minimal records for the regions its diff
    /// found (`CommitStats::minimal_log_bytes`), commit record excluded;
    /// reported beside the independent one, not used by the verdict.
    pub engine_minimal_log_bytes: u64,
    /// Records against Amber's own count, the worst commit: 1.0 whenever the
    /// log holds what Amber's diff found, so it says nothing about whether
    /// the diff found the least.
    pub log_vs_engine_minimal: f64,
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
    /// What a ranges record costs beyond its ranges (R), what each range
    /// costs beyond its bytes (E), and the commit record's size, in the
    /// log format.
    pub ranges_record_bytes: usize,
    /// See `ranges_record_bytes`.
    pub range_entry_bytes: usize,
    pub commit_record_bytes: usize,
    /// The Amber OO1 engine's summary (schema and options).
    pub engine: &'static str,
    /// `/proc/loadavg` before and after.
    pub loadavg_before: String,
    pub loadavg_after: String,
    pub method: &'static str,
    pub environment: Environment,
}

pub(super) const METHOD: &str = "OO1 database (N parts, 3 connections each) built by Amber's OO1 engine, copied and opened per backend; \
per p in {0, 0.05, 0.2, 1}: OO1's hot update input (root and per-visit decisions of the harness: visit v increments x and y when u(seed, i, v) < p), \
warm-up traversals untimed, then iters traversals with one commit each, every answer checked against the reference evaluator; \
medians of CommitStats (detect / diff / write), Tx::commit wall time, log_bytes and minimal_log_bytes; \
the verdict, log_vs_minimal, compares each commit's records (log_bytes - commit_record_bytes) with minimal_log_bytes, computed by the benchmark without Amber's diff: \
the bytes of x and y that differ between the benchmark's own copy of each part before and after the traversal's increments, at the fields' addresses, cut into ranges (range_entry_bytes + span each, within one page, after-images only) carried by ranges records (ranges_record_bytes each; one holds ranges less than 64 KiB apart) in the cheapest way (dynamic programming over the cut points); the worst commit decides; \
engine_minimal_log_bytes is Amber's own count (CommitStats::minimal_log_bytes), reported beside it; \
first write: M parts on distinct pages, resident and re-protected by a commit, read (untimed), then a field of each incremented twice in two tight loops \
in one transaction, (loop 1 - loop 2) / M, median over rounds";

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
            "  {:<13} {:>5} {:>6} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>7} {:>8} {:>7}",
            "scheme",
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
            "log/min",
            "amber B",
            "wchar"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "  {:<13} {:>5} {:>6} {:>6} {:>9.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>8} {:>8} {:>7.3} {:>8} {:>7}",
                r.scheme,
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
                r.log_vs_minimal,
                r.engine_minimal_log_bytes,
                r.wchar
            );
        }
        let _ = writeln!(
            s,
            "  min B = the least records for the bytes the traversal changed, computed by the benchmark (not by Amber's diff); log/min = (log B - {} B commit record) / min B, worst commit; amber B = Amber's own count of the minimal records (CommitStats)",
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
