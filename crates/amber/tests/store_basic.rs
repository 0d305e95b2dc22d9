//! The storage-level API end to end on the crash model and on real files.

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::Vfs;
use amber::internals::io::crash::CrashVfs;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions, StoreTx};
use std::path::Path;
use std::sync::Arc;

fn opts() -> StoreOptions {
    StoreOptions::default()
}

#[test]
fn write_commit_reopen_read() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, opts()).unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Data).unwrap();
    let run = tx.alloc(3, BlockKind::Data).unwrap();
    tx.write(page * ps + 100, b"hello").unwrap();
    tx.write(run * ps + 2 * ps + 10, b"far in the run").unwrap();
    tx.set_root("r", page * ps + 100, 0).unwrap();
    let info = tx.commit().unwrap();
    assert!(info.log_bytes > 0);
    let b = s.read_block(page).unwrap();
    assert_eq!(&b[100..105], b"hello");
    drop(s); // no checkpoint: recovery must replay
    let s = Store::open(v.clone(), p, opts()).unwrap();
    assert_eq!(s.recovery_report().committed, 1);
    let b = s.read_block(page).unwrap();
    assert_eq!(&b[100..105], b"hello");
    let r = s.read_block(run).unwrap();
    assert_eq!(r.len(), 3 * ps as usize);
    assert_eq!(
        &r[2 * ps as usize + 10..2 * ps as usize + 24],
        b"far in the run"
    );
    assert_eq!(s.root("r").unwrap().addr, page * ps + 100);
    // Abort leaves nothing.
    let mut tx = s.begin().unwrap();
    let q = tx.alloc(1, BlockKind::Data).unwrap();
    tx.write(page * ps + 100, b"XXXXX").unwrap();
    tx.abort();
    assert_eq!(&s.read_block(page).unwrap()[100..105], b"hello");
    assert!(s.read_block(q).is_err());
    s.close().unwrap();
    let s = Store::open(v, p, opts()).unwrap();
    assert_eq!(s.recovery_report().records, 0);
    assert_eq!(&s.read_block(page).unwrap()[100..105], b"hello");
    let rep = amber::internals::store::verify::verify(Arc::new(vfs), p);
    drop(s);
    assert!(rep.is_err() || rep.unwrap().is_ok());
}

#[test]
fn header_is_protected() {
    let v: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
    let s = Store::create(v, Path::new("/db"), opts()).unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Data).unwrap();
    assert!(tx.write(page * ps, b"x").is_err());
    assert!(tx.write(page * ps + 12, &40u32.to_le_bytes()).is_ok());
    assert!(tx.write(page * ps + HEADER_SIZE as u64, b"x").is_ok());
    assert!(tx.write(page * ps + ps - 1, b"xy").is_err());
    tx.commit().unwrap();
}

#[test]
fn real_files_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db.amber");
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let s = Store::create(v.clone(), &p, opts()).unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Data).unwrap();
    tx.write(page * ps + 64, &[7u8; 100]).unwrap();
    tx.commit().unwrap();
    assert!(matches!(
        Store::open(v.clone(), &p, opts()),
        Err(amber::Error::Locked { .. })
    ));
    drop(s);
    let s = Store::open(v.clone(), &p, opts()).unwrap();
    assert_eq!(&s.read_block(page).unwrap()[64..164], &[7u8; 100][..]);
    s.close().unwrap();
    let rep = amber::internals::store::verify::verify(v, &p).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
}

#[test]
fn open_reports_its_installing_checkpoint() {
    let v: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, opts()).unwrap();
    assert_eq!(s.open_checkpoint(), None);
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Raw).unwrap();
    tx.write(page * ps + 40, b"installed at open").unwrap();
    tx.commit().unwrap();
    drop(s); // the log keeps the transaction
    let ro = StoreOptions {
        read_only: true,
        ..opts()
    };
    let s = Store::open(v.clone(), p, ro.clone()).unwrap();
    assert_eq!(
        s.open_checkpoint(),
        None,
        "a read-only open installs nothing"
    );
    drop(s);
    let s = Store::open(v.clone(), p, opts()).unwrap();
    let ck = s
        .open_checkpoint()
        .expect("the writable open installed recovery's work");
    assert_eq!(ck.blocks, 1);
    assert!(ck.bytes >= ps);
    assert_eq!(ck.lsn, s.superblock().checkpoint_lsn);
    s.close().unwrap();
    // Nothing left to install: the next open runs no checkpoint.
    let s = Store::open(v, p, opts()).unwrap();
    assert_eq!(s.open_checkpoint(), None);
}

#[test]
fn verify_after_a_clean_close_does_not_report_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db.amber");
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let s = Store::create(v.clone(), &p, opts()).unwrap();
    let ps = s.page_size() as u64;
    for i in 0..5u8 {
        let mut tx = s.begin().unwrap();
        let page = tx.alloc(1, BlockKind::Raw).unwrap();
        tx.write(page * ps + 64, &[i; 300]).unwrap();
        tx.commit().unwrap();
    }
    // The checkpoint recycles the log; its old records stay in the file.
    s.close().unwrap();
    let rep = amber::internals::store::verify::verify(v.clone(), &p).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    // The log header vouches for the empty epoch: nothing to report.
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
    // A real torn write in the current epoch is still called one.
    let s = Store::open(v.clone(), &p, opts()).unwrap(); // truncates the stale bytes
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(2, BlockKind::Raw).unwrap();
    // Longer than everything before, so that the file's end is this record.
    tx.write(page * ps + 64, &[9; 6000]).unwrap();
    tx.commit().unwrap();
    drop(s);
    let wal = amber::internals::store::wal_path(&p);
    let len = std::fs::metadata(&wal).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 5).unwrap();
    let rep = amber::internals::store::verify::verify(v, &p).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    assert!(
        rep.notes.iter().any(|n| n.contains("torn tail")),
        "{:?}",
        rep.notes
    );
}

/// Commits that arrive together share one `fdatasync` (group commit), and
/// every one of them is durable and applied.
#[test]
fn concurrent_commits_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db.amber");
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let s = Store::create(v.clone(), &p, opts()).unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Raw).unwrap();
    tx.commit().unwrap();
    let before = s.stats().log_syncs;
    let threads = 8u64;
    let per = 50u64;
    std::thread::scope(|sc| {
        for t in 0..threads {
            let s = &s;
            sc.spawn(move || {
                for i in 0..per {
                    let mut tx = s.begin().unwrap();
                    let off = 64 + (t * per + i) * 8;
                    tx.write(page * ps + off, &(t * 1000 + i).to_le_bytes())
                        .unwrap();
                    tx.commit().unwrap();
                }
            });
        }
    });
    let syncs = s.stats().log_syncs - before;
    assert!(
        syncs < threads * per,
        "{syncs} syncs for {} commits: no commit shared a sync",
        threads * per
    );
    drop(s);
    let s = Store::open(v, &p, opts()).unwrap();
    let b = s.read_block(page).unwrap();
    for t in 0..threads {
        for i in 0..per {
            let off = (64 + (t * per + i) * 8) as usize;
            assert_eq!(
                u64::from_le_bytes(b[off..off + 8].try_into().unwrap()),
                t * 1000 + i
            );
        }
    }
    eprintln!("{} commits, {syncs} syncs", threads * per);
}

/// `StoreTx::commit_all` (the server's committer): transactions committed
/// together take one sync of the log, each gets its own outcome in order
/// (one that changes nothing commits nothing; one of another store is
/// refused alone), and all are applied and durable.
#[test]
fn commit_all_syncs_once_for_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db.amber");
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    let s = Store::create(v.clone(), &p, opts()).unwrap();
    let other = Store::create(v.clone(), &dir.path().join("other.amber"), opts()).unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Raw).unwrap();
    tx.commit().unwrap();
    let before = s.stats().log_syncs;
    let mut txs: Vec<StoreTx<'_>> = (0..6u64)
        .map(|i| {
            let mut tx = s.begin().unwrap();
            tx.write(page * ps + 64 + i * 8, &(i + 100).to_le_bytes())
                .unwrap();
            tx
        })
        .collect();
    txs.insert(2, s.begin().unwrap());
    let mut foreign = other.begin().unwrap();
    foreign.alloc(1, BlockKind::Raw).unwrap();
    txs.push(foreign);
    let out = StoreTx::commit_all(txs);
    assert_eq!(s.stats().log_syncs - before, 1, "one sync for the batch");
    assert_eq!(out.len(), 8);
    assert_eq!(
        out[2].as_ref().unwrap().commit_lsn,
        0,
        "an empty one commits nothing"
    );
    assert!(out[7].is_err(), "a transaction of another store is refused");
    let lsns: Vec<u64> = (out.iter().enumerate())
        .filter(|(i, _)| ![2, 7].contains(i))
        .map(|(_, r)| r.as_ref().unwrap().commit_lsn)
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "in order: {lsns:?}");
    let check = |s: &Store| {
        let b = s.read_block(page).unwrap();
        for i in 0..6u64 {
            let off = (64 + i * 8) as usize;
            assert_eq!(
                u64::from_le_bytes(b[off..off + 8].try_into().unwrap()),
                i + 100
            );
        }
    };
    check(&s);
    drop(s);
    check(&Store::open(v, &p, opts()).unwrap());
}

/// Checks the data bytes of a block (the header's checksum and LSN are
/// stamped at each checkpoint) against the model, naming the first
/// difference.
#[track_caller]
fn same(got: &[u8], want: &[u8]) {
    let at = (HEADER_SIZE..want.len()).find(|&i| got.get(i) != Some(&want[i]));
    assert_eq!(at, None, "the block differs from the model");
}

/// The log since the last checkpoint growing past `checkpoint_log_bytes`
/// checkpoints by itself after the commit that crosses it (on the
/// checkpointer thread, which the test waits for after each commit, so that
/// each checkpoint is attributed to its commit); committed data survives
/// those checkpoints, a power loss after them, and reopening, and recovery
/// replays only the log written since the last one.
#[test]
fn checkpoint_fires_by_log_size() {
    const LIMIT: u64 = 64 << 10;
    const WRITE: usize = 1000;
    /// A range record's header, its bytes, and a commit record (§1.2).
    const PER_COMMIT: u64 = WRITE as u64 + 20 + 16;
    let o = StoreOptions {
        checkpoint_log_bytes: LIMIT,
        // Only the log's size may trigger one.
        checkpoint_pending_bytes: usize::MAX,
        ..opts()
    };
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, o.clone()).unwrap();
    let ps = s.page_size();
    let mut tx = s.begin().unwrap();
    let head = tx.alloc(4, BlockKind::Raw).unwrap();
    tx.commit().unwrap();
    let mut model = s.read_block(head).unwrap();
    let mut rng = amber::internals::io::crash::SplitMix::new(11);
    let start = s.stats();
    let mut fired = 0;
    let mut last_gen = start.generation;
    let commits = 300;
    for i in 0..commits {
        let before = s.stats();
        let off = HEADER_SIZE + rng.below((4 * ps - HEADER_SIZE - WRITE) as u64) as usize;
        let data = vec![(i % 251) as u8 + 1; WRITE];
        let mut tx = s.begin().unwrap();
        tx.write(head * ps as u64 + off as u64, &data).unwrap();
        tx.commit().unwrap();
        s.wait_for_checkpointer();
        model[off..off + WRITE].copy_from_slice(&data);
        let after = s.stats();
        let logged = |st: &amber::internals::store::StoreStats| st.end_lsn - st.checkpoint_lsn;
        if after.generation != last_gen {
            // It fired at the commit that took the log past the limit.
            assert!(
                logged(&before) <= LIMIT && logged(&before) + PER_COMMIT > LIMIT,
                "commit {i}: checkpoint with {} log bytes before it",
                logged(&before)
            );
            assert_eq!(after.pending_blocks, 0, "commit {i}: changes installed");
            fired += 1;
            last_gen = after.generation;
        } else {
            assert!(
                logged(&after) <= LIMIT,
                "commit {i}: {} log bytes since the checkpoint and none ran",
                logged(&after)
            );
        }
    }
    let expected = commits * PER_COMMIT / LIMIT;
    assert!(
        fired >= expected.saturating_sub(1) && fired <= expected + 1,
        "{fired} checkpoints for {} log bytes (expected about {expected})",
        commits * PER_COMMIT
    );
    same(&s.read_block(head).unwrap(), &model);
    // Power loss: everything committed is synced; nothing else is kept.
    let tail = s.stats().end_lsn - s.stats().checkpoint_lsn;
    drop(s);
    vfs.crash(5);
    let s = Store::open(v.clone(), p, o.clone()).unwrap();
    let rep = s.recovery_report();
    assert!(
        rep.end_lsn - rep.from_lsn == tail && tail <= LIMIT,
        "recovery read {} log bytes, the tail after the last checkpoint was {tail}",
        rep.end_lsn - rep.from_lsn
    );
    same(&s.read_block(head).unwrap(), &model);
    s.close().unwrap();
    let s = Store::open(v, p, o).unwrap();
    assert_eq!(s.recovery_report().records, 0);
    same(&s.read_block(head).unwrap(), &model);
    drop(s);
    let rep = amber::internals::store::verify::verify(Arc::new(vfs), p).unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
}
