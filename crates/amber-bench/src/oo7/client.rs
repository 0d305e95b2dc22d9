//! One client process of `amber bench oo7 --server` (QuickStore's
//! client-server experiment, `papers/002_*` §5): it connects to the
//! server under its recovery scheme, runs its traversal on its own module
//! as separate transactions with its cache kept across them, says
//! `ready` after the warm-up, waits for the word on its standard input,
//! then runs for the measured time and prints one JSON line of what it
//! did. A peer's client (`postgres`) does the same over one connection to
//! the peer's server.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::amber_engine::AmberOo7;
use super::clients::Peer;
use super::engine::{Answer, EngineError, Oo7Engine};
use super::ops::Op;
use super::ops::Traversal;
use crate::oo1::BenchError;
use amber::{BackendChoice, CommitStats, Error, Options, RemoteOptions, Scheme};

/// The hidden subcommand a client process runs: `amber bench oo7
/// __oo7-client JOB`, with the job as JSON.
pub const CLIENT_SUBCOMMAND: &str = "__oo7-client";

/// What one client process does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientJob {
    pub url: String,
    pub token: String,
    /// Its module, 1-based.
    pub module: u32,
    /// One of Amber's schemes, or a peer's form (`postgres`).
    pub scheme: String,
    pub op: String,
    /// `sigsegv` or `uffd`.
    pub backend: String,
    /// Pages of the recovery buffer (SIGSEGV backend).
    pub recovery_buffer_pages: usize,
    /// Unmeasured transactions first (the first faults the module in).
    pub warmup: u32,
    /// How long the measured transactions run.
    pub seconds: f64,
    /// The count every traversal must answer (the model's).
    pub expected_count: u64,
}

/// What one client process did in its measured time.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientResult {
    /// Committed transactions.
    pub transactions: u64,
    /// Commits that lost to a concurrent one and ran again.
    pub conflicts: u64,
    /// Each committed transaction's response time, conflicts included.
    pub response_ms: Vec<f64>,
    /// Sums over the committed transactions.
    pub data_pages: u64,
    pub log_pages: u64,
    pub minimal_log_bytes: u64,
    /// The measured time and the process's CPU time in it, seconds.
    pub wall_s: f64,
    pub cpu_s: f64,
    /// The fault backend Amber's client ran on (none for a peer).
    pub backend: Option<String>,
}

fn is_conflict(e: &EngineError) -> bool {
    matches!(e, EngineError::Backend { source, .. }
        if matches!(source.downcast_ref::<Error>(), Some(Error::Conflict { .. })))
}

/// A client's connection: Amber's, whose commits say what they shipped,
/// or a peer's.
enum Engine {
    Amber(Box<AmberOo7>),
    Peer(Box<dyn Oo7Engine>),
}

impl Engine {
    fn traverse(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        match self {
            Engine::Amber(e) => e.traverse(m, t),
            Engine::Peer(e) => e.traverse(m, t),
        }
    }

    /// What the last commit shipped (nothing for a peer, or for a
    /// traversal that changes nothing).
    fn last_commit(&self) -> CommitStats {
        match self {
            Engine::Amber(e) => e.last_commit().unwrap_or_default(),
            Engine::Peer(_) => CommitStats::default(),
        }
    }

    /// The fault backend in use (none for a peer).
    fn backend(&self) -> Option<String> {
        match self {
            Engine::Amber(e) => Some(e.backend().to_string()),
            Engine::Peer(_) => None,
        }
    }

    fn close(self) -> Result<(), EngineError> {
        match self {
            Engine::Amber(e) => e.close(),
            Engine::Peer(e) => e.close(),
        }
    }
}

/// Runs the client process of `job` (the JSON after the subcommand);
/// `peers` are the peer engines this binary has.
pub fn run_client(job: &str, peers: &[Box<dyn Peer>]) -> Result<(), BenchError> {
    let job: ClientJob = serde_json::from_str(job).map_err(|source| BenchError::Json {
        context: "reading the client's job".into(),
        source,
    })?;
    let name = job.scheme.clone();
    let fail = |during: &str, e: EngineError| BenchError::engine(&name, during.to_string(), e);
    let t = (Op::from_name(&job.op).and_then(Op::traversal))
        .ok_or_else(|| BenchError::Usage(format!("{} is not a traversal", job.op)))?;
    let mut engine = match super::clients::peer::find(peers, &job.scheme) {
        Some(peer) => Engine::Peer(
            peer.connect(&job.url, &job.scheme)
                .map_err(|e| fail("connecting", e))?,
        ),
        None => Engine::Amber(Box::new(connect(&job).map_err(|e| fail("connecting", e))?)),
    };
    let mut out = ClientResult::default();
    let one = |engine: &mut Engine, out: &mut ClientResult| -> Result<(), BenchError> {
        let t0 = Instant::now();
        let answer = loop {
            match engine.traverse(job.module, t) {
                Err(e) if is_conflict(&e) => out.conflicts += 1,
                r => break r.map_err(|e| fail("a traversal", e))?,
            }
        };
        if answer.count != job.expected_count {
            return Err(BenchError::Child {
                engine: job.scheme.clone(),
                job: job.op.clone(),
                message: format!(
                    "module {}: {} updates, the model's {}",
                    job.module, answer.count, job.expected_count
                ),
            });
        }
        let s = engine.last_commit();
        out.transactions += 1;
        out.response_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        out.data_pages += s.data_pages_shipped;
        out.log_pages += s.log_pages_shipped;
        out.minimal_log_bytes += s.minimal_log_bytes;
        Ok(())
    };
    for _ in 0..job.warmup {
        one(&mut engine, &mut ClientResult::default())?;
    }
    let stdout = std::io::stdout();
    let say = |line: &str| -> Result<(), BenchError> {
        let mut o = stdout.lock();
        writeln!(o, "{line}")
            .and_then(|()| o.flush())
            .map_err(|e| BenchError::io("writing to the harness", "stdout", e))
    };
    say("ready")?;
    let mut go = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut go)
        .map_err(|e| BenchError::io("waiting for the start", "stdin", e))?;
    let (t0, cpu0) = (Instant::now(), crate::procfs::cpu_time_s().unwrap_or(0.0));
    while t0.elapsed().as_secs_f64() < job.seconds {
        one(&mut engine, &mut out)?;
    }
    out.wall_s = t0.elapsed().as_secs_f64();
    out.cpu_s = crate::procfs::cpu_time_s().unwrap_or(0.0) - cpu0;
    out.backend = engine.backend();
    let line = serde_json::to_string(&out).map_err(|source| BenchError::Json {
        context: "writing the client's result".into(),
        source,
    })?;
    say(&format!("result {line}"))?;
    engine.close().map_err(|e| fail("closing", e))
}

/// Amber's client of `job`: connected under its scheme, with its cache
/// setting.
fn connect(job: &ClientJob) -> Result<AmberOo7, EngineError> {
    let scheme: Scheme =
        (job.scheme.parse()).map_err(|e| EngineError::bad_input(format!("{e}")))?;
    let options = Options {
        backend: match job.backend.as_str() {
            "uffd" => BackendChoice::Uffd,
            _ => BackendChoice::Sigsegv,
        },
        recovery_buffer_pages: job.recovery_buffer_pages,
        remote: RemoteOptions {
            token: Some(job.token.as_bytes().to_vec()),
            scheme: Some(scheme),
            timeout: Duration::from_secs(120),
            ..RemoteOptions::default()
        },
        ..Options::default()
    };
    AmberOo7::connect(&job.url, options)
}
