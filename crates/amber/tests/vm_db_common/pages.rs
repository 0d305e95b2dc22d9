//! Pages larger than the host's: the reservation is aligned to the page
//! size by construction, and every pointer conversion takes its offset from
//! the frame's base, so pointers round-trip. (Before, a reservation that
//! happened to be only 4 KiB-aligned stored pointers 0x1000-0x3000 bytes
//! from their targets.)

use super::{Graph, Node, check_backend, check_node, create_graph, opts};
use amber::{BackendChoice, Db, Options, PRef};

/// A graph built with 8 and 16 KiB pages: every node's smart pointer (a
/// conversion to a persistent address) leads back to it, the root too, and
/// after commit and reopen every node and pointer is what was stored.
/// Several sessions each, since where the kernel puts a reservation varies.
pub fn large_pages_round_trip(b: BackendChoice) {
    const N: u64 = 3_000;
    for page_size in [8192usize, 16384] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let o = Options {
            page_size,
            ..opts(b)
        };
        create_graph(&path, o.clone(), N);
        for session in 0..4 {
            let mut db = Db::open(&path, o.clone()).expect("open");
            check_backend(&db, b);
            assert_eq!(db.page_size(), page_size);
            let root: PRef<Graph> = db.root("graph").expect("root").expect("graph");
            let nodes: Vec<PRef<Node>> = db.slice(&db.get(root).nodes).to_vec();
            assert_eq!(nodes.len() as u64, N);
            for (id, &p) in nodes.iter().enumerate() {
                check_node(&db, p, id as u64, N);
            }
            // Persistent addresses and back, and a pointer written at
            // commit (a new root at a node in the middle of a page).
            let mut tx = db.begin().expect("begin");
            for (id, &p) in nodes.iter().enumerate().skip(session).step_by(7) {
                let s = tx.to_smart(p).expect("to_smart");
                assert_eq!(s.paddr() % 8, 0);
                assert_eq!(tx.smart(s).expect("smart").id, id as u64);
            }
            let mid = nodes[(N / 2) as usize + session];
            tx.set_root("mid", mid).expect("set_root");
            tx.get_mut(mid).value ^= 1;
            tx.commit().expect("commit");
            db.close().expect("close");
            let db = Db::open(&path, o.clone()).expect("reopen");
            let mid: PRef<Node> = db.root("mid").expect("root").expect("mid");
            let id = (N / 2) + session as u64;
            assert_eq!(db.get(mid).id, id, "page size {page_size}");
            assert_eq!(db.get(mid).value, super::value_of(id) ^ 1);
            assert_eq!(db.get(db.get(mid).next.expect("next")).id, id + 1);
            // Put the value back for the next session's checks.
            drop(db);
            let mut db = Db::open(&path, o.clone()).expect("reopen");
            let mid: PRef<Node> = db.root("mid").expect("root").expect("mid");
            let mut tx = db.begin().expect("begin");
            tx.get_mut(mid).value ^= 1;
            tx.commit().expect("commit");
            db.close().expect("close");
        }
    }
}
