//! `amber bench oo1`: generate the database, build it with every engine, run
//! every job in a child process on a pristine copy, check the answers against
//! the reference evaluator, and report.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::args::Oo1Args;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::child::{ChildReply, ChildRequest, JobResult, execute, post_checks};
use super::database::{GenParams, GeneratedDb, generate};
use super::engine::{Answer, EngineFactory, EngineOptions};
use super::error::BenchError;
use super::ops::{Job, Protocol, inputs};
use super::plot::write_svg;
use super::reference::Reference;
use super::report::{BuildInfo, ColdCache, Oo1Report};
use crate::procfs;

/// The answers every engine must give for one job.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub job: Job,
    pub iterations: Vec<Answer>,
    pub checks: Vec<Answer>,
}

/// Computes the expected answers of `job` with the reference evaluator on a
/// fresh copy of `db`.
pub fn expected_answers(
    db: &GeneratedDb,
    job: Job,
    protocol: Protocol,
) -> Result<Expected, BenchError> {
    let mut reference = Reference::new(db);
    let ins = inputs(db.params, job, protocol);
    let during = format!("computing the expected answers of {}", job.label());
    let iterations = execute(&mut reference, &ins, None)
        .map_err(|e| BenchError::engine("reference", &during, e))?
        .into_iter()
        .map(|it| it.answer)
        .collect();
    let checks = post_checks(&mut reference, db.params, job, protocol)
        .map_err(|e| BenchError::engine("reference", &during, e))?;
    Ok(Expected {
        job,
        iterations,
        checks,
    })
}

/// Compares a job's answers with the expected ones; returns one line per
/// difference.
pub fn compare_answers(result: &JobResult, expected: &Expected, protocol: Protocol) -> Vec<String> {
    let mut problems = Vec::new();
    let what = format!("{}: {}", result.engine, result.job.label());
    if result.iterations.len() != expected.iterations.len() {
        problems.push(format!(
            "{what}: {} iterations, expected {}",
            result.iterations.len(),
            expected.iterations.len()
        ));
    }
    for (i, (got, want)) in result
        .iterations
        .iter()
        .zip(&expected.iterations)
        .enumerate()
    {
        if got.answer != *want {
            problems.push(format!(
                "{what}: iteration {} ({}) answered {:?}, expected {:?}",
                i + 1,
                protocol.phase(i).name(),
                got.answer,
                want
            ));
        }
    }
    if result.checks != expected.checks {
        problems.push(format!(
            "{what}: reads after the last iteration answered {:?}, expected {:?}",
            result.checks, expected.checks
        ));
    }
    problems
}

/// Runs OO1 on the engines of `engines` that `args` selects, prints the table
/// to stdout, writes the JSON and SVG files that `args` asks for, and returns
/// the report. An engine that fails or gives an answer different from the
/// reference makes the result [`BenchError::Failed`] (after reporting).
pub fn run_oo1(
    args: Oo1Args,
    engines: Vec<Box<dyn EngineFactory>>,
) -> Result<Oo1Report, BenchError> {
    let params = GenParams {
        parts: args.parts,
        seed: args.seed,
    };
    params.validate().map_err(BenchError::Usage)?;
    let selected = select(&engines, args.engines.as_deref())?;
    let mut problems = Vec::new();
    let (selected, unavailable) = keep_available(
        "oo1",
        selected,
        args.engines.is_some(),
        |f| (f.info().name, f.available()),
        &mut problems,
    );
    let cold_cache = if !args.drop_caches {
        ColdCache::OsCached
    } else if procfs::can_drop_caches() {
        ColdCache::Dropped
    } else {
        eprintln!(
            "oo1: --drop-caches: /proc/sys/vm/drop_caches is not writable here; cold runs read from the OS page cache"
        );
        ColdCache::OsCached
    };
    let db = with_progress(&format!("generating {} parts", params.parts), || {
        generate(params)
    })
    .map_err(BenchError::Usage)?;
    let jobs = Job::all(&args.ops);
    let expected = with_progress("computing the expected answers", || {
        jobs.iter()
            .map(|&job| expected_answers(&db, job, args.protocol))
            .collect::<Result<Vec<_>, _>>()
    })?;
    let workspace = Workspace::new(args.dir.as_deref())?;
    let options = EngineOptions {
        cache_mib: args.cache_mib,
    };

    // Every engine's database is built once; the rounds then sweep over the
    // engines and jobs in turn, each job on a fresh copy in a new process.
    let mut builds = Vec::new();
    let mut built = Vec::new();
    for factory in &selected {
        let name = factory.info().name;
        let base = workspace.root().join(name).join("base");
        reset_dir(&base)?;
        let start = Instant::now();
        let outcome = with_progress(&format!("{name}: building the database"), || {
            factory.build(&base, &db, &options)
        });
        if let Err(e) = outcome {
            problems.push(BenchError::engine(name, "building the database", e).to_string());
            continue;
        }
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        sync_tree(&base)?;
        builds.push(BuildInfo {
            info: factory.info(),
            build_ms,
            db_bytes: tree_size(&base)?,
        });
        built.push((name, base));
    }

    let mut results = Vec::new();
    for round in 1..=args.rounds {
        for (name, base) in &built {
            let run = workspace.root().join(name).join("run");
            for (job, want) in jobs.iter().zip(&expected) {
                reset_dir(&run)?;
                copy_tree(base, &run)?;
                if cold_cache == ColdCache::Dropped {
                    procfs::drop_caches().map_err(|e| {
                        BenchError::io("dropping caches via", "/proc/sys/vm/drop_caches", e)
                    })?;
                }
                let request = ChildRequest {
                    engine: name.to_string(),
                    dir: run.clone(),
                    params,
                    job: *job,
                    protocol: args.protocol,
                    options: options.clone(),
                };
                let label = format!(
                    "round {round}/{}: {name:<9} {:<16}",
                    args.rounds,
                    job.label()
                );
                match spawn_child(&args.child_args, &request) {
                    Ok(result) => {
                        let differences = compare_answers(&result, want, args.protocol);
                        let verdict = if differences.is_empty() {
                            "ok"
                        } else {
                            "WRONG ANSWERS"
                        };
                        eprintln!("oo1: {label} {verdict}");
                        problems.extend(differences);
                        results.push(result);
                    }
                    Err(e) => {
                        eprintln!("oo1: {label} FAILED");
                        problems.push(e.to_string());
                    }
                }
            }
            remove_dir(&run)?;
        }
    }

    let mut report = Oo1Report::new(&args, &db, cold_cache, &builds, &jobs, &results, &problems);
    report.unavailable = unavailable;
    print!("{}", report.table());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| BenchError::Json {
            context: "encoding the OO1 report".into(),
            source: e,
        })?;
        fs::write(path, json + "\n").map_err(|e| BenchError::io("writing", path, e))?;
    }
    if let Some(path) = &args.plot {
        fs::write(path, write_svg(&report)).map_err(|e| BenchError::io("writing", path, e))?;
    }
    drop(workspace);
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(BenchError::Failed {
            bench: "OO1",
            problems,
        })
    }
}

/// The engines named by `--engines` (in that order), or all of them.
fn select<'a>(
    engines: &'a [Box<dyn EngineFactory>],
    names: Option<&[String]>,
) -> Result<Vec<&'a dyn EngineFactory>, BenchError> {
    select_by("OO1", engines, names, |f| f.info().name)
}

/// An engine of the run left out because it cannot run on this machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    pub engine: &'static str,
    /// What is missing, and how to get it.
    pub reason: String,
}

/// Keeps the selected engines that can run here
/// ([`EngineFactory::available`]) and lists the others, each noted on
/// stderr. When `--engines` named them (`named`), each is also a problem
/// that fails the run, after the other engines have run.
pub(crate) fn keep_available<'a, F: ?Sized>(
    bench: &str,
    selected: Vec<&'a F>,
    named: bool,
    info: impl Fn(&F) -> (&'static str, Result<(), String>),
    problems: &mut Vec<String>,
) -> (Vec<&'a F>, Vec<Unavailable>) {
    let mut kept = Vec::new();
    let mut missing = Vec::new();
    for f in selected {
        match info(f) {
            (_, Ok(())) => kept.push(f),
            (engine, Err(reason)) => {
                eprintln!("{bench}: {engine}: unavailable: {reason}");
                if named {
                    problems.push(format!("{engine}: unavailable: {reason}"));
                }
                missing.push(Unavailable { engine, reason });
            }
        }
    }
    (kept, missing)
}

/// [`select`] for any kind of engine factory, named by `name` (OO7's
/// factories are another trait); `bench` names the benchmark in errors.
pub(crate) fn select_by<'a, F: ?Sized>(
    bench: &str,
    engines: &'a [Box<F>],
    names: Option<&[String]>,
    name: impl Fn(&F) -> &'static str,
) -> Result<Vec<&'a F>, BenchError> {
    let available: Vec<&str> = engines.iter().map(|f| name(f)).collect();
    if available.is_empty() {
        return Err(BenchError::Usage(format!(
            "no {bench} engines in this binary (the comparison engines need the `compare` feature)"
        )));
    }
    let Some(names) = names else {
        return Ok(engines.iter().map(|f| f.as_ref()).collect());
    };
    if let Some((i, name)) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        return Err(BenchError::Usage(format!(
            "engine {name:?} is named twice in --engines (position {})",
            i + 1
        )));
    }
    names
        .iter()
        .map(|n| {
            engines
                .iter()
                .find(|f| name(f) == n.as_str())
                .map(|f| f.as_ref())
                .ok_or_else(|| {
                    BenchError::Usage(format!(
                        "unknown engine {n:?}; available: {}",
                        available.join(", ")
                    ))
                })
        })
        .collect()
}

/// Runs one job in a new process: `current_exe() child_args…`, request on stdin,
/// reply on stdout.
fn spawn_child(child_args: &[String], request: &ChildRequest) -> Result<JobResult, BenchError> {
    spawn_json(child_args, request, |message| BenchError::Child {
        engine: request.engine.clone(),
        job: request.job.label(),
        message,
    })
}

/// Runs `current_exe() child_args…` with `request` as JSON on stdin and
/// reads a [`ChildReply`] from the last JSON line of its stdout; `fail`
/// makes the error of every way this can go wrong. OO7's harness uses it
/// for its own requests and results.
pub(crate) fn spawn_json<Req: Serialize, Reply: DeserializeOwned>(
    child_args: &[String],
    request: &Req,
    fail: impl Fn(String) -> BenchError,
) -> Result<Reply, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| fail(format!("cannot find the running binary: {e}")))?;
    let mut child = Command::new(&exe)
        .args(child_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", exe.display())))?;
    let json =
        serde_json::to_vec(request).map_err(|e| fail(format!("cannot encode the request: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&json)
            .map_err(|e| fail(format!("cannot send the request: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| fail(format!("cannot wait for the child: {e}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reply = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str::<ChildReply<Reply>>(l).ok());
    match reply {
        Some(ChildReply::Ok(result)) if output.status.success() => Ok(result),
        Some(ChildReply::Error(message)) => Err(fail(message)),
        _ => Err(fail(format!(
            "{} exited with {} without a reply (does it route {:?} to the benchmark's child entry point?)",
            exe.display(),
            output.status,
            child_args.join(" ")
        ))),
    }
}

/// Runs `f`, printing a progress line to stderr if it takes more than a second.
fn with_progress<T>(what: &str, f: impl FnOnce() -> T) -> T {
    with_progress_of("oo1", what, f)
}

/// [`with_progress`] for benchmark `bench` (the lines' prefix).
pub(crate) fn with_progress_of<T>(bench: &str, what: &str, f: impl FnOnce() -> T) -> T {
    let (done, wait) = mpsc::channel::<()>();
    let label = format!("{bench}: {what}");
    let start = Instant::now();
    let watcher = thread::spawn(move || {
        if wait.recv_timeout(Duration::from_secs(1)) == Err(mpsc::RecvTimeoutError::Timeout) {
            eprintln!("{label} …");
            true
        } else {
            false
        }
    });
    let out = f();
    let _ = done.send(());
    if watcher.join().unwrap_or(false) {
        eprintln!(
            "{bench}: {what}: done in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    out
}

/// Where the databases live: a temporary directory, or `--dir`.
pub(crate) enum Workspace {
    Temp(tempfile::TempDir),
    Given(PathBuf),
}

impl Workspace {
    pub(crate) fn new(dir: Option<&Path>) -> Result<Workspace, BenchError> {
        Self::with_prefix(dir, "amber-oo1-")
    }

    /// A workspace whose temporary directory's name starts with `prefix`.
    pub(crate) fn with_prefix(dir: Option<&Path>, prefix: &str) -> Result<Workspace, BenchError> {
        match dir {
            Some(dir) => {
                fs::create_dir_all(dir).map_err(|e| BenchError::io("creating", dir, e))?;
                Ok(Workspace::Given(dir.to_path_buf()))
            }
            // Mode 0711, not the 0700 a temporary directory gets: a server
            // engine running as another user (PostgreSQL under root, which
            // it refuses) passes through to its data directory, and no one
            // else can list the workspace.
            None => tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .and_then(|t| {
                    use std::os::unix::fs::PermissionsExt;
                    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o711))?;
                    Ok(Workspace::Temp(t))
                })
                .map_err(|e| {
                    BenchError::io("creating a temporary directory in", std::env::temp_dir(), e)
                }),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        match self {
            Workspace::Temp(t) => t.path(),
            Workspace::Given(p) => p,
        }
    }
}

pub(crate) fn remove_dir(dir: &Path) -> Result<(), BenchError> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BenchError::io("removing", dir, e)),
    }
}

/// Makes `dir` an empty directory.
pub(crate) fn reset_dir(dir: &Path) -> Result<(), BenchError> {
    remove_dir(dir)?;
    fs::create_dir_all(dir).map_err(|e| BenchError::io("creating", dir, e))
}

/// Copies the files under `from` into the existing directory `to`, and syncs
/// them, so that no write-back of the copy overlaps the measured process.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), BenchError> {
    for entry in fs::read_dir(from).map_err(|e| BenchError::io("reading", from, e))? {
        let entry = entry.map_err(|e| BenchError::io("reading", from, e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| BenchError::io("inspecting", &src, e))?;
        if kind.is_dir() {
            fs::create_dir_all(&dst).map_err(|e| BenchError::io("creating", &dst, e))?;
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| BenchError::io("copying", &src, e))?;
            sync_file(&dst)?;
        }
    }
    sync_file(to)
}

/// fsyncs every file and directory under `dir`.
pub(crate) fn sync_tree(dir: &Path) -> Result<(), BenchError> {
    for entry in fs::read_dir(dir).map_err(|e| BenchError::io("reading", dir, e))? {
        let path = entry.map_err(|e| BenchError::io("reading", dir, e))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            sync_file(&path)?;
        }
    }
    sync_file(dir)
}

fn sync_file(path: &Path) -> Result<(), BenchError> {
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| BenchError::io("syncing", path, e))
}

/// Bytes of the files under `dir`.
pub(crate) fn tree_size(dir: &Path) -> Result<u64, BenchError> {
    let mut total = 0;
    for entry in fs::read_dir(dir).map_err(|e| BenchError::io("reading", dir, e))? {
        let entry = entry.map_err(|e| BenchError::io("reading", dir, e))?;
        let meta = entry
            .metadata()
            .map_err(|e| BenchError::io("inspecting", entry.path(), e))?;
        total += if meta.is_dir() {
            tree_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that cannot run here is listed, not run; a failure only
    /// when `--engines` named it.
    #[test]
    fn unavailable_engines_are_listed_and_fail_only_when_named() {
        let engines: [(&'static str, Result<(), String>); 2] =
            [("here", Ok(())), ("absent", Err("not installed".into()))];
        let all: Vec<&(&'static str, Result<(), String>)> = engines.iter().collect();
        for named in [false, true] {
            let mut problems = Vec::new();
            let (kept, missing) = keep_available(
                "oo1",
                all.clone(),
                named,
                |e| (e.0, e.1.clone()),
                &mut problems,
            );
            assert_eq!(kept.iter().map(|e| e.0).collect::<Vec<_>>(), ["here"]);
            assert_eq!(
                missing,
                [Unavailable {
                    engine: "absent",
                    reason: "not installed".into()
                }]
            );
            assert_eq!(problems.len(), usize::from(named), "{problems:?}");
        }
    }
}
