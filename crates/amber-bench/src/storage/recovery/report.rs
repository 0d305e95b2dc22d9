//! What the recovery benchmark measured, as JSON and as a table.

use crate::storage::measure::{Environment, env_lines};
use serde::Serialize;
use std::fmt::Write as _;

/// Where the time of a warm read-only open goes (medians of separately
/// timed steps).
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryBreakdown {
    /// Reading the log file alone, start to end in 1 MiB `read`s into one
    /// reused buffer, seconds: the floor for reading this log as it sits in
    /// the page cache (see `warm_note`).
    pub read_log_s: f64,
    /// `wal::scan::scan` with nothing applied: reading the log through the
    /// read-ahead buffers and checking every record's length and checksum,
    /// seconds.
    pub scan_s: f64,
    /// The rest of the open: loading the checkpoint's metadata and
    /// replaying the records into pending changes, as far as it does not
    /// overlap the scan, seconds (`recovery_s - scan_s`).
    pub redo_and_rest_s: f64,
}

/// Numbers with the OS page cache dropped before every run of each side.
#[derive(Debug, Clone, Serialize)]
pub struct ColdNumbers {
    /// Runs of each side.
    pub runs: usize,
    /// Median read-only open, seconds.
    pub recovery_s: f64,
    /// Median sequential read, seconds.
    pub sequential_read_s: f64,
    /// `recovery_s / sequential_read_s`.
    pub recovery_vs_read: f64,
    /// Every run, seconds.
    pub recovery_runs_s: Vec<f64>,
    /// Every run, seconds.
    pub sequential_read_runs_s: Vec<f64>,
}

/// What the recovery benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryReport {
    /// "recovery".
    pub bench: &'static str,
    /// The headline: recovery time over the time to read a file of the
    /// log's size sequentially, both from the device (cold page cache) when
    /// the cache can be dropped, since after a machine crash the log is read
    /// from the device; warm otherwise (`recovery_vs_read_basis` says which).
    pub recovery_vs_read: f64,
    /// "cold", or "warm" with why there are no cold runs.
    pub recovery_vs_read_basis: String,
    /// `recovery_s / sequential_read_s`, both warm.
    pub recovery_vs_read_warm: f64,
    /// The cold ratio, when there are cold runs.
    pub recovery_vs_read_cold: Option<f64>,
    /// Median time of a read-only `Store::open` (recovery in memory: read
    /// the log, check, replay; nothing written), seconds, warm page cache.
    pub recovery_s: f64,
    /// Mean CPU time of a warm read-only open, user and system, both of its
    /// threads, seconds (clock-tick resolution, summed over the runs). With
    /// other work on the machine, wall times stretch toward it divided by the
    /// CPUs left, while a sequential read needs little CPU.
    pub recovery_cpu_s: Option<f64>,
    /// The one-minute load average before and after the warm runs: other
    /// work competing for the CPUs.
    pub load_average: [Option<f64>; 2],
    /// Median time of a writable `Store::open`: the same recovery plus the
    /// checkpoint that installs it (page writes, fdatasyncs, log recycle),
    /// seconds, warm page cache.
    pub recovery_with_install_s: f64,
    /// Median time to read a file of the log's size sequentially (1 MiB
    /// `read`s into one buffer), seconds, warm page cache.
    pub sequential_read_s: f64,
    /// `recovery_with_install_s / sequential_read_s`, warm.
    pub recovery_with_install_vs_read: f64,
    /// Every timed run, seconds.
    pub recovery_runs_s: Vec<f64>,
    /// Every timed run, seconds.
    pub recovery_with_install_runs_s: Vec<f64>,
    /// Every timed run, seconds.
    pub sequential_read_runs_s: Vec<f64>,
    /// Where the warm read-only open's time goes.
    pub breakdown: RecoveryBreakdown,
    /// How the sequential read reads.
    pub sequential_read_method: &'static str,
    /// What the warm comparison compares.
    pub warm_note: &'static str,
    /// Cold-cache numbers, when the page cache can be dropped (in a VM the
    /// host may still cache the disk).
    pub cold: Option<ColdNumbers>,
    /// Why there are no cold numbers, if there are none.
    pub cold_skipped: Option<String>,
    /// Timed runs per measurement.
    pub runs: usize,
    /// Requested log size, MiB.
    pub wal_mib: u64,
    /// Log bytes after the checkpoint LSN (what recovery scans).
    pub log_bytes: u64,
    /// Size of the `-wal` file.
    pub wal_file_bytes: u64,
    /// Size of the page file.
    pub db_file_bytes: u64,
    /// Page size.
    pub page_size: usize,
    /// Data pages the transactions write to.
    pub db_pages: u64,
    /// Log records recovery found.
    pub records: u64,
    /// Committed transactions recovery found.
    pub transactions: u64,
    /// Records replayed (a ranges record counts once per range).
    pub redone: u64,
    /// Ranges in the workload.
    pub ranges: u64,
    /// Ranges records in the log (records less the commit records): one
    /// per transaction and one more wherever a range does not follow the
    /// one before in address order within 64 KiB.
    pub range_records: u64,
    /// Mean ranges per transaction.
    pub ranges_per_transaction: f64,
    /// Mean bytes per range.
    pub bytes_per_range: f64,
    /// Blocks the writable open installed (median run).
    pub installed_blocks: u64,
    /// Bytes the writable open wrote to the page file (median run).
    pub installed_bytes: u64,
    /// Seconds spent building the database and log (syncs skipped while
    /// building; the files are synced once at the end).
    pub build_s: f64,
    /// Where it ran.
    #[serde(flatten)]
    pub env: Environment,
}

impl RecoveryReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "recovery: {:.1} MiB of log ({} records, {} transactions, {:.1} ranges of {:.0} B per transaction) over {} pages; medians of {} runs",
            self.log_bytes as f64 / (1 << 20) as f64,
            self.records,
            self.transactions,
            self.ranges_per_transaction,
            self.bytes_per_range,
            self.db_pages,
            self.runs,
        );
        let _ = writeln!(
            s,
            "  {:<52} {:>10} {:>8}",
            "warm page cache", "seconds", "× read"
        );
        let rows = [
            (
                "read-only open (recovery: read, check, replay)",
                self.recovery_s,
            ),
            (
                "  scan alone (read and check, nothing applied)",
                self.breakdown.scan_s,
            ),
            (
                "  rest (metadata, replay beyond the scan)",
                self.breakdown.redo_and_rest_s,
            ),
            (
                "  read the log file alone (its page-cache state)",
                self.breakdown.read_log_s,
            ),
            (
                "writable open (recovery + installing checkpoint)",
                self.recovery_with_install_s,
            ),
            (
                "sequential read of a file of the log's size",
                self.sequential_read_s,
            ),
        ];
        for (name, x) in rows {
            let _ = writeln!(
                s,
                "  {name:<52} {x:>10.4} {:>8.2}",
                x / self.sequential_read_s
            );
        }
        match (&self.cold, &self.cold_skipped) {
            (Some(c), _) => {
                let _ = writeln!(
                    s,
                    "  {:<52} {:>10} {:>8}",
                    "cold page cache (dropped before every run)", "seconds", "× read"
                );
                for (name, x) in [
                    ("read-only open", c.recovery_s),
                    ("sequential read", c.sequential_read_s),
                ] {
                    let _ = writeln!(s, "  {name:<52} {x:>10.4} {:>8.2}", x / c.sequential_read_s);
                }
            }
            (None, Some(why)) => {
                let _ = writeln!(s, "  cold page cache: skipped ({why})");
            }
            (None, None) => {}
        }
        let _ = writeln!(
            s,
            "  recovery / read: {:.2} ({}; target <= 3: {}); warm {:.2}{}",
            self.recovery_vs_read,
            self.recovery_vs_read_basis,
            if self.recovery_vs_read <= 3.0 {
                "met"
            } else {
                "MISSED"
            },
            self.recovery_vs_read_warm,
            self.recovery_vs_read_cold
                .map(|c| format!(", cold {c:.2}"))
                .unwrap_or_default(),
        );
        if let Some(c) = self.recovery_cpu_s {
            let _ = writeln!(
                s,
                "  a warm read-only open used {c:.3} s of CPU (both threads); load average {}",
                self.load_average
                    .iter()
                    .map(|l| l.map_or("?".to_string(), |l| format!("{l:.2}")))
                    .collect::<Vec<_>>()
                    .join(" → ")
            );
        }
        let _ = writeln!(
            s,
            "  writable open installed {} blocks, {} bytes",
            self.installed_blocks, self.installed_bytes
        );
        env_lines(&mut s, &self.env);
        s
    }
}
