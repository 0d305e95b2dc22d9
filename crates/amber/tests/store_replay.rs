//! Recovery rebuilds exactly what the running store had: in commit order, and
//! for logs longer than the chunks the scan reads them in, with transactions
//! whose records straddle chunk boundaries or were logged early. A log that
//! a clean close vouched for is not read at all.

mod common;

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::countdown::CountdownVfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::io::{OpenMode, Vfs};
use amber::internals::store::{Store, StoreOptions, StoreTx};
use common::no_checkpoints;
use std::path::Path;
use std::sync::Arc;

/// What the data blocks hold after their headers (whose checksum and LSN
/// change when a checkpoint installs them).
fn blocks(s: &Store) -> Vec<(u64, Vec<u8>)> {
    s.blocks()
        .into_iter()
        .map(|(h, _)| (h, s.read_block(h).expect("reads")))
        .filter(|(_, b)| b[4] == BlockKind::Data as u8)
        .map(|(h, b)| (h, b[HEADER_SIZE..].to_vec()))
        .collect()
}

#[test]
fn replay_follows_commit_order() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, no_checkpoints()).unwrap();
    let ps = s.page_size() as u64;
    let mut tx = s.begin().unwrap();
    let page = tx.alloc(1, BlockKind::Data).unwrap();
    tx.commit().unwrap();
    let at = page * ps + HEADER_SIZE as u64;
    // `a` logs its write early; `b` writes the same bytes and commits; then
    // `a` commits. The running store applies each at its commit: `a` last.
    let mut a = s.begin().unwrap();
    a.write(at, b"AAAA").unwrap();
    a.log_early().unwrap();
    let mut b = s.begin().unwrap();
    b.write(at, b"BBBB").unwrap();
    b.commit().unwrap();
    a.commit().unwrap();
    let off = HEADER_SIZE;
    assert_eq!(&s.read_block(page).unwrap()[off..off + 4], b"AAAA");
    drop(s);
    let s = Store::open(v, p, no_checkpoints()).unwrap();
    assert_eq!(s.recovery_report().committed, 3);
    assert_eq!(&s.read_block(page).unwrap()[off..off + 4], b"AAAA");
}

#[test]
fn a_log_of_many_chunks_replays_to_the_running_state() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, no_checkpoints()).unwrap();
    let ps = s.page_size();
    let mut tx = s.begin().unwrap();
    let mut pages = Vec::new();
    for _ in 0..64 {
        pages.push(tx.alloc(1, BlockKind::Data).unwrap());
    }
    let run = tx.alloc(3, BlockKind::Data).unwrap();
    tx.commit().unwrap();
    let mut rng = SplitMix::new(7);
    let write = |tx: &mut StoreTx<'_>, rng: &mut SplitMix| {
        let len = 1 + rng.below(300) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let addr = if rng.below(8) == 0 {
            let off = HEADER_SIZE as u64 + rng.below((3 * ps - HEADER_SIZE - len) as u64);
            run * ps as u64 + off
        } else {
            let page = pages[rng.below(pages.len() as u64) as usize];
            let off = HEADER_SIZE as u64 + rng.below((ps - HEADER_SIZE - len) as u64);
            page * ps as u64 + off
        };
        tx.write(addr, &data).unwrap();
    };
    // Some 3 MiB of log: several chunks of the scan. Now and then a
    // transaction logs early and commits many transactions later, or never.
    let mut early: Vec<StoreTx<'_>> = Vec::new();
    let mut logged = 0u64;
    let mut uncommitted = 0u64;
    while logged < 3 << 20 {
        if rng.below(200) == 0 {
            let mut tx = s.begin().unwrap();
            write(&mut tx, &mut rng);
            write(&mut tx, &mut rng);
            tx.log_early().unwrap();
            early.push(tx);
        }
        if !early.is_empty() && rng.below(100) == 0 {
            let mut tx = early.remove(0);
            write(&mut tx, &mut rng);
            if rng.below(4) == 0 {
                // Logged early, never committed: dropped by recovery.
                tx.abort();
                uncommitted += 1;
            } else {
                logged += tx.commit().unwrap().log_bytes;
            }
        }
        let mut tx = s.begin().unwrap();
        for _ in 0..1 + rng.below(4) {
            write(&mut tx, &mut rng);
        }
        logged += tx.commit().unwrap().log_bytes;
    }
    for tx in early {
        tx.abort();
        uncommitted += 1;
    }
    let want = blocks(&s);
    let before = s.stats().end_lsn;
    drop(s);
    let s = Store::open(v, p, no_checkpoints()).unwrap();
    let rep = s.recovery_report().clone();
    assert_eq!(rep.end_lsn, before);
    assert_eq!(rep.uncommitted, uncommitted);
    assert!(rep.end_lsn - rep.from_lsn > 3 << 20);
    let got = blocks(&s);
    assert_eq!(got.len(), want.len());
    for ((h, a), (_, b)) in got.iter().zip(&want) {
        if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
            let n = (0..a.len() - i)
                .take_while(|&k| a[i + k] != b[i + k])
                .count();
            panic!("block {h} differs after its header from byte {i} ({n} bytes)");
        }
    }
}

#[test]
fn a_cleanly_closed_log_is_not_read() {
    let vfs = CrashVfs::new();
    let p = Path::new("/db");
    let s = Store::create(Arc::new(vfs.clone()), p, StoreOptions::default()).unwrap();
    let mut tx = s.begin().unwrap();
    tx.alloc(1, BlockKind::Data).unwrap();
    tx.commit().unwrap();
    s.close().unwrap();
    let ro = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    let calls = |vfs: &CrashVfs| {
        let counted = CountdownVfs::new(Arc::new(vfs.clone()), 0, false);
        let s = Store::open(Arc::new(counted.clone()), p, ro.clone()).unwrap();
        assert_eq!(s.recovery_report().records, 0);
        drop(s);
        counted.calls()
    };
    let before = calls(&vfs);
    // Megabytes of old bytes after the header: the clean close vouches that
    // none belongs to the log, and opening does not look at them.
    let log = vfs
        .open(&amber::internals::store::wal_path(p), OpenMode::ReadWrite)
        .unwrap();
    let size = log.size().unwrap();
    log.write_all_at(&vec![0x5a; 8 << 20], size).unwrap();
    log.sync_data().unwrap();
    drop(log);
    assert_eq!(calls(&vfs), before);
}
