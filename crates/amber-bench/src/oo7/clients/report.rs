//! What `amber bench oo7 --server` reports: a row per cell with exactly
//! the fields, what each cell cost the machine, and the table.

use serde::Serialize;

use super::args::Cache;

/// One cell: a scheme, a cache setting, a traversal and a number of
/// clients. The fields the issue names, in its order.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub scheme: String,
    pub size: String,
    pub cache: Cache,
    pub clients: u32,
    pub op: String,
    /// Median response time of a transaction, ms (conflicts retried
    /// included).
    pub response_ms: f64,
    /// Committed transactions per second, all clients together.
    pub tx_per_s: f64,
    /// Pages shipped per transaction from a client to the server: data
    /// pages and log-record pages.
    pub pages_shipped: f64,
    /// Of those, log-record pages.
    pub log_pages_shipped: f64,
    /// Bytes the server logged per transaction (its log's growth over the
    /// measured time, commit records included).
    pub log_bytes: f64,
    /// The minimal log for the transaction's changes (diffing schemes).
    pub minimal_log_bytes: f64,
}

/// What each cell cost the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Resources {
    pub scheme: String,
    pub cache: Cache,
    pub clients: u32,
    pub op: String,
    /// CPU time of the server over the measured time (1 = one core): this
    /// process's, which does nothing else meanwhile.
    pub server_cpu: f64,
    /// CPU time of the clients together over the measured time.
    pub clients_cpu: f64,
    /// Both over the machine's cores.
    pub cpu_busy: f64,
    /// The machine's cores busy over the measured time, every process's
    /// work (other programs' included: the machine may be shared).
    pub machine_busy: f64,
    /// The machine's cores waiting for I/O over the measured time.
    pub iowait: f64,
    /// `cpu` when the machine's cores are busy (≥ 0.85; `cpu, shared`
    /// when the run's own processes used less than half of that); else
    /// `the log device` (the commits' syncs).
    pub saturates: &'static str,
    /// Commits that lost to a concurrent one (a page two modules share)
    /// and ran again.
    pub conflicts: u64,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct ClientsReport {
    pub bench: &'static str,
    pub backend: String,
    pub modules: u32,
    pub module_bytes: u64,
    pub seconds: f64,
    pub cores: usize,
    pub load_before: Option<f64>,
    pub rows: Vec<Row>,
    pub resources: Vec<Resources>,
}

/// The table: one line per cell, with what it cost the machine.
pub fn print_table(r: &ClientsReport, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "OO7 through the server ({} backend, {} modules of {} KiB, {} s per cell, {} cores, load {:.2} before)",
        r.backend,
        r.modules,
        r.module_bytes >> 10,
        r.seconds,
        r.cores,
        r.load_before.unwrap_or(f64::NAN)
    );
    let _ = writeln!(
        out,
        "{:<13} {:<8} {:<4} {:>3} {:>11} {:>9} {:>8} {:>8} {:>10} {:>10} {:>6} {:>6} {:>5} {:>5} {:>5}  saturates",
        "cache",
        "scheme",
        "op",
        "n",
        "response_ms",
        "tx_per_s",
        "pages",
        "log_pg",
        "log_bytes",
        "minimal",
        "srv",
        "cli",
        "mach",
        "iow",
        "confl"
    );
    for (row, res) in r.rows.iter().zip(&r.resources) {
        let _ = writeln!(
            out,
            "{:<13} {:<8} {:<4} {:>3} {:>11.2} {:>9.1} {:>8.1} {:>8.1} {:>10.0} {:>10.0} {:>6.2} {:>6.2} {:>5.2} {:>5.2} {:>5}  {}",
            row.cache.name(),
            row.scheme,
            row.op,
            row.clients,
            row.response_ms,
            row.tx_per_s,
            row.pages_shipped,
            row.log_pages_shipped,
            row.log_bytes,
            row.minimal_log_bytes,
            res.server_cpu,
            res.clients_cpu,
            res.machine_busy,
            res.iowait,
            res.conflicts,
            res.saturates
        );
    }
}
