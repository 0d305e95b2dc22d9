//! The `postgres` engines against the reference evaluator (OO1) and the
//! model (OO7), and the server's lifecycle.
//!
//! A server start costs a fraction of a second and `initdb` about a
//! second, so most tests share one scratch server per test binary
//! ([`shared`]): each job runs on a database cloned from a loaded template
//! (`CREATE DATABASE … TEMPLATE`), as the harness runs each on a copy of a
//! built directory. The harness's own path (`build` into a directory,
//! `open` starting a server on a copy of it, `run_job`) runs once per
//! benchmark with a committing job and a reading one.
//!
//! When PostgreSQL is not installed the tests say so and pass; with
//! `AMBER_REQUIRE_POSTGRES=1` (CI, which installs it) they fail instead.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use amber_bench::oo1::harness as oo1_harness;
use amber_bench::oo1::{self, Engine, EngineFactory, EngineOptions};
use amber_bench::oo7::engine::Oo7Engine;
use amber_bench::oo7::harness as oo7_harness;
use amber_bench::oo7::{self, Oo7Factory};
use amber_compare::oo7::postgres::{PostgresFactory as PostgresOo7Factory, PostgresOo7};
use amber_compare::postgres::oo1::{Postgres, PostgresFactory};
use amber_compare::postgres::server::{Install, Server, check_durability};
use amber_compare::postgres::{DATABASE, Session, available};

/// The installed PostgreSQL, or `None` (the test then passes, saying it
/// was skipped) unless `AMBER_REQUIRE_POSTGRES=1`.
fn install(test: &str) -> Option<Install> {
    match available() {
        Ok(()) => Some(Install::find().expect("available")),
        Err(why) if std::env::var("AMBER_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
            panic!("{test}: AMBER_REQUIRE_POSTGRES=1 but {why}")
        }
        Err(why) => {
            eprintln!("{test}: SKIPPED: {why}");
            None
        }
    }
}

/// The scratch server every test of this binary shares, started by the
/// first test that needs it; it stops, and its directory goes, when the
/// binary exits (the tether does it).
fn shared(test: &str) -> Option<&'static Server> {
    static SERVER: OnceLock<Server> = OnceLock::new();
    let install = install(test)?;
    Some(SERVER.get_or_init(|| Server::scratch(&install).expect("a scratch PostgreSQL server")))
}

/// A session on a schema of its own in the shared server, filled by
/// `load` and analysed, as `build` leaves a database: every job starts
/// from the generated data, as the harness starts each on a copy of a
/// built directory.
fn fresh(server: &Server, load: impl FnOnce(&mut postgres::Client)) -> Session {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let schema = format!("job{}", NEXT.fetch_add(1, Ordering::Relaxed));
    // The load need not wait for the disk (asynchronous commit), the
    // engine's own connection below must (`Session::on` checks it).
    let mut c = server.connect(DATABASE).expect("connect");
    c.batch_execute(&format!(
        "SET synchronous_commit = off; CREATE SCHEMA {schema}; SET search_path TO {schema}"
    ))
    .expect("a schema of its own");
    load(&mut c);
    let tables: Vec<String> = c
        .query(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = $1",
            &[&schema],
        )
        .expect("the schema's tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    c.batch_execute(&format!("ANALYZE {}", tables.join(", ")))
        .expect("analyze");
    c.close().expect("close the loader");
    let mut c = server.connect(DATABASE).expect("connect");
    c.batch_execute(&format!("SET search_path TO {schema}"))
        .expect("search path");
    Session::on(c).expect("session")
}

const OO1_PARAMS: oo1::GenParams = oo1::GenParams {
    parts: 2_000,
    seed: 2024,
};
/// Every phase, once (the client is a debug build here: a traversal is
/// 3,280 queries).
const OO1_PROTOCOL: oo1::Protocol = oo1::Protocol { warm: 1, hot: 1 };

/// OO1's jobs, updates at three of the seven p (none, some, all).
fn oo1_jobs() -> Vec<oo1::Job> {
    oo1::Job::all(&oo1::Op::ALL)
        .into_iter()
        .filter(|j| matches!(j.p, None | Some(0.0) | Some(0.1) | Some(1.0)))
        .collect()
}

/// Every OO1 job answers as the reference does, each on fresh data, and
/// each commit that changes something logs WAL.
#[test]
fn oo1_answers_every_job_like_the_reference() {
    let Some(server) = shared("oo1_answers_every_job_like_the_reference") else {
        return;
    };
    let db = oo1::generate(OO1_PARAMS).expect("valid parameters");
    for job in oo1_jobs() {
        let expected =
            oo1_harness::expected_answers(&db, job, OO1_PROTOCOL).expect("reference answers");
        let session = fresh(server, |c| {
            amber_compare::postgres::oo1::load(c, &db).expect("load")
        });
        let mut engine = Postgres::new(session).expect("engine");
        let inputs = oo1::ops::inputs(OO1_PARAMS, job, OO1_PROTOCOL);
        let iterations = oo1::child::execute(&mut engine, &inputs, None).expect("every iteration");
        let checks = oo1::child::post_checks(&mut engine, OO1_PARAMS, job, OO1_PROTOCOL)
            .expect("post checks");
        if job.op.commits() && job.p != Some(0.0) {
            assert!(
                iterations
                    .iter()
                    .all(|i| i.log_bytes.is_some_and(|b| b > 0)),
                "{}: WAL bytes {iterations:?}",
                job.label()
            );
        }
        let result = oo1::JobResult {
            engine: "postgres".into(),
            job,
            open_ms: 0.0,
            iterations,
            amortized: None,
            checks,
            peak_rss_kib: None,
            server_kib: None,
        };
        let problems = oo1_harness::compare_answers(&result, &expected, OO1_PROTOCOL);
        assert!(problems.is_empty(), "{problems:#?}");
        Box::new(engine).close().expect("close");
    }
}

/// The harness's path: `build` into a directory (initdb, load, checkpoint,
/// stop), then `run_job` on a copy, which starts a server of its own: the
/// answers, the bytes the server wrote (and nothing counted for a read),
/// the amortized span with its checkpoint, the server's memory.
#[test]
fn oo1_runs_as_the_harness_runs_it() {
    if install("oo1_runs_as_the_harness_runs_it").is_none() {
        return;
    }
    let db = oo1::generate(OO1_PARAMS).expect("valid parameters");
    let options = EngineOptions { cache_mib: Some(4) };
    let base = tempfile::tempdir().expect("temporary directory");
    PostgresFactory
        .build(base.path(), &db, &options)
        .expect("build");
    for op in [oo1::Op::Update, oo1::Op::Traversal] {
        let job = oo1::Job::all(&[op])
            .into_iter()
            .find(|j| j.p != Some(0.0))
            .expect("a job");
        let expected =
            oo1_harness::expected_answers(&db, job, OO1_PROTOCOL).expect("reference answers");
        let dir = tempfile::tempdir().expect("temporary directory");
        copy_tree(base.path(), dir.path());
        let request = oo1::ChildRequest {
            engine: "postgres".into(),
            dir: dir.path().to_path_buf(),
            params: OO1_PARAMS,
            job,
            protocol: OO1_PROTOCOL,
            options: options.clone(),
        };
        let result = oo1::run_job(&PostgresFactory, &request).expect("the job");
        let problems = oo1_harness::compare_answers(&result, &expected, OO1_PROTOCOL);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(result.server_kib.is_some_and(|k| k > 1024), "{result:?}");
        assert!(result.peak_rss_kib > result.server_kib, "{result:?}");
        if op == oo1::Op::Update {
            // The commits outlive the server: a new one on the directory
            // reads what the job's own checks read.
            let mut engine = PostgresFactory.open(dir.path(), &options).expect("reopen");
            let all: Vec<u32> = (1..=OO1_PARAMS.parts).collect();
            assert_eq!(engine.lookup(&all).expect("lookup"), result.checks[0]);
            engine.close().expect("close");
        }
        let Some(a) = &result.amortized else {
            assert!(!op.commits());
            continue;
        };
        let commits: u64 = result
            .iterations
            .iter()
            .map(|i| i.io.expect("the server's counters").wchar)
            .sum();
        assert!(
            commits > 0,
            "the server's commits wrote nothing: {result:?}"
        );
        let span = a.io.expect("the server's counters").wchar;
        assert!(
            span > commits,
            "the checkpoint wrote nothing: {span} <= {commits}"
        );
    }
}

/// Opening a directory without a cluster names what is missing.
#[test]
fn opening_a_missing_database_is_a_clear_error() {
    if install("opening_a_missing_database_is_a_clear_error").is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let err = match PostgresFactory.open(dir.path(), &EngineOptions::default()) {
        Ok(_) => panic!("opened an empty directory"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("no PostgreSQL cluster"), "{err}");
}

/// Copies the files under `from` into `to`, as the harness does.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let dst = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir(&dst).expect("mkdir");
            copy_tree(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), dst).expect("copy");
        }
    }
}

/// A connection whose session asks for less durability is refused, naming
/// the setting.
#[test]
fn durability_settings_are_checked() {
    let Some(server) = shared("durability_settings_are_checked") else {
        return;
    };
    let mut c = server.connect("postgres").expect("connect");
    check_durability(&mut c).expect("the server's settings");
    c.batch_execute("SET synchronous_commit = off")
        .expect("set");
    let err = check_durability(&mut c).expect_err("synchronous_commit = off");
    assert!(
        err.to_string().contains("synchronous_commit = off"),
        "{err}"
    );
}

/// Every phase, once: each committing iteration waits for an fsync.
const OO7_PROTOCOL: oo7::Protocol = oo7::Protocol { warm: 1, hot: 1 };

fn oo7_params() -> oo7::Params {
    oo7::Params {
        modules: 2,
        ..oo7::Size::Tiny.params(7)
    }
}

/// Every OO7 operation, every iteration and the post checks, against the
/// model, each on fresh data (as `oo7_engines.rs` runs the other engines);
/// after the delete job the database holds exactly the generated objects
/// again. `postgres-recursive` differs from `postgres` in T1 and T6 alone
/// (the same code runs every other operation): those two run for it.
#[test]
fn oo7_every_operation_agrees_with_the_model() {
    let Some(server) = shared("oo7_every_operation_agrees_with_the_model") else {
        return;
    };
    let params = oo7_params();
    let db = oo7::generate(params).expect("tiny generates");
    let mut failures = Vec::new();
    for recursive in [false, true] {
        let name = PostgresOo7Factory { recursive }.info().name;
        let ops: &[oo7::Op] = if recursive {
            &[oo7::Op::T1, oo7::Op::T6]
        } else {
            &oo7::Op::ALL
        };
        for &op in ops {
            let expected =
                oo7_harness::expected_answers(&db, op, OO7_PROTOCOL).expect("model answers");
            let session = fresh(server, |c| {
                amber_compare::oo7::postgres_schema::load(c, &db).expect("load")
            });
            let mut engine = PostgresOo7::new(session, recursive).expect("engine");
            let iterations = oo7::child::execute(&mut engine, &params, op, OO7_PROTOCOL, None)
                .unwrap_or_else(|e| panic!("{name} {op}: {e}"));
            if op.commits() {
                assert!(
                    iterations
                        .iter()
                        .all(|i| i.log_bytes.is_some_and(|b| b > 0)),
                    "{name} {op}: WAL bytes {iterations:?}"
                );
            }
            let checks = oo7::child::checks(&mut engine, &params, op, OO7_PROTOCOL)
                .unwrap_or_else(|e| panic!("{name} {op} checks: {e}"));
            let result = oo7::child::JobResult {
                engine: name.into(),
                op,
                open_ms: 0.0,
                iterations,
                amortized: None,
                checks,
                peak_rss_kib: None,
                server_kib: None,
            };
            failures.extend(oo7_harness::compare_answers(&result, &expected, 1));
            if op == oo7::Op::Delete {
                failures.extend(oo7_harness::check_after_delete(&mut engine, &db, name));
            }
            Box::new(engine).close().expect("close");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The harness's path for OO7, under a 1 MiB buffer pool
/// (`shared_buffers`, `--cache-mib 1`): one build shared by both engines,
/// a committing job of `postgres` and T1 of `postgres-recursive`, each
/// starting a server on a copy.
#[test]
fn oo7_runs_as_the_harness_runs_it() {
    if install("oo7_runs_as_the_harness_runs_it").is_none() {
        return;
    }
    let params = oo7_params();
    let db = oo7::generate(params).expect("tiny generates");
    let options = EngineOptions { cache_mib: Some(1) };
    let base = tempfile::tempdir().expect("temporary directory");
    let plain = PostgresOo7Factory { recursive: false };
    let recursive = PostgresOo7Factory { recursive: true };
    assert_eq!(recursive.build_of(), "postgres");
    plain.build(base.path(), &db, &options).expect("build");
    for (factory, op) in [(plain, oo7::Op::T2b), (recursive, oo7::Op::T1)] {
        let name = factory.info().name;
        let expected = oo7_harness::expected_answers(&db, op, OO7_PROTOCOL).expect("model");
        let dir = tempfile::tempdir().expect("temporary directory");
        copy_tree(base.path(), dir.path());
        let request = oo7::child::ChildRequest {
            engine: name.into(),
            dir: dir.path().to_path_buf(),
            params,
            op,
            protocol: OO7_PROTOCOL,
            options: options.clone(),
        };
        let result = oo7::run_job(&factory, &request).expect("the job");
        let problems = oo7_harness::compare_answers(&result, &expected, 1);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(result.server_kib.is_some_and(|k| k > 1024), "{result:?}");
        if let Some(a) = &result.amortized {
            let commits: u64 = result
                .iterations
                .iter()
                .map(|i| i.io.expect("the server's counters").wchar)
                .sum();
            let span = a.io.expect("the server's counters").wchar;
            assert!(commits > 0 && span > commits, "{commits} {span}");
        }
    }
}

/// The tether: a process that started a server and is SIGKILLed takes the
/// server down with it (fast shutdown), and a scratch server's directory
/// goes too.
#[test]
fn a_killed_owner_takes_its_server_down() {
    if std::env::var_os("AMBER_PG_TETHER_CHILD").is_some() {
        // The child: start a server, say where it is, wait to be killed.
        let install = install("tether child").expect("installed");
        let server = Server::scratch(&install).expect("a server");
        println!(
            "server {} {}",
            server.processes().root(),
            server.data().display()
        );
        std::thread::sleep(std::time::Duration::from_secs(120));
        return;
    }
    if install("a_killed_owner_takes_its_server_down").is_none() {
        return;
    }
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "--exact",
            "a_killed_owner_takes_its_server_down",
            "--nocapture",
        ])
        .env("AMBER_PG_TETHER_CHILD", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the child");
    let stdout = child.stdout.take().expect("stdout");
    let line = std::io::BufReader::new(stdout)
        .lines()
        .map(|l| l.expect("a line"))
        .find(|l| l.starts_with("server "))
        .expect("the child's server");
    let mut words = line.split_whitespace().skip(1);
    let pid: u32 = words.next().and_then(|p| p.parse().ok()).expect("a pid");
    let data = std::path::PathBuf::from(words.next().expect("a directory"));
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    let start = std::time::Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() || data.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the server {pid} (or {}) outlived its owner",
            data.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
