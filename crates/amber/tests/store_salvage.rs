//! Salvage under the crash model: cutting a damaged log, killed at every
//! mutating I/O call (each write since the last sync then kept, dropped or
//! torn at random), leaves either the log as it was (recovery still
//! refuses, and a second salvage finishes the job) or the log cut at the
//! damaged record (the database opens at the last commit before it) —
//! never anything else; and the bytes cut are saved before the cut.

use amber::internals::format::page::BlockKind;
use amber::internals::io::Vfs;
use amber::internals::io::crash::CrashVfs;
use amber::internals::store::salvage::{cut_damaged_log, new_log};
use amber::internals::store::{Store, StoreOptions, wal_path};
use amber::internals::wal::header::RECORDS_START;
use amber::internals::wal::record::COMMIT_SIZE;
use amber::{Error, FileKind};
use std::path::Path;
use std::sync::Arc;

const DB: &str = "/salvage.amber";

fn no_close() -> StoreOptions {
    StoreOptions {
        checkpoint_on_close: false,
        ..StoreOptions::default()
    }
}

/// A database with five committed transactions, all in the log, and the
/// first record of the third damaged; returns the damaged record's LSN.
fn build(vfs: &CrashVfs) -> u64 {
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new(DB);
    let s = Store::create(v, p, no_close()).expect("create");
    let base = s.superblock().checkpoint_lsn;
    let ps = s.page_size() as u64;
    let mut commits = Vec::new();
    for i in 0..5u8 {
        let mut tx = s.begin().expect("begin");
        let ty = tx.define_type(&[0xab, 0xcd, i]).expect("type");
        let page = tx.alloc(1, BlockKind::Raw).expect("alloc");
        tx.write(page * ps + 100, &[i; 64]).expect("write");
        tx.set_root(&format!("root{i}"), page * ps + 100, ty)
            .expect("root");
        commits.push(tx.commit().expect("commit").commit_lsn);
    }
    drop(s);
    let damaged = commits[1] + COMMIT_SIZE as u64;
    let wal = wal_path(p);
    let off = RECORDS_START + (damaged - base) + 17;
    let byte = vfs.durable_image(&wal).expect("log")[off as usize];
    vfs.corrupt(&wal, off, &[byte ^ 0x5a]).expect("damage");
    damaged
}

/// What opening finds: `false` for a refused (uncut) log, `true` for a
/// database at the second commit; anything else fails the test.
fn opens_cut(vfs: &CrashVfs, damaged: u64, ctx: &str) -> bool {
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    match Store::open(v, Path::new(DB), no_close()) {
        Err(Error::Corrupt {
            file: FileKind::Log,
            at,
            ..
        }) => {
            assert_eq!(
                at,
                amber::Location::Lsn(damaged),
                "{ctx}: refused elsewhere"
            );
            false
        }
        Err(e) => panic!("{ctx}: open failed otherwise: {e}"),
        Ok(s) => {
            for i in 0..5 {
                assert_eq!(
                    s.root(&format!("root{i}")).is_some(),
                    i < 2,
                    "{ctx}: root{i}"
                );
            }
            true
        }
    }
}

#[test]
fn salvage_is_crash_safe_at_every_step() {
    // The mutating calls of a whole salvage.
    let vfs = CrashVfs::new();
    let damaged = build(&vfs);
    assert!(!opens_cut(&vfs, damaged, "before salvage"));
    let before = vfs.mutations();
    let cut = cut_damaged_log(&vfs, Path::new(DB))
        .expect("salvage")
        .expect("damage found");
    let calls = vfs.mutations() - before;
    assert_eq!(cut.damaged_lsn, damaged);
    assert_eq!(cut.lost_commits.len(), 3, "{cut:?}");
    let saved = vfs.durable_image(&cut.saved_to).expect("saved tail");
    assert_eq!(saved.len() as u64, cut.discarded_bytes);
    assert!(opens_cut(&vfs, damaged, "after salvage"));
    assert!(calls >= 3, "save, sync, cut: {calls} mutating calls");

    let (mut uncut, mut was_cut) = (0, 0);
    for n in 1..=calls {
        for seed in 0..4 {
            let ctx = format!("crash at call {n}, seed {seed}");
            let vfs = CrashVfs::new();
            let damaged = build(&vfs);
            vfs.crash_after(n);
            let _ = cut_damaged_log(&vfs, Path::new(DB));
            assert!(vfs.is_dead(), "{ctx}: the crash point was not reached");
            vfs.crash(seed);
            if opens_cut(&vfs, damaged, &ctx) {
                was_cut += 1;
                let again = cut_damaged_log(&vfs, Path::new(DB)).expect("second salvage");
                assert_eq!(again, None, "{ctx}: a cut log has nothing more to give up");
            } else {
                uncut += 1;
                let again = cut_damaged_log(&vfs, Path::new(DB))
                    .expect("second salvage")
                    .expect("damage still there");
                assert_eq!(again.lost_commits.len(), 3, "{ctx}");
                let saved = vfs.durable_image(&again.saved_to).expect("saved tail");
                assert_eq!(saved.len() as u64, again.discarded_bytes, "{ctx}");
                assert!(opens_cut(&vfs, damaged, &ctx));
            }
        }
    }
    assert!(uncut > 0 && was_cut > 0, "uncut {uncut}, cut {was_cut}");
}

/// A database with three committed transactions, closed cleanly (so the
/// page file holds them all), whose log was then removed.
fn build_without_log(vfs: &CrashVfs) {
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new(DB);
    let s = Store::create(v.clone(), p, StoreOptions::default()).expect("create");
    let ps = s.page_size() as u64;
    for i in 0..3u8 {
        let mut tx = s.begin().expect("begin");
        let ty = tx.define_type(&[0xab, i]).expect("type");
        let page = tx.alloc(1, BlockKind::Raw).expect("alloc");
        tx.write(page * ps + 100, &[i; 64]).expect("write");
        tx.set_root(&format!("root{i}"), page * ps + 100, ty)
            .expect("root");
        tx.commit().expect("commit");
    }
    s.close().expect("close");
    v.remove(&wal_path(p)).expect("remove log");
}

/// Opens the database and checks that the three transactions are there.
fn opens_whole(vfs: &CrashVfs, ctx: &str) {
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let s = Store::open(v, Path::new(DB), no_close())
        .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
    for i in 0..3 {
        assert!(s.root(&format!("root{i}")).is_some(), "{ctx}: root{i}");
    }
}

#[test]
fn new_log_is_crash_safe_at_every_step() {
    let vfs = CrashVfs::new();
    build_without_log(&vfs);
    let before = vfs.mutations();
    new_log(&vfs, Path::new(DB)).expect("new log");
    let calls = vfs.mutations() - before;
    opens_whole(&vfs, "after a new log");
    assert!(
        matches!(new_log(&vfs, Path::new(DB)), Err(Error::Invalid(_))),
        "a readable log is never replaced"
    );
    let (mut retried, mut done) = (0, 0);
    for n in 1..=calls {
        for seed in 0..4 {
            let ctx = format!("crash at call {n}, seed {seed}");
            let vfs = CrashVfs::new();
            build_without_log(&vfs);
            vfs.crash_after(n);
            let _ = new_log(&vfs, Path::new(DB));
            assert!(vfs.is_dead(), "{ctx}: the crash point was not reached");
            vfs.crash(seed);
            // Either the new log made it (and is not replaced again) or a
            // second run makes it; either way nothing is lost.
            match new_log(&vfs, Path::new(DB)) {
                Ok(_) => retried += 1,
                Err(Error::Invalid(_)) => done += 1,
                Err(e) => panic!("{ctx}: second new-log run: {e}"),
            }
            opens_whole(&vfs, &ctx);
        }
    }
    assert!(retried > 0 && done > 0, "retried {retried}, done {done}");
}
