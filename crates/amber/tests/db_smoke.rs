//! End-to-end smoke test of the object layer with hand-written descriptors
//! (the derive has its own tests).
#![allow(unsafe_code)]

use amber::BackendChoice;
use amber::internals::schema::desc::{FieldDesc, FieldKind, TypeDesc};
use amber::{Db, Field, Options, PRef, PVec, Persistent};

#[repr(C)]
struct Node {
    value: u64,
    next: Option<PRef<Node>>,
    kids: PVec<u64>,
}

// SAFETY: `Node` is `repr(C)` with fields u64 (offset 0), Option<PRef<Node>>
// (8, a u64 by the null-pointer optimisation) and PVec<u64> (16, 16 bytes):
// 32 bytes, no padding, alignment 8, no drop glue; every field type is a
// `Field`, and the descriptor lists each with its exact offset and kind.
unsafe impl Persistent for Node {
    const DESC: TypeDesc = TypeDesc {
        name: "Node",
        size: 32,
        align: 8,
        fields: &[
            FieldDesc {
                name: "value",
                offset: 0,
                kind: &<u64 as Field>::KIND,
                evolution: amber::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "next",
                offset: 8,
                kind: &<Option<PRef<Node>> as Field>::KIND,
                evolution: amber::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "kids",
                offset: 16,
                kind: &<PVec<u64> as Field>::KIND,
                evolution: amber::desc::Evolution::NONE,
            },
        ],
    };
}

fn opts(b: BackendChoice) -> Options {
    Options {
        backend: b,
        ..Options::default()
    }
}

fn list(b: BackendChoice) {
    let _ = FieldKind::Bytes;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    {
        let mut db = Db::create(&p, opts(b)).unwrap();
        let mut tx = db.begin().unwrap();
        let mut head: Option<PRef<Node>> = None;
        for i in 0..2000u64 {
            let n = tx
                .alloc(Node {
                    value: i,
                    next: head,
                    kids: PVec::new(),
                })
                .unwrap();
            head = Some(n);
        }
        let h = head.unwrap();
        for k in 0..100 {
            tx.push(h, |n| &mut n.kids, k * 3).unwrap();
        }
        tx.set_root("head", h).unwrap();
        let st = tx.commit().unwrap();
        assert!(st.blocks > 10, "{st:?}");
        // Update a few in place.
        let mut tx = db.begin().unwrap();
        tx.get_mut(h).value = 777;
        let st = tx.commit().unwrap();
        assert_eq!(st.blocks, 1);
        assert!(st.log_bytes < 100, "{st:?}");
        // Abort restores.
        let mut tx = db.begin().unwrap();
        tx.get_mut(h).value = 5;
        tx.abort().unwrap();
        assert_eq!(db.get(h).value, 777);
        db.close().unwrap();
    }
    let db = Db::open(&p, opts(b)).unwrap();
    let h: PRef<Node> = db.root("head").unwrap().unwrap();
    assert_eq!(db.get(h).value, 777);
    let kids = db.slice(&db.get(h).kids);
    assert_eq!(kids.len(), 100);
    assert_eq!(kids[99], 297);
    let mut n = Some(h);
    let mut count = 0;
    let mut sum = 0;
    while let Some(p) = n {
        let node = db.get(p);
        sum += node.value;
        count += 1;
        n = node.next;
    }
    assert_eq!(count, 2000);
    assert_eq!(sum, (0..1999u64).sum::<u64>() + 777);
    eprintln!("{:?}: {:?}", db.backend(), db.stats());
}

#[test]
fn list_uffd() {
    list(BackendChoice::Uffd);
}

#[test]
fn list_sigsegv() {
    list(BackendChoice::Sigsegv);
}

#[repr(C)]
struct Holder {
    idx: amber::PIndex<Node>,
}

// SAFETY: `Holder` is `repr(C)` with one field, a PIndex<Node> (16 bytes, a
// `Field`) at offset 0: 16 bytes, no padding, alignment 8, no drop glue, and
// the descriptor says exactly that.
unsafe impl Persistent for Holder {
    const DESC: TypeDesc = TypeDesc {
        name: "Holder",
        size: 16,
        align: 8,
        fields: &[FieldDesc {
            name: "idx",
            offset: 0,
            kind: &<amber::PIndex<Node> as Field>::KIND,
            evolution: amber::desc::Evolution::NONE,
        }],
    };
}

#[test]
fn index_matches_btreemap() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    let mut db = Db::create(&p, Options::default()).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut rng = amber::internals::io::crash::SplitMix::new(9);
    let mut tx = db.begin().unwrap();
    let h = tx
        .alloc(Holder {
            idx: amber::PIndex::new(),
        })
        .unwrap();
    tx.set_root("h", h).unwrap();
    let mut nodes = Vec::new();
    for i in 0..50u64 {
        nodes.push(
            tx.alloc(Node {
                value: i,
                next: None,
                kids: PVec::new(),
            })
            .unwrap(),
        );
    }
    for _ in 0..30_000 {
        let k = rng.below(20_000);
        if rng.below(5) == 0 {
            let got = tx
                .index_remove(h, |o| &mut o.idx, &k)
                .unwrap()
                .map(|r| tx.get(r).value);
            assert_eq!(got, model.remove(&k));
        } else {
            let v = rng.below(50) as usize;
            let old = tx
                .index_insert(h, |o| &mut o.idx, &k, nodes[v])
                .unwrap()
                .map(|r| tx.get(r).value);
            assert_eq!(old, model.insert(k, v as u64));
        }
    }
    tx.commit().unwrap();
    db.close().unwrap();
    let db = Db::open(&p, Options::default()).unwrap();
    let h: PRef<Holder> = db.root("h").unwrap().unwrap();
    let idx = &db.get(h).idx;
    assert_eq!(idx.len(), model.len() as u64);
    for k in 0..20_000u64 {
        let got = db.index_get(idx, &k).unwrap().map(|r| db.get(r).value);
        assert_eq!(got, model.get(&k).copied(), "key {k}");
    }
    let r = db.index_range(idx, 500..1500).unwrap();
    let want: Vec<u64> = model.range(500..1500).map(|(k, _)| *k).collect();
    assert_eq!(r.map(|e| e.unwrap().0).collect::<Vec<_>>(), want);
    // Only the paths looked up were given frames: far fewer than the nodes.
    eprintln!("{:?}", db.stats());
}

/// Many pages updated in one transaction with a 4-page recovery buffer: the
/// overflow is logged early, commit and abort still come out exact.
#[test]
fn recovery_buffer_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    let o = Options {
        backend: BackendChoice::Sigsegv,
        recovery_buffer_pages: 4,
        ..Options::default()
    };
    let mut db = Db::create(&p, o.clone()).unwrap();
    let mut tx = db.begin().unwrap();
    let mut nodes = Vec::new();
    for i in 0..3000u64 {
        nodes.push(
            tx.alloc(Node {
                value: i,
                next: None,
                kids: PVec::new(),
            })
            .unwrap(),
        );
    }
    tx.set_root("first", nodes[0]).unwrap();
    tx.commit().unwrap();
    // Update one node on every page, twice (the second write after the early log).
    let mut tx = db.begin().unwrap();
    for round in 0..2 {
        for (i, &n) in nodes.iter().enumerate().step_by(50) {
            tx.get_mut(n).value = 1_000_000 * (round + 1) + i as u64;
        }
    }
    let st = tx.commit().unwrap();
    assert!(db.stats().early_logged > 20, "{:?}", db.stats());
    assert!(
        st.log_bytes as f64 <= 1.1 * st.minimal_log_bytes as f64 + 16.0,
        "{st:?}"
    );
    for (i, &n) in nodes.iter().enumerate() {
        let want = if i % 50 == 0 {
            2_000_000 + i as u64
        } else {
            i as u64
        };
        assert_eq!(db.get(n).value, want);
    }
    // And an aborted one with overflow.
    let mut tx = db.begin().unwrap();
    for &n in nodes.iter().step_by(50) {
        tx.get_mut(n).value = 7;
    }
    tx.abort().unwrap();
    for (i, &n) in nodes.iter().enumerate() {
        let want = if i % 50 == 0 {
            2_000_000 + i as u64
        } else {
            i as u64
        };
        assert_eq!(db.get(n).value, want, "after abort, node {i}");
    }
    drop(db); // no close: recovery replays
    let db = Db::open(&p, o).unwrap();
    let first: PRef<Node> = db.root("first").unwrap().unwrap();
    assert_eq!(db.get(first).value, 2_000_000);
}

/// `remove_root` drops the name only: the root is gone after commit and
/// after reopening, an aborted removal leaves it, removing a name that does
/// not exist is not an error, and the object it named is still there.
#[test]
fn roots_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("db");
    let mut db = Db::create(&p, Options::default()).unwrap();
    let mut tx = db.begin().unwrap();
    let n = tx
        .alloc(Node {
            value: 5,
            next: None,
            kids: PVec::new(),
        })
        .unwrap();
    tx.set_root("a", n).unwrap();
    tx.set_root("b", n).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.remove_root("a").unwrap();
    tx.abort().unwrap();
    assert_eq!(db.root::<Node>("a").unwrap(), Some(n), "an aborted removal");
    let mut tx = db.begin().unwrap();
    tx.remove_root("a").unwrap();
    tx.remove_root("never").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.root::<Node>("a").unwrap(), None);
    assert_eq!(db.get(n).value, 5, "the object stays");
    db.close().unwrap();
    let db = Db::open(&p, Options::default()).unwrap();
    assert_eq!(db.root::<Node>("a").unwrap(), None, "after reopening");
    let b: PRef<Node> = db.root("b").unwrap().expect("the other root stays");
    assert_eq!(db.get(b).value, 5);
    let names: Vec<String> = db.store().roots().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["b"]);
}

/// Opening a file that is not there is the operating system's "no such
/// file", an I/O error naming the path, not a claim about its format.
#[test]
fn missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nothing.amber");
    match Db::open(&path, Options::default()) {
        Err(amber::Error::Io {
            source, path: p, ..
        }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(p, path);
        }
        other => panic!("opening a missing file: {other:?}"),
    }
    let e = Db::open(&path, Options::default()).expect_err("missing");
    let shown = e.to_string();
    assert!(
        shown.contains("nothing.amber") && shown.contains("No such file"),
        "{shown}"
    );
}

/// `open_or_create` creates a database where there is none and opens the
/// one that is there; a log without its database stays an error.
#[test]
fn open_or_create_creates_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("new.amber");
    let mut db = Db::open_or_create(&path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let n = tx
        .alloc(Node {
            value: 42,
            next: None,
            kids: PVec::new(),
        })
        .expect("alloc");
    tx.set_root("n", n).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
    let db = Db::open_or_create(&path, Options::default()).expect("open");
    let n: PRef<Node> = db.root("n").expect("root").expect("n");
    assert_eq!(db.get(n).value, 42);
    db.close().expect("close");

    let orphan = dir.path().join("orphan.amber");
    std::fs::copy(
        amber::inspect::wal_path(&path),
        amber::inspect::wal_path(&orphan),
    )
    .expect("copy log");
    let e = Db::open_or_create(&orphan, Options::default()).expect_err("orphan log");
    assert!(
        e.to_string()
            .contains("a log file exists without its database"),
        "{e}"
    );
    // Debug is the same line, for `fn main() -> amber::Result<()>`.
    assert_eq!(format!("{e:?}"), e.to_string());
}

#[test]
fn list_mapped_unverified() {
    list(BackendChoice::MappedUnverified);
}
