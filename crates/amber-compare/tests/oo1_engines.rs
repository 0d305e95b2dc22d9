//! Every comparison engine that runs in process (`postgres`, which starts a
//! server, has `postgres.rs`) on a small database: traversal counts, a build,
//! reopen and commit round trip, and the error for a missing database. (The
//! answers of every job against the reference are in `oo1_answers.rs`.)

use amber_bench::oo1::{EngineOptions, GenParams, GeneratedDb, UpdatePlan, generate};

const PARAMS: GenParams = GenParams {
    parts: 2_000,
    seed: 2024,
};

fn db() -> GeneratedDb {
    generate(PARAMS).expect("valid parameters")
}

#[test]
fn traversals_visit_3280_parts_in_every_engine() {
    let db = db();
    for factory in amber_compare::in_process_engines() {
        let dir = tempfile::tempdir().expect("temporary directory");
        factory
            .build(dir.path(), &db, &EngineOptions::default())
            .expect("build");
        let mut engine = factory
            .open(dir.path(), &EngineOptions::default())
            .expect("open");
        for root in [1, 1_000, 2_000] {
            assert_eq!(engine.traverse(root).expect("traversal").count, 3_280);
            let plan = UpdatePlan::new(Vec::new());
            assert_eq!(engine.update(root, &plan).expect("update").count, 3_280);
        }
        assert!(
            engine.lookup(&[2_001]).is_err(),
            "{}: a missing part is an error",
            factory.info().name
        );
        engine.close().expect("close");
    }
}

/// Build, open, change, close, reopen: the persistent engines keep the data
/// and the committed changes; `memory` starts again from the seed.
#[test]
fn build_open_round_trip_preserves_data_and_commits() {
    use amber_bench::oo1::Engine;
    use amber_bench::oo1::reference::Reference;

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

    for factory in amber_compare::in_process_engines() {
        let name = factory.info().name;
        let dir = tempfile::tempdir().expect("temporary directory");
        factory
            .build(dir.path(), &db, &EngineOptions::default())
            .expect("build");
        let mut engine = factory
            .open(dir.path(), &EngineOptions::default())
            .expect("open");
        assert_eq!(
            engine.lookup(&all).expect("lookup"),
            pristine,
            "{name}: data after build"
        );
        for root in [3, 999, 1_998] {
            let mut r = Reference::new(&db);
            assert_eq!(
                engine.traverse(root).expect("t"),
                r.traverse(root).expect("t"),
                "{name}"
            );
            assert_eq!(
                engine.reverse(root).expect("r"),
                r.reverse(root).expect("r"),
                "{name}"
            );
        }
        engine.insert(&batch).expect("insert");
        engine.update(17, &plan).expect("update");
        engine.close().expect("close");

        let mut engine = factory
            .open(dir.path(), &EngineOptions::default())
            .expect("reopen");
        if name == "memory" {
            assert_eq!(
                engine.lookup(&all).expect("lookup"),
                pristine,
                "memory restarts from the seed"
            );
        } else {
            assert_eq!(
                engine.lookup(&all_after).expect("lookup"),
                changed,
                "{name}: commits survive reopening"
            );
            assert_eq!(
                engine.reverse(PARAMS.parts + 1).expect("reverse"),
                reverse_after,
                "{name}"
            );
        }
        engine.close().expect("close");
    }
}

#[test]
fn opening_a_missing_database_is_a_clear_error() {
    for factory in amber_compare::in_process_engines() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let err = match factory.open(dir.path(), &EngineOptions::default()) {
            Ok(_) => panic!("{}: opened an empty directory", factory.info().name),
            Err(e) => e.to_string(),
        };
        assert!(!err.is_empty());
    }
}
