//! `PIndex` and `PMultiIndex`: ordered maps from encoded keys to objects,
//! B+trees whose nodes are reached through persistent addresses translated
//! at each use.
//!
//! This is Texas's mixed granularity (`papers/001_*` §5): faulting in a node
//! swizzles nothing, so a lookup that follows one path down the tree
//! reserves frames for that path only, not for every child of every node it
//! touches. Keys are stored as their order-preserving encodings
//! ([`IndexKey`], `key.rs`) in slotted nodes (`node.rs`), compared as bytes;
//! a lookup reads one node per level.
//!
//! A multi-index is the same tree over composite keys: the key's nested
//! (self-delimiting) encoding followed by an 8-byte big-endian sequence
//! number from the index header, so that entries of one key are adjacent,
//! in insertion order, and every entry has a unique tree key (a value can
//! be found and removed without scanning other keys). The sequence
//! number, not the value's address, makes them unique, so that moving an
//! object (compaction) rewrites the values and never the order.
//!
//! The read side is written once, over `read::Nodes` (what a `Db` and a `Tx`
//! both have), and exposed on both (`api.rs`).

mod api;
mod key;
pub(crate) mod node;
mod read;
mod write;

pub use api::{IndexRange, IndexValues};
pub(crate) use api::reads;
pub(crate) use read::Nodes;
pub use key::IndexKey;
