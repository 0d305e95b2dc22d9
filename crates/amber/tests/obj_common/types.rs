//! Persistent types of the round-trip suite: every pointer kind in every
//! layout the derive accepts.

use amber::{PBytes, PIndex, PRef, PVec, Persistent, Smart};

/// A small target.
#[derive(Persistent)]
#[repr(C)]
pub struct Leaf {
    pub v: u64,
    pub tag: [u8; 8],
}

/// A struct holding pointers, used by value (in arrays, vectors, structs).
#[derive(Persistent)]
#[repr(C)]
pub struct Pair {
    pub a: PRef<Leaf>,
    pub b: Option<PRef<Leaf>>,
}

/// A nested struct with pointers inside, and a struct inside it.
#[derive(Persistent)]
#[repr(C)]
pub struct Inner {
    pub x: u32,
    pub _pad: [u8; 4],
    pub leaf: Option<PRef<Leaf>>,
    pub pair: Pair,
}

/// A large object: a run of three pages, with pointers of its own.
#[derive(Persistent)]
#[repr(C)]
pub struct Big {
    pub head: u64,
    pub back: Option<PRef<Hub>>,
    pub leaves: [Option<PRef<Leaf>>; 4],
    pub data: [u8; 10000],
    pub tail: u64,
}

/// Every pointer kind at once.
#[derive(Persistent)]
#[repr(C)]
pub struct Hub {
    pub id: u64,
    pub inner: Inner,
    pub arr: [Option<PRef<Leaf>>; 5],
    pub pairs: [Pair; 3],
    pub none: Option<PRef<Leaf>>,
    pub me: Option<PRef<Hub>>,
    pub next: Option<PRef<Hub>>,
    pub smart: Smart<Leaf>,
    pub osmart: Option<Smart<Big>>,
    pub vrefs: PVec<PRef<Leaf>>,
    pub vpairs: PVec<Pair>,
    pub vnums: PVec<u64>,
    pub name: PBytes,
    pub blob: PBytes,
    pub idx: PIndex<Leaf>,
    pub big: Option<PRef<Big>>,
    pub bigs: PVec<PRef<Big>>,
}

/// The root of the round-trip database: every object, by kind.
#[derive(Persistent)]
#[repr(C)]
pub struct Catalog {
    pub leaves: PVec<PRef<Leaf>>,
    pub hubs: PVec<PRef<Hub>>,
    pub bigs: PVec<PRef<Big>>,
    pub first: Option<PRef<Hub>>,
}
