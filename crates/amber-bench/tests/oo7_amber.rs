//! Amber's OO7 engines against the in-memory model, in process, on the tiny
//! configuration with two modules: every operation, every iteration and
//! the post checks, with and without a cache budget; log bytes reported by
//! every commit; the structural delete frees what the insert allocated.

use amber::{Db, Options, View};
use amber_bench::oo7::amber_engine::FILE;
use amber_bench::oo7::child::ChildRequest;
use amber_bench::oo7::engine::EngineOptions;
use amber_bench::oo7::harness::{compare_answers, expected_answers};
use amber_bench::oo7::{Op, Params, Protocol, Size, builtin_engines, generate, run_job};

const PROTOCOL: Protocol = Protocol { warm: 2, hot: 2 };

fn params() -> Params {
    Params {
        modules: 2,
        ..Size::Tiny.params(42)
    }
}

fn copy(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

fn every_op(options: &EngineOptions) {
    let params = params();
    let db = generate(params).expect("tiny generates");
    let mut failures = Vec::new();
    for factory in builtin_engines() {
        let name = factory.info().name;
        let base = tempfile::tempdir().expect("temporary directory");
        factory
            .build(base.path(), &db, options)
            .unwrap_or_else(|e| panic!("{name}: build: {e}"));
        for op in Op::ALL {
            let expected = expected_answers(&db, op, PROTOCOL).expect("model answers");
            let dir = tempfile::tempdir().expect("temporary directory");
            copy(base.path(), dir.path());
            let request = ChildRequest {
                engine: name.to_string(),
                dir: dir.path().to_path_buf(),
                params,
                op,
                protocol: PROTOCOL,
                options: options.clone(),
            };
            let result =
                run_job(factory.as_ref(), &request).unwrap_or_else(|e| panic!("{name} {op}: {e}"));
            failures.extend(compare_answers(&result, &expected, 1));
            if op.commits() {
                assert!(result.amortized.is_some(), "{name} {op}: amortized");
                for it in &result.iterations {
                    assert!(
                        it.log_bytes.is_some_and(|b| b > 0),
                        "{name} {op}: log bytes"
                    );
                }
            }
            if op == Op::Delete {
                // Every object the inserts added was freed again.
                let adb = Db::open(dir.path().join(FILE), Options::default()).expect("open");
                let atomics = adb
                    .count::<amber_bench::oo7::amber_engine::schema::AtomicPart>()
                    .expect("count");
                assert_eq!(
                    atomics,
                    u64::from(params.atomics()),
                    "{name}: atomic parts after delete"
                );
                adb.close().expect("close");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_operation_agrees_with_the_model() {
    every_op(&EngineOptions::default());
}

#[test]
fn every_operation_agrees_under_a_small_cache_budget() {
    every_op(&EngineOptions { cache_mib: Some(1) });
}
