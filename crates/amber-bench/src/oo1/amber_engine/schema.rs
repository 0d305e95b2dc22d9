//! The OO1 schema as persistent Amber types.
//!
//! A part holds its three outgoing connections and a vector of its incoming
//! ones; a connection points at both of its parts. Connections are objects of
//! their own (OO1's schema gives them `kind` and `length`), allocated on the
//! page of their `from` part, so a traversal that reads a part and follows its
//! connections stays on one page for the first step.
//!
//! **(choice)** The id index is two-level: the root holds a vector of
//! [`PartChunk`]s, each a page-sized array of [`CHUNK`] part pointers (ids are
//! dense, so id `i` is slot `(i − 1) % CHUNK` of chunk `(i − 1) / CHUNK`). A
//! single `PVec<PRef<Part>>` would do the same lookups with one load less, but
//! its buffer is one object: at 200,000 parts a 1.6 MB run of 391 pages that the
//! first lookup after opening must fetch and swizzle whole (reserving frames
//! for every part page), that a cache budget must keep or refetch whole, and
//! that an insert which outgrows it copies and logs whole. A chunk is one
//! page: fetched, swizzled and logged alone.

use amber::{PRef, PVec, Persistent};

/// Part ids per [`PartChunk`]: 500 pointers (4,000 bytes) fill one 4 KiB page
/// with the page and object headers.
pub const CHUNK: usize = 500;

/// An OO1 part: 72 bytes, no padding.
#[derive(Persistent)]
#[persistent(name = "oo1::Part")]
#[repr(C)]
pub struct Part {
    pub id: u32,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub x: i32,
    pub y: i32,
    pub build: i64,
    /// The outgoing connections in slot order. `Option` only because a cycle
    /// of non-null pointers cannot be allocated (a part needs its connections
    /// and a connection its part): every stored part has all three.
    pub out: [Option<PRef<Conn>>; 3],
    /// The connections that end at this part, in the order they were made.
    pub incoming: PVec<PRef<Conn>>,
}

/// An OO1 connection: 32 bytes, no padding.
#[derive(Persistent)]
#[persistent(name = "oo1::Conn")]
#[repr(C)]
pub struct Conn {
    pub from: PRef<Part>,
    pub to: PRef<Part>,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub length: i32,
}

/// [`CHUNK`] slots of the id index.
#[derive(Persistent)]
#[persistent(name = "oo1::PartChunk")]
#[repr(C)]
pub struct PartChunk {
    pub parts: [Option<PRef<Part>>; CHUNK],
}

/// The root object: how many parts there are and the chunks of the id index.
#[derive(Persistent)]
#[persistent(name = "oo1::Root")]
#[repr(C)]
pub struct Root {
    /// Parts `1..=parts` exist.
    pub parts: u64,
    pub chunks: PVec<PRef<PartChunk>>,
}

/// The name of the root object.
pub const ROOT: &str = "oo1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Part>(), 72);
        assert_eq!(std::mem::size_of::<Conn>(), 32);
        assert_eq!(std::mem::size_of::<PartChunk>(), 4_000);
        assert_eq!(std::mem::size_of::<Root>(), 24);
    }
}
