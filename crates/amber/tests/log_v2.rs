//! A log of format version 2, left by a crash of the build that wrote it
//! (range records of kind 1, one range each; committed transactions not
//! yet installed, one logged early, one never committed), recovers with
//! this build: the fixture in `tests/fixtures/log-v2` was written by the
//! build of commit 636fd14 (log format 2), with
//! `AMBER_WRITE_FIXTURES=1 cargo test -p amber --test log_v2`, which
//! refuses to write it with a build of another log format. This build
//! appends to a log only once its header says version 3, the version an
//! older build refuses (`docs/design.md` 1.2).

mod common;

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::Vfs;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};
use common::no_checkpoints;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DB: &str = "v2.amber";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-v2")
}

fn wal(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// The changes of the fixture, in commit order: (block, offset in the
/// block, bytes). Block 0 is one page, block 1 two pages.
fn changes() -> Vec<(usize, u64, Vec<u8>)> {
    let mut out = vec![(0, 40, b"first".to_vec()), (0, 200, b"second".to_vec())];
    // Small fields 80 bytes apart, as OO7's T2b changes them.
    out.extend((0..12u64).map(|i| (0, 400 + 80 * i, vec![i as u8 + 1; 1 + i as usize % 5])));
    // One change across the block's page boundary.
    out.push((1, 4000, (0..200u32).map(|i| i as u8).collect()));
    out.push((0, 3000, b"logged early".to_vec()));
    out
}

/// Writes the fixture: three committed transactions after the one that
/// allocates the blocks, the last logged early, and one logged early that
/// never commits; then the process "crashes" (no close, no checkpoint).
fn write_fixture(dir: &Path) {
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let db = dir.join(DB);
    let s = Store::create(v, &db, no_checkpoints()).expect("create");
    let ps = s.page_size() as u64;
    let mut tx = s.begin().expect("begin");
    let ty = tx.define_type(b"fixture").expect("type");
    let blocks = [
        tx.alloc(1, BlockKind::Data).expect("alloc"),
        tx.alloc(2, BlockKind::Data).expect("alloc"),
    ];
    for (i, b) in blocks.iter().enumerate() {
        tx.set_root(&format!("block{i}"), b * ps + HEADER_SIZE as u64, ty)
            .expect("root");
    }
    tx.commit().expect("commit");
    let c = changes();
    let n = c.len();
    for group in [&c[..2], &c[2..n - 1]] {
        let mut tx = s.begin().expect("begin");
        for (b, off, bytes) in group {
            tx.write(blocks[*b] * ps + off, bytes).expect("write");
        }
        tx.commit().expect("commit");
    }
    let mut early = s.begin().expect("begin");
    let (b, off, bytes) = &c[n - 1];
    early.write(blocks[*b] * ps + off, bytes).expect("write");
    early.log_early().expect("log early");
    let mut lost = s.begin().expect("begin");
    lost.write(blocks[0] * ps + 1000, b"never committed")
        .expect("write");
    lost.log_early().expect("log early");
    early.commit().expect("commit");
    std::mem::forget(lost);
    drop(s);
    let header = std::fs::read(wal(&db)).expect("log");
    assert_eq!(
        header[8..12],
        2u32.to_le_bytes(),
        "the fixture is a log of format version 2: write it with a build of log format 2"
    );
}

#[test]
fn a_version_2_log_recovers_and_is_continued_as_version_3() {
    let tmp = tempfile::tempdir().expect("tempdir");
    if std::env::var_os("AMBER_WRITE_FIXTURES").is_some() {
        write_fixture(tmp.path());
        let out = fixture_dir();
        std::fs::create_dir_all(&out).expect("fixture dir");
        for name in [DB.to_string(), format!("{DB}-wal")] {
            std::fs::copy(tmp.path().join(&name), out.join(&name)).expect("copy");
        }
        return;
    }
    for name in [DB.to_string(), format!("{DB}-wal")] {
        std::fs::copy(fixture_dir().join(&name), tmp.path().join(&name)).expect("copy");
    }
    let db = tmp.path().join(DB);
    let log = std::fs::read(wal(&db)).expect("log");
    assert_eq!(
        log[8..12],
        2u32.to_le_bytes(),
        "the fixture's log is version 2"
    );
    assert_eq!(log[4096 + 8..4096 + 12], 2u32.to_le_bytes());
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let s = Store::open(v.clone(), &db, no_checkpoints()).expect("a version-2 log recovers");
    let r = s.recovery_report();
    assert_eq!((r.committed, r.uncommitted), (4, 1), "{r:?}");
    let ps = s.page_size() as u64;
    let block = |i: usize| s.root(&format!("block{i}")).expect("the root").addr / ps;
    let blocks = [block(0), block(1)];
    let check = |s: &Store, what: &str| {
        let imgs: Vec<Vec<u8>> = blocks
            .iter()
            .map(|&b| s.read_block(b).expect("reads"))
            .collect();
        for (b, off, bytes) in changes() {
            let at = off as usize;
            assert_eq!(
                &imgs[b][at..at + bytes.len()],
                &bytes[..],
                "{what}: block {b} at {off}"
            );
        }
        assert_eq!(
            &imgs[0][1000..1015],
            &[0u8; 15],
            "{what}: the lost transaction"
        );
    };
    check(&s, "recovered");
    // The open's checkpointer thread installed what it recovered and
    // recycled the log, under a header of version 3.
    s.wait_for_checkpointer();
    let log = std::fs::read(wal(&db)).expect("log");
    for copy in [0, 4096] {
        assert_eq!(
            log[copy + 8..copy + 12],
            3u32.to_le_bytes(),
            "copy at {copy}"
        );
    }
    let mut tx = s.begin().expect("begin");
    tx.write(blocks[0] * ps + 2000, b"appended").expect("write");
    tx.commit().expect("commit");
    drop(s);
    let s = Store::open(v, &db, no_checkpoints()).expect("reopens");
    assert_eq!(s.recovery_report().committed, 1);
    check(&s, "reopened");
    assert_eq!(
        &s.read_block(blocks[0]).expect("reads")[2000..2008],
        b"appended"
    );
    s.close().expect("close");
}

/// Sets the format version of both copies of the log header of `db`, and
/// clears their "closed cleanly" mark unless `closed`.
fn set_log_version(db: &Path, version: u32, closed: bool) -> Vec<u8> {
    use amber::internals::format::crc;
    let mut log = std::fs::read(wal(db)).expect("log");
    for copy in [0, 4096] {
        let slot = &mut log[copy..copy + 512];
        slot[8..12].copy_from_slice(&version.to_le_bytes());
        slot[56] &= u8::from(closed);
        let c = crc(&slot[..508]);
        slot[508..].copy_from_slice(&c.to_le_bytes());
    }
    std::fs::write(wal(db), &log).expect("write");
    log
}

/// The log version of the header copies of `db`.
fn log_versions(db: &Path) -> [u32; 2] {
    let log = std::fs::read(wal(db)).expect("log");
    [0, 4096].map(|c| u32::from_le_bytes(log[c + 8..c + 12].try_into().expect("4 bytes")))
}

/// A version-2 log that holds no record to recover opens without a
/// checkpoint; the first append rewrites its header as version 3 before
/// any ranges record goes in — after a clean close, and after a crash
/// right after a checkpoint (the header not marked closed). (The header of
/// such a log is the same in both versions but for the version field.)
#[test]
fn the_first_append_to_a_version_2_log_makes_it_version_3() {
    for closed in [true, false] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let db = tmp.path().join("empty.amber");
        let v: Arc<dyn Vfs> = Arc::new(RealVfs);
        let s = Store::create(v.clone(), &db, StoreOptions::default()).expect("create");
        let mut tx = s.begin().expect("begin");
        let page = tx.alloc(1, BlockKind::Data).expect("alloc");
        tx.commit().expect("commit");
        s.close().expect("close");
        set_log_version(&db, 2, closed);
        let s = Store::open(v.clone(), &db, no_checkpoints()).expect("opens");
        assert_eq!(
            log_versions(&db),
            [2, 2],
            "closed {closed}: nothing rewritten yet"
        );
        let ps = s.page_size() as u64;
        let mut tx = s.begin().expect("begin");
        tx.write(page * ps + 100, b"v3").expect("write");
        tx.write(page * ps + 200, b"ranges").expect("write");
        tx.commit().expect("commit");
        assert_eq!(log_versions(&db), [3, 3], "closed {closed}");
        drop(s);
        let s = Store::open(v, &db, no_checkpoints()).expect("recovers");
        let b = s.read_block(page).expect("reads");
        assert_eq!((&b[100..102], &b[200..206]), (&b"v3"[..], &b"ranges"[..]));
    }
}

/// A log whose header copies are sound but of a later format version (a
/// newer build's) is refused by name, and never replaced by a new log.
#[test]
fn a_log_of_a_later_version_is_refused_and_kept() {
    use amber::internals::store::salvage;
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("later.amber");
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let s = Store::create(v.clone(), &db, no_checkpoints()).expect("create");
    let mut tx = s.begin().expect("begin");
    tx.alloc(1, BlockKind::Data).expect("alloc");
    tx.commit().expect("commit");
    drop(s);
    let log = set_log_version(&db, 4, false);
    let e = Store::open(v.clone(), &db, no_checkpoints()).expect_err("a version-4 log");
    assert!(matches!(e, amber::Error::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("log format version 4"), "{e}");
    let e = salvage::new_log(&*v, &db).expect_err("not replaced");
    assert!(e.to_string().contains("format version 4"), "{e}");
    assert_eq!(
        std::fs::read(wal(&db)).expect("log"),
        log,
        "the log is untouched"
    );
}
