//! Version 2 of the outline's types: `Task.prio` (u32) became `priority`
//! (u64, converted), `finished` was renamed `done`, `effort` and `parent`
//! were added with defaults, the fields were reordered, and `Tag` grew a
//! `weight` with a default. `Outline` is unchanged, but what it points to
//! grew.

use amber::{PIndex, PRef, PString, PVec, Persistent};

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
    pub tags: PVec<Tag>,
    pub title: PString,
    #[persistent(renamed_from = "prio")]
    pub priority: u64,
    #[persistent(renamed_from = "finished")]
    pub done: u32,
    #[persistent(default = 3)]
    pub effort: u32,
    pub next: Option<PRef<Task>>,
    #[persistent(default)]
    pub parent: Option<PRef<Task>>,
}

#[derive(Persistent)]
#[repr(C)]
pub struct Tag {
    pub code: u32,
    pub level: u32,
    #[persistent(default = 1.5)]
    pub weight: f32,
    #[persistent(default)]
    pub spare: u32,
}

/// The migration from version 1.
pub fn migration() -> amber::Migration {
    let mut m = amber::Migration::new();
    m.upgrade::<Outline>()
        .expect("v2 types")
        .convert_field::<Task, u32, u64>("priority", |p| u64::from(p) * 10)
        .expect("priority");
    m
}
