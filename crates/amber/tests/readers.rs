//! Readers beside the writer: a read-only handle sees the committed state
//! of its snapshot, whatever the writer commits and checkpoints meanwhile,
//! until it refreshes; the writer's checkpoints wait for readers whose
//! snapshot is older than the log's end; readers come and go in this
//! process and in others, and a reader that dies frees its slot.
//!
//! The checked state is an account book: every commit moves money between
//! accounts (the total stays the same), bumps a commit counter, and appends
//! the counter to a history vector — so a reader that saw part of a commit,
//! or an uncommitted one, finds a wrong total, a history that disagrees
//! with the counter, or a counter that went backwards.

use amber::{Db, Error, Options, PRef, PVec, Persistent};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Persistent)]
#[repr(C)]
struct Book {
    commits: u64,
    accounts: [u64; 16],
    history: PVec<u64>,
    /// A new object each commit, linked from the book: a reader follows
    /// pointers into blocks allocated after its snapshot.
    latest: Option<PRef<Entry>>,
}

#[derive(Persistent)]
#[repr(C)]
struct Entry {
    commit: u64,
    previous: Option<PRef<Entry>>,
}

const TOTAL: u64 = 16 * 1000;

fn create(path: &Path) -> Db {
    let mut db = Db::create(path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let book = tx
        .alloc(Book {
            commits: 0,
            accounts: [1000; 16],
            history: PVec::new(),
            latest: None,
        })
        .expect("alloc");
    tx.set_root("book", book).expect("root");
    tx.commit().expect("commit");
    db
}

/// One commit: moves money, counts, records, links a new entry.
fn commit(db: &mut Db, seed: u64) {
    let book: PRef<Book> = db.root("book").expect("root").expect("book");
    let mut tx = db.begin().expect("begin");
    let b = tx.get_mut(book);
    let (from, to) = ((seed % 16) as usize, ((seed / 16) % 16) as usize);
    let amount = (seed * 7919) % 50;
    let amount = amount.min(b.accounts[from]);
    b.accounts[from] -= amount;
    b.accounts[to] += amount;
    b.commits += 1;
    let n = b.commits;
    let previous = b.latest;
    tx.push(book, |b| &mut b.history, n).expect("push");
    let e = tx
        .alloc(Entry {
            commit: n,
            previous,
        })
        .expect("entry");
    tx.get_mut(book).latest = Some(e);
    tx.commit().expect("commit");
}

/// Checks the reader's state; returns its commit counter.
fn check(db: &Db, ctx: &str) -> u64 {
    let book: PRef<Book> = db.root("book").expect("root").expect("book");
    let b = db
        .try_get(book)
        .unwrap_or_else(|e| panic!("{ctx}: book: {e}"));
    let total: u64 = b.accounts.iter().sum();
    assert_eq!(total, TOTAL, "{ctx}: a commit seen in part");
    let history = db.slice(&b.history);
    assert_eq!(
        history.len() as u64,
        b.commits,
        "{ctx}: history against counter"
    );
    assert!(
        history.iter().enumerate().all(|(i, &c)| c == i as u64 + 1),
        "{ctx}: history out of order"
    );
    // The chain of entries: one per commit, newest first.
    let mut at = b.latest;
    let mut expect = b.commits;
    while let Some(e) = at {
        let e = db
            .try_get(e)
            .unwrap_or_else(|err| panic!("{ctx}: entry {expect}: {err}"));
        assert_eq!(e.commit, expect, "{ctx}: entry chain");
        expect -= 1;
        at = e.previous;
    }
    assert_eq!(expect, 0, "{ctx}: entry chain too short");
    b.commits
}

/// The writer process, killed with the test if it fails first (a writer
/// left running commits forever).
struct Writer(std::process::Child);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_reader_sees_its_snapshot_until_it_refreshes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("book.amber");
    let mut w = create(&path);
    for s in 0..5 {
        commit(&mut w, s);
    }
    let mut r = Db::open_read_only(&path, Options::default()).expect("reader");
    assert_eq!(check(&r, "at open"), 5);
    assert!(
        matches!(r.begin(), Err(Error::Invalid(_))),
        "a reader cannot write"
    );
    let mut r2 = Db::open_read_only(&path, Options::default()).expect("second reader");
    for s in 5..20 {
        commit(&mut w, s);
    }
    assert_eq!(
        check(&r, "before refresh"),
        5,
        "the snapshot does not move by itself"
    );
    // The writer's checkpoint waits for the readers behind.
    let e = w.checkpoint().expect_err("deferred");
    assert!(e.to_string().contains("2 reader(s)"), "{e}");
    assert!(r.refresh().expect("refresh"));
    assert_eq!(check(&r, "after refresh"), 20);
    assert!(!r.refresh().expect("refresh"), "nothing new");
    let e = w.checkpoint().expect_err("one reader still behind");
    assert!(e.to_string().contains("1 reader(s)"), "{e}");
    assert!(r2.refresh().expect("refresh"));
    assert_eq!(check(&r2, "second reader"), 20);
    w.checkpoint()
        .expect("every reader is at the end: the checkpoint runs");
    // Past the checkpoint: the readers reload it.
    for s in 20..30 {
        commit(&mut w, s);
    }
    assert_eq!(check(&r, "before the second refresh"), 20);
    assert!(r.refresh().expect("refresh after a checkpoint"));
    assert_eq!(check(&r, "after a checkpoint"), 30);
    r2.close().expect("close a reader");
    w.close()
        .expect("close the writer (its checkpoint waits for r)");
    // The writer is gone: a refresh reads the log to its end.
    assert!(!r.refresh().expect("refresh without a writer") || check(&r, "no writer") == 30);
    assert_eq!(check(&r, "no writer"), 30);
    r.close().expect("close");
    // A new writer, and the reader's slot is free again.
    let mut w = Db::open(&path, Options::default()).expect("reopen");
    commit(&mut w, 30);
    w.checkpoint().expect("no reader left");
    w.close().expect("close");
}

/// A reader in this process beside a writer in a child process that is
/// killed at random points of its commits, again and again: every refresh
/// shows a whole commit, the counter never goes back, and after the last
/// kill the reader reaches the last commit the writer made durable.
#[test]
fn readers_beside_a_killed_writer_see_whole_commits() {
    if let Ok(dir) = std::env::var("AMBER_READERS_CHILD") {
        let path = Path::new(&dir).join("book.amber");
        let mut w = Db::open(&path, Options::default()).expect("child: open");
        let start: u64 = std::env::var("AMBER_READERS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        for s in start.. {
            commit(&mut w, s);
            if s % 50 == 0 {
                // Checkpoints are deferred while the reader is behind, and
                // run when it has caught up.
                let _ = w.checkpoint();
            }
        }
        unreachable!();
    }
    let rounds: u64 = std::env::var("AMBER_READERS_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("book.amber");
    create(&path).close().expect("close");
    let mut r = Db::open_read_only(&path, Options::default()).expect("reader");
    let mut seen = check(&r, "start");
    let exe = std::env::current_exe().expect("exe");
    let mut refreshes = 0u64;
    for round in 0..rounds {
        let mut child = Writer(
            Command::new(&exe)
                .args([
                    "--exact",
                    "readers_beside_a_killed_writer_see_whole_commits",
                    "--nocapture",
                ])
                .env("AMBER_READERS_CHILD", dir.path())
                .env("AMBER_READERS_SEED", (round * 100_000).to_string())
                .spawn()
                .expect("spawn writer"),
        );
        let until = Instant::now() + Duration::from_millis(300 + 150 * (round % 4));
        while Instant::now() < until {
            r.refresh().expect("refresh beside the writer");
            let now = check(&r, &format!("round {round}"));
            assert!(
                now >= seen,
                "round {round}: the counter went back {seen} → {now}"
            );
            seen = now;
            refreshes += 1;
        }
        child.0.kill().expect("kill writer");
        child.0.wait().expect("reap");
        // The writer died holding no lock: the reader still refreshes, to
        // the last commit that reached the log.
        r.refresh().expect("refresh after the kill");
        let now = check(&r, &format!("after kill {round}"));
        assert!(now >= seen);
        seen = now;
    }
    assert!(seen > 0, "the writer committed nothing in {rounds} rounds");
    r.close().expect("close");
    // A writer opening now recovers exactly what the reader saw last.
    let w = Db::open(&path, Options::default()).expect("recover");
    let book: PRef<Book> = w.root("book").expect("root").expect("book");
    assert_eq!(w.get(book).commits, seen, "{refreshes} refreshes");
    eprintln!("readers: {rounds} kills, {refreshes} refreshes, {seen} commits seen");
    w.close().expect("close");
}

/// A collection replaces the page file, which a reader would go on
/// reading: it is refused while a reader has the database open, and runs
/// once the reader is gone; a reader opened afterwards sees the collected
/// file.
#[test]
fn a_collection_waits_for_no_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("book.amber");
    let mut w = create(&path);
    for s in 0..10 {
        commit(&mut w, s);
    }
    let r = Db::open_read_only(&path, Options::default()).expect("reader");
    let e = w.collect().expect_err("a reader is open");
    assert!(
        e.to_string().contains("reader(s) have the database open"),
        "{e}"
    );
    assert_eq!(check(&r, "beside the refused collection"), 10);
    r.close().expect("close the reader");
    let w = Db::open(&path, Options::default()).expect("reopen the writer");
    let (w, stats) = w.collect().expect("no reader: the collection runs");
    assert!(stats.objects_live > 0, "{stats:?}");
    let r = Db::open_read_only(&path, Options::default()).expect("a reader after");
    assert_eq!(check(&r, "after the collection"), 10);
    r.close().expect("close");
    w.close().expect("close");
}

#[derive(Persistent)]
#[repr(C)]
struct Bulk {
    items: PVec<u64>,
}

/// A writer's checkpoint frees the blocks of its old metadata, and later
/// commits place blocks of other shapes there: a reader whose fetch
/// clusters covered the old metadata meets the new blocks after a refresh.
#[test]
fn a_reader_meets_blocks_placed_where_the_old_metadata_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("book.amber");
    let mut w = create(&path);
    let mut tx = w.begin().expect("begin");
    let bulk = tx.alloc(Bulk { items: PVec::new() }).expect("alloc");
    tx.set_root("bulk", bulk).expect("root");
    tx.commit().expect("commit");
    let mut r = Db::open_read_only(&path, Options::default()).expect("reader");
    let mut n = 0u64;
    for round in 0..40u64 {
        commit(&mut w, round);
        let mut tx = w.begin().expect("begin");
        let more: Vec<u64> = (n..n + 300 + round * 97).collect();
        n += more.len() as u64;
        tx.extend_from_slice(bulk, |b| &mut b.items, &more)
            .expect("extend");
        tx.commit().expect("commit");
        assert!(r.refresh().expect("refresh"));
        assert_eq!(check(&r, &format!("round {round}")), round + 1);
        let rb: PRef<Bulk> = r.root("bulk").expect("root").expect("bulk");
        let b = r
            .try_get(rb)
            .unwrap_or_else(|e| panic!("round {round}: bulk: {e}"));
        let items = r.slice(&b.items);
        assert_eq!(items.len() as u64, n, "round {round}");
        assert!(items.iter().enumerate().all(|(i, &v)| v == i as u64));
        w.checkpoint().expect("the reader is at the end");
    }
    r.close().expect("close");
    w.close().expect("close");
}

/// A reader refreshing across every kind of checkpoint the writer makes:
/// none (the log read on from where the last refresh left it); one that
/// installs commits and recycles the log; one forced with nothing new
/// (the log's positions kept, a new superblock generation, new metadata
/// blocks that later commits may reuse) — each also with the reader table
/// still showing the generation from before the checkpoint, as a reader
/// may read it while the checkpoint runs — and a table with no published
/// generation (a writer of an earlier build): every refresh shows exactly
/// the writer's last commit.
#[test]
fn a_reader_follows_every_kind_of_checkpoint() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("book.amber");
    let mut w = create(&path);
    let mut r = Db::open_read_only(&path, Options::default()).expect("reader");
    let table = {
        let mut p = path.clone().into_os_string();
        p.push("-readers");
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(std::path::PathBuf::from(p))
            .expect("reader table")
    };
    let generation = || {
        let mut g = [0u8; 16];
        table
            .read_exact_at(&mut g, 48)
            .expect("read the generation");
        g
    };
    let mut n = 0;
    for round in 0..16u64 {
        for _ in 0..=round % 3 {
            commit(&mut w, n);
            n += 1;
        }
        let before = generation();
        match round % 4 {
            0 => {}
            1 => {
                assert!(r.refresh().expect("refresh before the checkpoint"));
                w.checkpoint().expect("checkpoint");
            }
            2 => {
                assert!(r.refresh().expect("refresh before the checkpoint"));
                w.checkpoint().expect("checkpoint");
                assert!(r.refresh().expect("refresh after it"));
                let before = generation();
                w.checkpoint().expect("a second one, with nothing new");
                if round % 8 == 2 {
                    table.write_all_at(&before, 48).expect("stale generation");
                }
            }
            _ => table.write_all_at(&[0u8; 16], 48).expect("no generation"),
        }
        if round % 8 == 1 {
            table.write_all_at(&before, 48).expect("stale generation");
        }
        commit(&mut w, n);
        n += 1;
        assert!(r.refresh().expect("refresh"), "round {round}");
        assert_eq!(check(&r, &format!("round {round}")), n, "round {round}");
    }
    r.close().expect("close");
    w.close().expect("close");
}
