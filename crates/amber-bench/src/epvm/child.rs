//! One experiment of one version in one process: open, run the iterations
//! and transactions the experiment asks for, timing each, then (untimed)
//! read every part back from the database reopened when the experiment
//! updated. The parent sends a [`ChildRequest`] as JSON on stdin and reads
//! a [`ChildRun`] from stdout (the OO1 harness's protocol).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cesm::Cesm;
use super::copying::{self, Copying};
use super::engine::{Engine, Transaction, Work};
use super::epvm1::Epvm1;
use super::mapped::Mapped;
use super::raw::{RawEngine, values};
use super::rawdb::{self, Directory, PART_SIZE, PageKind};
use super::schema::{self, Fig11, Oo1, Schema};
use super::{Experiment, FIGURE_11_P, Version};
use crate::oo1::child::serve_child;
use crate::oo1::database::GenParams;
use crate::oo1::engine::{Answer, EngineError, ResultExt, Tally, UpdatePlan};
use crate::oo1::error::BenchError;
use crate::oo1::harness::{Expected, compare_answers_of};
use crate::oo1::ops::{Input, Job, Op, Protocol, inputs};
use crate::procfs;
use crate::rng::Rng;

/// The hidden subcommand that makes the binary run one experiment.
pub const CHILD_SUBCOMMAND: &str = "__epvm-child";

/// What a child is asked to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRequest {
    pub version: Version,
    pub params: GenParams,
    pub experiment: Experiment,
    /// Buffer pool or cache budget, in 4 KiB pages.
    pub pool_pages: usize,
    /// A fresh copy of the version's database.
    pub dir: PathBuf,
}

/// One timed iteration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Iteration {
    /// Wall time; for an iteration that is a transaction of its own, its
    /// begin and commit included.
    pub ms: f64,
    /// User + system CPU of the process (every thread) over the same span.
    pub cpu_ms: f64,
    /// Pages read from below during it, where the version can tell.
    pub reads: Option<u64>,
    /// Objects copied into the object cache during it (the copy versions).
    #[serde(default)]
    pub copied: Option<u64>,
    pub answer: Answer,
}

/// What a child measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRun {
    pub iterations: Vec<Iteration>,
    /// [`Experiment::Single`]: the hot iterations again, drawing a random
    /// number at every visit.
    pub random: Vec<Iteration>,
    /// The one transaction's commit (0 when every iteration commits).
    pub commit_ms: f64,
    /// Every iteration and every commit.
    pub total_ms: f64,
    /// Their CPU time.
    pub total_cpu_ms: f64,
    /// Pages read from below over the run.
    pub reads: u64,
    /// EPVM 1.0's table emptied for want of buffer pool frames.
    pub flushes: Option<u64>,
    /// Every part read back from the database reopened after the run (an
    /// ordered lookup of ids `1..=N`), for the experiments that update.
    pub check: Option<Answer>,
    /// Amber's fault backend (mapped, and the copy versions).
    pub backend: Option<String>,
    /// Objects copied into the object cache (the copy versions).
    #[serde(default)]
    pub copied: Option<u64>,
    /// Log bytes the run's commits wrote (early records included).
    #[serde(default)]
    pub log_bytes: u64,
    /// Figure 11: what the read-back found of the parts' arrays
    /// (`schema::array_check`, summed over the parts, and whether all
    /// agreed).
    #[serde(default)]
    pub arrays: Option<(i64, bool)>,
}

/// The OO1 job and protocol whose inputs an experiment runs.
pub fn job_of(e: Experiment) -> (Job, Protocol) {
    match e {
        Experiment::Single | Experiment::PerIteration => (
            Job {
                op: Op::Traversal,
                p: None,
            },
            Protocol { warm: 9, hot: 10 },
        ),
        Experiment::Update { p, hot, .. } => (
            Job {
                op: Op::Update,
                p: Some(p),
            },
            Protocol { warm: 9, hot },
        ),
        Experiment::Sweep { p, hot } => (
            Job {
                op: Op::Update,
                p: Some(p),
            },
            Protocol { warm: 0, hot },
        ),
        Experiment::Figure11 { .. } => (
            Job {
                op: Op::Update,
                p: Some(FIGURE_11_P),
            },
            Protocol { warm: 9, hot: 10 },
        ),
    }
}

/// Compares a run's answers with the reference's; one line per difference.
pub fn check(label: &str, run: &ChildRun, want: &Expected, e: Experiment) -> Vec<String> {
    let (_, protocol) = job_of(e);
    let answers: Vec<Answer> = run.iterations.iter().map(|i| i.answer).collect();
    let mut problems = compare_answers_of(label, &answers, want, protocol);
    if let Some(hot) = want.iterations.last() {
        for (i, r) in run.random.iter().enumerate() {
            if r.answer != *hot {
                problems.push(format!(
                    "{label}: hot iteration {} with random draws answered {:?}, expected {hot:?}",
                    i + 1,
                    r.answer
                ));
            }
        }
    }
    if e.updates() && run.check.as_ref() != want.checks.first() {
        problems.push(format!(
            "{label}: the database reopened after the run holds {:?}, expected {:?}",
            run.check,
            want.checks.first()
        ));
    }
    if let Experiment::Figure11 { ints } = e {
        // Every update adds one to `vals[1]` and leaves the last integer
        // (unless all are updated).
        let updates: u64 = want.iterations.iter().map(|a| a.changed).sum();
        let want_arrays = if ints < schema::INTS {
            updates as i64
        } else {
            0
        };
        if run.arrays != Some((want_arrays, true)) {
            problems.push(format!(
                "{label}: the parts' arrays read back as {:?}, expected ({want_arrays}, true): an update lost or partial",
                run.arrays
            ));
        }
    }
    problems
}

/// The child side: reads a [`ChildRequest`], runs it, writes a
/// [`ChildRun`].
pub fn run_epvm_child() -> Result<(), BenchError> {
    serve_child("epvm", |request: ChildRequest| {
        run_request(&request)
            .map_err(|e| BenchError::engine(request.version.name(), request.experiment.label(), e))
    })
}

fn run_request(request: &ChildRequest) -> Result<ChildRun, EngineError> {
    match request.experiment {
        Experiment::Figure11 { ints } => run_on::<Fig11>(request, ints),
        _ => run_on::<Oo1>(request, 0),
    }
}

/// [`run_request`] on schema `S`, an update changing `ints` integers.
fn run_on<S: Schema>(request: &ChildRequest, ints: usize) -> Result<ChildRun, EngineError> {
    let (job, protocol) = job_of(request.experiment);
    let inputs = inputs(request.params, job, protocol);
    let pages = request.pool_pages;
    let raw_only = || {
        if matches!(request.experiment, Experiment::Figure11 { .. }) {
            return Err(EngineError::bad_input(format!(
                "{} has no Figure 11 database",
                request.version
            )));
        }
        Ok(())
    };
    let mut run = match request.version {
        Version::Cesm => {
            raw_only()?;
            let mut engine = RawEngine::open(&request.dir, pages, Cesm)?;
            let run = drive(&mut engine, request, &inputs)?;
            engine.close()?;
            run
        }
        Version::Epvm1 | Version::Epvm1No => {
            raw_only()?;
            let method = Epvm1::new(request.version == Version::Epvm1);
            let mut engine = RawEngine::open(&request.dir, pages, method)?;
            let mut run = drive(&mut engine, request, &inputs)?;
            run.flushes = Some(engine.method().flushes);
            engine.close()?;
            run
        }
        Version::Mapped => {
            let mut engine = Mapped::<S>::open(&request.dir, (pages * rawdb::PAGE) as u64, ints)?;
            let mut run = drive(&mut engine, request, &inputs)?;
            run.backend = Some(engine.backend());
            engine.close()?;
            run
        }
        v => {
            let opts = copying::options(v)
                .ok_or_else(|| EngineError::bad_input(format!("{v} is not a copy version")))?;
            let pool = (copying::pool_pages(v, pages) * rawdb::PAGE) as u64;
            let mut engine = Copying::<S>::open(&request.dir, pool, opts, ints)?;
            let mut run = drive(&mut engine, request, &inputs)?;
            run.backend = Some(engine.backend());
            run.copied = Some(engine.stats().copied);
            engine.close()?;
            run
        }
    };
    if request.experiment.updates() {
        let (check, arrays) = read_back::<S>(request, ints)?;
        run.check = Some(check);
        run.arrays = arrays;
    }
    Ok(run)
}

/// The input's start part and update plan.
fn work_of(input: &Input) -> Result<(u32, Option<&UpdatePlan>), EngineError> {
    match input {
        Input::Traversal(root) => Ok((*root, None)),
        Input::Update { root, plan } => Ok((*root, Some(plan))),
        other => Err(EngineError::bad_input(format!(
            "an OO1 experiment was given {other:?}"
        ))),
    }
}

/// Wall and CPU time from a start.
struct Clock {
    wall: Instant,
    cpu_ns: u64,
}

impl Clock {
    fn start() -> Clock {
        Clock {
            cpu_ns: procfs::cpu_time_ns(),
            wall: Instant::now(),
        }
    }

    /// Milliseconds of wall and CPU time since the start.
    fn read(&self) -> (f64, f64) {
        let wall = self.wall.elapsed().as_secs_f64() * 1e3;
        let cpu = procfs::cpu_time_ns().saturating_sub(self.cpu_ns) as f64 / 1e6;
        (wall, cpu)
    }
}

/// Runs the experiment's iterations and transactions on `engine`.
fn drive<E: Engine>(
    engine: &mut E,
    request: &ChildRequest,
    inputs: &[Input],
) -> Result<ChildRun, EngineError> {
    let start_reads = engine.reads();
    let mut iterations = Vec::with_capacity(inputs.len());
    let mut random = Vec::new();
    let (mut commit_ms, mut commit_cpu_ms) = (0.0, 0.0);
    let mut log_bytes = 0;
    let per_iteration = matches!(
        request.experiment,
        Experiment::PerIteration
            | Experiment::Update {
                per_iteration: true,
                ..
            }
    );
    if per_iteration {
        for input in inputs {
            let (root, plan) = work_of(input)?;
            let before = engine.reads();
            let clock = Clock::start();
            let mut tx = engine.begin(true)?;
            let copied_before = tx.copied();
            let answer = tx.iterate(root, Work { plan, random: None })?;
            let copied = delta(copied_before, tx.copied());
            log_bytes += tx.commit()?;
            let (ms, cpu_ms) = clock.read();
            iterations.push(Iteration {
                ms,
                cpu_ms,
                reads: Some(engine.reads() - before),
                copied,
                answer,
            });
        }
    } else {
        // Single, and the single-transaction updates and sweeps (real
        // transactions: their commits are part of the figure).
        let real = request.experiment != Experiment::Single;
        let mut tx = engine.begin(real)?;
        for input in inputs {
            let (root, plan) = work_of(input)?;
            let (before, copied_before) = (tx.reads(), tx.copied());
            let clock = Clock::start();
            let answer = tx.iterate(root, Work { plan, random: None })?;
            let (ms, cpu_ms) = clock.read();
            iterations.push(Iteration {
                ms,
                cpu_ms,
                reads: delta(before, tx.reads()),
                copied: delta(copied_before, tx.copied()),
                answer,
            });
        }
        if request.experiment == Experiment::Single
            && let Some(last) = inputs.last()
        {
            let (root, _) = work_of(last)?;
            let mut rng = Rng::stream(request.params.seed, &[0xE9, 3]);
            for _ in 0..10 {
                let (before, copied_before) = (tx.reads(), tx.copied());
                let clock = Clock::start();
                let answer = tx.iterate(
                    root,
                    Work {
                        plan: None,
                        random: Some(&mut rng),
                    },
                )?;
                let (ms, cpu_ms) = clock.read();
                random.push(Iteration {
                    ms,
                    cpu_ms,
                    reads: delta(before, tx.reads()),
                    copied: delta(copied_before, tx.copied()),
                    answer,
                });
            }
        }
        let clock = Clock::start();
        log_bytes += tx.commit()?;
        (commit_ms, commit_cpu_ms) = clock.read();
    }
    let total_ms = iterations.iter().map(|i| i.ms).sum::<f64>() + commit_ms;
    let total_cpu_ms = iterations.iter().map(|i| i.cpu_ms).sum::<f64>() + commit_cpu_ms;
    Ok(ChildRun {
        iterations,
        random,
        commit_ms,
        total_ms,
        total_cpu_ms,
        reads: engine.reads() - start_reads,
        flushes: None,
        check: None,
        backend: None,
        copied: None,
        log_bytes,
        arrays: None,
    })
}

/// The growth of a counter from `before` to `after`, where it is kept.
fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    before.zip(after).map(|(a, b)| b - a)
}

/// Every part of the database in `request.dir`, reopened, read in id
/// order; on a Figure 11 database, its arrays checked too.
fn read_back<S: Schema>(
    request: &ChildRequest,
    ints: usize,
) -> Result<(Answer, Option<(i64, bool)>), EngineError> {
    let n = request.params.parts;
    let mut tally = Tally::for_op(Op::Lookup);
    let mut arrays: Option<(i64, bool)> = None;
    if request.version.raw() {
        let store = rawdb::open(&request.dir)?;
        let dir = Directory::read(&store)?;
        let mut pages: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut page = |page: u64, kind: PageKind| -> Result<Vec<u8>, EngineError> {
            if let Some(image) = pages.get(&page) {
                return Ok(image.clone());
            }
            let image = store
                .read_block(page)
                .ctx(&format!("reading page {page}"))?;
            rawdb::check_page(page, &image, kind)?;
            pages.insert(page, image.clone());
            Ok(image)
        };
        for id in 1..=n {
            let (index, at) = dir.entry(id)?;
            let oid = rawdb::u64_at(&page(index, PageKind::Index)?, at);
            let (p, off) = rawdb::split(oid, PageKind::Parts)?;
            let (pid, x, y, kind) = values(&page(p, PageKind::Parts)?[off..off + PART_SIZE]);
            tally.visit(pid, x, y, &kind);
        }
        store.close().ctx("closing the store")?;
    } else {
        let engine = Mapped::<S>::open(&request.dir, u64::MAX, ints)?;
        engine.read_all(n, &mut tally, |p| {
            if let Some((inc, ok)) = S::arrays(p, ints) {
                let (sum, all) = arrays.get_or_insert((0, true));
                *sum += inc;
                *all &= ok;
            }
        })?;
        engine.close()?;
    }
    Ok((tally.finish(), arrays))
}
