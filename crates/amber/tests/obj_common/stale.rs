//! Stale pointers: a pointer to a freed object, or to an object allocated by
//! a transaction that aborted, never reads another object and never kills
//! the process. `try_get`/`smart` return `Error::Dangling`, `get` panics
//! naming the pointer, `free` of a freed object is `Error::Dangling`, and
//! no commit stores a pointer into the space of an aborted transaction.
//! Freed slots and aborted space are not handed out again in the session:
//! objects allocated afterwards land elsewhere, whatever their type and
//! size. Run at several page sizes, on both backends.

use super::{Cfg, cached, check_backend, open, opts};
use amber::{Db, Error, PRef, PVec, Persistent, Smart, Tx};
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

#[derive(Persistent)]
#[repr(C)]
pub struct Anchor {
    pub id: u64,
    pub nodes: PVec<PRef<Node>>,
}

/// A node with a non-null pointer: read as zeros it would be a null
/// `PRef`, which safe code must never see.
#[derive(Persistent)]
#[repr(C)]
pub struct Node {
    pub id: u64,
    pub anchor: PRef<Anchor>,
    pub next: Option<PRef<Node>>,
    pub items: PVec<u64>,
}

/// Larger than a page at every page size tested: a block of several pages.
#[derive(Persistent)]
#[repr(C)]
pub struct Big {
    pub id: u64,
    pub anchor: PRef<Anchor>,
    pub data: [u64; 2600],
}

fn node(tx: &mut Tx<'_>, anchor: PRef<Anchor>, id: u64, near: Option<PRef<Node>>) -> PRef<Node> {
    let n = Node {
        id,
        anchor,
        next: None,
        items: PVec::new(),
    };
    match near {
        Some(p) => tx.alloc_near(n, p),
        None => tx.alloc(n),
    }
    .expect("alloc node")
}

fn big(tx: &mut Tx<'_>, anchor: PRef<Anchor>, id: u64) -> PRef<Big> {
    tx.alloc(Big {
        id,
        anchor,
        data: [id; 2600],
    })
    .expect("alloc big")
}

thread_local! {
    /// Set while this thread runs code expected to panic: the hook below
    /// keeps those panics out of the output (the userfaultfd suite's
    /// harness does not capture it).
    static EXPECTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs, once, a panic hook that stays quiet for expected panics.
fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !EXPECTING.with(|e| e.get()) {
                default(info);
            }
        }));
    });
}

/// The message of the panic `f` raises; fails if it returns.
fn panic_message<R>(f: impl FnOnce() -> R) -> String {
    quiet_expected_panics();
    EXPECTING.with(|e| e.set(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    EXPECTING.with(|e| e.set(false));
    match result {
        Ok(_) => panic!("expected a panic naming a dangling pointer"),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

/// Checks that `p` is refused as dangling by every way of following it.
fn refused<T: Persistent>(db: &Db, p: PRef<T>, what: &str) {
    match db.try_get(p) {
        Err(Error::Dangling { what: w }) => {
            assert!(w.contains(&format!("{:#x}", p.addr())), "{what}: {w}")
        }
        Err(e) => panic!("{what}: try_get gave {e}, not Dangling"),
        Ok(_) => panic!("{what}: try_get followed a stale pointer"),
    }
    let msg = panic_message(|| db.get(p) as *const T as usize);
    assert!(
        msg.contains("dangling") && msg.contains(&format!("{:#x}", p.addr())),
        "{what}: the panic does not name the pointer: {msg}"
    );
}

/// Persistent addresses of `ps`.
fn paddrs<T: Persistent>(tx: &Tx<'_>, ps: &[PRef<T>]) -> BTreeSet<u64> {
    ps.iter()
        .map(|&p| tx.to_smart(p).expect("smart").paddr())
        .collect()
}

fn setup(db: &mut Db, n: u64) -> (PRef<Anchor>, Vec<PRef<Node>>) {
    let mut tx = db.begin().expect("begin");
    let a = tx
        .alloc(Anchor {
            id: 1,
            nodes: PVec::new(),
        })
        .expect("alloc");
    let mut nodes = Vec::new();
    for i in 0..n {
        let p = node(&mut tx, a, i, nodes.last().copied());
        tx.push(p, |x| &mut x.items, i).expect("push");
        tx.push(a, |x| &mut x.nodes, p).expect("push");
        nodes.push(p);
    }
    tx.set_root("anchor", a).expect("root");
    tx.commit().expect("commit");
    (a, nodes)
}

/// Freed objects: never handed out again, refused when followed, and freed
/// only once.
pub fn freed(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("freed.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let (a, nodes) = setup(&mut db, 200);
    let gone: Vec<PRef<Node>> = nodes.iter().copied().step_by(3).collect();
    let mut tx = db.begin().expect("begin");
    let gone_pa = paddrs(&tx, &gone);
    for &p in &gone {
        tx.free(p).expect("free");
    }
    // Freed in this transaction: freeing again is refused already.
    assert!(matches!(tx.free(gone[0]), Err(Error::Dangling { .. })));
    // New objects of the same type and size, in the same transaction and
    // the next: none lands on a freed slot.
    let fresh: Vec<_> = (0..100).map(|i| node(&mut tx, a, 1000 + i, None)).collect();
    assert!(
        paddrs(&tx, &fresh).is_disjoint(&gone_pa),
        "a freed slot was reused"
    );
    tx.commit().expect("commit");
    for &p in &gone {
        refused(&db, p, "freed node");
    }
    let mut tx = db.begin().expect("begin");
    assert!(matches!(tx.free(gone[1]), Err(Error::Dangling { .. })));
    assert!(matches!(tx.to_smart(gone[2]), Err(Error::Dangling { .. })));
    assert!(matches!(
        tx.set_root("x", gone[3]),
        Err(Error::Dangling { .. })
    ));
    let fresh: Vec<_> = (0..100)
        .map(|i| node(&mut tx, a, 2000 + i, Some(gone[5])))
        .collect();
    assert!(
        paddrs(&tx, &fresh).is_disjoint(&gone_pa),
        "a freed slot was reused"
    );
    tx.commit().expect("commit");
    // The live ones read as before; after reopen (a new session) too, and
    // freed slots are still not reused.
    for (i, &p) in nodes.iter().enumerate() {
        if i % 3 != 0 {
            assert_eq!(db.get(p).id, i as u64);
            assert_eq!(db.slice(&db.get(p).items), &[i as u64]);
        }
    }
    db.close().expect("close");
    let mut db = open(&path, opts(b));
    let a: PRef<Anchor> = db.root("anchor").expect("root").expect("anchor");
    let all = db.slice(&db.get(a).nodes).to_vec();
    let mut tx = db.begin().expect("begin");
    let gone: Vec<PRef<Node>> = all.iter().copied().step_by(3).collect();
    for &p in &gone {
        assert!(matches!(tx.try_get(p), Err(Error::Dangling { .. })));
    }
    // (A freed object has no smart form: compare addresses of this session.)
    let gone_va: BTreeSet<u64> = gone.iter().map(|p| p.addr()).collect();
    let fresh: Vec<_> = (0..300)
        .map(|i| node(&mut tx, a, 3000 + i, Some(all[1])))
        .collect();
    assert!(
        fresh.iter().all(|p| !gone_va.contains(&p.addr())),
        "a freed slot was reused after reopen"
    );
    tx.commit().expect("commit");
    drop(db);
}

/// Objects of a transaction that aborted: small ones in existing pages and
/// in new pages, and blocks of several pages. Refused when followed, the
/// space not handed out again this session, and no commit may store a
/// pointer to them.
pub fn aborted(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("aborted.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let (a, nodes) = setup(&mut db, 100);
    let mut tx = db.begin().expect("begin");
    // Next to committed nodes (existing pages), then many (new pages), then
    // big ones (blocks of several pages); vectors grown too.
    let mut small: Vec<PRef<Node>> = (0..20)
        .map(|i| node(&mut tx, a, 500 + i, Some(nodes[i as usize * 5])))
        .collect();
    small.extend((0..400).map(|i| node(&mut tx, a, 600 + i, None)));
    let bigs: Vec<PRef<Big>> = (0..4).map(|i| big(&mut tx, a, 900 + i)).collect();
    for &p in &small[..50] {
        tx.push(p, |x| &mut x.items, 7).expect("push");
    }
    let smart: Smart<Node> = tx.to_smart(small[30]).expect("smart");
    let small_pa = paddrs(&tx, &small);
    let big_pa = paddrs(&tx, &bigs);
    tx.abort().expect("abort");

    for &p in &small {
        refused(&db, p, "aborted node");
    }
    for &p in &bigs {
        refused(&db, p, "aborted big object");
    }
    assert!(matches!(db.smart(smart), Err(Error::Dangling { .. })));
    // The dead space (blocks still reserved in the store) is not committed
    // data: deep verification of the open database finds nothing.
    let rep = db.verify_deep().expect("deep verification");
    assert!(rep.is_clean(), "{rep:?}");
    // The committed nodes are intact.
    for (i, &p) in nodes.iter().enumerate() {
        assert_eq!((db.get(p).id, db.get(p).anchor), (i as u64, a));
    }

    // Allocating again, the same shapes: nothing lands in the aborted space.
    let mut tx = db.begin().expect("begin");
    let mut again: Vec<PRef<Node>> = (0..20)
        .map(|i| node(&mut tx, a, 700 + i, Some(nodes[i as usize * 5])))
        .collect();
    again.extend((0..400).map(|i| node(&mut tx, a, 800 + i, None)));
    let bigs2: Vec<PRef<Big>> = (0..4).map(|i| big(&mut tx, a, 950 + i)).collect();
    assert!(
        paddrs(&tx, &again).is_disjoint(&small_pa),
        "aborted space reused"
    );
    assert!(
        paddrs(&tx, &bigs2).is_disjoint(&big_pa),
        "aborted blocks reused"
    );
    // A pointer into aborted space cannot be committed, whatever carries it.
    assert!(matches!(tx.to_smart(small[3]), Err(Error::Dangling { .. })));
    assert!(matches!(
        tx.set_root("s", small[3]),
        Err(Error::Dangling { .. })
    ));
    tx.commit().expect("commit");
    let mut tx = db.begin().expect("begin");
    tx.get_mut(nodes[0]).next = Some(small[1]);
    match tx.commit() {
        Err(Error::Dangling { .. }) => {}
        other => panic!("committing a pointer to an aborted object: {other:?}"),
    }
    assert_eq!(
        db.get(nodes[0]).next,
        None,
        "the failed commit was rolled back"
    );
    let mut tx = db.begin().expect("begin");
    // A smart pointer into aborted space, stored in a new object's field
    // through a type that holds one, is refused too.
    let holder = tx.alloc(SmartHolder { to: smart, pad: 0 }).expect("alloc");
    let _ = holder;
    match tx.commit() {
        Err(Error::Dangling { .. }) => {}
        other => panic!("committing a smart pointer to an aborted object: {other:?}"),
    }

    // Under a cache budget the aborted blocks' frames fault again: still
    // refused, never a fatal fault.
    db.close().expect("close");
    let db = open(&path, cached(b, 8 * b.page_size as u64));
    let a: PRef<Anchor> = db.root("anchor").expect("root").expect("anchor");
    let all = db.slice(&db.get(a).nodes).to_vec();
    assert_eq!(all.len(), 100);
    for (i, &p) in all.iter().enumerate() {
        assert_eq!(db.get(p).id, i as u64);
    }
    drop(db);
}

/// A type holding a smart pointer, for the commit check of smart pointers.
#[derive(Persistent)]
#[repr(C)]
pub struct SmartHolder {
    pub to: Smart<Node>,
    pub pad: u64,
}

/// Aborted space, faulted back in after eviction in the same session: the
/// stale pointers still get `Dangling`, never a fatal fault or zeros.
pub fn aborted_then_evicted(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("evicted.amber");
    {
        let mut db = Db::create(&path, opts(b)).expect("create");
        setup(&mut db, 50);
        db.close().expect("close");
    }
    let mut db = open(&path, cached(b, 8 * b.page_size as u64));
    check_backend(&db, b);
    let a: PRef<Anchor> = db.root("anchor").expect("root").expect("anchor");
    let mut tx = db.begin().expect("begin");
    let bigs: Vec<PRef<Big>> = (0..6).map(|i| big(&mut tx, a, i)).collect();
    let small: Vec<PRef<Node>> = (0..200).map(|i| node(&mut tx, a, 100 + i, None)).collect();
    tx.abort().expect("abort");
    // Touch enough committed pages to push every dead frame out.
    let all = db.slice(&db.get(a).nodes).to_vec();
    for _ in 0..3 {
        for (i, &p) in all.iter().enumerate() {
            assert_eq!(db.get(p).id, i as u64);
        }
    }
    for &p in &bigs {
        refused(&db, p, "aborted big object after eviction");
    }
    for &p in small.iter().step_by(17) {
        refused(&db, p, "aborted node after eviction");
    }
}
