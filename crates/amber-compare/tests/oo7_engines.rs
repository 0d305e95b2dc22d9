//! OO7's comparison engines that run in process against the in-memory
//! model (`postgres`, which starts a server, has `postgres.rs`), on the
//! tiny configuration with two modules: every operation, every iteration
//! and the post checks, with the engines' own caches and with a 1 MiB
//! budget; and after the delete job, the key-value layouts hold exactly the
//! generated objects again (nothing the inserts added is left behind).

use amber_bench::oo7::child::ChildRequest;
use amber_bench::oo7::engine::EngineOptions;
use amber_bench::oo7::harness::{check_after_delete, compare_answers, expected_answers};
use amber_bench::oo7::{Op, Params, Protocol, Size, generate, run_job};

const PROTOCOL: Protocol = Protocol { warm: 2, hot: 2 };

fn params() -> Params {
    Params {
        modules: 2,
        ..Size::Tiny.params(7)
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
    for factory in amber_compare::oo7::in_process_engines() {
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
            if op == Op::Delete && name != "memory" {
                // The inserted parts and their bag entries are gone: a scan
                // of every atomic part and Q5/Q6 (every bag entry) answer
                // as on the generated database.
                let mut engine = factory.open(dir.path(), options).expect("reopen");
                failures.extend(check_after_delete(engine.as_mut(), &db, name));
                engine.close().expect("close");
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
