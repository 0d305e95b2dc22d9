//! Types through the server, between clients: a type one client defines
//! is read by another after its refresh; and a client whose program has an
//! evolved layout of a stored type (a field added) is refused with
//! `SchemaMismatch` naming the type — reading the stored objects and
//! storing its own alike — so no client is ever handed bytes of another
//! layout, and the others read on unchanged. (An evolved layout comes in
//! through a migration, which needs the database to itself.)

mod common;

use amber::{Db, Error, Options, PRef, Persistent};
use common::{start, writing};

#[derive(Persistent, Debug)]
#[repr(C)]
#[persistent(name = "Note")]
struct NoteV1 {
    n: u64,
}

/// `Note` with a field added: what a newer program declares.
#[derive(Persistent, Debug)]
#[repr(C)]
#[persistent(name = "Note")]
struct NoteV2 {
    n: u64,
    extra: u64,
}

fn connect(addr: std::net::SocketAddr) -> Db {
    common::connect_db(addr, "t")
}

fn mismatch(e: Error) {
    match e {
        Error::SchemaMismatch { type_name, .. } => assert_eq!(type_name, "Note"),
        other => panic!("{other}"),
    }
}

#[test]
fn clients_agree_on_defined_and_evolved_types() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("t.amber");
    Db::create(&path, Options::default())
        .expect("created")
        .close()
        .expect("closed");
    let server = start(writing(&[("t", &path)]));
    let mut a = connect(server.addr);
    let mut b = connect(server.addr);
    let mut c = connect(server.addr);

    // a defines Note (version 1) and commits one.
    let mut tx = a.begin().expect("begun");
    let note = tx.alloc(NoteV1 { n: 7 }).expect("allocated");
    tx.set_root("v1", note).expect("root");
    tx.commit().expect("committed");

    // b sees it after its refresh, under the same type.
    assert!(b.root::<NoteV1>("v1").expect("roots").is_none());
    b.refresh().expect("refreshed");
    let got: PRef<NoteV1> = b.root("v1").expect("roots").expect("the root");
    assert_eq!(b.get(got).n, 7);

    // c's program has Note with a field more: refused, not misread.
    c.refresh().expect("refreshed");
    mismatch(c.root::<NoteV2>("v1").expect_err("another layout"));

    // Nor may c store a Note of its layout: an evolved layout comes in
    // through a migration (`amber migrate`, with the database to itself),
    // never beside the old one.
    let mut tx = c.begin().expect("begun");
    match tx.alloc(NoteV2 { n: 8, extra: 9 }) {
        Err(e) => mismatch(e),
        Ok(_) => panic!("a second layout of Note was stored"),
    }
    drop(tx);
    for db in [&mut a, &mut b] {
        db.refresh().expect("refreshed");
        let got: PRef<NoteV1> = db.root("v1").expect("roots").expect("the root");
        assert_eq!(db.get(got).n, 7);
    }
    drop((a, b, c));
    server.shutdown();
}
