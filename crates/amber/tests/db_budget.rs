//! Transactions larger than the cache budget keep working: dirty pages are
//! spilled (their changes logged early and kept in persistent form) and come
//! back on the next touch; commit, abort and recovery stay exact.

use amber::BackendChoice;
use amber::{Db, Options, PRef, Persistent};

#[derive(Persistent)]
#[repr(C)]
struct Big {
    value: u64,
    next: Option<PRef<Big>>,
    payload: [u8; 1000],
}

const N: u64 = 6000; // about 6 MB: six times the budget

fn opts(b: BackendChoice) -> Options {
    Options {
        backend: b,
        cache_bytes: Some(1 << 20),
        recovery_buffer_pages: 64,
        ..Options::default()
    }
}

fn walk(db: &Db, head: PRef<Big>) -> Vec<u64> {
    let mut out = Vec::new();
    let mut n = Some(head);
    while let Some(p) = n {
        let b = db.get(p);
        assert_eq!(b.payload[999], (b.value % 251) as u8);
        out.push(b.value);
        n = b.next;
    }
    out
}

fn larger_than_budget(b: BackendChoice) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    let mut db = Db::create(&p, opts(b)).unwrap();
    // Creation alone dirties six budgets' worth of pages.
    let mut tx = db.begin().unwrap();
    let mut head: Option<PRef<Big>> = None;
    for i in 0..N {
        let mut payload = [0u8; 1000];
        payload[999] = (i % 251) as u8;
        head = Some(
            tx.alloc(Big {
                value: i,
                next: head,
                payload,
            })
            .unwrap(),
        );
    }
    tx.set_root("head", head.unwrap()).unwrap();
    tx.commit().unwrap();
    let s = db.stats();
    assert!(s.spilled > 0, "{s:?}");
    assert!(s.resident_frames <= 256 + 64, "{s:?}");
    let head: PRef<Big> = db.root("head").unwrap().unwrap();
    let want: Vec<u64> = (0..N).rev().collect();
    assert_eq!(walk(&db, head), want);

    // An update of everything, aborted: nothing changes.
    let mut tx = db.begin().unwrap();
    let mut n = Some(head);
    while let Some(p) = n {
        let b = tx.get_mut(p);
        b.value += 1_000_000;
        b.payload[999] = (b.value % 251) as u8;
        n = b.next;
    }
    tx.abort().unwrap();
    assert_eq!(walk(&db, head), want);

    // The same update committed.
    let mut tx = db.begin().unwrap();
    let mut n = Some(head);
    while let Some(p) = n {
        let b = tx.get_mut(p);
        b.value += 1_000_000;
        b.payload[999] = (b.value % 251) as u8;
        n = b.next;
    }
    let st = tx.commit().unwrap();
    let want2: Vec<u64> = want.iter().map(|v| v + 1_000_000).collect();
    assert_eq!(walk(&db, head), want2);
    assert!(db.stats().resident_frames <= 256 + 64, "{:?}", db.stats());
    eprintln!("{b:?}: {:?} / {st:?}", db.stats());
    drop(db); // recovery from the log, spilled records included
    let db = Db::open(&p, opts(b)).unwrap();
    let head: PRef<Big> = db.root("head").unwrap().unwrap();
    assert_eq!(walk(&db, head), want2);
}

#[test]
fn larger_than_budget_uffd() {
    larger_than_budget(BackendChoice::Uffd);
}

#[test]
fn larger_than_budget_sigsegv() {
    larger_than_budget(BackendChoice::Sigsegv);
}
