//! Schema evolution: a database written by version 1 of a program (the
//! committed fixture `fixtures/evolve-v1/`, written by the test binary
//! `evolve_v1.rs`, which alone has version 1's types in its build) opened
//! and migrated by version 2 (`evolve_common/v2.rs`): fields added with
//! defaults, renamed, reordered and converted; a by-value element type that
//! grew; a layout no object uses retired; a migration that cannot be done
//! refused before anything is written; crashes at every step of a
//! migration (the crash model) leaving version 1 or version 2, never
//! anything else.

mod evolve_common;

use amber::{BackendChoice, Db, Error, Options, PRef, Persistent};
use evolve_common::v2::{self, Outline, Task};
use evolve_common::{DB_NAME, check_v2, copy_fixture, no_default, opts};

/// The names of the schema catalog's types.
fn catalog(path: &std::path::Path) -> Vec<String> {
    let i = amber::inspect::Inspector::open(path).expect("inspect");
    let mut names: Vec<String> = i
        .catalog()
        .into_iter()
        .map(|e| e.decoded.expect("decodes").name)
        .collect();
    names.sort();
    names
}

#[test]
fn opening_without_migrating_names_the_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let db = Db::open(&path, opts()).expect("open");
    let e = db
        .root::<Outline>("outline")
        .expect_err("Task's layout changed");
    let Error::SchemaMismatch { type_name, what } = &e else {
        panic!("{e}")
    };
    assert_eq!(type_name, "Task");
    assert!(what.contains("field 0 is `tags`"), "{e}");
    assert!(what.contains("amber::Migration"), "{e}");
    let plan = db.migration_plan(&v2::migration()).expect("plan");
    let want = [
        "`Tag`: field `weight` added (its default)",
        "`Tag`: field `spare` added (its default)",
        "`Task`: field `prio` renamed to `priority`",
        "`Task`: field `priority` converted from `u32` to `u64`",
        "`Task`: field `finished` renamed to `done`",
        "`Task`: field `effort` added (its default)",
        "`Task`: field `parent` added (its default)",
    ];
    for w in want {
        assert!(plan.iter().any(|p| p == w), "{w} not in {plan:#?}");
    }
    assert_eq!(plan.len(), want.len(), "{plan:#?}");
}

#[test]
fn migrate_on_open_converts_once() {
    for backend in [BackendChoice::Auto, BackendChoice::Sigsegv] {
        let o = Options { backend, ..opts() };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = copy_fixture(dir.path());
        let before = catalog(&path);
        assert!(before.iter().any(|n| n == "Scratch"), "{before:?}");
        let db = Db::open(&path, o.clone()).expect("open");
        let (mut db, stats) = db.migrate(&v2::migration()).expect("migrate");
        assert!(stats.rewritten);
        assert_eq!(stats.changes.len(), 7, "{:?}", stats.changes);
        check_v2(&db, 0).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        // The old layouts are gone: Scratch had no object left.
        let after = catalog(&path);
        assert_eq!(after.len(), before.len() - 1, "{before:?} → {after:?}");
        assert!(!after.iter().any(|n| n == "Scratch"), "{after:?}");
        // Version 2 writes: a task with a parent, more tags.
        let o_ref: PRef<Outline> = db.root("outline").expect("root").expect("outline");
        let mut tx = db.begin().expect("begin");
        let first = tx.slice(&tx.get(o_ref).tasks)[0];
        let t = tx
            .alloc_with(|tx| {
                Ok(Task {
                    tags: tx.new_vec([v2::Tag {
                        code: 1,
                        level: 2,
                        weight: 0.5,
                        spare: 0,
                    }])?,
                    title: tx.new_string("new")?,
                    priority: 1,
                    done: 0,
                    effort: 8,
                    next: None,
                    parent: Some(first),
                })
            })
            .expect("alloc");
        tx.push(o_ref, |o| &mut o.tasks, t).expect("push");
        tx.commit().expect("commit");
        let deep = db.verify_deep().expect("deep");
        assert!(deep.is_clean(), "{:?}", deep.findings);
        db.close().expect("close");
        // Opened again: the catalog is version 2's, and migrating again
        // finds nothing to do.
        let db = Db::open(&path, o.clone()).expect("reopen");
        check_v2(&db, 1).expect("after reopening");
        let (db, again) = db.migrate(&v2::migration()).expect("migrate again");
        assert!(!again.rewritten && again.changes.is_empty(), "{again:?}");
        db.close().expect("close");
    }
}

#[test]
fn migrate_a_closed_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let stats = v2::migration().run_file(&path).expect("migrate");
    assert!(stats.rewritten);
    // The freed Scratch, and the buffers and index nodes version 1 left
    // behind as its vectors grew and its index split.
    assert!(stats.collect.objects_reclaimed > 0, "{stats:?}");
    let db = Db::open(&path, opts()).expect("open");
    check_v2(&db, 0).expect("migrated");
    db.close().expect("close");
    assert!(!v2::migration().run_file(&path).expect("again").rewritten);
}

/// `Task` with `prio` turned into a `u64` and no conversion given.
mod no_conversion {
    use amber::{PRef, PString, PVec, Persistent};
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Task {
        pub title: PString,
        pub prio: u64,
        pub tags: PVec<super::evolve_common::v1::Tag>,
        pub next: Option<PRef<Task>>,
    }
}

/// A non-null pointer added with the zero default.
mod zero_pointer {
    use amber::{PRef, PString, PVec, Persistent};
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Task {
        pub title: PString,
        pub prio: u32,
        pub finished: u32,
        pub tags: PVec<super::evolve_common::v1::Tag>,
        pub next: Option<PRef<Task>>,
        #[persistent(default)]
        pub owner: PRef<Task>,
    }
}

fn refused<T: Persistent>(want: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let before = std::fs::read(&path).expect("read");
    let mut m = amber::Migration::new();
    m.upgrade::<T>().expect("upgrade");
    let db = Db::open(&path, opts()).expect("open");
    let e = db.migration_plan(&m).expect_err("refused");
    assert!(e.to_string().contains(want), "{e}");
    let e = db.migrate(&m).expect_err("refused");
    assert!(matches!(e, Error::SchemaMismatch { .. }), "{e}");
    assert!(e.to_string().contains(want), "{e}");
    let e = m.run_file(&path).expect_err("refused");
    assert!(e.to_string().contains(want), "{e}");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "nothing written"
    );
    // Version 1's data is still there, whole.
    let db = Db::open(&path, opts()).expect("open");
    let o: PRef<evolve_common::v1::Outline> = db.root("outline").expect("root").expect("o");
    assert_eq!(
        amber::View::slice(&db, &db.get(o).tasks).len(),
        evolve_common::TASKS as usize
    );
}

#[test]
fn what_cannot_be_converted_is_refused_naming_the_field() {
    refused::<no_default::Task>("field `Task.owner` is new and has no default");
    refused::<no_conversion::Task>("field `Task.prio`: it is `u32` in the database and `u64`");
    refused::<zero_pointer::Task>("field `Task.owner` is new and its default is zero");
}

#[test]
fn a_conversion_must_match_the_stored_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let mut m = amber::Migration::new();
    m.convert_field::<Task, u16, u64>("priority", u64::from)
        .expect("the program's side matches");
    let db = Db::open(&path, opts()).expect("open");
    let e = db.migration_plan(&m).expect_err("prio is a u32");
    assert!(
        e.to_string()
            .contains("reads `u16`, but the field is `u32`"),
        "{e}"
    );
    let mut m = amber::Migration::new();
    let e = m
        .convert_field::<Task, u32, u32>("priority", |p| p)
        .expect_err("priority is a u64");
    assert!(e.to_string().contains("returns `u32`"), "{e}");
    let e = m
        .convert_field::<Task, u32, u64>("nothing", u64::from)
        .expect_err("no such field");
    assert!(e.to_string().contains("no field `nothing`"), "{e}");
    drop(db);
    let _ = DB_NAME;
}

/// A crash at every mutating call of a migration (the crash model: each
/// write, sync and rename, then the unsynced state lost at random) leaves
/// version 1's database, whole, or version 2's, whole; a migration run
/// after the crash finishes the job.
#[test]
fn a_migration_crashed_anywhere_leaves_v1_or_v2() {
    use amber::internals::io::crash::CrashVfs;
    use amber::internals::store::readers::readers_path;
    use std::path::Path;
    use std::sync::Arc;

    let vfs = CrashVfs::new();
    let path = Path::new("/evolve/db");
    let mut db = Db::create_with(Arc::new(vfs.clone()), path, opts()).expect("create");
    evolve_common::write_v1(&mut db).expect("write v1");
    db.close().expect("close");
    let m = v2::migration();
    let probe = vfs.durable_copy();
    let before = probe.mutations();
    m.run_file_with(Arc::new(probe.clone()), path)
        .expect("migrate");
    let points = probe.mutations() - before;
    assert!(points > 5, "a migration makes {points} mutating calls");
    let (mut old, mut new) = (0, 0);
    for point in 1..=points + 1 {
        let fs = vfs.durable_copy();
        fs.crash_after(point);
        let r = m.run_file_with(Arc::new(fs.clone()), path);
        let harmless = fs.died_on() == Some(readers_path(path));
        assert!(
            r.is_err() == (point <= points) || (harmless && r.is_ok()),
            "crash point {point}: {r:?}"
        );
        fs.crash(point.wrapping_mul(0x9E37));
        let fsa: Arc<CrashVfs> = Arc::new(fs.clone());
        let db = Db::open_with(fsa.clone(), path, opts())
            .unwrap_or_else(|e| panic!("crash point {point}: open: {e}"));
        match db.root::<Outline>("outline") {
            Ok(_) => {
                new += 1;
                check_v2(&db, 0).unwrap_or_else(|e| panic!("crash point {point}: {e}"));
            }
            Err(Error::SchemaMismatch { .. }) => {
                old += 1;
                let o: PRef<evolve_common::v1::Outline> =
                    db.root("outline").expect("v1").expect("outline");
                let n = amber::View::slice(&db, &db.get(o).tasks).len();
                assert_eq!(n, evolve_common::TASKS as usize, "crash point {point}");
            }
            Err(e) => panic!("crash point {point}: {e}"),
        }
        let deep = db.verify_deep().expect("deep");
        assert!(deep.is_clean(), "crash point {point}: {:?}", deep.findings);
        db.close().expect("close");
        if point % 5 == 0 {
            m.run_file_with(fsa.clone(), path)
                .expect("migrate after the crash");
            let db = Db::open_with(fsa, path, opts()).expect("open");
            check_v2(&db, 0).unwrap_or_else(|e| panic!("crash point {point}, rerun: {e}"));
        }
    }
    assert!(
        old > 0 && new > 0,
        "v1 after {old} crash points, v2 after {new}"
    );
}

/// A buffer spanning several pages (3,000 tags of 8 bytes that become 16)
/// and a string longer than a page convert like small ones: the new block
/// spans the pages the new size needs.
#[test]
fn large_objects_convert() {
    use amber::{PIndex, View};
    use evolve_common::v1;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(DB_NAME);
    let mut db = Db::create(&path, opts()).expect("create");
    let mut tx = db.begin().expect("begin");
    let long_title = "x".repeat(10_000);
    let o = tx
        .alloc_with(|tx| {
            let t = tx.alloc_with(|tx| {
                Ok(v1::Task {
                    title: tx.new_string(&long_title)?,
                    prio: 9,
                    finished: 1,
                    tags: tx.new_vec((0..3000).map(|k| v1::Tag {
                        code: k,
                        level: k * 2,
                    }))?,
                    next: None,
                })
            })?;
            Ok(v1::Outline {
                name: tx.new_string("big")?,
                tasks: tx.new_vec([t])?,
                by_title: PIndex::new(),
            })
        })
        .expect("alloc");
    tx.set_root("outline", o).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");

    let db = Db::open(&path, opts()).expect("open");
    let (db, stats) = db.migrate(&v2::migration()).expect("migrate");
    assert!(stats.rewritten);
    let o: PRef<Outline> = db.root("outline").expect("root").expect("outline");
    let t = db.get(db.slice(&db.get(o).tasks)[0]);
    assert_eq!(db.str(&t.title), long_title);
    assert_eq!((t.priority, t.done, t.effort), (90, 1, 3));
    let tags = db.slice(&t.tags);
    assert_eq!(tags.len(), 3000);
    for (k, g) in tags.iter().enumerate() {
        let k = k as u32;
        assert_eq!((g.code, g.level, g.weight, g.spare), (k, k * 2, 1.5, 0));
    }
    let deep = db.verify_deep().expect("deep");
    assert!(deep.is_clean(), "{:?}", deep.findings);
    db.close().expect("close");
}

/// `Task` without its tags: a dropped field.
mod dropped {
    use amber::{PIndex, PRef, PString, Persistent};
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Outline {
        pub name: PString,
        pub tasks: amber::PVec<PRef<Task>>,
        pub by_title: PIndex<Task, String>,
    }
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Task {
        pub title: PString,
        pub prio: u32,
        pub finished: u32,
        pub next: Option<PRef<Task>>,
    }
}

/// What only a dropped field reached (the tags' buffers) is reclaimed by
/// the migration, and its layout retired.
#[test]
fn a_dropped_field_frees_what_it_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let mut m = amber::Migration::new();
    m.upgrade::<dropped::Outline>().expect("upgrade");
    let stats = m.run_file(&path).expect("migrate");
    assert!(
        stats
            .changes
            .iter()
            .any(|c| c == "`Task`: field `tags` removed (its values dropped)"),
        "{:?}",
        stats.changes
    );
    let names = catalog(&path);
    assert!(!names.iter().any(|n| n == "[Tag]"), "{names:?}");
    let db = Db::open(&path, opts()).expect("open");
    let o: PRef<dropped::Outline> = db.root("outline").expect("root").expect("outline");
    let tasks = amber::View::slice(&db, &db.get(o).tasks);
    assert_eq!(tasks.len(), evolve_common::TASKS as usize);
    assert_eq!(db.get(tasks[5]).prio, 15);
    let deep = db.verify_deep().expect("deep");
    assert!(deep.is_clean(), "{:?}", deep.findings);
}

/// A read-only handle cannot migrate (nor collect): refused with a clear
/// error, the database left as it was; its plan is readable.
#[test]
fn a_read_only_handle_cannot_migrate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let before = std::fs::read(&path).expect("read");
    let db = Db::open_read_only(&path, opts()).expect("open read-only");
    assert_eq!(db.migration_plan(&v2::migration()).expect("plan").len(), 7);
    let e = db.migrate(&v2::migration()).expect_err("read-only");
    assert!(matches!(e, Error::Invalid(_)), "{e}");
    assert!(
        e.to_string()
            .contains("open the database writable to migrate"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), before);
    let db = Db::open_read_only(&path, opts()).expect("open read-only");
    let e = db.collect().expect_err("read-only");
    assert!(matches!(e, Error::Invalid(_)), "{e}");
    assert!(
        e.to_string()
            .contains("open the database writable to collect"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), before);
}

/// Saving a schema file over an older one with every file-system call
/// failing in turn: the older file stays whole (a failed save) or the new
/// one is in place, never a part of either; loading a damaged file is
/// refused naming it.
#[test]
fn a_schema_file_is_replaced_whole_or_not_at_all() {
    use amber::internals::io::countdown::CountdownVfs;
    use amber::internals::io::real::RealVfs;
    use std::sync::Arc;

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("app.schema");
    let mut old = amber::Migration::new();
    old.upgrade::<dropped::Outline>().expect("upgrade");
    let mut new = amber::Migration::new();
    new.upgrade::<no_default::Task>().expect("upgrade");
    let plan_of = |m: &amber::Migration| {
        let db_dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(copy_fixture(db_dir.path()), opts()).expect("open");
        db.migration_plan(m).map_err(|e| e.to_string())
    };
    let (old_plan, new_plan) = (plan_of(&old), plan_of(&new));
    assert_ne!(old_plan, new_plan);
    for n in 1.. {
        old.save(&path).expect("the older file");
        let vfs = CountdownVfs::new(Arc::new(RealVfs), n, false);
        let r = new.save_with(&vfs, &path);
        let failed = vfs.failed_file().is_some();
        assert_eq!(r.is_err(), failed, "call {n}: {r:?}");
        let loaded = amber::Migration::load(&path).expect("a whole file");
        let got = plan_of(&loaded);
        if failed {
            assert!(got == old_plan || got == new_plan, "call {n}: {got:?}");
        } else {
            assert_eq!(got, new_plan, "call {n}");
            break;
        }
    }
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).expect("write");
    let e = amber::Migration::load(&path).expect_err("damaged");
    assert!(
        e.to_string().contains("app.schema") && e.to_string().contains("checksum"),
        "{e}"
    );
}
