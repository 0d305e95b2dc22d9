//! QuickStore's recovery buffer (SIGSEGV backend) at its limits, driven
//! step by step. With `recovery_buffer_pages = 1` the buffer holds one copy
//! plus a reserve of two: the second page written marks the first for early
//! logging, and writes made without calling into Amber (several pages of one
//! object through one `&mut`) fill the reserve, so a copy is dropped.
//!
//! The case: a page logged early, written back to its committed value, and
//! the copy taken at that write dropped. The commit used to diff the page
//! against the committed image, found no change, and left the early record
//! (the intermediate value) to win in the store.

use super::Cfg;
use super::{check_backend, open, opts};
use amber::BackendChoice;
use amber::{Db, Options, PRef, Persistent};

#[derive(Persistent)]
#[repr(C)]
pub struct Cell {
    pub v: u64,
    pub pad: [u8; 4000],
}

/// Five pages.
#[derive(Persistent)]
#[repr(C)]
pub struct Wide {
    pub data: [u64; 2500],
}

const WORDS_PER_PAGE: usize = 512;

pub fn early_logged_page_rewritten(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rbuf.amber");
    let o = Options {
        recovery_buffer_pages: 1,
        ..opts(b)
    };
    let mut db = Db::create(&path, o.clone()).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let a = tx
        .alloc(Cell {
            v: 1,
            pad: [0; 4000],
        })
        .expect("alloc");
    let w = tx.alloc(Wide { data: [0; 2500] }).expect("alloc");
    tx.set_root("a", a).expect("root");
    tx.set_root("w", w).expect("root");
    tx.commit().expect("commit");

    let mut tx = db.begin().expect("begin");
    tx.get_mut(a).v = 2; // copy of A
    tx.get_mut(w).data[WORDS_PER_PAGE] = 7; // copy of W's page: A marked
    // The call logs A early (v = 2) and write-protects it; the write takes a
    // fresh copy (v = 2) and puts the value back to the committed one.
    tx.get_mut(a).v = 1;
    {
        // Three more pages through one reference, no call into Amber: the
        // reserve fills and A's copy is dropped.
        let g = tx.get_mut(w);
        for p in 2..5 {
            g.data[p * WORDS_PER_PAGE] = 7;
        }
    }
    tx.commit().expect("commit");
    let st = db.stats();
    assert_eq!(db.get(a).v, 1, "in memory after the commit");
    db.close().expect("close");
    let db = open(&path, opts(b));
    let a: PRef<Cell> = db.root("a").expect("root").expect("a");
    let w: PRef<Wide> = db.root("w").expect("root").expect("w");
    assert_eq!(db.get(a).v, 1, "in the database");
    for p in 1..5 {
        assert_eq!(
            db.get(w).data[p * WORDS_PER_PAGE],
            7,
            "page {p} of the wide object"
        );
    }
    if b.backend == BackendChoice::Sigsegv {
        assert!(st.early_logged > 0 && st.copies_dropped > 0, "{st:?}");
    }
}
