//! Crash consistency under the crash model: random workloads killed at random
//! crash points, every write since the last sync kept, dropped or torn at
//! random; after recovery the database equals the last acknowledged state (or
//! that state plus the one transaction whose commit was in flight), `verify`
//! passes, and no page leaks from the allocator. Some runs crash again during
//! recovery.
//!
//! `AMBER_CRASH_POINTS` sets the number of crash points (default 10,000; the
//! long run in `.ci/run` and the README uses more).

mod common;

use amber::internals::io::Vfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::{Store, StoreOptions};
use common::{Model, run_workload};
use std::path::Path;
use std::sync::Arc;

fn opts() -> StoreOptions {
    StoreOptions {
        checkpoint_log_bytes: 30_000,
        checkpoint_pending_bytes: 128 << 10,
        ..StoreOptions::default()
    }
}

/// What the crash runs exercised, so the test fails if the model stops
/// reaching the interesting cases.
#[derive(Debug, Default)]
struct Seen {
    torn_tails: u64,
    repaired_blocks: u64,
    in_flight_kept: u64,
    in_flight_lost: u64,
    uncommitted_ignored: u64,
}

/// Checks the recovered store against the acknowledged and in-flight models.
fn check(s: &Store, ack: &Model, in_flight: &Option<Model>, ctx: &str, seen: &mut Seen) {
    let d1 = ack.diff(s);
    if let Some(m) = in_flight {
        if m.diff(s).is_none() && m != ack {
            seen.in_flight_kept += 1;
            return;
        }
        if d1.is_none() && m != ack {
            seen.in_flight_lost += 1;
        }
    }
    if d1.is_none() {
        return;
    }
    panic!(
        "{ctx}: recovered state matches neither the acknowledged state ({d1:?}) nor the in-flight one"
    );
}

fn one_crash(seed: u64, seen: &mut Seen) {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let mut rng = SplitMix::new(seed);
    let s = Store::create(v.clone(), p, opts()).unwrap();
    // Some committed history first, then the crash somewhere in what follows.
    let warm = rng.below(10) as usize;
    let (base, _, err) = run_workload(&s, Model::default(), &mut rng, warm);
    assert!(err.is_none());
    // Sometimes a clean close first: the log header then vouches for the
    // bytes after its empty epoch, and the next session appends in place.
    let s = if rng.below(3) == 0 {
        s.close().unwrap();
        Store::open(v.clone(), p, opts()).unwrap()
    } else {
        s
    };
    vfs.crash_after(1 + rng.below(160));
    let (ack, in_flight, _err) = run_workload(&s, base, &mut rng, 40);
    drop(s);
    vfs.crash(seed ^ 0xC0FFEE);
    // Sometimes crash again while recovering.
    if rng.below(4) == 0 {
        vfs.crash_after(1 + rng.below(12));
        let _ = Store::open(v.clone(), p, opts());
        vfs.crash(seed ^ 0xBEEF);
    }
    let s = match Store::open(v.clone(), p, opts()) {
        Ok(s) => s,
        Err(e) => panic!("seed {seed}: reopen after crash failed: {e}"),
    };
    let r = s.recovery_report();
    seen.torn_tails += u64::from(matches!(
        r.tail,
        amber::internals::wal::scan::Tail::Torn { .. }
    ));
    seen.repaired_blocks += r.repaired.len() as u64;
    seen.uncommitted_ignored += r.uncommitted;
    check(&s, &ack, &in_flight, &format!("seed {seed}"), seen);
    drop(s);
    let rep = amber::internals::store::verify::verify(v, p).unwrap();
    assert!(
        rep.is_ok(),
        "seed {seed}: verify after recovery: {:?}",
        rep.problems
    );
}

#[test]
fn recovery_restores_the_last_committed_state() {
    let n: u64 = std::env::var("AMBER_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let base: u64 = std::env::var("AMBER_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut seen = Seen::default();
    for seed in base..base + n {
        one_crash(seed, &mut seen);
    }
    eprintln!("crash points: {n}; {seen:?}");
    if n >= 1000 {
        assert!(
            seen.torn_tails > 0
                && seen.repaired_blocks > 0
                && seen.in_flight_kept > 0
                && seen.in_flight_lost > 0
                && seen.uncommitted_ignored > 0,
            "the crash runs did not reach every case: {seen:?}"
        );
    }
}
