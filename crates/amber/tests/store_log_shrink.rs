//! The log file shrinks back after a checkpoint when it grew far past its
//! usual size (`StoreOptions::log_keep_bytes`, `wal/writer.rs`), is not cut
//! and regrown by a steady workload, and a crash at every crash point of
//! a shrinking checkpoint loses nothing committed.

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::Vfs;
use amber::internals::io::crash::CrashVfs;
use amber::internals::store::{Store, StoreOptions};
use amber::internals::wal::header::RECORDS_START;
use std::path::Path;
use std::sync::Arc;

const DB: &str = "/db";

fn opts(keep: u64) -> StoreOptions {
    StoreOptions {
        // Only the checkpoints the test asks for.
        checkpoint_log_bytes: u64::MAX,
        checkpoint_pending_bytes: usize::MAX,
        log_keep_bytes: keep,
        ..StoreOptions::default()
    }
}

fn log_len(vfs: &CrashVfs) -> u64 {
    vfs.file_len(&amber::inspect::wal_path(Path::new(DB)))
        .expect("log file")
}

/// Commits `txs` transactions of one new one-page block each, filled with
/// bytes of `seed`; returns the blocks.
fn fill(s: &Store, txs: u64, seed: u8) -> Vec<u64> {
    let ps = s.page_size() as u64;
    (0..txs)
        .map(|i| {
            let mut tx = s.begin().expect("begin");
            let p = tx.alloc(1, BlockKind::Data).expect("alloc");
            let body = vec![seed.wrapping_add(i as u8); ps as usize - HEADER_SIZE];
            tx.write(p * ps + HEADER_SIZE as u64, &body).expect("write");
            tx.commit().expect("commit");
            p
        })
        .collect()
}

fn check(s: &Store, blocks: &[u64], seed: u8) {
    for (i, &p) in blocks.iter().enumerate() {
        let b = s.read_block(p).expect("read");
        assert!(
            b[HEADER_SIZE..]
                .iter()
                .all(|&x| x == seed.wrapping_add(i as u8)),
            "block {p}"
        );
    }
}

/// A bulk load's log (12 MB) is cut back to the floor (1 MiB here) by the
/// checkpoint after it; epochs of a steady size are then left alone.
#[test]
fn a_grown_log_shrinks_and_a_steady_one_stays() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let s = Store::create(v, Path::new(DB), opts(1 << 20)).expect("create");
    let bulk = fill(&s, 3000, 1);
    let grown = log_len(&vfs);
    assert!(grown > 10 << 20, "the bulk load's log is {grown} bytes");
    s.checkpoint().expect("checkpoint");
    assert_eq!(
        log_len(&vfs),
        RECORDS_START + (1 << 20),
        "cut back to the floor"
    );
    check(&s, &bulk, 1);
    // Steady epochs of about 2 MiB each: the first grows the file, later
    // ones reuse it in place (not cut: 2 MiB is the usual size now).
    let mut lens = Vec::new();
    for round in 0..4u8 {
        fill(&s, 600, round);
        s.checkpoint().expect("checkpoint");
        lens.push(log_len(&vfs));
    }
    assert!(lens[0] > 2 << 20, "{lens:?}");
    assert!(
        lens.windows(2).all(|w| w[0] == w[1]),
        "not cut again: {lens:?}"
    );
    // The default never cuts a log within its floor of 4 MiB.
    s.close().expect("close");
}

/// A crash at every crash point of the checkpoint that shrinks the log
/// (crash model: unsynced writes kept, dropped or torn): every committed
/// block is there after recovery, and the log is shrunk by the next
/// checkpoint (the close's) if the crash prevented it.
#[test]
fn a_crash_at_every_point_of_a_shrinking_checkpoint_loses_nothing() {
    let base = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(base.clone());
    let s = Store::create(v, Path::new(DB), opts(16 << 10)).expect("create");
    let first = fill(&s, 10, 3);
    s.checkpoint().expect("checkpoint");
    let bulk = fill(&s, 60, 7);
    drop(s);
    base.crash(0);
    // Opening recovers the bulk load and checkpoints (a shrinking one):
    // count its crash points.
    let probe = base.durable_copy();
    let before = probe.mutations();
    let s = Store::open(Arc::new(probe.clone()), Path::new(DB), opts(16 << 10)).expect("open");
    // The checkpointer thread installs what the open recovered.
    s.wait_for_checkpointer();
    let points = probe.mutations() - before;
    assert!(
        log_len(&probe) <= RECORDS_START + (16 << 10),
        "{}",
        log_len(&probe)
    );
    drop(s);
    assert!(points > 4, "{points} crash points");
    for point in 1..=points {
        for seed in 0..3 {
            let fs = base.durable_copy();
            fs.crash_after(point);
            if let Ok(s) = Store::open(Arc::new(fs.clone()), Path::new(DB), opts(16 << 10)) {
                s.wait_for_checkpointer();
            }
            fs.crash(seed * 31 + point);
            let s = Store::open(Arc::new(fs.clone()), Path::new(DB), opts(16 << 10))
                .unwrap_or_else(|e| panic!("crash point {point}: {e}"));
            check(&s, &first, 3);
            check(&s, &bulk, 7);
            s.close().expect("close");
            assert!(
                log_len(&fs) <= RECORDS_START + (16 << 10),
                "crash point {point}: the log is shrunk by the next checkpoint"
            );
        }
    }
}
