//! One measured OO7 process: open a database, run every iteration of one
//! operation, and report times, answers, bytes written and peak RSS; the
//! protocol of OO1's children ([`crate::oo1::child`]), with OO7's request.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::engine::{Answer, EngineOptions, Oo7Engine, Oo7Factory};
use super::ops::{Op, Protocol, inputs, post_checks};
use super::params::Params;
use crate::oo1::child::{
    Amortized, IoDelta, IoProbe, no_engine, peak_rss_kib, serve_child, server_memory_kib, written,
};
use crate::oo1::{BenchError, EngineError};

/// The hidden subcommand that makes a harness binary serve one OO7 job.
pub const CHILD_SUBCOMMAND: &str = "__oo7-child";

/// What a child process is asked to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRequest {
    pub engine: String,
    /// A pristine copy of the engine's database.
    pub dir: PathBuf,
    pub params: Params,
    pub op: Op,
    pub protocol: Protocol,
    pub options: EngineOptions,
}

/// One timed iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    pub ms: f64,
    pub answer: Answer,
    /// Committing operations: bytes written around the operation.
    pub io: Option<IoDelta>,
    /// Committing operations of engines that count it: their last commit's
    /// log bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
}

/// Everything one job measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub engine: String,
    pub op: Op,
    /// Time of `Oo7Factory::open`.
    pub open_ms: f64,
    pub iterations: Vec<Iteration>,
    /// For committing operations: the commits and the forced installation.
    pub amortized: Option<Amortized>,
    /// Untimed answers of [`post_checks`] after the last iteration.
    pub checks: Vec<Answer>,
    /// `VmHWM` at the end, in KiB, plus `server_kib`.
    pub peak_rss_kib: Option<u64>,
    /// An engine with a server: its processes' memory at the end of the
    /// job (OO1's [`JobResult::server_kib`](crate::oo1::JobResult)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_kib: Option<u64>,
}

/// Runs every iteration of `op`'s inputs on `engine`: the untimed setup
/// (a delete's insert), then the operation, timed; for committing
/// operations the bytes written around it.
pub fn execute(
    engine: &mut dyn Oo7Engine,
    params: &Params,
    op: Op,
    protocol: Protocol,
    probe: Option<&IoProbe>,
) -> Result<Vec<Iteration>, EngineError> {
    let probe = probe.filter(|_| op.commits());
    let mut out = Vec::new();
    for input in inputs(params, op, protocol) {
        input.setup(engine)?;
        let before = probe.and_then(IoProbe::sample);
        let start = Instant::now();
        let answer = input.run(engine)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let io = written(before, probe.and_then(IoProbe::sample));
        let log_bytes = if op.commits() {
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

/// The answers of `op`'s post checks on `engine`.
pub fn checks(
    engine: &mut dyn Oo7Engine,
    params: &Params,
    op: Op,
    protocol: Protocol,
) -> Result<Vec<Answer>, EngineError> {
    post_checks(params, op, protocol)
        .iter()
        .map(|i| i.run(engine))
        .collect()
}

/// Runs one job in this process: open (timed), the iterations, for a
/// committing job the installation (timed, amortized with the commits),
/// the post checks, close.
pub fn run_job(factory: &dyn Oo7Factory, request: &ChildRequest) -> Result<JobResult, BenchError> {
    let name = factory.info().name;
    let start = Instant::now();
    let mut engine = factory
        .open(&request.dir, &request.options)
        .map_err(|e| BenchError::engine(name, format!("opening {}", request.dir.display()), e))?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let during = request.op.name();
    let probe = IoProbe::for_dir(&request.dir, engine.server());
    let commits = request.op.commits();
    let before = commits.then(|| probe.sample()).flatten();
    let p = &request.params;
    let iterations = execute(
        engine.as_mut(),
        p,
        request.op,
        request.protocol,
        Some(&probe),
    )
    .map_err(|e| BenchError::engine(name, during, e))?;
    let amortized = if commits {
        let start = Instant::now();
        engine
            .install()
            .map_err(|e| BenchError::engine(name, format!("installing after {during}"), e))?;
        let install_ms = start.elapsed().as_secs_f64() * 1e3;
        Some(Amortized {
            commits: iterations.len() as u64,
            total_ms: iterations.iter().map(|it| it.ms).sum::<f64>() + install_ms,
            install_ms,
            io: written(before, probe.sample()),
        })
    } else {
        None
    };
    let checks = checks(engine.as_mut(), p, request.op, request.protocol)
        .map_err(|e| BenchError::engine(name, format!("checking after {during}"), e))?;
    let server_kib = server_memory_kib(engine.server());
    engine
        .close()
        .map_err(|e| BenchError::engine(name, "closing", e))?;
    Ok(JobResult {
        engine: name.to_string(),
        op: request.op,
        open_ms,
        iterations,
        amortized,
        checks,
        peak_rss_kib: peak_rss_kib(server_kib),
        server_kib,
    })
}

/// The child side: reads a [`ChildRequest`] from stdin, runs it with the
/// engine of that name, writes a reply to stdout; an error (after
/// replying) when the job failed.
pub fn run_oo7_child(engines: Vec<Box<dyn Oo7Factory>>) -> Result<(), BenchError> {
    serve_child("OO7", |request: ChildRequest| {
        let find = |name: &str| engines.iter().find(|f| f.info().name == name);
        if let Some(factory) = find(&request.engine) {
            return run_job(factory.as_ref(), &request);
        }
        // `ENGINE/SCHEME` (`--schemes`).
        let (engine, scheme) = request
            .engine
            .split_once('/')
            .ok_or_else(|| no_engine(&request.engine))?;
        let factory = find(engine)
            .ok_or_else(|| no_engine(engine))?
            .with_scheme(scheme)
            .map_err(BenchError::Usage)?;
        run_job(factory.as_ref(), &request)
    })
}
