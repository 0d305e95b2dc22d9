//! What `amber bench oo7 --server` reports: a row per cell with exactly
//! the fields, what each cell cost the machine, and the table.

use serde::Serialize;

use super::args::Cache;

/// One cell: a scheme, a cache setting, a traversal and a number of
/// clients. The fields the issue names, in its order, then the backend.
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
    /// pages and log-record pages (null for a peer, which ships
    /// statements).
    pub pages_shipped: Option<f64>,
    /// Of those, log-record pages (null for a peer).
    pub log_pages_shipped: Option<f64>,
    /// Bytes the server logged per transaction (its log's growth over the
    /// measured time, commit records included; PostgreSQL's WAL).
    pub log_bytes: f64,
    /// The minimal log for the transaction's changes (null for a peer).
    pub minimal_log_bytes: Option<f64>,
    /// The fault backend the clients ran on, as they report it (`sigsegv`
    /// or `uffd`; null for a peer).
    pub backend: Option<String>,
}

/// One of the throughput targets, as measured in this run: the
/// best of Amber's schemes against a peer, on the same traversal, cache
/// and number of clients.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub op: String,
    pub clients: u32,
    pub cache: Cache,
    pub best_scheme: String,
    pub best_tx_per_s: f64,
    pub peer: String,
    pub peer_tx_per_s: f64,
    /// `best_tx_per_s / peer_tx_per_s`.
    pub ratio: f64,
    /// The target for the ratio (null: reported beside it).
    pub target: Option<f64>,
    pub met: Option<bool>,
}

/// The targets: T2A ≥ 30 × `postgres`, T1 ≥ 100 × `postgres` and, beside
/// it, T1 against `postgres-recursive`; each at the most clients the run
/// had, unconstrained where it ran (the issue's: 5 clients, small,
/// unconstrained), when the run has both sides' rows.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let goals = [
        ("t2a", "postgres", Some(30.0)),
        ("t1", "postgres", Some(100.0)),
        ("t1", "postgres-recursive", None),
    ];
    let mut out = Vec::new();
    for (op, peer, target) in goals {
        let of = |r: &&Row| r.op == op && r.cache == Cache::Unconstrained;
        let Some(clients) = rows.iter().filter(of).map(|r| r.clients).max() else {
            continue;
        };
        let cell = |r: &&Row| of(r) && r.clients == clients;
        let Some(p) = rows.iter().filter(cell).find(|r| r.scheme == peer) else {
            continue;
        };
        let amber = rows
            .iter()
            .filter(cell)
            .filter(|r| r.pages_shipped.is_some());
        let Some(best) = amber.max_by(|a, b| a.tx_per_s.total_cmp(&b.tx_per_s)) else {
            continue;
        };
        let ratio = best.tx_per_s / p.tx_per_s.max(1e-9);
        out.push(Target {
            op: op.into(),
            clients,
            cache: Cache::Unconstrained,
            best_scheme: best.scheme.clone(),
            best_tx_per_s: best.tx_per_s,
            peer: peer.into(),
            peer_tx_per_s: p.tx_per_s,
            ratio,
            target,
            met: target.map(|t| ratio >= t),
        });
    }
    out
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
    pub targets: Vec<Target>,
    /// Columns asked for that cannot run here (a peer not built in or
    /// not installed).
    pub unavailable: Vec<Unavailable>,
}

/// A column that could not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Unavailable {
    pub scheme: String,
    pub reason: String,
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
            "{:<13} {:<8} {:<4} {:>3} {:>11.2} {:>9.1} {:>8} {:>8} {:>10.0} {:>10} {:>6.2} {:>6.2} {:>5.2} {:>5.2} {:>5}  {}",
            row.cache.name(),
            row.scheme,
            row.op,
            row.clients,
            row.response_ms,
            row.tx_per_s,
            opt(row.pages_shipped, 1),
            opt(row.log_pages_shipped, 1),
            row.log_bytes,
            opt(row.minimal_log_bytes, 0),
            res.server_cpu,
            res.clients_cpu,
            res.machine_busy,
            res.iowait,
            res.conflicts,
            res.saturates
        );
    }
    for t in &r.targets {
        let _ = writeln!(
            out,
            "target {} x{} ({}): {} {:.1} tx/s / {} {:.1} = {:.1}{}",
            t.op,
            t.clients,
            t.cache.name(),
            t.best_scheme,
            t.best_tx_per_s,
            t.peer,
            t.peer_tx_per_s,
            t.ratio,
            match (t.target, t.met) {
                (Some(g), Some(true)) => format!(" (target >= {g}: met)"),
                (Some(g), _) => format!(" (target >= {g}: NOT met)"),
                _ => String::new(),
            }
        );
    }
    for u in &r.unavailable {
        let _ = writeln!(out, "{}: unavailable: {}", u.scheme, u.reason);
    }
}

/// `v` with `places` decimals, or `-` for none.
fn opt(v: Option<f64>, places: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.places$}"))
}
