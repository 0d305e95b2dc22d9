//! `amber bench oo7 --server --clients 1..5`: QuickStore's client-server
//! experiment (`papers/002_*` §5; docs/design.md §11.7). A database is
//! built once and served by an `amber_server` in this process (plain TCP
//! on loopback, with a token); client `i` is a process of its own that
//! works on module `2i` only (no data sharing),
//! running T2A, T2B or T2C again and again as separate transactions, its
//! cache kept across them, under one recovery scheme. For every scheme,
//! cache setting, traversal and number of clients: the median response
//! time, the throughput, and per transaction the pages shipped (data and
//! log-record pages, Figures 9 and 14), the log bytes and the minimal log.
//!
//! **(choice) Every other module.** The build lays each module's atomic
//! parts after the previous module's, so two neighbouring modules share a
//! page; under the server's page-granularity validation (§11.3) clients
//! on neighbouring modules conflict on it (a tiny run's two clients
//! retried about 700 times a second), where QuickStore's page locks made
//! them wait; and module 1's first atomic parts share a page with the
//! database's root object, which every traversal reads. Clients on
//! modules 2, 4, 6, … share no page one of them writes; the database has
//! `2n` modules for `n` clients (at least the size's own), each module as
//! the size makes it.
//!
//! **The caches.** The client's buffer pool holds its whole module in both
//! settings, as in the paper; the recovery buffer (SIGSEGV backend, the
//! page copies of page differencing) is a third of the client's memory,
//! unconstrained, and a sixteenth, constrained. The client's memory is
//! sized from the module as the paper's was: 12 MB for a 6.6 MB module
//! (1.8 ×) unconstrained, 8 MB (1.2 ×) constrained. The software barrier's
//! copies (`sd-esm`, `sl-esm`) are not bounded by the recovery buffer.
//!
//! **The resources.** Server and clients share the machine's cores, so
//! each cell also says the CPU time of the server (this process) and of
//! the clients over the measured time, and which resource saturates.
//!
//! **The peer** (`postgres`, [`Peer`]): the same clients on the same
//! modules, each with one connection to a PostgreSQL server of the run's
//! own, built once from the same generated database; its log bytes are
//! the WAL's growth over the measured time. It has no client cache
//! setting (its server's buffer pool holds the database): its cells run
//! once, under `unconstrained`. `postgres-recursive` differs from
//! `postgres` only in T1 (one recursive query per composite part's
//! graph), so it runs T1 only.

mod args;
pub(super) mod peer;
pub mod plot;
mod report;
mod served;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use self::served::Served;
use super::amber_engine::{AmberOo7Factory, FILE};
use super::client::{ClientJob, ClientResult};
use super::engine::{EngineError, EngineOptions, Oo7Factory};
use super::generate::generate;
use super::model::Model;
use super::ops::Op;
use crate::oo1::BenchError;
use crate::oo1::harness::{remove_dir, reset_dir};

pub use args::{Cache, ClientsArgs, Column, PEERS, USAGE};
pub use peer::{Peer, PeerServer};
pub use report::{ClientsReport, Resources, Row, Target, Unavailable, print_table};

const TOKEN: &str = "oo7-clients";

/// Runs the experiment; writes the JSON if asked. `peers` are the peer
/// engines this binary has (the CLI's, with `--features compare`).
pub fn run_clients(a: &ClientsArgs, peers: &[Box<dyn Peer>]) -> Result<ClientsReport, BenchError> {
    let most = a.clients.iter().copied().max().unwrap_or(1);
    let own = a.size.params(a.seed);
    let params = super::params::Params {
        modules: own.modules.max(2 * most),
        ..own
    };
    params.validate().map_err(BenchError::Usage)?;
    if let Some(d) = &a.plot {
        // Before the run, so that a bad directory fails at once.
        std::fs::create_dir_all(d).map_err(|e| BenchError::io("making", d, e))?;
    }
    let db = generate(params).map_err(BenchError::Usage)?;
    // Mode 0711: a peer's server running as another user (PostgreSQL
    // under root) passes through to its data directory.
    let temp = tempfile::tempdir()
        .and_then(|t| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o711))?;
            Ok(t)
        })
        .map_err(|e| BenchError::io("making a directory", "/tmp", e))?;
    // Built afresh, and removed afterwards (disk is shared).
    let dir = (a.dir.as_deref().unwrap_or(temp.path())).join("oo7-clients");
    reset_dir(&dir)?;
    let factory = AmberOo7Factory::DEFAULT;
    eprintln!(
        "building the {} database ({} modules)…",
        a.size.name(),
        params.modules
    );
    (factory.build(&dir, &db, &EngineOptions::default()))
        .map_err(|e| BenchError::engine("amber", "building", e))?;
    let path = dir.join(FILE);
    let file_bytes = (std::fs::metadata(&path))
        .map_err(|e| BenchError::io("reading the size of", &path, e))?
        .len();
    let module_bytes = file_bytes / u64::from(params.modules);
    // The count each traversal answers on each module.
    let mut model = Model::new(&db);
    let mut expected = std::collections::HashMap::new();
    for &op in &a.ops {
        for m in (1..=most).map(module_of) {
            let t = op.traversal().expect("a traversal");
            let answer = (model.traverse(m, t))
                .map_err(|e| BenchError::engine("model", "a traversal", e))?;
            expected.insert((op, m), answer.count);
        }
    }
    let mut report = ClientsReport {
        bench: "oo7-clients",
        backend: a.backend.clone(),
        modules: params.modules,
        module_bytes,
        seconds: a.seconds,
        cores: crate::procfs::cores(),
        load_before: crate::procfs::load_average(),
        rows: Vec::new(),
        resources: Vec::new(),
        targets: Vec::new(),
        unavailable: Vec::new(),
    };
    // The peers' databases, built once each (both forms share one).
    let pg_dir = dir.join("peer");
    let mut built: Vec<&str> = Vec::new();
    for column in &a.schemes {
        let Column::Peer(name) = column else { continue };
        let Some(peer) = peer::find(peers, name) else {
            eprintln!("{name}: unavailable: {PEER_HINT}");
            report.unavailable.push(Unavailable {
                scheme: name.to_string(),
                reason: PEER_HINT.into(),
            });
            continue;
        };
        if let Err(reason) = peer.available() {
            eprintln!("{name}: unavailable: {reason}");
            report.unavailable.push(Unavailable {
                scheme: name.to_string(),
                reason,
            });
            continue;
        }
        let first = peer.names()[0];
        if !built.contains(&first) {
            eprintln!("building the {first} database…");
            reset_dir(&pg_dir)?;
            (peer.build(&pg_dir, &db)).map_err(|e| BenchError::engine(first, "building", e))?;
            built.push(first);
        }
    }
    let runs = |c: &Column| match c {
        Column::Amber(_) => true,
        Column::Peer(p) => !report.unavailable.iter().any(|u| u.scheme == *p),
    };
    let columns: Vec<Column> = a.schemes.iter().filter(|c| runs(c)).cloned().collect();
    for &cache in &a.caches {
        for column in &columns {
            // A peer has no client cache: it runs once, unconstrained.
            let peer = match column {
                Column::Peer(p) => peer::find(peers, p),
                Column::Amber(_) => None,
            };
            if peer.is_some() && cache != Cache::Unconstrained && a.caches.len() > 1 {
                continue;
            }
            for &op in &a.ops {
                if *column == Column::Peer("postgres-recursive") && op != Op::T1 {
                    continue;
                }
                for &n in &a.clients {
                    let job = |module: u32, url: &str| ClientJob {
                        url: url.to_string(),
                        token: TOKEN.into(),
                        module,
                        scheme: column.name(),
                        op: op.name().into(),
                        backend: a.backend.clone(),
                        recovery_buffer_pages: cache.recovery_buffer_pages(module_bytes, 4096),
                        warmup: a.warmup,
                        seconds: a.seconds,
                        expected_count: expected[&(op, module)],
                    };
                    let host = match peer {
                        None => Host::Amber(Served::start(&path, TOKEN)?),
                        Some(p) => Host::Peer(
                            p.serve(&pg_dir)
                                .map_err(|e| BenchError::engine(p.names()[0], "starting", e))?,
                        ),
                    };
                    let (row, res) = cell(a, host, n, &job)?;
                    eprintln!(
                        "{} {} {} x{n}: {:.1} ms, {:.1} tx/s, {} pages ({} log), {:.0} log bytes, cpu {:.2}",
                        cache.name(),
                        column.name(),
                        op.name(),
                        row.response_ms,
                        row.tx_per_s,
                        row.pages_shipped.unwrap_or(f64::NAN),
                        row.log_pages_shipped.unwrap_or(f64::NAN),
                        row.log_bytes,
                        res.cpu_busy
                    );
                    report.rows.push(Row {
                        scheme: column.name(),
                        size: a.size.name().into(),
                        cache,
                        ..row
                    });
                    report.resources.push(Resources {
                        scheme: column.name(),
                        cache,
                        ..res
                    });
                }
            }
        }
    }
    remove_dir(&dir)?;
    report.targets = report::targets(&report.rows);
    if let Some(p) = &a.json {
        crate::json::write(p, &report).map_err(|e| BenchError::io("writing", p, e))?;
    }
    if let Some(d) = &a.plot {
        for (name, svg) in plot::charts(&report) {
            let p = d.join(name);
            std::fs::write(&p, svg).map_err(|e| BenchError::io("writing", &p, e))?;
        }
    }
    Ok(report)
}

/// Why a peer named in `--schemes` is not in this binary.
const PEER_HINT: &str = "not built into this binary (build amber-cli with --features compare)";

/// What a cell's clients talk to: Amber's server in this process, or a
/// peer's server.
enum Host {
    Amber(Served),
    Peer(Box<dyn PeerServer>),
}

impl Host {
    fn url(&self) -> String {
        match self {
            Host::Amber(s) => format!("amber://{}/oo7", s.addr),
            Host::Peer(p) => p.url(),
        }
    }

    /// The end of the server's log, bytes.
    fn log_end(&mut self) -> Result<u64, BenchError> {
        match self {
            Host::Amber(s) => Ok(s.writer.as_ref().map_or(0, |w| w.store.stats().end_lsn)),
            Host::Peer(p) => p
                .log_end()
                .map_err(|e| host_failed("reading its log's end", e)),
        }
    }

    /// The server's CPU time so far, seconds: this process's (which does
    /// nothing else meanwhile), or the peer's processes'.
    fn cpu_s(&self) -> f64 {
        match self {
            Host::Amber(_) => crate::procfs::cpu_time_s().unwrap_or(0.0),
            Host::Peer(p) => p.processes().cpu_time_s().unwrap_or(0.0),
        }
    }

    fn stop(self) -> Result<(), BenchError> {
        match self {
            Host::Amber(s) => drop(s),
            Host::Peer(p) => p.stop().map_err(|e| host_failed("stopping", e))?,
        }
        Ok(())
    }
}

fn host_failed(during: &str, e: EngineError) -> BenchError {
    BenchError::engine("peer server", during, e)
}

/// A client process of `job`, its standard output read into `lines`.
fn spawn_client(
    a: &ClientsArgs,
    job: &ClientJob,
    lines: mpsc::Sender<(u32, String)>,
) -> Result<(Child, ChildStdin), BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::io("finding this program", "/proc/self/exe", e))?;
    let json = serde_json::to_string(job).map_err(|source| BenchError::Json {
        context: "writing a client's job".into(),
        source,
    })?;
    let mut child = Command::new(&exe)
        .args(&a.child_args)
        .arg(json)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::io("starting a client", &exe, e))?;
    let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
    let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
        return Err(BenchError::io(
            "piping a client",
            &exe,
            std::io::ErrorKind::BrokenPipe.into(),
        ));
    };
    let module = job.module;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send((module, line));
        }
    });
    Ok((child, stdin))
}

/// The module client `i` (1-based) works on: every other one from the
/// second, so that no client writes a page another reads.
fn module_of(i: u32) -> u32 {
    2 * i
}

/// Runs `n` clients of `job` against a fresh server, `host`.
fn cell(
    a: &ClientsArgs,
    mut host: Host,
    n: u32,
    job: &dyn Fn(u32, &str) -> ClientJob,
) -> Result<(Row, Resources), BenchError> {
    let url = host.url();
    let (tx, rx) = mpsc::channel();
    let mut clients = Vec::new();
    for m in (1..=n).map(module_of) {
        clients.push(spawn_client(a, &job(m, &url), tx.clone())?);
    }
    drop(tx);
    let child_failed = |m: u32, what: &str| BenchError::Child {
        engine: "amber".into(),
        job: format!("client {m}"),
        message: what.to_string(),
    };
    // Every client warmed up, then all start at once.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut ready = 0;
    while ready < n {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok((_, line)) if line.trim_end().ends_with("ready") => ready += 1,
            Ok(_) => {}
            Err(_) => {
                return Err(child_failed(
                    ready + 1,
                    "a client ended or hung before its warm-up ended",
                ));
            }
        }
    }
    let lsn0 = host.log_end()?;
    let cpu0 = host.cpu_s();
    let machine0 = crate::procfs::machine_cpu_ticks().unwrap_or_default();
    let t0 = Instant::now();
    for (_, stdin) in &mut clients {
        let _ = stdin.write_all(b"go\n").and_then(|()| stdin.flush());
    }
    let mut results: Vec<ClientResult> = Vec::new();
    while results.len() < n as usize {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok((m, line)) => {
                if let Some((_, json)) = line.split_once("result ") {
                    let r =
                        serde_json::from_str(json).map_err(|e| child_failed(m, &e.to_string()))?;
                    results.push(r);
                }
            }
            Err(_) => {
                return Err(child_failed(
                    results.len() as u32 + 1,
                    "a client ended without its result",
                ));
            }
        }
    }
    if results.iter().any(|r| r.backend != results[0].backend) {
        return Err(child_failed(0, "the clients ran on different backends"));
    }
    let wall = t0.elapsed().as_secs_f64();
    let server_cpu = host.cpu_s() - cpu0;
    let machine1 = crate::procfs::machine_cpu_ticks().unwrap_or_default();
    let ticks = |i: usize| machine1[i].saturating_sub(machine0[i]) as f64;
    let (machine_busy, iowait) = (ticks(0) / ticks(1).max(1.0), ticks(2) / ticks(1).max(1.0));
    // Every commit since `go` is a measured one: the server's log grew by
    // their records and commit records.
    let logged = host.log_end()?.saturating_sub(lsn0);
    for (mut c, stdin) in clients {
        drop(stdin);
        let status = c
            .wait()
            .map_err(|e| BenchError::io("waiting for a client", &url, e))?;
        if !status.success() {
            return Err(child_failed(0, &format!("a client exited with {status}")));
        }
    }
    host.stop()?;
    let tx_count: u64 = results.iter().map(|r| r.transactions).sum::<u64>().max(1);
    let mut times: Vec<f64> = results
        .iter()
        .flat_map(|r| r.response_ms.iter().copied())
        .collect();
    times.sort_by(f64::total_cmp);
    let per_tx =
        |f: fn(&ClientResult) -> u64| results.iter().map(f).sum::<u64>() as f64 / tx_count as f64;
    let clients_cpu: f64 = results.iter().map(|r| r.cpu_s).sum();
    let cores = crate::procfs::cores().max(1) as f64;
    let cpu_busy = (server_cpu + clients_cpu) / wall / cores;
    let j = job(module_of(1), "");
    let amber = j.scheme.parse::<amber::Scheme>().is_ok();
    let row = Row {
        scheme: String::new(),
        size: String::new(),
        cache: Cache::Unconstrained,
        clients: n,
        op: j.op.clone(),
        response_ms: times.get(times.len() / 2).copied().unwrap_or(0.0),
        tx_per_s: results
            .iter()
            .map(|r| r.transactions as f64 / r.wall_s.max(1e-9))
            .sum(),
        pages_shipped: amber.then(|| per_tx(|r| r.data_pages + r.log_pages)),
        log_pages_shipped: amber.then(|| per_tx(|r| r.log_pages)),
        log_bytes: logged as f64 / tx_count as f64,
        minimal_log_bytes: amber.then(|| per_tx(|r| r.minimal_log_bytes)),
        backend: results.first().and_then(|r| r.backend.clone()),
    };
    let res = Resources {
        scheme: String::new(),
        cache: Cache::Unconstrained,
        clients: n,
        op: j.op,
        server_cpu: server_cpu / wall,
        clients_cpu: clients_cpu / wall,
        cpu_busy,
        machine_busy,
        iowait,
        saturates: match (machine_busy >= 0.85, cpu_busy * 2.0 >= machine_busy) {
            (true, true) => "cpu",
            (true, false) => "cpu, shared",
            (false, _) => "the log device",
        },
        conflicts: results.iter().map(|r| r.conflicts).sum(),
    };
    Ok((row, res))
}
