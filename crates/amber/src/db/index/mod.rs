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
//! (self-delimiting) encoding, the value's persistent address and an
//! 8-byte big-endian sequence number from the index header (format 2), so
//! that entries of one key are adjacent and ordered by value, a removal
//! descends to its entry, and every entry has a unique tree key (the same
//! value twice differs in the sequence number). A collection that moves a
//! value rewrites the entry's value but not its key: removing such a value
//! falls back to reading its key's entries, as every removal in an index
//! of the first format (key and sequence number only, entries in insertion
//! order) does; Amber reads and writes both.
//!
//! The read side is written once, over `read::Nodes` (what a `Db` and a `Tx`
//! both have), and exposed on both (`api.rs`).

mod api;
mod key;
pub(crate) mod node;
mod read;
mod write;

pub use api::{IndexRange, IndexValues};
pub(crate) use api::{BY_VALUE, multi_suffix, reads};
pub(crate) use read::Nodes;
pub use key::IndexKey;
