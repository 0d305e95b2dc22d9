//! Threads on both backends: no thread is prepared for anything.

use super::{Graph, Node, check_backend, check_node, create_graph, opts};
use amber::{BackendChoice, Db, Options, PRef, PVec, Persistent};

/// Nodes of the graph the readers traverse (about 40 pages of 4 KiB).
const NODES: u64 = 4_000;

/// Four plain threads (`std::thread::scope`, nothing called first) each
/// traverse a quarter of a graph of a freshly opened database, all cold,
/// checking every value and pointer: once with one page per fault and no
/// budget, once under a 64 KiB budget, where their faults also evict what
/// the others fetched.
pub fn readers_of_a_cold_graph(b: BackendChoice) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    create_graph(&path, opts(b), NODES);
    for budget in [None, Some(64 << 10)] {
        let db = Db::open(
            &path,
            Options {
                fetch_cluster: 1,
                cache_bytes: budget,
                ..opts(b)
            },
        )
        .expect("open");
        check_backend(&db, b);
        let root: PRef<Graph> = db.root("graph").expect("root").expect("graph");
        std::thread::scope(|sc| {
            for t in 0..4u64 {
                let db = &db;
                sc.spawn(move || {
                    let nodes = db.slice(&db.get(root).nodes);
                    assert_eq!(nodes.len() as u64, NODES);
                    for id in (t..NODES).step_by(4) {
                        check_node(db, nodes[id as usize], id, NODES);
                    }
                    // And a walk along `next`, crossing the others' pages.
                    let mut p = nodes[(t * NODES / 4) as usize];
                    for _ in 0..NODES / 2 {
                        p = db.get(p).next.expect("next");
                    }
                    assert_eq!(db.get(p).id, (t * NODES / 4 + NODES / 2) % NODES);
                });
            }
        });
        let st = db.stats();
        assert!(st.faults > 4, "{st:?}");
        if budget.is_some() {
            assert!(st.evicted > 0, "{st:?}");
        }
    }
}

/// A vector of this many `u64`s (512 KiB, one block of 129 pages).
const LEN: usize = 64 * 1024;

#[derive(Persistent)]
#[repr(C)]
pub struct Holder {
    pub data: PVec<u64>,
}

fn expected(i: usize, round: u64) -> u64 {
    (i as u64).wrapping_mul(0x0100_0000_01B3) ^ (round << 56) ^ 0x5A
}

/// Two scoped threads of one transaction write disjoint halves of a 512 KiB
/// vector (`slice_mut` + `split_at_mut`) under a 1 MiB cache budget, for
/// three transactions; between them a traversal of a graph fills the cache,
/// so that the vector is evicted and both writers fault on it cold. Each
/// commit, and a reopen, must hold every write.
pub fn writers_in_one_transaction(b: BackendChoice) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    // About 160 pages: with the vector's 129, more than the budget's 256.
    create_graph(&path, opts(b), 16_000);
    let budget = Options {
        cache_bytes: Some(1 << 20),
        fetch_cluster: 4,
        ..opts(b)
    };
    {
        let mut db = Db::open(&path, budget.clone()).expect("open");
        let mut tx = db.begin().expect("begin");
        let h = tx.alloc(Holder { data: PVec::new() }).expect("alloc");
        for _ in 0..LEN {
            tx.push(h, |h| &mut h.data, 0u64).expect("push");
        }
        tx.set_root("holder", h).expect("root");
        tx.commit().expect("commit");
        db.close().expect("close");
    }
    let mut db = Db::open(&path, budget.clone()).expect("open");
    check_backend(&db, b);
    let h: PRef<Holder> = db.root("holder").expect("root").expect("holder");
    let g: PRef<Graph> = db.root("graph").expect("root").expect("graph");
    for round in 1..=3u64 {
        // Fill the cache with the graph (the vector's pages go).
        let nodes: Vec<PRef<Node>> = db.slice(&db.get(g).nodes).to_vec();
        for (id, &p) in nodes.iter().enumerate() {
            assert_eq!(db.get(p).id, id as u64);
        }
        let mut tx = db.begin().expect("begin");
        let v = tx.slice_mut(h, |h| &mut h.data);
        assert_eq!(v.len(), LEN);
        let (lo, hi) = v.split_at_mut(LEN / 2);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                for (i, x) in lo.iter_mut().enumerate() {
                    *x = expected(i, round);
                }
            });
            sc.spawn(|| {
                // Backwards, so that the two meet nowhere in particular.
                for (i, x) in hi.iter_mut().enumerate().rev() {
                    *x = expected(LEN / 2 + i, round);
                }
            });
        });
        tx.commit().expect("commit");
        let data = db.slice(&db.get(h).data);
        for (i, &x) in data.iter().enumerate() {
            assert_eq!(x, expected(i, round), "element {i} after commit {round}");
        }
    }
    assert!(db.stats().evicted > 0, "{:?}", db.stats());
    db.close().expect("close");
    let db = Db::open(&path, budget).expect("reopen");
    let data = db.slice(&db.get(h_of(&db)).data);
    for (i, &x) in data.iter().enumerate() {
        assert_eq!(x, expected(i, 3), "element {i} after reopen");
    }
}

fn h_of(db: &Db) -> PRef<Holder> {
    db.root("holder").expect("root").expect("holder")
}
