//! Error countdown: every I/O call of a workload failing in turn gives an
//! error to the caller and leaves a database that opens, verifies, and holds
//! the last acknowledged state (or that plus the transaction whose commit was
//! in flight).

mod common;

use amber::internals::format::page::HEADER_SIZE;
use amber::internals::io::Vfs;
use amber::internals::io::countdown::CountdownVfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::readers::readers_path;
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

/// Runs the workload with call `n` failing; returns whether the workload
/// reached call `n`.
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
    // A failing call on the reader table (`-readers`) fails the operation
    // that needs it (opening, a checkpoint's check of the readers) or
    // nothing (publishing the log's end after a durable commit): either
    // way the state checked below is the acknowledged one.
    let on_table = cd.failed_file() == Some(readers_path(p));
    assert!(
        failed == reached || (on_table && !failed),
        "call {n}: failure surfaced = {failed}, but the failing call was reached = {reached} (on {:?})",
        cd.failed_file()
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
    reached
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

/// A store on `inner` through a countdown failing call `fail_at` once, with
/// a committed history whose last changes are pending (not checkpointed).
fn history(inner: &CrashVfs, fail_at: u64) -> (CountdownVfs, Store, Model) {
    let cd = CountdownVfs::new(Arc::new(inner.clone()), fail_at, false);
    let s = Store::create(
        Arc::new(cd.clone()),
        Path::new("/db"),
        common::no_checkpoints(),
    )
    .unwrap();
    let mut rng = SplitMix::new(7);
    let (mut m, _, e) = run_workload(&s, Model::default(), &mut rng, 12);
    assert!(e.is_none(), "the history failed: {e:?}");
    // Changes over installed blocks, so that the checkpoint reads them.
    s.checkpoint().unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    for (head, img) in m.blocks.iter_mut().take(3) {
        let off = HEADER_SIZE + 8;
        tx.write(head * ps + off as u64, &[0xA5; 100]).unwrap();
        img[off..off + 100].fill(0xA5);
    }
    tx.commit().unwrap();
    (cd, s, m)
}

/// Every I/O call of a checkpoint failing once, in turn: the checkpoint
/// reports it, and the store then either refuses every change (poisoned:
/// from its page writes on, the page file and superblock are in a state
/// memory no longer describes) or goes on correctly — a failure before the
/// page writes undoes the checkpoint's allocations, so no block leaks, and
/// the next transaction and checkpoint are durable. Reopening gives the
/// acknowledged state and `verify` passes.
#[test]
fn every_io_call_of_a_checkpoint_failing_once() {
    let (first, last) = {
        let inner = CrashVfs::new();
        let (cd, s, _) = history(&inner, 0);
        let before = cd.calls();
        s.checkpoint().unwrap();
        (before + 1, cd.calls())
    };
    assert!(
        last - first > 10,
        "a checkpoint of {} calls",
        last - first + 1
    );
    let (mut poisoned, mut went_on) = (0, 0);
    for n in first..=last {
        let inner = CrashVfs::new();
        let (cd, s, mut model) = history(&inner, n);
        assert_eq!(
            cd.calls(),
            first - 1,
            "call {n}: the history is not the same"
        );
        let ran = s.checkpoint();
        if ran.is_ok() && cd.failed_file() == Some(readers_path(Path::new("/db"))) {
            // Publishing the new checkpoint LSN to readers failed: nothing
            // else did.
            continue;
        }
        assert!(ran.is_err(), "call {n}: the checkpoint did not fail");
        let mut rng = SplitMix::new(n);
        let mut in_flight = None;
        if let Err(e) = s.begin() {
            assert!(
                matches!(e, amber::Error::Poisoned { .. }),
                "call {n}: after the failed checkpoint: {e}"
            );
            poisoned += 1;
        } else {
            model = common::random_tx(&s, &model, &mut rng, &mut in_flight)
                .unwrap_or_else(|e| panic!("call {n}: a transaction after it: {e}"));
            s.checkpoint()
                .unwrap_or_else(|e| panic!("call {n}: the next checkpoint: {e}"));
            assert!(model.diff(&s).is_none(), "call {n}: {:?}", model.diff(&s));
            went_on += 1;
        }
        drop(s);
        let v: Arc<dyn Vfs> = Arc::new(inner.clone());
        let s = Store::open(v, Path::new("/db"), common::no_checkpoints())
            .unwrap_or_else(|e| panic!("call {n}: reopen failed: {e}"));
        let ok =
            model.diff(&s).is_none() || in_flight.as_ref().is_some_and(|m| m.diff(&s).is_none());
        assert!(ok, "call {n}: after reopen: {:?}", model.diff(&s));
        drop(s);
        let rep =
            amber::internals::store::verify::verify(Arc::new(inner), Path::new("/db")).unwrap();
        assert!(rep.is_ok(), "call {n}: verify: {:?}", rep.problems);
    }
    eprintln!("{poisoned} failures poisoned the store, after {went_on} it went on");
    assert!(poisoned > 0 && went_on > 0);
}

/// An automatic checkpoint runs on the checkpointer thread; when it fails,
/// the store is poisoned and the next call says so, naming the cause: the
/// commit of a transaction begun before, `begin`, `close`.
#[test]
fn a_failed_background_checkpoint_is_reported_by_the_next_call() {
    let auto = StoreOptions {
        checkpoint_log_bytes: 2_000,
        ..common::no_checkpoints()
    };
    // The calls up to the end of the commit that crosses the threshold,
    // counted where it does not (no background checkpoint to race with).
    let calls_before = {
        let cd = CountdownVfs::new(Arc::new(CrashVfs::new()), 0, false);
        let s = Store::create(
            Arc::new(cd.clone()),
            Path::new("/db"),
            common::no_checkpoints(),
        )
        .unwrap();
        let mut tx = s.begin().unwrap();
        let head = tx
            .alloc(1, amber::internals::format::page::BlockKind::Raw)
            .unwrap();
        tx.commit().unwrap();
        let mut tx = s.begin().unwrap();
        tx.write(head * s.page_size() as u64 + 64, &[7; 3000])
            .unwrap();
        tx.commit().unwrap();
        cd.calls()
    };
    // Again, with the automatic checkpoint's first call failing.
    let inner = CrashVfs::new();
    let cd = CountdownVfs::new(Arc::new(inner), calls_before + 1, true);
    let s = Store::create(Arc::new(cd.clone()), Path::new("/db"), auto).unwrap();
    let mut tx = s.begin().unwrap();
    let head = tx
        .alloc(1, amber::internals::format::page::BlockKind::Raw)
        .unwrap();
    tx.commit().unwrap();
    // A transaction begun before the failure commits after it.
    let mut later = s.begin().unwrap();
    later
        .write(head * s.page_size() as u64 + 64, &[9; 10])
        .unwrap();
    let mut tx = s.begin().unwrap();
    tx.write(head * s.page_size() as u64 + 64, &[7; 3000])
        .unwrap();
    tx.commit().expect("the commit itself succeeds");
    s.wait_for_checkpointer();
    assert!(matches!(later.commit(), Err(amber::Error::Poisoned { .. })));
    match s.begin() {
        Err(amber::Error::Poisoned { cause }) => {
            assert!(
                cause.contains("checkpoint failed") && cause.contains("injected"),
                "{cause}"
            );
        }
        other => panic!("expected the store poisoned, got {other:?}"),
    }
    assert!(matches!(s.close(), Err(amber::Error::Poisoned { .. })));
}
