//! Concurrent store transactions and background checkpoints: commits from
//! many threads apply to the running state in the order of their commit
//! records, so the running store holds exactly what recovery rebuilds from
//! the log; reads during checkpoints see whole committed images; records
//! logged early survive the checkpoints running meanwhile; a commit that
//! fails holds up no other.
//!
//! `AMBER_ORDER_ROUNDS` sets the rounds of the ordering test (default 150)
//! and `AMBER_CHECKPOINT_ROUNDS` those of the checkpoint tests (default 2);
//! the long run uses more.

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::countdown::CountdownVfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::io::{IoFile, OpenMode, Vfs};
use amber::internals::store::readers::readers_path;
use amber::internals::store::{Store, StoreOptions};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// No automatic checkpoint, none on close: the reopen must rebuild the
/// state from the log alone.
fn log_only() -> StoreOptions {
    StoreOptions {
        checkpoint_log_bytes: u64::MAX,
        checkpoint_pending_bytes: usize::MAX,
        checkpoint_on_close: false,
        ..StoreOptions::default()
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const BLOCKS: u64 = 4;
const THREADS: u64 = 6;
const COMMITS: u64 = 60;

/// Every block's committed image, read through the store.
fn images(s: &Store, heads: &[u64]) -> Vec<Vec<u8>> {
    heads
        .iter()
        .map(|&h| s.read_block(h).expect("read"))
        .collect()
}

/// Threads commit transactions that write the same bytes of the same few
/// blocks (each its own values); afterwards the running store's images must
/// equal what a reopen recovers from the log. Before commits applied in
/// commit-record order, group commit woke committers in any order and the
/// later of two commits to the same bytes could apply first.
#[test]
fn concurrent_commits_leave_what_recovery_rebuilds() {
    let rounds = env_or("AMBER_ORDER_ROUNDS", 150);
    for round in 0..rounds {
        let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
        let p = Path::new("/db");
        let s = Store::create(vfs.clone(), p, log_only()).expect("create");
        let ps = s.page_size() as u64;
        let mut tx = s.begin().expect("begin");
        let heads: Vec<u64> = (0..BLOCKS)
            .map(|_| tx.alloc(1, BlockKind::Raw).expect("alloc"))
            .collect();
        tx.commit().expect("commit");
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (s, heads) = (&s, &heads);
                scope.spawn(move || {
                    for k in 0..COMMITS {
                        let mut tx = s.begin().expect("begin");
                        let value = [(t * COMMITS + k) as u8 | 1; 48];
                        // Two overlapping ranges in two blocks, so that
                        // commits overlap in part and in whole.
                        let a = heads[(k % BLOCKS) as usize] * ps + HEADER_SIZE as u64;
                        let b = heads[((k + t) % BLOCKS) as usize] * ps + HEADER_SIZE as u64 + 24;
                        tx.write(a, &value).expect("write");
                        tx.write(b, &value[..40]).expect("write");
                        tx.commit().expect("commit");
                    }
                });
            }
        });
        let running = images(&s, &heads);
        drop(s);
        // Read-only: the recovered state stays in memory as recovery
        // rebuilt it (a writable open would install and seal it).
        let ro = StoreOptions {
            read_only: true,
            ..log_only()
        };
        let s = Store::open(vfs, p, ro).expect("reopen");
        assert_eq!(
            s.recovery_report().committed,
            1 + THREADS * COMMITS,
            "round {round}"
        );
        let recovered = images(&s, &heads);
        for (i, (a, b)) in running.iter().zip(&recovered).enumerate() {
            let at = (0..a.len()).find(|&j| a[j] != b[j]);
            assert!(
                at.is_none(),
                "round {round}: block {} differs between the running store and recovery at byte {at:?}",
                heads[i]
            );
        }
    }
}

/// The value every word of a block's body holds (the tests below write
/// whole bodies of one value), or `None` when the words differ: an image
/// made of two commits' bytes, or of a torn read.
fn uniform(img: &[u8]) -> Option<u64> {
    let mut words = img[HEADER_SIZE..]
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
    let first = words.next()?;
    words.all(|w| w == first).then_some(first)
}

/// Rewrites the body of block `head` (`pages` pages) with `value` in
/// every word.
fn fill(s: &Store, head: u64, pages: u32, value: u64) {
    let ps = s.page_size();
    let body: Vec<u8> = (0..(pages as usize * ps - HEADER_SIZE) / 8)
        .flat_map(|_| value.to_le_bytes())
        .collect();
    let mut tx = s.begin().expect("begin");
    tx.write(head * ps as u64 + HEADER_SIZE as u64, &body)
        .expect("write");
    tx.commit().expect("commit");
}

/// A file system whose reads and writes are not atomic: one of several
/// pages is made page by page with a pause between them, as POSIX allows,
/// so that a read overlapping a checkpoint's writes of a block comes back
/// torn unless the store avoids such reads.
#[derive(Debug)]
struct PageByPage(CrashVfs);

#[derive(Debug)]
struct PageByPageFile(Box<dyn IoFile>);

impl Vfs for PageByPage {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Box<dyn IoFile>> {
        Ok(Box::new(PageByPageFile(self.0.open(path, mode)?)))
    }

    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }

    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.0.remove(path)
    }
}

impl IoFile for PageByPageFile {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        for (i, page) in buf.chunks_mut(4096).enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_micros(20));
            }
            self.0.read_exact_at(page, off + i as u64 * 4096)?;
        }
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        for (i, page) in buf.chunks(4096).enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_micros(20));
            }
            self.0.write_all_at(page, off + i as u64 * 4096)?;
        }
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }

    fn size(&self) -> std::io::Result<u64> {
        self.0.size()
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }

    fn try_lock_exclusive(&self) -> std::io::Result<bool> {
        self.0.try_lock_exclusive()
    }

    fn unlock(&self) -> std::io::Result<()> {
        self.0.unlock()
    }
}

/// Readers fetch whole blocks and fetch clusters while a writer rewrites
/// blocks and the checkpointer installs them in the background, on a file
/// system whose multi-page reads can tear: every image read is whole (one
/// commit's value throughout, checksum good) and never older than one the
/// same reader saw before — a checkpoint's installation never shows a
/// reader a block half-installed, nor the page file's old image without the
/// changes it had pending.
#[test]
fn reads_during_background_checkpoints_see_whole_committed_images() {
    let opts = StoreOptions {
        checkpoint_log_bytes: 48 << 10,
        checkpoint_pending_bytes: usize::MAX,
        ..StoreOptions::default()
    };
    for round in 0..env_or("AMBER_CHECKPOINT_ROUNDS", 2) {
        let vfs = Arc::new(PageByPage(CrashVfs::new()));
        let s = Store::create(vfs, Path::new("/db"), opts.clone()).expect("create");
        // Blocks of one and of two pages, side by side.
        let mut tx = s.begin().expect("begin");
        let blocks: Vec<(u64, u32)> = (0..12)
            .map(|i| {
                let pages = 1 + i % 2;
                (tx.alloc(pages, BlockKind::Raw).expect("alloc"), pages)
            })
            .collect();
        tx.commit().expect("commit");
        for &(h, n) in &blocks {
            fill(&s, h, n, 0);
        }
        let first = blocks[0].0;
        let span = blocks
            .iter()
            .map(|&(h, n)| h + u64::from(n))
            .max()
            .expect("blocks")
            - first;
        let generation = s.stats().generation;
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for r in 0..2 {
                let (s, blocks, done) = (&s, &blocks, &done);
                scope.spawn(move || {
                    let mut seen = vec![0u64; blocks.len()];
                    let mut buf = Vec::new();
                    let mut check = |i: usize, img: &[u8], how: &str| {
                        let v = uniform(img).unwrap_or_else(|| {
                            panic!("round {round} reader {r}: block {} read by {how} is not one commit's image", blocks[i].0)
                        });
                        assert!(
                            v >= seen[i],
                            "round {round} reader {r}: block {} read by {how} went back from {} to {v}",
                            blocks[i].0,
                            seen[i]
                        );
                        seen[i] = v;
                    };
                    while !done.load(Ordering::Acquire) {
                        for (i, &(h, _)) in blocks.iter().enumerate() {
                            check(i, &s.read_block(h).expect("read_block"), "read_block");
                        }
                        for b in s.read_cluster(first, span, &mut buf) {
                            b.image.as_ref().expect("cluster image");
                            let i = blocks.iter().position(|&(h, _)| h == b.head).expect("a block");
                            let len = b.pages as usize * s.page_size();
                            check(i, &buf[b.at..b.at + len], "read_cluster");
                        }
                    }
                });
            }
            let mut rng = SplitMix::new(round);
            let mut values = vec![0u64; blocks.len()];
            // At least 300 commits, and on until ten checkpoints have run:
            // on a loaded machine the checkpointer falls behind and folds
            // several thresholds into one checkpoint, so a fixed count of
            // commits does not guarantee a fixed count of checkpoints.
            let mut commits = 0u64;
            while commits < 300 || (s.stats().generation < generation + 10 && commits < 30_000) {
                let i = rng.below(blocks.len() as u64) as usize;
                values[i] += 1;
                fill(&s, blocks[i].0, blocks[i].1, values[i]);
                commits += 1;
            }
            done.store(true, Ordering::Release);
        });
        s.wait_for_checkpointer();
        assert!(
            s.stats().generation >= generation + 10,
            "round {round}: only {} checkpoints ran in 30,000 commits",
            s.stats().generation - generation
        );
        s.close().expect("close");
    }
}

/// One thread logs records early (QuickStore's recovery-buffer overflow)
/// several times per transaction while another commits enough to keep the
/// checkpointer busy. A checkpoint never runs while a transaction has
/// records in the log, and `log_early` never appends while one runs: no
/// checkpoint fails for records it cannot recycle, and the running state
/// equals what recovery rebuilds from the log.
#[test]
fn early_logged_records_survive_background_checkpoints() {
    let opts = StoreOptions {
        checkpoint_log_bytes: 4 << 10,
        checkpoint_pending_bytes: usize::MAX,
        checkpoint_on_close: false,
        ..StoreOptions::default()
    };
    let rounds = env_or("AMBER_CHECKPOINT_ROUNDS", 2) * 20;
    let mut checkpoints = 0;
    for round in 0..rounds {
        let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
        let p = Path::new("/db");
        let s = Store::create(vfs.clone(), p, opts.clone()).expect("create");
        let ps = s.page_size() as u64;
        let mut tx = s.begin().expect("begin");
        let heads: Vec<u64> = (0..6)
            .map(|_| tx.alloc(1, BlockKind::Raw).expect("alloc"))
            .collect();
        tx.commit().expect("commit");
        let generation = s.stats().generation;
        std::thread::scope(|scope| {
            let (s, heads) = (&s, &heads);
            scope.spawn(move || {
                for k in 0..200u64 {
                    let mut tx = s.begin().expect("begin");
                    let at = heads[(k % 3) as usize] * ps + HEADER_SIZE as u64;
                    tx.write(at, &[k as u8; 300]).expect("write");
                    tx.commit().expect("commit (busy thread)");
                }
            });
            scope.spawn(move || {
                for k in 0..60u64 {
                    let mut tx = s.begin().expect("begin");
                    let at = heads[3 + (k % 3) as usize] * ps + HEADER_SIZE as u64;
                    for j in 0..3 {
                        let before = [0u8; 100];
                        tx.write_with_before(at + j * 100, &before, &[(k + j) as u8 | 1; 100])
                            .expect("write");
                        tx.log_early().expect("log_early");
                    }
                    if k % 5 == 4 {
                        tx.abort();
                    } else {
                        tx.commit().expect("commit (early-logging thread)");
                    }
                }
            });
        });
        s.wait_for_checkpointer();
        checkpoints += s.stats().generation - generation;
        let running = images(&s, &heads);
        drop(s);
        let ro = StoreOptions {
            read_only: true,
            ..opts.clone()
        };
        let s = Store::open(vfs, p, ro).expect("reopen");
        let recovered = images(&s, &heads);
        for (i, (a, b)) in running.iter().zip(&recovered).enumerate() {
            assert!(
                a[HEADER_SIZE..] == b[HEADER_SIZE..],
                "round {round}: block {} differs between the running store and recovery",
                heads[i]
            );
        }
    }
    assert!(
        checkpoints >= rounds,
        "{checkpoints} checkpoints in {rounds} rounds"
    );
}

/// Threads commit until the one I/O call made to fail fails (the log's
/// write or sync of some commit): every thread returns — the commits that
/// had appended after the failing one do not wait for it to apply — the
/// store is poisoned, and reopening recovers.
#[test]
fn a_failed_commit_holds_up_no_other() {
    let p = Path::new("/db");
    let opts = log_only();
    let create = |inner: &CrashVfs| -> Vec<u64> {
        let s = Store::create(Arc::new(inner.clone()), p, log_only()).expect("create");
        let mut tx = s.begin().expect("begin");
        let heads = (0..BLOCKS)
            .map(|_| tx.alloc(1, BlockKind::Raw).expect("alloc"))
            .collect();
        tx.commit().expect("commit");
        heads
    };
    let open_calls = {
        let inner = CrashVfs::new();
        create(&inner);
        let cd = CountdownVfs::new(Arc::new(inner), 0, false);
        drop(Store::open(Arc::new(cd.clone()), p, log_only()).expect("open"));
        cd.calls()
    };
    for fail_at in (open_calls + 1..open_calls + 80).step_by(5) {
        let inner = CrashVfs::new();
        let heads = create(&inner);
        let (sent, got) = std::sync::mpsc::channel();
        let vfs = inner.clone();
        let shared = heads.clone();
        std::thread::spawn(move || {
            let heads = shared;
            let cd = CountdownVfs::new(Arc::new(vfs), fail_at, false);
            let s = Store::open(Arc::new(cd.clone()), p, log_only()).expect("open");
            let ps = s.page_size() as u64;
            let failed = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (s, heads) = (&s, &heads);
                        scope.spawn(move || {
                            for k in 0..COMMITS {
                                let mut tx = match s.begin() {
                                    Ok(tx) => tx,
                                    Err(_) => return true,
                                };
                                let at =
                                    heads[((t + k) % BLOCKS) as usize] * ps + HEADER_SIZE as u64;
                                tx.write(at, &[k as u8; 64]).expect("write");
                                if tx.commit().is_err() {
                                    return true;
                                }
                            }
                            false
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().expect("worker"))
                    .filter(|&f| f)
                    .count()
            });
            let poisoned = matches!(s.begin(), Err(amber::Error::Poisoned { .. }));
            // A failure to publish the log's end to readers (`-readers`)
            // fails no commit: the commits are durable.
            let harmless = cd.failed_file() == Some(readers_path(p));
            let _ = sent.send((failed, poisoned, harmless));
        });
        let (failed, poisoned, harmless) = match got.recv_timeout(Duration::from_secs(120)) {
            Ok(x) => x,
            Err(RecvTimeoutError::Timeout) => {
                panic!("call {fail_at}: committers still waiting after 2 minutes")
            }
            Err(RecvTimeoutError::Disconnected) => panic!("call {fail_at}: the test thread failed"),
        };
        assert!(
            (failed > 0 && poisoned) || (harmless && failed == 0 && !poisoned),
            "call {fail_at}: failed {failed}, poisoned {poisoned}"
        );
        let s = Store::open(Arc::new(inner), p, opts.clone())
            .unwrap_or_else(|e| panic!("call {fail_at}: reopen: {e}"));
        images(&s, &heads);
    }
}
