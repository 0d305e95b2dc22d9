//! Abort restores exactly. A committed graph; then a transaction that
//! writes existing objects, rewires pointers, frees nodes, grows vectors and
//! byte strings, inserts into the index (splitting nodes), and allocates
//! many new objects, small and large (new pages and page runs); aborted.
//! After it: the database equals the committed model, memory holds no
//! leftover change (an empty commit logs nothing, a one-field commit logs
//! one page), and the store has exactly its old blocks. The next
//! transactions allocate again: the aborted transaction's pages are reused,
//! also by blocks of another shape (single pages where a large object's run
//! was, and the reverse), and the file does not grow past its old end more
//! than the new objects need.

use super::graph::{GBlob, GNode, Model, Op, apply_db, create_root, diff, refs, root_of};
use super::{check_backend, open, opts};
use amber::BackendChoice;
use amber::internals::io::crash::SplitMix;
use amber::{Db, PBytes, PRef, PVec};
use std::collections::BTreeSet;

fn pages_of(db: &Db) -> Vec<(u64, u32)> {
    db.store().blocks()
}

fn node(id: u64) -> GNode {
    GNode {
        id,
        val: 0,
        next: None,
        other: None,
        blob: None,
        kids: PVec::new(),
        nums: PVec::new(),
        name: PBytes::new(),
        pad: [id; super::graph::PAD],
    }
}

fn blob(id: u64) -> GBlob {
    GBlob {
        id,
        owner: None,
        data: [id as u8; super::graph::BLOB],
    }
}

/// New objects, in an order: `true` for a large one (a run of two pages).
fn allocate(tx: &mut amber::Tx<'_>, shapes: &[bool]) -> BTreeSet<u64> {
    let mut pages = BTreeSet::new();
    for (i, &large) in shapes.iter().enumerate() {
        let pa = if large {
            let p = tx.alloc(blob(5000 + i as u64)).expect("alloc blob");
            tx.to_smart(p).expect("paddr").paddr()
        } else {
            let p = tx.alloc(node(5000 + i as u64)).expect("alloc node");
            tx.to_smart(p).expect("paddr").paddr()
        };
        pages.insert(pa >> 12);
    }
    pages
}

pub fn run(b: BackendChoice) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("abort.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut root = create_root(&mut db);
    let mut model = Model::default();
    let mut rng = SplitMix::new(0xab07);
    // A committed graph of 60 nodes, linked, indexed, with blobs.
    for round in 0..3 {
        let mut tx = db.begin().expect("begin");
        let mut r = refs(&tx, root);
        let n = if round == 0 { 60 } else { 40 };
        for i in 0..n {
            let op = if round == 0 && i < 60 {
                Op::Alloc(None)
            } else {
                model.random_op(&mut rng, 80)
            };
            model.apply(&op);
            apply_db(&mut tx, root, &mut r, &op).expect("apply");
        }
        model.apply(&Op::Commit);
        apply_db(&mut tx, root, &mut r, &Op::Commit).expect("apply");
        tx.commit().expect("commit");
    }
    diff(&db, root, &model).expect("committed graph");
    let blocks_before = pages_of(&db);
    let count_before = db.store().stats().page_count;

    // The transaction to abort: every kind of change, and many new objects.
    let mut tx = db.begin().expect("begin");
    let mut r = refs(&tx, root);
    let mut work = model.clone();
    for _ in 0..300 {
        let op = work.random_op(&mut rng, 200);
        work.apply(&op);
        apply_db(&mut tx, root, &mut r, &op).expect("apply");
    }
    for k in 0..400 {
        let id = work.order[k % work.order.len()];
        let op = Op::IdxInsert(1000 + k as u64, id);
        work.apply(&op);
        // Keys beyond the model's range: the index splits.
        tx.index_insert(root, |g| &mut g.idx, 1000 + k as u64, r[&id])
            .expect("insert");
    }
    // Shapes: singles, then a large one, alternating in runs, so that the
    // next transaction's different order puts blocks of other shapes on
    // these pages.
    let shapes: Vec<bool> = (0..120).map(|i| i % 5 == 2).collect();
    let aborted_pages = allocate(&mut tx, &shapes);
    diff(&tx, root, &work)
        .map_err(|e| format!("before abort: {e}"))
        .expect("in-tx");
    tx.abort().expect("abort");

    diff(&db, root, &model).expect("abort restores the committed graph");
    assert_eq!(
        pages_of(&db),
        blocks_before,
        "the store's blocks after abort"
    );
    assert_eq!(db.store().stats().page_count, count_before);
    // Nothing of the aborted transaction is left in memory.
    let tx = db.begin().expect("begin");
    let st = tx.commit().expect("empty commit");
    assert_eq!((st.blocks, st.changed_bytes), (0, 0), "{st:?}");
    let first = model.order[0];
    let mut tx = db.begin().expect("begin");
    let p = refs(&tx, root)[&first];
    tx.get_mut(p).val = 4242;
    let st = tx.commit().expect("commit");
    assert_eq!(st.blocks, 1, "one page written: {st:?}");
    model.nodes.get_mut(&first).expect("node").val = 4242;
    diff(&db, root, &model).expect("after a one-field commit");

    // The pages come back to the same objects allocated again...
    let fresh: BTreeSet<u64> = aborted_pages
        .iter()
        .copied()
        .filter(|&p| p >= count_before)
        .collect();
    assert!(!fresh.is_empty(), "the aborted transaction added no pages");
    let top = aborted_pages.iter().max().expect("pages") + 3;
    let mut tx = db.begin().expect("begin");
    let reused = allocate(&mut tx, &shapes);
    let again = reused.intersection(&fresh).count();
    assert!(
        again * 4 >= fresh.len() * 3,
        "only {again} of the aborted transaction's {} new pages reused",
        fresh.len()
    );
    tx.abort().expect("abort");
    // ... and to objects of other shapes on the same pages (a large object
    // where single pages were, and the reverse): they must not conflict
    // with the frames the aborted blocks left, and the file must not grow
    // much past where the aborted transaction had taken it.
    let shifted: Vec<bool> = (0..120).map(|i| i % 5 == 0).collect();
    let mut tx = db.begin().expect("begin");
    allocate(&mut tx, &shifted);
    tx.commit().expect("commit of the shifted shapes");
    let grown = db.store().stats().page_count;
    assert!(
        grown <= top + (top - count_before),
        "file grew to {grown} pages; the aborted transaction had reached {top}"
    );
    diff(&db, root, &model).expect("after reuse");
    let mut tx = db.begin().expect("begin");
    allocate(&mut tx, &shapes);
    tx.abort().expect("abort");
    let mut tx = db.begin().expect("begin");
    allocate(&mut tx, &shifted);
    tx.commit().expect("commit");
    diff(&db, root, &model).expect("after a second abort and reuse");
    db.close().expect("close");

    // And the database reopens to the same graph (the reused pages hold
    // valid objects).
    let db = open(&path, opts(b));
    root = root_of(&db).expect("root");
    diff(&db, root, &model).expect("after reopen");
    drop(db);
    let v = amber::internals::store::verify::verify(
        std::sync::Arc::new(amber::internals::io::real::RealVfs),
        &path,
    );
    assert!(v.expect("verify").is_ok());
}

/// A freed slot is handed out once. Slots freed and committed, their page
/// evicted; then two objects of that type allocated in one transaction:
/// taking the first slot faults its page in, and the fetch must not record
/// the slot as free again (it did, and the second object took the same slot,
/// overwriting the first).
pub fn freed_slot_reused_once(b: BackendChoice) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("slots.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let root = create_root(&mut db);
    // Ten pages of nodes, then free a few on the first page.
    let mut tx = db.begin().expect("begin");
    let nodes: Vec<PRef<GNode>> = (0..140)
        .map(|i| tx.alloc(node(i)).expect("alloc"))
        .collect();
    for &p in &nodes {
        tx.push(root, |g| &mut g.nodes, p).expect("push");
    }
    tx.commit().expect("commit");
    let mut tx = db.begin().expect("begin");
    for &p in &nodes[1..5] {
        tx.free(p).expect("free");
    }
    tx.commit().expect("commit");
    db.close().expect("close");
    // A cache of four pages: touching other pages evicts the first one.
    let mut db = open(&path, super::cached(b, 16 << 10));
    let root = root_of(&db).expect("root");
    // The first page is fetched (its free slots noted), then evicted.
    let all = db.slice(&db.get(root).nodes).to_vec();
    assert_eq!(db.get(all[0]).id, 0);
    let sum: u64 = all.iter().skip(20).step_by(14).map(|&p| db.get(p).id).sum();
    assert_eq!(sum, (20..140).step_by(14).sum::<u64>());
    assert!(db.stats().evicted > 0, "{:?}", db.stats());
    let mut tx = db.begin().expect("begin");
    let a = tx.alloc(node(100)).expect("alloc");
    let b2 = tx.alloc(node(101)).expect("alloc");
    assert_ne!(a, b2, "one slot handed out twice");
    assert_eq!((tx.get(a).id, tx.get(b2).id), (100, 101));
    tx.commit().expect("commit");
    assert_eq!((db.get(a).id, db.get(b2).id), (100, 101));
}

/// The same with a fetch cluster: making the chosen slot's page resident
/// also fetches the next page, whose free slots are recorded after it, and
/// evicts that page again at once (the only clean one, every other written).
/// The slot taken must be the one whose page was made resident; taking the
/// last listed (the neighbour's, whose page is gone) let the header write
/// refetch that page and record the slot again.
pub fn freed_slot_reused_once_with_cluster(b: BackendChoice) {
    use super::eviction::{Slab, Slabs};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("slots.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let root = create_root(&mut db);
    // Five pages of nodes, listed in the root's vector; then ten slabs.
    let mut tx = db.begin().expect("begin");
    let nodes: Vec<PRef<GNode>> = (0..70).map(|i| tx.alloc(node(i)).expect("alloc")).collect();
    for &n in &nodes {
        tx.push(root, |g| &mut g.nodes, n).expect("push");
    }
    let slabs = tx.alloc(Slabs { all: PVec::new() }).expect("alloc");
    for id in 0..10 {
        let s = tx
            .alloc(Slab {
                id,
                v: 0,
                pad: [0; 4000],
            })
            .expect("alloc");
        tx.push(slabs, |r| &mut r.all, s).expect("push");
    }
    tx.set_root("slabs", slabs).expect("root");
    tx.commit().expect("commit");
    // Free two nodes on a middle page P and two on P + 1.
    let pages: Vec<u64> = nodes.iter().map(|&n| super::page_of(&mut db, n)).collect();
    let p = pages[35];
    let on = |pg: u64| -> Vec<usize> { (0..nodes.len()).filter(|&i| pages[i] == pg).collect() };
    let (before, first, second) = (on(p - 1), on(p), on(p + 1));
    assert!(
        before.len() > 2 && first.len() > 2 && second.len() > 2,
        "three consecutive pages of nodes"
    );
    let mut tx = db.begin().expect("begin");
    for &i in first.iter().take(2).chain(second.iter().take(2)) {
        tx.free(nodes[i]).expect("free");
    }
    tx.commit().expect("commit");
    db.close().expect("close");

    let o = amber::Options {
        fetch_cluster: 2,
        ..super::cached(b, 16 << 10)
    };
    let mut db = open(&path, o);
    let root = root_of(&db).expect("root");
    let all = db.slice(&db.get(root).nodes).to_vec();
    let sl: PRef<Slabs> = db.root("slabs").expect("root").expect("slabs");
    let sl = db.slice(&db.get(sl).all).to_vec();
    // Page P - 1 is fetched with its neighbour P (whose free slots are
    // noted), not P + 1; then reading slabs evicts both.
    assert_eq!(db.get(all[before[0]]).id, before[0] as u64);
    let sum: u64 = sl.iter().map(|&s| db.get(s).id).sum();
    assert_eq!(sum, 45);
    let mut tx = db.begin().expect("begin");
    for &s in &sl[..5] {
        tx.get_mut(s).v = 1;
    }
    // The slot on P is taken: P is fetched, P + 1 with it (its slots noted
    // after P's) and evicted again.
    let a = tx.alloc(node(900)).expect("alloc");
    let c = tx.alloc(node(901)).expect("alloc");
    let d = tx.alloc(node(902)).expect("alloc");
    assert!(
        a != c && c != d && a != d,
        "one slot handed out twice: {a:?} {c:?} {d:?}"
    );
    assert_eq!((tx.get(a).id, tx.get(c).id, tx.get(d).id), (900, 901, 902));
    tx.commit().expect("commit");
}
