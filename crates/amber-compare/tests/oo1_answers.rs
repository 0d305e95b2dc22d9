//! Every comparison engine that runs in process (`postgres`, which starts a
//! server, has `postgres.rs`) against the reference evaluator, on a small
//! database: answers of every job, the bytes each commit wrote, and the
//! amortized span (the commits and the forced installation).
//!
//! The only test of its binary: the I/O counters it reads (`/proc/self/io`)
//! are per process, and libtest's report of a parallel test finishing (a
//! `write` to stdout) would land in the `memory` engine's measurement.

use amber_bench::oo1::harness::{compare_answers, expected_answers};
use amber_bench::oo1::{
    ChildRequest, EngineOptions, GenParams, Job, JobResult, Op, Protocol, generate, run_job,
};

const PARAMS: GenParams = GenParams {
    parts: 2_000,
    seed: 2024,
};

/// Shorter than OO1's 1 + 9 + 10, enough to have every phase twice.
const PROTOCOL: Protocol = Protocol { warm: 2, hot: 2 };

#[test]
fn every_engine_answers_every_job_like_the_reference() {
    let db = generate(PARAMS).expect("valid parameters");
    let options = EngineOptions { cache_mib: Some(4) };
    for job in Job::all(&Op::ALL) {
        let expected = expected_answers(&db, job, PROTOCOL).expect("reference answers");
        for factory in amber_compare::in_process_engines() {
            let name = factory.info().name;
            let dir = tempfile::tempdir().expect("temporary directory");
            factory
                .build(dir.path(), &db, &options)
                .unwrap_or_else(|e| panic!("{name}: build: {e}"));
            let request = ChildRequest {
                engine: name.to_string(),
                dir: dir.path().to_path_buf(),
                params: PARAMS,
                job,
                protocol: PROTOCOL,
                options: options.clone(),
            };
            let result =
                run_job(factory.as_ref(), &request).unwrap_or_else(|e| panic!("{name}: {e}"));
            let problems = compare_answers(&result, &expected, PROTOCOL);
            assert!(problems.is_empty(), "{name}: {problems:#?}");
            // An update with p = 0 changes nothing: engines may skip the write.
            if job.op.commits() && job.p != Some(0.0) {
                let written: u64 = result
                    .iterations
                    .iter()
                    .filter_map(|i| i.io)
                    .map(|d| d.wchar)
                    .sum();
                if name == "memory" {
                    assert_eq!(written, 0, "memory persists nothing");
                } else {
                    assert!(written > 0, "{name}: {} wrote nothing", job.label());
                }
            }
            check_amortized(name, job, &result);
        }
    }
}

/// A committing job's amortized span holds its commits and the installation
/// the engine deferred: exactly the commits' bytes where nothing is deferred
/// (nothing else writes in between), more where the installation writes
/// (SQLite's checkpoint copies the WAL into the database file).
fn check_amortized(name: &str, job: Job, result: &JobResult) {
    let what = format!("{name}: {}", job.label());
    let Some(a) = &result.amortized else {
        assert!(!job.op.commits(), "{what}: no amortized figures");
        return;
    };
    assert!(job.op.commits(), "{what}: amortized figures of a read job");
    assert_eq!(a.commits as usize, result.iterations.len(), "{what}");
    let timed: f64 = result.iterations.iter().map(|i| i.ms).sum();
    assert!(
        (a.total_ms - (timed + a.install_ms)).abs() < 1e-9 * a.total_ms.max(1.0),
        "{what}: {a:?}"
    );
    let commits: u64 = result
        .iterations
        .iter()
        .filter_map(|i| i.io)
        .map(|d| d.wchar)
        .sum();
    let span = a.io.expect("I/O counters").wchar;
    let changes = job.p != Some(0.0);
    match name {
        "sqlite" if changes => assert!(span > commits, "{what}: {span} <= {commits}"),
        "sqlite" => assert!(span >= commits, "{what}: {span} < {commits}"),
        _ => assert_eq!(span, commits, "{what}: nothing to install"),
    }
}
