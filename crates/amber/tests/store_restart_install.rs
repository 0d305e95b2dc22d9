//! A writable open returns once the log is replayed into memory; the
//! checkpointer thread then installs what it recovered (docs/design.md
//! §11.9). A crash at every crash point of that installation — with the
//! store serving a read of every block and a commit meanwhile — recovers
//! again to the last acknowledged state (or that plus the commit in
//! flight), and `verify` passes.

mod common;

use amber::internals::io::Vfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::{Store, StoreOptions};
use common::{Model, random_tx, run_workload};
use std::path::Path;
use std::sync::Arc;

const DB: &str = "/db";

/// Only the checkpoints the workload asks for, and the restart's
/// installation.
fn opts() -> StoreOptions {
    common::no_checkpoints()
}

/// A database left as a crash leaves it, with committed transactions in
/// the log since its last checkpoint; and its committed state.
fn crashed_with_a_log() -> (CrashVfs, Model) {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let s = Store::create(v, Path::new(DB), opts()).expect("create");
    let mut rng = SplitMix::new(19);
    let (model, _, err) = run_workload(&s, Model::default(), &mut rng, 12);
    assert!(err.is_none(), "{err:?}");
    let mut model = model;
    for _ in 0..6 {
        model = random_tx(&s, &model, &mut rng, &mut None).expect("commit");
    }
    drop(s);
    vfs.crash(1);
    (vfs, model)
}

#[test]
fn crashes_during_the_installation_after_a_restart_recover_again() {
    let (base, model) = crashed_with_a_log();
    // The crash points of an open and of the installation it asks for.
    let probe = base.durable_copy();
    let before = probe.mutations();
    let s = Store::open(Arc::new(probe.clone()), Path::new(DB), opts()).expect("open");
    let r = s.recovery_report().clone();
    assert!(r.end_lsn > r.from_lsn && r.redone > 0, "{r:?}");
    let installed = s
        .open_checkpoint()
        .expect("the open asked for an installation");
    assert!(installed.blocks > 0, "{installed:?}");
    let points = probe.mutations() - before;
    drop(s);
    assert!(points > 4, "{points} crash points");
    let (mut reopened, mut read_before_installed) = (0, 0);
    for (point, seed) in (1..=points + 1).flat_map(|p| (0..3).map(move |s| (p, s))) {
        let fs = base.durable_copy();
        fs.crash_after(point);
        let (mut ack, mut in_flight) = (model.clone(), None);
        if let Ok(s) = Store::open(Arc::new(fs.clone()), Path::new(DB), opts()) {
            reopened += 1;
            // Served while the checkpointer thread installs: every block
            // read is the recovered one (a read may be refused once the
            // simulated process has died, never wrong), then a commit.
            if let Err(d) = model.compare(&s) {
                panic!("crash point {point}: read during the installation: {d}");
            }
            read_before_installed += u64::from(s.superblock().checkpoint_lsn == r.from_lsn);
            let mut rng = SplitMix::new(point * 3 + seed);
            if let Ok(m) = random_tx(&s, &ack, &mut rng, &mut in_flight) {
                ack = m;
            }
            // Dropping it lets the installation finish (or fail) first.
        }
        fs.crash(point.wrapping_mul(0x9E37) ^ seed);
        let s = Store::open(Arc::new(fs.clone()), Path::new(DB), opts())
            .unwrap_or_else(|e| panic!("crash point {point}: recovery failed: {e}"));
        let lost = ack.diff(&s);
        let kept = in_flight.as_ref().and_then(|m: &Model| m.diff(&s));
        if lost.is_some() && (in_flight.is_none() || kept.is_some()) {
            panic!(
                "crash point {point}: recovered state is neither the acknowledged one ({lost:?}) \
                 nor the one in flight ({kept:?})"
            );
        }
        s.close().expect("close");
        let rep = amber::internals::store::verify::verify(Arc::new(fs), Path::new(DB)).unwrap();
        assert!(
            rep.is_ok(),
            "crash point {point}: verify: {:?}",
            rep.problems
        );
    }
    eprintln!(
        "{points} crash points, 3 crashes each; {reopened} opens served before their installation ended, \
         {read_before_installed} of them read every block before a new superblock"
    );
    assert!(reopened > 0, "no crash point came after the open returned");
}
