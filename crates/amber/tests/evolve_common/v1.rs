//! The outline's types as version 1 of a program had them: the layouts the
//! fixture `fixtures/evolve-v1/` was written with (`evolve_v1.rs`), which
//! `evolve.rs` migrates to `v2.rs`.

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
    pub title: PString,
    pub prio: u32,
    pub finished: u32,
    pub tags: PVec<Tag>,
    pub next: Option<PRef<Task>>,
}

/// Held by value in a vector's buffer.
#[derive(Persistent)]
#[repr(C)]
pub struct Tag {
    pub code: u32,
    pub level: u32,
}

/// Only freed objects have it: its layout is retired by a migration.
#[derive(Persistent)]
#[repr(C)]
pub struct Scratch {
    pub v: u64,
}
