//! One measured process: open a database, run every iteration of one job, and
//! report times, answers, bytes written and peak RSS.
//!
//! The harness runs each job in a new process (so that iteration 1 is cold for
//! the engine) by re-executing its own binary with the hidden subcommand
//! [`CHILD_SUBCOMMAND`]; the binary routes it to [`run_oo1_child`], which reads a
//! [`ChildRequest`] as JSON from stdin and writes a [`ChildReply`] as JSON to
//! stdout. [`run_job`] does the same work in the calling process.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::database::{GenParams, PartId};
use super::engine::{Answer, Engine, EngineError, EngineFactory, EngineOptions};
use super::error::BenchError;
use super::ops::{INSERT_PARTS, Input, Job, Op, Protocol, inputs};
use crate::procfs::{self, BlockDevice, IoCounters, ProcessTree};

/// The hidden subcommand that makes a harness binary serve one job; pass it (and
/// whatever must precede it) in [`Oo1Args::child_args`](super::Oo1Args).
pub const CHILD_SUBCOMMAND: &str = "__oo1-child";

/// What a child process is asked to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The engine's name, as in [`EngineInfo::name`](super::EngineInfo).
    pub engine: String,
    /// The directory holding a pristine copy of the engine's database.
    pub dir: PathBuf,
    pub params: GenParams,
    pub job: Job,
    pub protocol: Protocol,
    pub options: EngineOptions,
}

/// Bytes written during one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoDelta {
    /// `write_bytes` of `/proc/self/io` (folios dirtied; see [`IoCounters`]),
    /// or of the engine's server processes ([`IoProbe::server`]).
    pub write_bytes: u64,
    /// `wchar` of `/proc/self/io` (bytes passed to write calls), or of the
    /// engine's server processes.
    pub wchar: u64,
    /// Bytes the database's block device received (machine-wide), if known.
    pub device_bytes: Option<u64>,
}

/// What [`execute`] measures around committing iterations.
#[derive(Clone, Debug, Default)]
pub struct IoProbe {
    /// The device holding the database, if it has statistics.
    pub device: Option<BlockDevice>,
    /// The engine's server ([`Engine::server`]): its process tree's
    /// counters are read in place of this process's, whose writes are
    /// requests to a socket, not I/O to the database.
    pub server: Option<ProcessTree>,
}

impl IoProbe {
    /// A probe for a database in `dir`, written by this process or by
    /// `server`.
    pub fn for_dir(dir: &std::path::Path, server: Option<ProcessTree>) -> IoProbe {
        IoProbe {
            device: BlockDevice::of(dir),
            server,
        }
    }

    pub(crate) fn sample(&self) -> Option<Sample> {
        let io = match self.server {
            Some(tree) => tree.io()?,
            None => IoCounters::now()?,
        };
        Some(Sample {
            io,
            device: self.device.as_ref().and_then(BlockDevice::written_bytes),
        })
    }
}

/// The counters at one instant.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    io: IoCounters,
    device: Option<u64>,
}

/// The bytes written between two samples.
pub(crate) fn written(before: Option<Sample>, after: Option<Sample>) -> Option<IoDelta> {
    before.zip(after).map(|(a, b)| {
        let d = a.io.delta(b.io);
        IoDelta {
            write_bytes: d.write_bytes,
            wchar: d.wchar,
            device_bytes: a.device.zip(b.device).map(|(x, y)| y.saturating_sub(x)),
        }
    })
}

/// One timed iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    pub ms: f64,
    pub answer: Answer,
    /// For committing operations: bytes written around the operation (whose end
    /// is the commit).
    pub io: Option<IoDelta>,
    /// For committing operations of engines that count it: the log bytes of
    /// the commit by the engine's own account
    /// ([`Engine::last_commit_log_bytes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
}

/// A committing job's commits taken together, with the installation work
/// they deferred: the amortized cost of a commit is `total_ms` and the bytes
/// of `io` divided by `commits`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Amortized {
    /// The job's commits: one per iteration.
    pub commits: u64,
    /// Every iteration's time (the whole operation, not only its commit) plus
    /// `install_ms`.
    pub total_ms: f64,
    /// Time of [`Engine::install`] after the last iteration.
    pub install_ms: f64,
    /// Bytes written from just before the first iteration to just after the
    /// installation: log, page file and metadata, whenever the engine wrote
    /// them.
    pub io: Option<IoDelta>,
}

/// Everything one job measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub engine: String,
    pub job: Job,
    /// Time of `EngineFactory::open`.
    pub open_ms: f64,
    pub iterations: Vec<Iteration>,
    /// For committing jobs: the commits and the forced installation together.
    pub amortized: Option<Amortized>,
    /// Untimed answers read after the last iteration, checking that the writes
    /// landed (see [`post_checks`]).
    pub checks: Vec<Answer>,
    /// `VmHWM` of the process at the end, in KiB, plus `server_kib`.
    pub peak_rss_kib: Option<u64>,
    /// For an engine with a server ([`Engine::server`]): the memory its
    /// processes hold at the end of the job, before it closes, in KiB
    /// ([`ProcessTree::memory_kib`]: proportional set sizes, shared memory
    /// counted once); included in `peak_rss_kib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_kib: Option<u64>,
}

/// A child's reply on stdout (OO7's children send their own result type).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildReply<T = JobResult> {
    Ok(T),
    Error(String),
}

/// Runs every iteration of `inputs` on `engine`, timing each one. With a
/// probe, committing operations also record the bytes written (sampled outside
/// the timed region).
pub fn execute(
    engine: &mut dyn Engine,
    inputs: &[Input],
    probe: Option<&IoProbe>,
) -> Result<Vec<Iteration>, EngineError> {
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let commits = matches!(input, Input::Insert(_) | Input::Update { .. });
        let probe = probe.filter(|_| commits);
        let before = probe.and_then(IoProbe::sample);
        let start = Instant::now();
        let answer = match input {
            Input::Lookup(ids) => engine.lookup(ids)?,
            Input::Traversal(root) => engine.traverse(*root)?,
            Input::Reverse(root) => engine.reverse(*root)?,
            Input::Insert(parts) => engine.insert(parts)?,
            Input::Update { root, plan } => engine.update(*root, plan)?,
            Input::Open(id) => engine.lookup(&[*id])?,
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let after = probe.and_then(IoProbe::sample);
        let io = written(before, after);
        let log_bytes = if commits {
            engine.last_commit_log_bytes()
        } else {
            None
        };
        out.push(Iteration {
            ms,
            answer,
            io,
            log_bytes,
        });
    }
    Ok(out)
}

/// Untimed reads after a committing job, so that a write that did not land (or
/// landed in the wrong index) fails the run:
/// - after `insert`: a lookup of every inserted part, and a traversal and a
///   reverse traversal from the first inserted part (the reverse one reaches the
///   new parts through the incoming index);
/// - after `update`: a lookup of every original part.
pub fn post_checks(
    engine: &mut dyn Engine,
    params: GenParams,
    job: Job,
    protocol: Protocol,
) -> Result<Vec<Answer>, EngineError> {
    match job.op {
        Op::Insert => {
            let first = params.parts + 1;
            let last = params.parts + protocol.iterations() as u32 * INSERT_PARTS;
            let ids: Vec<PartId> = (first..=last).collect();
            Ok(vec![
                engine.lookup(&ids)?,
                engine.traverse(first)?,
                engine.reverse(first)?,
            ])
        }
        Op::Update => {
            let ids: Vec<PartId> = (1..=params.parts).collect();
            Ok(vec![engine.lookup(&ids)?])
        }
        _ => Ok(Vec::new()),
    }
}

/// Runs one job in this process: open (timed), iterations, for a committing
/// job [`Engine::install`] (timed, and counted with the iterations in
/// [`Amortized`]), post checks, close.
pub fn run_job(
    factory: &dyn EngineFactory,
    request: &ChildRequest,
) -> Result<JobResult, BenchError> {
    let name = factory.info().name;
    let inputs = inputs(request.params, request.job, request.protocol);
    let start = Instant::now();
    let mut engine = factory
        .open(&request.dir, &request.options)
        .map_err(|e| BenchError::engine(name, format!("opening {}", request.dir.display()), e))?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let during = request.job.label();
    let probe = IoProbe::for_dir(&request.dir, engine.server());
    let commits = request.job.op.commits();
    let before = commits.then(|| probe.sample()).flatten();
    let iterations = execute(engine.as_mut(), &inputs, Some(&probe))
        .map_err(|e| BenchError::engine(name, &during, e))?;
    let amortized = if commits {
        let start = Instant::now();
        engine
            .install()
            .map_err(|e| BenchError::engine(name, format!("installing after {during}"), e))?;
        let install_ms = start.elapsed().as_secs_f64() * 1e3;
        let io = written(before, probe.sample());
        Some(Amortized {
            commits: iterations.len() as u64,
            total_ms: iterations.iter().map(|it| it.ms).sum::<f64>() + install_ms,
            install_ms,
            io,
        })
    } else {
        None
    };
    let checks = post_checks(
        engine.as_mut(),
        request.params,
        request.job,
        request.protocol,
    )
    .map_err(|e| BenchError::engine(name, format!("checking after {during}"), e))?;
    let server_kib = server_memory_kib(engine.server());
    engine
        .close()
        .map_err(|e| BenchError::engine(name, "closing", e))?;
    Ok(JobResult {
        engine: name.to_string(),
        job: request.job,
        open_ms,
        iterations,
        amortized,
        checks,
        peak_rss_kib: peak_rss_kib(server_kib),
        server_kib,
    })
}

/// The memory of an engine's server now ([`ProcessTree::memory_kib`]).
pub(crate) fn server_memory_kib(server: Option<ProcessTree>) -> Option<u64> {
    server.and_then(|tree| tree.memory_kib())
}

/// This process's peak RSS plus the server's memory, in KiB.
pub(crate) fn peak_rss_kib(server_kib: Option<u64>) -> Option<u64> {
    procfs::peak_rss_kib().map(|k| k + server_kib.unwrap_or(0))
}

/// The child side of the harness: reads a [`ChildRequest`] (JSON) from stdin,
/// runs it with the engine of that name from `engines`, and writes a
/// [`ChildReply`] (JSON) to stdout. Returns an error (after replying) when the
/// job failed, so the binary can exit non-zero.
pub fn run_oo1_child(engines: Vec<Box<dyn EngineFactory>>) -> Result<(), BenchError> {
    serve_child("OO1", |request: ChildRequest| {
        let factory = engines
            .iter()
            .find(|f| f.info().name == request.engine)
            .ok_or_else(|| no_engine(&request.engine))?;
        run_job(factory.as_ref(), &request)
    })
}

/// The refusal of a request naming an engine this binary lacks.
pub(crate) fn no_engine(name: &str) -> BenchError {
    BenchError::Usage(format!("no engine named {name:?} in this binary"))
}

/// A benchmark child's protocol (OO1's and OO7's): reads one request
/// (JSON) from stdin, runs it with `run`, and writes a [`ChildReply`]
/// (JSON) to stdout. Returns `run`'s error after replying, so the binary
/// can exit non-zero. `bench` names the benchmark in messages.
pub(crate) fn serve_child<Req, Res>(
    bench: &str,
    run: impl FnOnce(Req) -> Result<Res, BenchError>,
) -> Result<(), BenchError>
where
    Req: serde::de::DeserializeOwned,
    Res: Serialize + Clone,
{
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| BenchError::Io {
            context: format!("reading the {bench} child request from stdin"),
            path: None,
            source: e,
        })?;
    let outcome = serde_json::from_str::<Req>(&text)
        .map_err(|e| BenchError::Json {
            context: format!("malformed {bench} child request"),
            source: e,
        })
        .and_then(run);
    let reply = match &outcome {
        Ok(result) => ChildReply::Ok(result.clone()),
        Err(e) => ChildReply::Error(e.to_string()),
    };
    let json = serde_json::to_string(&reply).map_err(|e| BenchError::Json {
        context: format!("encoding the {bench} child reply"),
        source: e,
    })?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{json}")
        .and_then(|()| stdout.flush())
        .map_err(|e| BenchError::Io {
            context: format!("writing the {bench} child reply to stdout"),
            path: None,
            source: e,
        })?;
    outcome.map(|_| ())
}
