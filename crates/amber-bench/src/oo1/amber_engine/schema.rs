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
//! **(choice)** The id index is the root's `PVec<PRef<Part>>`: ids are dense,
//! so part `id` is element `id − 1`, and a lookup is two loads (the element,
//! then the part). Its buffer is one object: at 200,000 parts a run of 391
//! pages, which the first lookup after opening faults in whole (reading,
//! checksumming and swizzling 200,000 pointers, which reserves a frame for
//! every part page), which a cache budget evicts and refetches whole, and which
//! an insert that outgrows its capacity (a doubling) copies and logs whole. A
//! two-level index (page-sized chunks of 500 pointers) avoids those costs but
//! adds a dependent load to every lookup: measured on 20,000 parts, 7.0 µs
//! per 1,000 hot lookups against 5.3 µs for the flat vector and 3.8 µs for
//! plain memory, so the flat vector it is.

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

/// The root object: the id index.
#[derive(Persistent)]
#[persistent(name = "oo1::Root")]
#[repr(C)]
pub struct Root {
    /// Part `id` is `parts[id − 1]`.
    pub parts: PVec<PRef<Part>>,
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
        assert_eq!(std::mem::size_of::<Root>(), 16);
    }
}
