//! Version 1 of a program: writes the schema-evolution fixture with the old
//! layouts (`evolve_common/v1.rs`). Another test binary (`evolve.rs`), built
//! with the new layouts only, opens the committed copy and migrates it.
//!
//! `AMBER_WRITE_FIXTURES=1 cargo test -p amber --test evolve_v1` rewrites
//! the committed fixture (after a deliberate change of version 1's data);
//! otherwise the test checks that the committed fixture still opens with
//! version 1's types and holds what version 1 writes.

mod evolve_common;

use amber::{Db, PRef, View};
use evolve_common::{DB_NAME, TASKS, copy_fixture, fixture_dir, opts, title, write_v1};

#[test]
fn v1_fixture() {
    let dir = tempfile::tempdir().expect("tempdir");
    if std::env::var_os("AMBER_WRITE_FIXTURES").is_some() {
        let fresh = dir.path().join(DB_NAME);
        let mut db = Db::create(&fresh, opts()).expect("create");
        write_v1(&mut db).expect("write");
        db.close().expect("close");
        let out = fixture_dir();
        std::fs::create_dir_all(&out).expect("fixture dir");
        // The page file and its log; the reader table is run-time state.
        for e in std::fs::read_dir(dir.path()).expect("dir") {
            let e = e.expect("entry");
            if e.file_name().to_string_lossy().ends_with("-readers") {
                continue;
            }
            std::fs::copy(e.path(), out.join(e.file_name())).expect("copy");
        }
    }
    let path = copy_fixture(dir.path());
    let db = Db::open(&path, opts()).expect("the fixture opens");
    let o: PRef<evolve_common::v1::Outline> =
        db.root("outline").expect("root").expect("the outline");
    let tasks = db.slice(&db.get(o).tasks);
    assert_eq!(tasks.len(), TASKS as usize);
    for (i, &t) in tasks.iter().enumerate() {
        let task = db.get(t);
        assert_eq!(db.str(&task.title), title(i as u32));
        assert_eq!(task.prio, i as u32 * 3);
        assert_eq!(db.slice(&task.tags).len(), i % 4);
    }
    db.close().expect("close");
}
