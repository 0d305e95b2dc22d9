//! Amber: a persistent object store for Rust.
//!
//! A program opens a [`Db`] and works on a graph of persistent objects
//! through ordinary pointers ([`PRef`]): pages are faulted in and their
//! pointers swizzled on first touch, updates are made in place and noticed
//! by page protection, and [`Tx::commit`] writes only the changed bytes to a
//! write-ahead log.
//!
//! The public API is what a program needs: [`Db`], [`Tx`], [`Options`], the
//! pointer and collection types, the [`Persistent`] derive, [`Error`], the
//! statistics, and the read-only [`inspect`] module (files, committed state,
//! verification, deep verification) that the `amber` command is built on.
//! Everything else (the virtual-memory module, the store, the
//! on-disk formats, the log, the I/O layer) is private: no safe call writes
//! raw bytes into a data block or names a root with an object of another
//! type. Amber's own tests, benchmarks and fuzzers reach the internals
//! through the `internals` cargo feature, which is unstable and can break
//! every invariant this crate keeps; programs must not enable it.
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
// Without `internals`, the items only Amber's tools and tests use (through
// `amber::internals`) are unused; with it (every workspace build, since the
// benchmarks enable it) they are reachable.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

/// Declares internal modules: private, or with the `internals` feature
/// public (hidden from the docs) so that `internals` can re-export them.
/// Their items are documented where it helps a reader, not as public API.
macro_rules! internal_modules {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        #[allow(missing_docs)]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

internal_modules! {
    db;
    fasthash;
    format;
    io;
    schema;
    store;
    translate;
    wal;
    #[allow(unsafe_code)]
    vm;
}
mod error;
mod gc;
pub mod inspect;
mod ptr;

// Lets `#[derive(Persistent)]`, which names `::amber`, be used inside Amber.
extern crate self as amber;

/// `#[derive(Persistent)]`: see the `amber_derive` crate for what it checks.
pub use amber_derive::Persistent;
pub use db::index::{IndexKey, IndexRange, IndexValues};
pub use db::{CommitStats, Db, DbStats, Options, Tx, View};
pub use error::{Error, FileKind, Location, Result};
pub use gc::CollectStats;
pub use ptr::{PBytes, PIndex, PMultiIndex, PRef, PString, PVec, Smart};
pub use store::{StoreOptions, StoreStats};
pub use vm::{Backend, BackendChoice, Field, Persistent};

/// Type descriptors: what `#[derive(Persistent)]` says about a type (its
/// name, size, and each field's offset and kind), as [`Persistent::DESC`]
/// and [`Field::KIND`] hold them.
pub mod desc {
    pub use crate::schema::desc::{FieldDesc, FieldKind, Prim, Target, TypeDesc};
}

/// What `#[derive(Persistent)]` expands to needs; not for direct use.
#[doc(hidden)]
pub mod __private {
    pub use crate::vm::check_layout;
}

/// Amber's internals, for its own tests, benchmarks, fuzzers and tools:
/// unstable, undocumented as API, and able to break every invariant the
/// public API keeps (raw writes into data blocks, frame spaces with any
/// fault service). Enabled by the `internals` cargo feature only.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::{db, fasthash, format, io, schema, store, translate, vm, wal};
}

/// The README, whose Rust examples rustdoc compiles and runs as doctests, so
/// that a change of the API that breaks them fails `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
