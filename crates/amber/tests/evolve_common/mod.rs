//! The outline of the schema-evolution tests: its two versions, and the
//! data version 1 writes (which version 2 must read back, converted).

#![allow(dead_code)]

pub mod v1;
pub mod v2;

/// `Task` as a version 2 that forgot a default would have it.
pub mod no_default {
    use amber::{PRef, PString, PVec, Persistent};
    #[derive(Persistent)]
    #[repr(C)]
    pub struct Task {
        pub title: PString,
        pub prio: u32,
        pub finished: u32,
        pub tags: PVec<super::v1::Tag>,
        pub next: Option<PRef<Task>>,
        pub owner: u64,
    }
}

use amber::{Db, Options, PIndex, PRef, PVec, Result};
use std::path::{Path, PathBuf};

/// Tasks the fixture holds.
pub const TASKS: u32 = 120;

/// Where the committed fixture lives (from the amber crate, or from a
/// sibling crate's tests that include this module).
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../amber/tests/fixtures/evolve-v1")
}

/// The database's file name in a fixture directory.
pub const DB_NAME: &str = "outline.amber";

pub fn title(i: u32) -> String {
    format!("task {i:04}")
}

pub fn tags(i: u32) -> Vec<(u32, u32)> {
    (0..i % 4).map(|k| (i * 10 + k, k)).collect()
}

/// Writes version 1's outline: `TASKS` tasks in a vector and an index by
/// title, chained by `next`, with tags; and a `Scratch` object, freed.
pub fn write_v1(db: &mut Db) -> Result<()> {
    use v1::*;
    let mut tx = db.begin()?;
    let outline = tx.alloc_with(|tx| {
        Ok(Outline {
            name: tx.new_string("chores")?,
            tasks: PVec::new(),
            by_title: PIndex::new(),
        })
    })?;
    tx.set_root("outline", outline)?;
    let mut prev: Option<PRef<Task>> = None;
    for i in 0..TASKS {
        // All tags but the last in one buffer, the last pushed: the buffer
        // then has spare capacity, which a migration must convert too.
        let mut all: Vec<Tag> = tags(i)
            .into_iter()
            .map(|(code, level)| Tag { code, level })
            .collect();
        let last = all.pop();
        let t = tx.alloc_with(|tx| {
            Ok(Task {
                title: tx.new_string(&title(i))?,
                prio: i * 3,
                finished: i % 2,
                tags: tx.new_vec(all)?,
                next: prev,
            })
        })?;
        if let Some(last) = last {
            tx.push(t, |t| &mut t.tags, last)?;
        }
        tx.push(outline, |o| &mut o.tasks, t)?;
        tx.index_insert(outline, |o| &mut o.by_title, title(i).as_str(), t)?;
        prev = Some(t);
    }
    let s = tx.alloc(Scratch { v: 7 })?;
    tx.commit()?;
    let mut tx = db.begin()?;
    tx.free(s)?;
    tx.commit().map(drop)
}

/// Checks version 2's view of what `write_v1` wrote (converted by
/// `v2::migration`); `extra` tasks were added after the migration.
pub fn check_v2(db: &Db, extra: u32) -> std::result::Result<(), String> {
    use amber::View;
    use v2::*;
    let o: PRef<Outline> = db
        .root("outline")
        .map_err(|e| e.to_string())?
        .ok_or("no outline")?;
    let outline = db.get(o);
    if db.str(&outline.name) != "chores" {
        return Err(format!("name {:?}", db.str(&outline.name)));
    }
    let tasks = db.slice(&outline.tasks);
    if tasks.len() != (TASKS + extra) as usize {
        return Err(format!("{} tasks", tasks.len()));
    }
    for (i, &t) in tasks.iter().enumerate().take(TASKS as usize) {
        let i = i as u32;
        let task = db.get(t);
        let want_next = (i > 0).then(|| tasks[i as usize - 1]);
        let got_tags: Vec<(u32, u32, f32, u32)> = db
            .slice(&task.tags)
            .iter()
            .map(|g| (g.code, g.level, g.weight, g.spare))
            .collect();
        let want_tags: Vec<_> = tags(i).into_iter().map(|(c, l)| (c, l, 1.5, 0)).collect();
        let got = (
            db.str(&task.title).to_string(),
            task.priority,
            task.done,
            task.effort,
            task.next,
            task.parent,
            got_tags,
        );
        let want = (
            title(i),
            u64::from(i * 3) * 10,
            i % 2,
            3,
            want_next,
            None,
            want_tags,
        );
        if got != want {
            return Err(format!("task {i}: {got:?}, want {want:?}"));
        }
        let by_title = db
            .index_get(&outline.by_title, title(i).as_str())
            .map_err(|e| e.to_string())?;
        if by_title != Some(t) {
            return Err(format!("index lookup of task {i}: {by_title:?}"));
        }
    }
    Ok(())
}

/// Copies the committed fixture into `dir`; returns the database's path.
pub fn copy_fixture(dir: &Path) -> PathBuf {
    for e in std::fs::read_dir(fixture_dir()).expect("the fixture directory") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), dir.join(e.file_name())).expect("copy the fixture");
    }
    dir.join(DB_NAME)
}

pub fn opts() -> Options {
    Options::default()
}
