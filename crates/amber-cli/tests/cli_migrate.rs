//! `amber migrate PATH --schema FILE`: version 1's database (the amber
//! crate's committed fixture) migrated from a schema file that a version 2
//! of the program wrote (`Migration::save`), without the program: a dry
//! run that changes nothing, the migration, a second run that finds nothing
//! to do; a schema file that would need a default it lacks, a damaged one,
//! and a missing one, each refused on one line with the database untouched.

mod common;
#[path = "../../amber/tests/evolve_common/mod.rs"]
mod evolve_common;

use amber::{Db, Migration, PIndex, PRef, PString, PVec, Persistent, View};
use common::{amber, assert_error, s, serial};
use evolve_common::{TASKS, copy_fixture, no_default, title};

/// Version 2 as a schema file can carry it: renames, defaults, a grown
/// element type; no conversion.
mod v2 {
    use super::*;
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Outline {
        pub name: PString,
        pub tasks: PVec<PRef<Task>>,
        pub by_title: PIndex<Task, String>,
    }
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Task {
        pub title: PString,
        #[persistent(renamed_from = "prio")]
        pub rank: u32,
        #[persistent(renamed_from = "finished")]
        pub done: u32,
        pub tags: PVec<Tag>,
        pub next: Option<PRef<Task>>,
        #[persistent(default = 7)]
        pub effort: u64,
    }
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Tag {
        pub code: u32,
        pub level: u32,
        #[persistent(default = 2.5)]
        pub weight: f64,
    }
}

#[test]
fn migrate_from_a_schema_file() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let schema = dir.path().join("v2.schema");
    let mut m = Migration::new();
    m.upgrade::<v2::Outline>().expect("upgrade");
    m.save(&schema).expect("save");

    let before = std::fs::read(&path).expect("read");
    let r = amber(&["migrate", s(&path), "--schema", s(&schema), "--dry-run"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "would change: `Task`: field `prio` renamed to `rank`",
        "would change: `Task`: field `effort` added (its default)",
        "would change: `Tag`: field `weight` added (its default)",
    ] {
        assert!(r.stdout.contains(want), "{want}: {}", r.stdout);
    }
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "a dry run writes nothing"
    );

    let r = amber(&["migrate", s(&path), "--schema", s(&schema)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("changed: `Task`: field `finished` renamed to `done`"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("gc: kept"), "{}", r.stdout);

    let db = Db::open(&path, evolve_common::opts()).expect("open");
    let o: PRef<v2::Outline> = db.root("outline").expect("root").expect("outline");
    let tasks = db.slice(&db.get(o).tasks);
    assert_eq!(tasks.len(), TASKS as usize);
    for (i, &t) in tasks.iter().enumerate() {
        let i = i as u32;
        let task = db.get(t);
        assert_eq!(db.str(&task.title), title(i));
        assert_eq!((task.rank, task.done, task.effort), (i * 3, i % 2, 7));
        let tags: Vec<(u32, u32, f64)> = db
            .slice(&task.tags)
            .iter()
            .map(|g| (g.code, g.level, g.weight))
            .collect();
        let want: Vec<_> = evolve_common::tags(i)
            .into_iter()
            .map(|(c, l)| (c, l, 2.5))
            .collect();
        assert_eq!(tags, want, "task {i}");
    }
    db.close().expect("close");

    let r = amber(&["migrate", s(&path), "--schema", s(&schema)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("nothing written"), "{}", r.stdout);

    // `amber inspect` shows a string field's text beside its header.
    let shown = (2..8).any(|page| {
        let r = amber(&["inspect", s(&path), "--page", &page.to_string()]);
        r.stdout.contains("title (PString, offset 0): len 9")
            && r.stdout.contains("contents: \"task 0000\"")
    });
    assert!(shown, "no page shows task 0000's title");
}

#[test]
fn refusals_leave_the_database_untouched() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = copy_fixture(dir.path());
    let before = std::fs::read(&path).expect("read");

    let schema = dir.path().join("bad.schema");
    let mut m = Migration::new();
    m.upgrade::<no_default::Task>().expect("upgrade");
    m.save(&schema).expect("save");
    let r = amber(&["migrate", s(&path), "--schema", s(&schema)]);
    assert_error(&r, "field `Task.owner` is new and has no default");

    let mut bytes = std::fs::read(&schema).expect("read");
    bytes[12] ^= 0xff;
    std::fs::write(&schema, &bytes).expect("write");
    let r = amber(&["migrate", s(&path), "--schema", s(&schema)]);
    assert_error(&r, "checksum does not match");

    let missing = dir.path().join("missing.schema");
    let r = amber(&["migrate", s(&path), "--schema", s(&missing)]);
    assert_error(&r, "read the schema file");

    assert_eq!(std::fs::read(&path).expect("read"), before);

    // A migration with a conversion is code: it cannot be saved.
    let mut m = Migration::new();
    m.convert_field::<v2::Task, u16, u32>("rank", u32::from)
        .expect("convert");
    let e = m.save(dir.path().join("code.schema")).expect_err("code");
    assert!(e.to_string().contains("run it from the program"), "{e}");
}
