//! Error countdown: every I/O call of a workload failing in turn gives an
//! error to the caller and leaves a database that opens, verifies, and holds
//! the last acknowledged state (or that plus the transaction whose commit was
//! in flight).

mod common;

use amber::internals::io::Vfs;
use amber::internals::io::countdown::CountdownVfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::{Store, StoreOptions};
use common::{Model, run_workload};
use std::path::Path;
use std::sync::Arc;

fn opts() -> StoreOptions {
    StoreOptions {
        checkpoint_log_bytes: 8_000,
        ..StoreOptions::default()
    }
}

/// Runs the workload with call `n` failing; returns whether a call failed.
fn run_with_failure(n: u64, sticky: bool, crash: bool) -> bool {
    let inner = CrashVfs::new();
    let p = Path::new("/db");
    // The same workload for every n, so that call n is the same call.
    let mut rng = SplitMix::new(42);
    // History made without faults.
    let base = {
        let s = Store::create(Arc::new(inner.clone()), p, opts()).unwrap();
        let (m, _, e) = run_workload(&s, Model::default(), &mut rng, 5);
        assert!(e.is_none());
        m
    };
    let cd = CountdownVfs::new(Arc::new(inner.clone()), n, sticky);
    let v: Arc<dyn Vfs> = Arc::new(cd.clone());
    let (ack, in_flight, failed) = match Store::open(v, p, opts()) {
        Err(_) => (base.clone(), None, true),
        Ok(s) => {
            let (ack, fl, e) = run_workload(&s, base.clone(), &mut rng, 25);
            let failed = e.is_some();
            let closed = if failed { true } else { s.close().is_err() };
            (ack, fl, failed || closed)
        }
    };
    let reached = cd.calls() >= n;
    assert_eq!(
        failed, reached,
        "call {n}: failure surfaced = {failed}, but the failing call was reached = {reached}"
    );
    if crash {
        inner.crash(n);
    }
    let s = Store::open(Arc::new(inner.clone()), p, opts()).unwrap_or_else(|e| {
        panic!("call {n} (sticky {sticky}, crash {crash}): reopen failed: {e}")
    });
    let ok = ack.diff(&s).is_none() || in_flight.as_ref().is_some_and(|m| m.diff(&s).is_none());
    assert!(
        ok,
        "call {n}: state after reopen is neither acknowledged nor in-flight: {:?}",
        ack.diff(&s)
    );
    drop(s);
    let rep = amber::internals::store::verify::verify(Arc::new(inner), p).unwrap();
    assert!(rep.is_ok(), "call {n}: verify: {:?}", rep.problems);
    failed
}

#[test]
fn every_io_call_failing_in_turn() {
    let mut n = 1;
    let mut failures = 0;
    // Walk the calls until one is beyond the workload's end.
    while run_with_failure(n, false, n % 2 == 0) {
        run_with_failure(n, true, n % 3 == 0);
        failures += 1;
        n += 1;
    }
    eprintln!("{failures} I/O calls failed in turn");
    assert!(
        failures > 100,
        "the workload made only {failures} I/O calls"
    );
}
