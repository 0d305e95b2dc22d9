//! Amber's OO1 engines against the reference evaluator, in process, on a small
//! database: every job, with and without a cache budget far below the
//! database's size; the amortized span of committing jobs (their commits and
//! the checkpoint forced after them); one log sync per commit.

use amber_bench::oo1::harness::{compare_answers, expected_answers};
use amber_bench::oo1::reference::Reference;
use amber_bench::oo1::{
    ChildRequest, Engine, EngineFactory, EngineOptions, GenParams, GeneratedDb, Job, Op, Protocol,
    UpdatePlan, builtin_engines, generate, run_job,
};

const PARAMS: GenParams = GenParams {
    parts: 2_000,
    seed: 2024,
};

/// Shorter than OO1's 1 + 9 + 10, enough to have every phase twice.
const PROTOCOL: Protocol = Protocol { warm: 2, hot: 2 };

fn db() -> GeneratedDb {
    generate(PARAMS).expect("valid parameters")
}

fn every_job(params: GenParams, options: &EngineOptions, engines: &[&str]) {
    let db = generate(params).expect("valid parameters");
    let mut failures = Vec::new();
    for factory in builtin_engines()
        .into_iter()
        .filter(|f| engines.contains(&f.info().name))
    {
        let name = factory.info().name;
        assert!(factory.info().cache_budget, "{name} honours --cache-mib");
        let base = tempfile::tempdir().expect("temporary directory");
        factory
            .build(base.path(), &db, options)
            .unwrap_or_else(|e| panic!("{name}: build: {e}"));
        for job in Job::all(&Op::ALL) {
            let expected = expected_answers(&db, job, PROTOCOL).expect("reference answers");
            // A pristine copy per job, as the harness gives each child.
            let dir = tempfile::tempdir().expect("temporary directory");
            for entry in std::fs::read_dir(base.path()).expect("read dir") {
                let entry = entry.expect("entry");
                std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
            }
            let request = ChildRequest {
                engine: name.to_string(),
                dir: dir.path().to_path_buf(),
                params,
                job,
                protocol: PROTOCOL,
                options: options.clone(),
            };
            let result =
                run_job(factory.as_ref(), &request).unwrap_or_else(|e| panic!("{name}: {e}"));
            failures.extend(compare_answers(&result, &expected, PROTOCOL));
            if job.op.commits() {
                for it in &result.iterations {
                    let log = it.log_bytes.expect("Amber reports its log bytes");
                    if job.p != Some(0.0) {
                        assert!(log > 0, "{name}: {} logged nothing", job.label());
                        assert!(
                            it.io.is_some_and(|io| io.wchar >= log),
                            "{name}: {} wrote less than it logged",
                            job.label()
                        );
                    }
                }
                // The amortized span: every commit, then the checkpoint,
                // which writes the committed changes into the page file.
                let a = result.amortized.as_ref().expect("amortized figures");
                assert_eq!(a.commits as usize, result.iterations.len());
                let commits: u64 = result
                    .iterations
                    .iter()
                    .filter_map(|i| i.io)
                    .map(|d| d.wchar)
                    .sum();
                let span = a.io.expect("I/O counters").wchar;
                assert!(span >= commits, "{name}: {}", job.label());
                if job.p != Some(0.0) && options.cache_mib.is_none() {
                    assert!(
                        span > commits,
                        "{name}: {}: the checkpoint wrote nothing",
                        job.label()
                    );
                }
            } else {
                assert!(result.amortized.is_none());
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_job_like_the_reference() {
    every_job(
        PARAMS,
        &EngineOptions::default(),
        &["amber", "amber-sigsegv"],
    );
}

/// 10,000 parts (a database of about 2.7 MB) under a budget of 1 MiB:
/// traversals evict and fault pages back in.
const BUDGET_PARAMS: GenParams = GenParams {
    parts: 10_000,
    seed: 7,
};

#[test]
fn every_job_like_the_reference_under_a_small_cache_budget() {
    every_job(
        BUDGET_PARAMS,
        &EngineOptions { cache_mib: Some(1) },
        &["amber-sigsegv"],
    );
}

/// The same with userfaultfd.
#[test]
fn every_job_like_the_reference_under_a_small_cache_budget_uffd() {
    every_job(
        BUDGET_PARAMS,
        &EngineOptions { cache_mib: Some(1) },
        &["amber"],
    );
}

/// Build, open, change, close, reopen: the data and the committed changes are
/// there.
#[test]
fn commits_survive_reopening() {
    let db = db();
    let all: Vec<u32> = (1..=PARAMS.parts).collect();
    let pristine = Reference::new(&db).lookup(&all).expect("reference");
    let batch = amber_bench::oo1::database::new_parts(
        PARAMS,
        &mut amber_bench::rng::Rng::seed_from_u64(5),
        PARAMS.parts + 1,
        100,
    );
    let plan = UpdatePlan::new(vec![true; 3_280]);
    let mut reference = Reference::new(&db);
    reference.insert(&batch).expect("reference insert");
    reference.update(17, &plan).expect("reference update");
    let all_after: Vec<u32> = (1..=PARAMS.parts + 100).collect();
    let changed = reference.lookup(&all_after).expect("reference");
    let reverse_after = reference.reverse(PARAMS.parts + 1).expect("reference");

    for factory in builtin_engines() {
        let name = factory.info().name;
        let dir = tempfile::tempdir().expect("temporary directory");
        let options = EngineOptions::default();
        factory.build(dir.path(), &db, &options).expect("build");
        let mut engine = factory.open(dir.path(), &options).expect("open");
        assert_eq!(engine.lookup(&all).expect("lookup"), pristine, "{name}");
        assert!(engine.lookup(&[PARAMS.parts + 1]).is_err(), "{name}");
        assert!(engine.lookup(&[0]).is_err(), "{name}");
        engine.insert(&batch).expect("insert");
        engine.update(17, &plan).expect("update");
        engine.close().expect("close");

        let mut engine = factory.open(dir.path(), &options).expect("reopen");
        assert_eq!(
            engine.lookup(&all_after).expect("lookup"),
            changed,
            "{name}"
        );
        assert_eq!(
            engine.reverse(PARAMS.parts + 1).expect("reverse"),
            reverse_after,
            "{name}"
        );
        // A batch whose ids do not follow the last part is refused.
        assert!(engine.insert(&batch).is_err(), "{name}");
        engine.close().expect("close");
    }
}

/// Amber's durability as the OO1 table states it: every commit of an insert
/// or an update syncs the log once.
#[test]
fn every_commit_syncs_the_log() {
    use amber_bench::oo1::amber_engine::AmberFactory;
    let db = db();
    let batch = amber_bench::oo1::database::new_parts(
        PARAMS,
        &mut amber_bench::rng::Rng::seed_from_u64(9),
        PARAMS.parts + 1,
        100,
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = EngineOptions::default();
    AmberFactory::DEFAULT
        .build(dir.path(), &db, &options)
        .expect("build");
    let mut engine = AmberFactory::DEFAULT
        .open_amber(dir.path(), &options)
        .expect("open");
    let syncs = |e: &amber_bench::oo1::amber_engine::AmberOo1| e.db().stats().store.log_syncs;
    let before = syncs(&engine);
    engine.insert(&batch).expect("insert");
    assert_eq!(syncs(&engine), before + 1, "an insert syncs once");
    let plan = UpdatePlan::new(vec![true; 3_280]);
    engine.update(42, &plan).expect("update");
    assert_eq!(syncs(&engine), before + 2, "an update syncs once");
    Box::new(engine).close().expect("close");
}
