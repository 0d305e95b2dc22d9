//! A damaged `PIndex` node met by lookups, range scans, inserts and removes:
//! a node whose key count is impossible, a key outside its node's key heap,
//! an unknown node kind, a null child, an inner node whose children share a
//! leaf, a child that points back at the root. The pages are crafted
//! through the storage API, so their checksums are valid and only the
//! index's own checks stand between the bytes and a slice out of bounds (a
//! panic) or an endless descent or scan. Each must be `Error::Corrupt`
//! naming the node's page.

use amber::Location;
use amber::internals::format::objects::walk;
use amber::internals::format::page::USED_OFFSET;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};
use amber::{Db, Error, Options, PIndex, PRef, Persistent};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Persistent)]
#[repr(C)]
struct Val {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Holder {
    idx: PIndex<Val>,
}

/// Bytes of an index node (`db/index/node.rs`).
const NODE_BYTES: usize = 507 * 8;
/// Byte 2 of a node: 1 leaf, 2 inner.
const KIND: usize = 2;
/// Bytes of the header, and of a slot.
const HDR: usize = 16;
const SLOT: usize = 16;

/// Creates a database whose root holds an index of `keys` keys, in a
/// temporary directory (removed when the returned handle is dropped).
fn build(keys: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut db = Db::create(&path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let h = tx.alloc(Holder { idx: PIndex::new() }).expect("alloc");
    for k in 0..keys {
        let v = tx.alloc(Val { v: k }).expect("alloc");
        tx.index_insert(h, |o| &mut o.idx, &k, v).expect("insert");
    }
    tx.set_root("h", h).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
    (dir, path)
}

/// A node found in the page file: its persistent address and bytes.
struct Node {
    paddr: u64,
    bytes: Vec<u8>,
}

impl Node {
    fn leaf(&self) -> bool {
        self.bytes[KIND] == 1
    }
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().unwrap())
    }
}

/// Every live index node of the database (objects of a node's size).
fn nodes(s: &Store) -> Vec<Node> {
    let ps = s.page_size() as u64;
    let mut out = Vec::new();
    for (head, _) in s.blocks() {
        let b = s.read_block(head).expect("read");
        if b[4] != 1 {
            continue; // not a data block
        }
        let used = u32::from_le_bytes(b[USED_OFFSET..USED_OFFSET + 4].try_into().unwrap());
        for e in walk(&b, used as usize) {
            let e = e.expect("object map");
            if e.size == NODE_BYTES && !e.is_free() {
                out.push(Node {
                    paddr: head * ps + e.body as u64,
                    bytes: b[e.body..e.body + NODE_BYTES].to_vec(),
                });
            }
        }
    }
    out
}

/// Writes bytes at byte `i` of the node at `paddr`, all chosen by `pick`,
/// in a committed transaction (so the page keeps a valid checksum);
/// returns the node's page.
fn craft(path: &Path, pick: impl Fn(&[Node]) -> (u64, usize, Vec<u8>)) -> u64 {
    let s = Store::open(Arc::new(RealVfs), path, StoreOptions::default()).expect("open store");
    let ps = s.page_size() as u64;
    let (paddr, i, value) = pick(&nodes(&s));
    let mut tx = s.begin().expect("begin");
    tx.write(paddr + i as u64, &value).expect("write");
    tx.commit().expect("commit");
    s.close().expect("close");
    paddr / ps
}

/// Checks that `r` is a corruption error naming `page` and saying `what`.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: amber::Result<T>, page: u64, what: &str) {
    match r {
        Err(e @ Error::Corrupt { .. }) => {
            let Error::Corrupt { at, .. } = &e else {
                unreachable!()
            };
            assert_eq!(*at, Location::Page(page), "{e}");
            assert!(e.to_string().contains(what), "{e}");
        }
        other => panic!("expected damage at page {page} ({what}), got {other:?}"),
    }
}

/// A full scan: its first error, if any.
fn scan(db: &Db, idx: &PIndex<Val>) -> amber::Result<usize> {
    db.index_range(idx, ..=u64::MAX)?
        .collect::<amber::Result<Vec<_>>>()
        .map(|v| v.len())
}

/// Runs every index operation against the damaged database.
fn every_operation(path: &Path, page: u64, what: &str, key: u64) {
    let mut db = Db::open(path, Options::default()).expect("open");
    let h: PRef<Holder> = db.root("h").expect("root").expect("set");
    refused(db.index_get(&db.get(h).idx, &key), page, what);
    refused(scan(&db, &db.get(h).idx), page, what);
    let mut tx = db.begin().expect("begin");
    refused(tx.index_get(&tx.get(h).idx, &key), page, what);
    let v = tx.alloc(Val { v: 0 }).expect("alloc");
    refused(tx.index_insert(h, |o| &mut o.idx, &key, v), page, what);
    refused(tx.index_remove(h, |o| &mut o.idx, &key), page, what);
    tx.abort().expect("abort");
    db.close().expect("close");
}

#[test]
fn impossible_key_count() {
    let (_dir, path) = build(10);
    let page = craft(&path, |n| {
        assert_eq!(n.len(), 1, "one leaf");
        (n[0].paddr, 0, 1000u16.to_le_bytes().to_vec())
    });
    every_operation(&path, page, "1000 slots", 3);
}

#[test]
fn key_outside_the_heap() {
    let (_dir, path) = build(10);
    // Slot 5's key offset: past the node's end.
    let page = craft(&path, |n| {
        (
            n[0].paddr,
            HDR + 5 * SLOT + 4,
            5000u16.to_le_bytes().to_vec(),
        )
    });
    every_operation(&path, page, "outside the key heap", 5);
}

#[test]
fn unknown_node_kind() {
    let (_dir, path) = build(10);
    let page = craft(&path, |n| (n[0].paddr, KIND, vec![7]));
    every_operation(&path, page, "kind byte is 7", 5);
}

#[test]
fn null_child() {
    let (_dir, path) = build(300);
    let page = craft(&path, |n| {
        let inner = n.iter().find(|x| !x.leaf()).expect("a root");
        // Child 0: where key 0 lives.
        (inner.paddr, 8, vec![0; 8])
    });
    every_operation(&path, page, "child 0 is null", 0);
}

#[test]
fn shared_leaf() {
    let (_dir, path) = build(300);
    craft(&path, |n| {
        let inner = n.iter().find(|x| !x.leaf()).expect("a root");
        // The right child of the first key becomes child 0 as well.
        let first = inner.u64_at(8);
        (inner.paddr, HDR + 8, first.to_le_bytes().to_vec())
    });
    let mut db = Db::open(&path, Options::default()).expect("open");
    let h: PRef<Holder> = db.root("h").expect("root").expect("set");
    // Point lookups still find the keys of the shared leaf; a scan meets
    // the leaf twice and stops at keys that do not ascend.
    assert!(db.index_get(&db.get(h).idx, &0).expect("get").is_some());
    match scan(&db, &db.get(h).idx) {
        Err(e @ Error::Corrupt { .. }) => {
            assert!(e.to_string().contains("not above the key before it"), "{e}")
        }
        other => panic!("expected a shared leaf to be refused, got {other:?}"),
    }
    let _ = db.begin().expect("the database stays usable");
}

#[test]
fn child_loops_to_the_root() {
    let (_dir, path) = build(300);
    let page = craft(&path, |n| {
        let root = n.iter().find(|x| !x.leaf()).expect("a root");
        (root.paddr, 8, root.paddr.to_le_bytes().to_vec())
    });
    every_operation(&path, page, "deeper than 64 levels", 0);
}

/// Removing keys frees the nodes they leave empty: a tree of 3,000 keys
/// (two levels) with all but the last 100 keys removed keeps a handful of
/// nodes, and with all removed, none; the index works again afterwards.
#[test]
fn emptied_nodes_are_freed() {
    let (_dir, path) = build(3000);
    let live = |path: &Path| {
        let s = Store::open(Arc::new(RealVfs), path, StoreOptions::default()).expect("open");
        let n = nodes(&s).len();
        s.close().expect("close");
        n
    };
    let full = live(&path);
    assert!(full > 20, "{full} nodes for 3,000 keys");
    let remove = |keys: std::ops::Range<u64>| {
        let mut db = Db::open(&path, Options::default()).expect("open");
        let h: PRef<Holder> = db.root("h").expect("root").expect("set");
        let mut tx = db.begin().expect("begin");
        for k in keys {
            assert!(
                tx.index_remove(h, |o| &mut o.idx, &k)
                    .expect("remove")
                    .is_some()
            );
        }
        tx.commit().expect("commit");
        let left = db.index_iter(&db.get(h).idx).expect("iter").count();
        db.close().expect("close");
        left
    };
    assert_eq!(remove(0..2900), 100);
    let few = live(&path);
    assert!(few <= 4, "{few} nodes left for 100 keys");
    assert_eq!(remove(2900..3000), 0);
    assert_eq!(live(&path), 0, "an empty index keeps no node");
    let mut db = Db::open(&path, Options::default()).expect("open");
    let h: PRef<Holder> = db.root("h").expect("root").expect("set");
    let mut tx = db.begin().expect("begin");
    let v = tx.alloc(Val { v: 7 }).expect("alloc");
    tx.index_insert(h, |o| &mut o.idx, &7, v).expect("insert");
    tx.commit().expect("commit");
    let got = db
        .index_get(&db.get(h).idx, &7)
        .expect("get")
        .expect("there");
    assert_eq!(db.get(got).v, 7);
    db.close().expect("close");
}

/// The index reads are part of the read trait: one function serves a
/// database and a transaction, which sees its own inserts.
#[test]
fn index_reads_through_the_read_trait() {
    use amber::View;
    fn sum(v: &impl View, h: PRef<Holder>, lo: u64, hi: u64) -> u64 {
        let idx = &v.get(h).idx;
        v.index_range(idx, lo..hi)
            .expect("range")
            .map(|e| v.get(e.expect("entry").1).v)
            .sum()
    }
    let (_dir, path) = build(100);
    let mut db = Db::open(&path, Options::default()).expect("open");
    let h: PRef<Holder> = db.root("h").expect("root").expect("h");
    assert_eq!(sum(&db, h, 10, 20), (10..20).sum());
    let mut tx = db.begin().expect("begin");
    let v = tx.alloc(Val { v: 1000 }).expect("alloc");
    tx.index_insert(h, |o| &mut o.idx, &150, v).expect("insert");
    assert_eq!(sum(&tx, h, 100, 200), 1000);
    assert!(View::index_contains(&tx, &tx.get(h).idx, &150).expect("contains"));
    tx.abort().expect("abort");
    assert_eq!(sum(&db, h, 100, 200), 0);
    assert!(!View::index_contains(&db, &db.get(h).idx, &150).expect("contains"));
}
