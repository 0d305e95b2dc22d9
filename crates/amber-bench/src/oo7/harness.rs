//! `amber bench oo7`: generate the database once, build it with every
//! engine, run every operation of every engine in a child process on a
//! pristine copy, round after round, check every answer against the model,
//! and report. OO1's harness pieces do the process, directory and progress
//! work ([`crate::oo1::harness`]).

use std::fs;
use std::time::Instant;

use super::args::Oo7Args;
use super::child::{ChildRequest, JobResult, checks, execute};
use super::engine::{Answer, EngineOptions, Oo7Engine, Oo7Factory};
use super::generate::{Oo7Db, generate};
use super::model::Model;
use super::ops::{Op, Protocol};
use super::plot::write_svg;
use super::report::{Build, Oo7Report};
use crate::oo1::BenchError;
use crate::oo1::harness::{
    Workspace, copy_tree, keep_available, remove_dir, reset_dir, select_by, spawn_json, sync_tree,
    tree_size, with_progress_of,
};

/// The answers every engine must give for one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub op: Op,
    pub iterations: Vec<Answer>,
    pub checks: Vec<Answer>,
}

/// The model's answers for `op` on a fresh copy of `db`.
pub fn expected_answers(db: &Oo7Db, op: Op, protocol: Protocol) -> Result<Expected, BenchError> {
    let mut model = Model::new(db);
    let during = format!("computing the expected answers of {op}");
    let fail = |e| BenchError::engine("model", &during, e);
    let iterations = execute(&mut model, &db.params, op, protocol, None)
        .map_err(fail)?
        .into_iter()
        .map(|it| it.answer)
        .collect();
    let checks = checks(&mut model, &db.params, op, protocol).map_err(fail)?;
    Ok(Expected {
        op,
        iterations,
        checks,
    })
}

/// One line per difference between a job's answers and the expected ones.
pub fn compare_answers(result: &JobResult, expected: &Expected, round: u32) -> Vec<String> {
    let what = format!("{}: {} (round {round})", result.engine, result.op);
    let mut problems = Vec::new();
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
                "{what}: iteration {} answered {:?}, expected {want:?}",
                i + 1,
                got.answer
            ));
        }
    }
    if result.checks != expected.checks {
        problems.push(format!(
            "{what}: the reads after the last iteration answered {:?}, expected {:?}",
            result.checks, expected.checks
        ));
    }
    problems
}

/// What a database must answer after the delete job (whose iterations
/// delete what their setup inserted): Q7 (every atomic part), Q5 and Q6
/// (every bag entry) as on the generated database, so that nothing the
/// inserts added is left behind. One line per difference or failure of
/// `engine` (named `name`).
pub fn check_after_delete(engine: &mut dyn Oo7Engine, db: &Oo7Db, name: &str) -> Vec<String> {
    let model = Model::new(db);
    let mut problems = Vec::new();
    for (what, got, want) in [
        ("q7", engine.scan(), Ok(model.scan())),
        ("q5", engine.q5(), model.q5()),
        ("q6", engine.q6(), model.q6()),
    ] {
        match (got, want) {
            (Ok(got), Ok(want)) if got == want => {}
            (Ok(got), Ok(want)) => problems.push(format!(
                "{name}: {what} after the delete job: {got:?}, the generated database's {want:?}"
            )),
            (Err(e), _) => problems.push(format!("{name}: {what} after the delete job: {e}")),
            (_, Err(e)) => problems.push(format!("the model's {what}: {e}")),
        }
    }
    problems
}

/// Each engine of `chosen` once per scheme of `schemes` (`--schemes`), as
/// `ENGINE/SCHEME`; `None` without `--schemes`. An engine without update
/// strategies, or a scheme an engine does not know, is a usage error.
fn with_schemes(
    chosen: &[&dyn Oo7Factory],
    schemes: Option<&[String]>,
) -> Result<Option<Vec<Box<dyn Oo7Factory>>>, BenchError> {
    let Some(schemes) = schemes else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for f in chosen {
        for s in schemes {
            out.push(f.with_scheme(s).map_err(BenchError::Usage)?);
        }
    }
    Ok(Some(out))
}

/// Runs OO7 on the engines `args` selects, prints the table, writes the
/// JSON and SVG asked for, and returns the report; an engine that fails or
/// answers differently from the model makes it [`BenchError::Failed`]
/// (after reporting).
pub fn run_oo7(args: Oo7Args, engines: Vec<Box<dyn Oo7Factory>>) -> Result<Oo7Report, BenchError> {
    let params = args.params();
    params.validate().map_err(BenchError::Usage)?;
    let chosen = select_by("OO7", &engines, args.engines.as_deref(), |f| f.info().name)?;
    let mut problems = Vec::new();
    let (chosen, unavailable) = keep_available(
        "oo7",
        chosen,
        args.engines.is_some(),
        |f| (f.info().name, f.available()),
        &mut problems,
    );
    let schemed = with_schemes(&chosen, args.schemes.as_deref())?;
    let selected: Vec<&dyn Oo7Factory> = match &schemed {
        Some(s) => s.iter().map(|f| f.as_ref()).collect(),
        None => chosen,
    };
    let db = with_progress_of(
        "oo7",
        &format!("generating the {} database", args.size),
        || generate(params),
    )
    .map_err(BenchError::Usage)?;
    let expected = with_progress_of("oo7", "computing the expected answers", || {
        args.ops
            .iter()
            .map(|&op| expected_answers(&db, op, args.protocol))
            .collect::<Result<Vec<_>, _>>()
    })?;
    let workspace = Workspace::with_prefix(args.dir.as_deref(), "amber-oo7-")?;
    let options = EngineOptions {
        cache_mib: args.cache_mib,
    };
    let mut builds = Vec::new();
    let mut built: Vec<(&str, std::path::PathBuf)> = Vec::new();
    for factory in &selected {
        let name = factory.info().name;
        // A scheme of an engine opens that engine's build.
        let shared = factory.build_of();
        if let Some(i) = builds
            .iter()
            .position(|b: &Build| b.info.name == shared || b.shares == shared)
        {
            let b = builds[i].clone();
            builds.push(Build {
                info: factory.info(),
                ..b
            });
            built.push((name, built[i].1.clone()));
            continue;
        }
        let base = workspace.root().join(shared).join("base");
        reset_dir(&base)?;
        let start = Instant::now();
        let outcome = with_progress_of("oo7", &format!("{name}: building the database"), || {
            factory.build(&base, &db, &options)
        });
        if let Err(e) = outcome {
            problems.push(BenchError::engine(name, "building the database", e).to_string());
            continue;
        }
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        sync_tree(&base)?;
        builds.push(Build {
            info: factory.info(),
            shares: shared,
            build_ms,
            db_bytes: tree_size(&base)?,
        });
        built.push((name, base));
    }

    let mut results: Vec<(u32, JobResult)> = Vec::new();
    for round in 1..=args.rounds {
        for (name, base) in &built {
            let run = workspace.root().join(name).join("run");
            for (&op, want) in args.ops.iter().zip(&expected) {
                reset_dir(&run)?;
                copy_tree(base, &run)?;
                let request = ChildRequest {
                    engine: name.to_string(),
                    dir: run.clone(),
                    params,
                    op,
                    protocol: args.protocol,
                    options: options.clone(),
                };
                let label = format!("round {round}/{}: {name:<13} {op:<7}", args.rounds);
                let outcome: Result<JobResult, BenchError> =
                    spawn_json(&args.child_args, &request, |message| BenchError::Child {
                        engine: name.to_string(),
                        job: op.to_string(),
                        message,
                    });
                match outcome {
                    Ok(result) => {
                        let differences = compare_answers(&result, want, round);
                        let verdict = if differences.is_empty() {
                            "ok"
                        } else {
                            "WRONG ANSWERS"
                        };
                        eprintln!("oo7: {label} {verdict}");
                        problems.extend(differences);
                        results.push((round, result));
                    }
                    Err(e) => {
                        eprintln!("oo7: {label} FAILED");
                        problems.push(e.to_string());
                    }
                }
            }
            remove_dir(&run)?;
        }
    }

    let mut report = Oo7Report::new(&args, &builds, &results, &problems);
    report.unavailable = unavailable;
    print!("{}", report.table());
    if let Some(path) = &args.json {
        crate::json::write(path, &report).map_err(|e| BenchError::io("writing", path, e))?;
    }
    if let Some(path) = &args.plot {
        fs::write(path, write_svg(&report)).map_err(|e| BenchError::io("writing", path, e))?;
    }
    drop(workspace);
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(BenchError::Failed {
            bench: "OO7",
            problems,
        })
    }
}
