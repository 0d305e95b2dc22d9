//! The multi-index's two formats (design.md §4.8): format 2 keeps a key's
//! entries ordered by value, so that a removal descends to its entry; an
//! index of the first format (entries in insertion order, found by reading
//! the key's entries) stays readable and writable, keeps its format while
//! it holds entries, and takes format 2 once emptied. The removal itself is
//! checked against a model in `obj_common/index_prop.rs`.

use amber::{Db, Options, PMultiIndex, PRef, Persistent};

#[derive(Persistent)]
#[repr(C)]
struct Val {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Root {
    dates: PMultiIndex<Val, u32>,
    vals: [Option<PRef<Val>>; 8],
}

fn values(db: &Db, root: PRef<Root>, key: u32) -> Vec<u64> {
    let r = db.get(root);
    db.multi_get(&r.dates, &key)
        .expect("multi_get")
        .map(|p| db.get(p.expect("value")).v)
        .collect()
}

fn val(tx: &amber::Tx<'_>, root: PRef<Root>, v: u64) -> PRef<Val> {
    tx.get(root).vals[v as usize].expect("value")
}

/// Inserts each `(key, v)` with the public insert.
fn insert(tx: &mut amber::Tx<'_>, root: PRef<Root>, entries: &[(u32, u64)]) {
    for &(k, v) in entries {
        let p = val(tx, root, v);
        tx.multi_insert(root, |r| &mut r.dates, &k, p)
            .expect("insert");
    }
}

/// Removes one entry of `v` under `k`; whether there was one.
fn remove(tx: &mut amber::Tx<'_>, root: PRef<Root>, k: u32, v: u64) -> bool {
    let p = val(tx, root, v);
    tx.multi_remove(root, |r| &mut r.dates, &k, p)
        .expect("remove")
}

fn verify(db: &Db, ctx: &str) {
    let rep = db.verify_deep().expect("verify_deep");
    assert!(rep.findings.is_empty(), "{ctx}: {:#?}", rep.findings);
}

#[test]
fn first_format_index_is_read_and_written_then_takes_format_two_once_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut db = Db::create(&path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let root = tx
        .alloc(Root {
            dates: PMultiIndex::new(),
            vals: [None; 8],
        })
        .expect("alloc");
    for i in 0..8 {
        let v = tx.alloc(Val { v: i }).expect("alloc");
        tx.get_mut(root).vals[i as usize] = Some(v);
    }
    tx.set_root("root", root).expect("root");
    // The first entry makes it an index of the first format; the public
    // insert keeps the format of an index that holds entries.
    let first = val(&tx, root, 5);
    tx.multi_insert_first_format(root, |r| &mut r.dates, &10, first)
        .expect("insert");
    insert(
        &mut tx,
        root,
        &[(10, 1), (10, 3), (10, 1), (10, 7), (20, 2), (20, 0)],
    );
    assert!(remove(&mut tx, root, 10, 1));
    assert!(!remove(&mut tx, root, 10, 6));
    tx.commit().expect("commit");
    // Insertion order, less the first 1.
    assert_eq!(values(&db, root, 10), [5, 3, 1, 7]);
    assert_eq!(values(&db, root, 20), [2, 0]);
    verify(&db, "first format");
    db.close().expect("close");

    let mut db = Db::open(&path, Options::default()).expect("open");
    let root: PRef<Root> = db.root("root").expect("root").expect("root");
    assert_eq!(values(&db, root, 10), [5, 3, 1, 7]);
    let all: Vec<(u32, u64)> = {
        let r = db.get(root);
        db.multi_iter(&r.dates)
            .expect("iter")
            .map(|e| e.map(|(k, p)| (k, db.get(p).v)).expect("entry"))
            .collect()
    };
    assert_eq!(all, [(10, 5), (10, 3), (10, 1), (10, 7), (20, 2), (20, 0)]);
    // Emptied, it takes format 2: values in the order of their addresses
    // (allocated in the order of `v`).
    let mut tx = db.begin().expect("begin");
    for (k, v) in all {
        assert!(remove(&mut tx, root, k, v));
    }
    assert_eq!(tx.get(root).dates.len(), 0);
    insert(
        &mut tx,
        root,
        &[(10, 5), (10, 1), (10, 3), (10, 1), (20, 7), (20, 2)],
    );
    assert!(remove(&mut tx, root, 10, 1));
    tx.commit().expect("commit");
    assert_eq!(values(&db, root, 10), [1, 3, 5]);
    assert_eq!(values(&db, root, 20), [2, 7]);
    verify(&db, "format 2");
    drop(db);
    let db = Db::open(&path, Options::default()).expect("recover");
    let root: PRef<Root> = db.root("root").expect("root").expect("root");
    assert_eq!(values(&db, root, 10), [1, 3, 5]);
    verify(&db, "format 2, recovered");
}
