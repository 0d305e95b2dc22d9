//! The OO1 schema as persistent Amber types, in the shape of the `memory`
//! engine's `Graph` (`amber_compare::graph`).
//!
//! **(choice)** A part holds its three outgoing connections inline, as a
//! nested persistent struct [`Out`] (target, `kind`, `length`), and the
//! parts that connect to it in a vector, `incoming: PVec<PRef<Part>>`:
//! exactly what `memory` keeps (`out: [Conn; 3]` with the target's arena
//! index, `incoming: Vec<u32>` of the from-parts), with `PRef`s where it has
//! arena indices. There are no connection objects, so a traversal step is
//! one dependent load (part → part), as in `memory`, and a connection's
//! `from` is implicit (it is stored in its from-part), as in `memory`. This
//! is how a careful Amber user writes OO1: the connection's data is read
//! with its part, and nothing ever reaches a connection except through its
//! from-part (OO1 has no query by connection).
//!
//! The earlier schema kept OO1's connections as objects of their own (part →
//! `Conn` → part, the connection on its from-part's page): each traversal step
//! was two dependent loads, and a hot traversal took 1.28–1.9 × `memory`'s
//! time, where `amber bench hot` (the same shapes on both sides) measures
//! 0.95–0.99.
//!
//! **(choice)** The id index has two levels: the root holds a vector of
//! [`Chunk`]s, each an object of [`CHUNK`] part pointers (three to a page), so part
//! `id` is `chunks[(id − 1) / CHUNK].parts[(id − 1) % CHUNK]`. A lookup is
//! three loads (the chunk pointer, read from a vector of a few hundred
//! entries that stays in the L1 cache, the part pointer, the part), and
//! opening a database of any size costs the same: the first lookup faults in
//! the root, the chunk list, one chunk and the part, whatever N is. An
//! earlier flat index (the root's `PVec<PRef<Part>>`, one load less) was one
//! object of N pointers: at 200,000 parts a run of 391 pages that the first
//! lookup faulted in whole — reading, checksumming and swizzling 200,000
//! pointers, reserving a frame for every part page — which a cache budget
//! evicted and refetched whole, and which every insert dirtied, so that its
//! commit copied out, unswizzled and diffed 1.6 MB: open plus one lookup
//! took 5.7 ms, where OO1 asks for 50 × faster than loading a snapshot
//! (37 ms), and an insert of 100 parts 6.7 ms. The price of the second
//! level is paid by hot lookups: 6.4 µs per 1,000 on 20,000 parts against
//! 5.0 for the flat index and 3.7 for `memory`, whose index is the arena
//! itself (one load).

use amber::{PRef, PVec, Persistent};

/// An OO1 part: 120 bytes, no padding (a 128-byte slot with its object
/// header; `memory`'s part is 112 bytes plus malloc's header for its vector).
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
    /// The outgoing connections, in slot order.
    pub out: [Out; 3],
    /// The parts connecting to this one, one element per connection (a part
    /// connecting twice appears twice), in (from, slot) order.
    pub incoming: PVec<PRef<Part>>,
}

/// An outgoing connection, stored inside its from-part: 24 bytes, no
/// padding.
#[derive(Persistent, Clone, Copy)]
#[persistent(name = "oo1::Out")]
#[repr(C)]
pub struct Out {
    /// The target part. `Option` only because a part may connect to a part
    /// that is added after it (a higher id): the link is made when the target
    /// arrives, in the same transaction, so every committed part has all
    /// three.
    pub to: Option<PRef<Part>>,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub length: i32,
}

/// Part pointers per index chunk: a power of two, so that finding the chunk
/// is a shift and a mask, not a division (measured on 20,000 parts: 6.4 µs
/// per 1,000 hot lookups with 128 or 256, 7.8 with 507, the most that fit a
/// page). Three chunks of 128 (1,032 bytes with their headers) share a page;
/// one of 256 would leave half its page empty.
pub const CHUNK: usize = 128;

/// One chunk of the id index: the parts with ids `c·CHUNK + 1 ..=
/// (c + 1)·CHUNK` for chunk `c`.
#[derive(Persistent)]
#[persistent(name = "oo1::Chunk")]
#[repr(C)]
pub struct Chunk {
    /// `None` past the last part.
    pub parts: [Option<PRef<Part>>; CHUNK],
}

/// The root object: the id index.
#[derive(Persistent)]
#[persistent(name = "oo1::Root")]
#[repr(C)]
pub struct Root {
    /// The chunks, in id order.
    pub chunks: PVec<PRef<Chunk>>,
    /// Parts in the index (ids `1..=parts`).
    pub parts: u64,
}

/// The name of the root object.
pub const ROOT: &str = "oo1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Part>(), 120);
        assert_eq!(std::mem::size_of::<Out>(), 24);
        assert_eq!(std::mem::size_of::<Root>(), 24);
        // Three chunk objects fit one page's object area (4,064 bytes).
        assert!(3 * (8 + std::mem::size_of::<Chunk>()) <= 4096 - 32);
    }
}
