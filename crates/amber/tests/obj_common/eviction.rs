//! Eviction under a cache budget while a transaction writes: regressions
//! found by the round-trip suite.
//!
//! - A fault with a fetch cluster must not evict the block it was taken for
//!   (the neighbours' budget enforcement used to pick it once every older
//!   block was written and unevictable, and the fault then aborted the
//!   process: "the fault service returned without installing frame N").
//! - With userfaultfd, the handler thread must not evict while the program
//!   runs: it used to wake the faulting thread at the install and enforce the
//!   budget afterwards, so a page the program wrote meanwhile could be
//!   dropped (and a commit's just-listed written pages evicted before being
//!   copied out), losing committed changes.

use super::Cfg;
use super::{cached, check_backend, child_scenario, open, opts, run_child};
use amber::BackendChoice;
use amber::{Db, Options, PRef, PVec, Persistent};

/// One object per page: 4016 body bytes, 4056 with the headers.
#[derive(Persistent)]
#[repr(C)]
pub struct Slab {
    pub id: u64,
    pub v: u64,
    pub pad: [u8; 4000],
}

#[derive(Persistent)]
#[repr(C)]
pub struct Slabs {
    pub all: PVec<PRef<Slab>>,
}

fn create(path: &std::path::Path, b: Cfg, n: u64) {
    let mut db = Db::create(path, opts(b)).expect("create");
    let mut tx = db.begin().expect("begin");
    let root = tx.alloc(Slabs { all: PVec::new() }).expect("alloc");
    for id in 0..n {
        let s = tx
            .alloc(Slab {
                id,
                v: 0,
                pad: [id as u8; 4000],
            })
            .expect("alloc");
        tx.push(root, |r| &mut r.all, s).expect("push");
    }
    tx.set_root("slabs", root).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
}

fn slabs(db: &Db) -> Vec<PRef<Slab>> {
    let r: PRef<Slabs> = db.root("slabs").expect("root").expect("slabs");
    db.slice(&db.get(r).all).to_vec()
}

/// Writes to more pages than the budget holds, then reads pages that are not
/// resident, with a fetch cluster of 4: every fault must find its page.
/// Runs in a child, because the failure was an abort of the process.
pub fn cluster_keeps_faulting_block(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("cluster") {
        let path = super::child_dir().join("db");
        let o = Options {
            fetch_cluster: 4,
            ..cached(b, 4 * b.page_size as u64)
        };
        let mut db = open(&path, o);
        check_backend(&db, b);
        let s = slabs(&db);
        let mut tx = db.begin().expect("begin");
        for i in (0..s.len()).step_by(8) {
            tx.get_mut(s[i]).v = 1;
        }
        for i in (4..s.len()).step_by(8) {
            assert_eq!(tx.get(s[i]).id, i as u64);
        }
        tx.commit().expect("commit");
        for (i, &p) in s.iter().enumerate() {
            assert_eq!(db.get(p).v, u64::from(i % 8 == 0), "slab {i}");
        }
        println!("cluster scenario done");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    create(&dir.path().join("db"), b, 64);
    let out = run_child(test, "cluster", dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("scenario done"),
        "the child failed ({}): {stderr}",
        out.status
    );
}

/// Faults a page in, then at once writes the page faulted in just before
/// (the one eviction picks next), over and over, with a four-page budget;
/// commits right after the last fault. Every write must be in the database.
pub fn writes_survive_eviction(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let n = 128u64;
    create(&path, b, n);
    let rounds = 30u64;
    for round in 1..=rounds {
        let mut db = open(&path, cached(b, 4 * b.page_size as u64));
        check_backend(&db, b);
        let s = slabs(&db);
        let mut tx = db.begin().expect("begin");
        for k in 1..s.len() - 1 {
            // Touch k (a fault, and an eviction), then write k - 1.
            assert_eq!(tx.get(s[k]).id, k as u64);
            tx.get_mut(s[k - 1]).v = round * 1000 + k as u64 - 1;
        }
        let last = s.len() - 2;
        tx.get_mut(s[last]).v = round * 1000 + last as u64;
        // A last fault, on a page never written, right before the commit:
        // the budget is enforced over a queue of written pages, and the
        // commit lists and re-protects them meanwhile.
        assert_eq!(tx.get(s[last + 1]).id, last as u64 + 1);
        tx.commit().expect("commit");
        for (k, &p) in s.iter().enumerate().take(last + 1) {
            assert_eq!(
                db.get(p).v,
                round * 1000 + k as u64,
                "round {round}, slab {k}"
            );
        }
        if round % 2 == 0 {
            db.close().expect("close");
        }
    }
    let db = open(&path, opts(b));
    for (k, &p) in slabs(&db).iter().enumerate().take(n as usize - 1) {
        assert_eq!(
            db.get(p).v,
            rounds * 1000 + k as u64,
            "after reopen, slab {k}"
        );
    }
}

/// SIGSEGV recovery buffer of one page under a small cache budget: a page
/// whose changes were logged early (the buffer overflowed) is write-protected
/// again, and must still not be evicted before the transaction ends: its
/// changes are not in the store's committed image yet, so a refetch would
/// bring back the old bytes (it did: reads in the transaction saw them, and
/// memory kept them after the commit).
pub fn early_logged_pages_stay(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let n = 48u64;
    create(&path, b, n);
    let o = Options {
        recovery_buffer_pages: 1,
        ..cached(b, 4 * b.page_size as u64)
    };
    let mut db = open(&path, o.clone());
    check_backend(&db, b);
    let s = slabs(&db);
    let mut tx = db.begin().expect("begin");
    // Write every fourth page: the buffer overflows at once, pages are
    // logged early, and the reads in between evict.
    for round in 1..=2u64 {
        for k in (0..s.len()).step_by(4) {
            tx.get_mut(s[k]).v = round * 100 + k as u64;
            assert_eq!(tx.get(s[(k + 2) % s.len()]).id, ((k + 2) % s.len()) as u64);
        }
        for k in (0..s.len()).step_by(4) {
            assert_eq!(
                tx.get(s[k]).v,
                round * 100 + k as u64,
                "in the transaction, slab {k}"
            );
        }
    }
    tx.commit().expect("commit");
    let st = db.stats();
    for (k, &p) in s.iter().enumerate() {
        let want = if k % 4 == 0 { 200 + k as u64 } else { 0 };
        assert_eq!(db.get(p).v, want, "after commit, slab {k}");
    }
    drop(db);
    let db = open(&path, opts(b));
    for (k, &p) in slabs(&db).iter().enumerate() {
        let want = if k % 4 == 0 { 200 + k as u64 } else { 0 };
        assert_eq!(db.get(p).v, want, "after reopen, slab {k}");
    }
    if b.backend == BackendChoice::Sigsegv {
        assert!(st.early_logged > 0, "{st:?}");
    }
}

/// Two threads read the same pages at once under a four-page budget: one
/// thread's fault may evict the block another's fault just installed, before
/// that fault checks it (as when SIGSEGV faults were served in each thread's
/// signal handler; `try_get` still runs the service beside the thread that
/// serves faults). The fault must fetch it again, not abort the
/// process ("the fault service returned without installing frame N").
/// Runs in a child, because the failure was an abort.
pub fn concurrent_readers(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("readers") {
        let db = open(
            &super::child_dir().join("db"),
            cached(b, 4 * b.page_size as u64),
        );
        check_backend(&db, b);
        let s = slabs(&db);
        std::thread::scope(|sc| {
            for t in 0..2usize {
                let (db, s) = (&db, &s);
                sc.spawn(move || {
                    for round in 0..20 {
                        for i in 0..s.len() {
                            let k = if t == 0 { i } else { s.len() - 1 - i };
                            assert_eq!(db.get(s[k]).id, k as u64, "thread {t}, round {round}");
                        }
                    }
                });
            }
        });
        assert!(db.stats().evicted > 0);
        println!("readers scenario done");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    create(&dir.path().join("db"), b, 200);
    let out = run_child(test, "readers", dir.path());
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("scenario done"),
        "the child failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
