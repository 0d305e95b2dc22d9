//! A damaged `PIndex` node met by lookups, range scans, inserts and removes:
//! a node whose key count is impossible, a null child, a leaf chain that
//! loops. The pages are crafted through the storage API, so their checksums
//! are valid and only the index's own checks stand between the bytes and a
//! slice out of bounds (a panic) or an endless scan. Each must be
//! `Error::Corrupt` naming the node's page.

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

/// Bytes of an index node (`db/index.rs`: 3 + 2 × 252 words).
const NODE_BYTES: usize = (3 + 2 * 252) * 8;
const LEAF: u64 = 1 << 63;

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
        tx.index_insert(h, |o| &mut o.idx, k, v).expect("insert");
    }
    tx.set_root("h", h).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
    (dir, path)
}

/// A node found in the page file: its persistent address and words.
struct Node {
    paddr: u64,
    words: Vec<u64>,
}

/// Every index node of the database (objects of a node's size).
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
            if e.size == NODE_BYTES {
                let words = b[e.body..e.body + NODE_BYTES]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                out.push(Node {
                    paddr: head * ps + e.body as u64,
                    words,
                });
            }
        }
    }
    out
}

/// Rewrites word `i` of the node at `paddr`, both chosen by `pick` with the
/// new value, in a committed transaction (so the page keeps a valid
/// checksum); returns the node's page.
fn craft(path: &Path, pick: impl Fn(&[Node]) -> (u64, usize, u64)) -> u64 {
    let s = Store::open(Arc::new(RealVfs), path, StoreOptions::default()).expect("open store");
    let ps = s.page_size() as u64;
    let (paddr, i, value) = pick(&nodes(&s));
    let mut tx = s.begin().expect("begin");
    tx.write(paddr + 8 * i as u64, &value.to_le_bytes())
        .expect("write");
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

/// Runs every index operation against the damaged database.
fn every_operation(path: &Path, page: u64, what: &str, key: u64) {
    let mut db = Db::open(path, Options::default()).expect("open");
    let h: PRef<Holder> = db.root("h").expect("root").expect("set");
    refused(db.index_get(&db.get(h).idx, key), page, what);
    refused(db.index_range(&db.get(h).idx, 0, u64::MAX), page, what);
    let mut tx = db.begin().expect("begin");
    refused(tx.index_get(&tx.get(h).idx, key), page, what);
    let v = tx.alloc(Val { v: 0 }).expect("alloc");
    refused(tx.index_insert(h, |o| &mut o.idx, key, v), page, what);
    refused(tx.index_remove(h, |o| &mut o.idx, key), page, what);
    tx.abort().expect("abort");
    db.close().expect("close");
}

#[test]
fn impossible_key_count() {
    let (_dir, path) = build(10);
    let page = craft(&path, |n| {
        assert_eq!(n.len(), 1, "one leaf");
        (n[0].paddr, 0, LEAF | 1000)
    });
    every_operation(&path, page, "1000 keys", 3);
}

#[test]
fn null_child() {
    let (_dir, path) = build(300);
    let page = craft(&path, |n| {
        let inner = n.iter().find(|x| x.words[0] & LEAF == 0).expect("a root");
        // The first child: where key 0 lives.
        (inner.paddr, 2 + 252, 0)
    });
    every_operation(&path, page, "child 0 is null", 0);
}

#[test]
fn leaf_chain_loops() {
    let (_dir, path) = build(300);
    craft(&path, |n| {
        let leaves: Vec<&Node> = n.iter().filter(|x| x.words[0] & LEAF != 0).collect();
        assert_eq!(leaves.len(), 2, "the root split once");
        let (first, last) = if leaves[0].words[1] != 0 {
            (leaves[0], leaves[1])
        } else {
            (leaves[1], leaves[0])
        };
        // The last leaf's next points back to the first.
        (last.paddr, 1, first.paddr)
    });
    let mut db = Db::open(&path, Options::default()).expect("open");
    let h: PRef<Holder> = db.root("h").expect("root").expect("set");
    // Point lookups do not follow the chain; a scan must stop, naming a leaf.
    assert!(db.index_get(&db.get(h).idx, 299).expect("get").is_some());
    match db.index_range(&db.get(h).idx, 0, u64::MAX) {
        Err(e @ Error::Corrupt { .. }) => assert!(e.to_string().contains("loops"), "{e}"),
        other => panic!("expected a loop to be refused, got {other:?}"),
    }
    let _ = db.begin().expect("the database stays usable");
}
