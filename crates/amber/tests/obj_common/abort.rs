//! Abort restores exactly. A committed graph; then a transaction that
//! writes existing objects, rewires pointers, frees nodes, grows vectors and
//! byte strings, inserts into the index (splitting nodes), and allocates
//! many new objects, small and large (new pages and page runs); aborted.
//! After it: the database equals the committed model, memory holds no
//! leftover change (an empty commit logs nothing, a one-field commit logs
//! one page). The aborted transaction's space is dead for the rest of the
//! session: the next transactions allocate elsewhere, also blocks of
//! another shape. Reopened, the store has exactly its committed blocks, and
//! a new session's allocations reuse the aborted pages, also with blocks of
//! another shape (single pages where a large object's run was, and the
//! reverse), so the file does not grow past its old end more than the new
//! objects need.

use super::Cfg;
use super::graph::{GBlob, GNode, GRoot, Model, Op, apply_db, create_root, diff, refs, root_of};
use super::{check_backend, open, opts};
use amber::internals::io::crash::SplitMix;
use amber::{Db, Lazy, PBytes, PRef, PVec};
use std::collections::BTreeSet;

/// The data blocks (a checkpoint moves the metadata blobs: shadow paging).
fn pages_of(db: &Db) -> Vec<(u64, u32)> {
    let sb = db.store().superblock();
    let meta = [sb.fsm_page, sb.roots_page, sb.catalog_page];
    let mut v = db.store().blocks();
    v.retain(|(h, _)| !meta.contains(h));
    v
}

fn node(id: u64, root: PRef<GRoot>) -> GNode {
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
        lazy_root: Lazy::from(root),
        lazy_kids: PVec::new(),
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
    let root = amber::View::root::<GRoot>(&*tx, "graph")
        .expect("root")
        .expect("a root");
    for (i, &large) in shapes.iter().enumerate() {
        let pa = if large {
            let p = tx.alloc(blob(5000 + i as u64)).expect("alloc blob");
            tx.to_smart(p).expect("paddr").paddr()
        } else {
            let p = tx.alloc(node(5000 + i as u64, root)).expect("alloc node");
            tx.to_smart(p).expect("paddr").paddr()
        };
        pages.insert(pa >> 12);
    }
    pages
}

pub fn run(b: Cfg) {
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
        tx.index_insert(root, |g| &mut g.idx, &(1000 + k as u64), r[&id])
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

    // In this session the aborted pages are dead: allocating again, with
    // both shapes, lands elsewhere.
    let mut tx = db.begin().expect("begin");
    let elsewhere = allocate(&mut tx, &shapes);
    assert!(
        elsewhere.is_disjoint(&aborted_pages),
        "aborted pages handed out again in the same session"
    );
    tx.abort().expect("abort");
    let shifted: Vec<bool> = (0..120).map(|i| i % 5 == 0).collect();
    let mut tx = db.begin().expect("begin");
    let elsewhere = allocate(&mut tx, &shifted);
    assert!(elsewhere.is_disjoint(&aborted_pages));
    tx.abort().expect("abort");
    db.close().expect("close");

    // Reopened: exactly the committed blocks; the aborted pages come back
    // to new objects, also of other shapes on the same pages (a large
    // object where single pages were, and the reverse), and the file does
    // not grow much past where the aborted transaction had taken it.
    let mut db = open(&path, opts(b));
    root = root_of(&db).expect("root");
    diff(&db, root, &model).expect("after reopen");
    assert_eq!(pages_of(&db), blocks_before, "the store's data blocks");
    // The last checkpoint placed the metadata blobs in free space.
    assert!(db.store().stats().page_count <= count_before + 3);
    let top = aborted_pages.iter().max().expect("pages") + 3;
    assert!(top > count_before, "the aborted transaction added no pages");
    let mut tx = db.begin().expect("begin");
    let reused = allocate(&mut tx, &shapes);
    // The space the aborted transaction took is free again: the same
    // objects fit below where it had taken the file.
    assert!(
        reused.iter().all(|&p| p <= top),
        "the aborted transaction's pages were not reused: {reused:?}, top {top}"
    );
    tx.abort().expect("abort");
    db.close().expect("close");
    let mut db = open(&path, opts(b));
    let mut tx = db.begin().expect("begin");
    allocate(&mut tx, &shifted);
    tx.commit().expect("commit of the shifted shapes");
    let grown = db.store().stats().page_count;
    assert!(
        grown <= top + (top - count_before),
        "file grew to {grown} pages; the aborted transaction had reached {top}"
    );
    diff(&db, root_of(&db).expect("root"), &model).expect("after reuse");
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
