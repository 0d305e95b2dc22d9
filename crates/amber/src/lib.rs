//! Amber: a persistent object store for Rust.
//!
//! A program opens a [`Db`] and works on a graph of persistent objects
//! through ordinary pointers ([`PRef`]): pages are faulted in and their
//! pointers swizzled on first touch, updates are made in place and noticed
//! by page protection, and [`Tx::commit`] writes only the changed bytes to a
//! write-ahead log. A crash never loses a committed transaction.
//!
//! # A tour
//!
//! **Types.** A persistent type is a `#[repr(C)]` struct with
//! `#[derive(Persistent)]` whose fields are numbers, fixed arrays, other
//! persistent structs, and Amber's pointer and collection types; the
//! derive refuses padding, references, `String`, `Vec` and `Box` at
//! compile time, with advice. The layout is recorded in the database's
//! catalog the first time a type is used and checked against the program's
//! on every open ([`Error::SchemaMismatch`] names the field).
//!
//! | field type | what it is |
//! |---|---|
//! | [`PRef<T>`], `Option<PRef<T>>` | a pointer: a plain address in memory, swizzled when its page is faulted in |
//! | [`Smart<T>`] | a persistent address translated at each use (sparse, high-fanout structures) |
//! | [`Lazy<T>`] | a persistent address swizzled upon discovery: rewritten in memory to the direct address when followed while its target is resident |
//! | [`PVec<T>`] | a growable array in a buffer of its own, with `Vec`'s operations and growth |
//! | [`PString`], [`PBytes`] | UTF-8 text (checked where it is read) and bytes |
//! | [`PIndex<V, K>`] | an ordered map from keys (`u64`, `String`, byte strings, tuples: [`IndexKey`]) to `PRef<V>` |
//! | [`PMultiIndex<V, K>`] | the same with several values per key |
//!
//! **Opening.** [`Db::create`], [`Db::open`] (recovering after a crash),
//! [`Db::open_or_create`], [`Db::open_read_only`] (a snapshot beside the
//! writer, in this process or another, moved forward by [`Db::refresh`]).
//! [`Options`] choose the fault backend, the cache budget and more.
//!
//! **Reading.** Named roots ([`Db::root`]) lead into the graph; from there
//! [`Db::get`] follows a pointer (a load once the page is resident),
//! [`Db::try_get`] returns damage or a stale pointer as an error, and the
//! [`View`] trait gives the same reads on a [`Db`] and a [`Tx`]: slices of
//! vectors, strings, roots, per-type counts. Indexes are read with
//! `index_get`, `index_range` (an iterator over any `RangeBounds`) and, for
//! a multi-index, `multi_get`.
//!
//! **Changing.** [`Db::begin`] starts a [`Tx`]: `alloc` (and `alloc_near`,
//! `alloc_with` to create an object with its strings and vectors in one
//! call), `get_mut` to change an object in place, the vector operations
//! (`push`, `insert`, `remove`, `retain`, `extend`, …), `set_str`,
//! `index_insert`/`index_remove`, `set_root`, `free` (an object with the
//! buffers and index nodes it owns) and `free_tree` (everything its
//! pointers and its indexes' values reach). `commit` makes it durable; `abort`, a failed commit, a
//! dropped or a forgotten transaction leave memory and disk as they were.
//!
//! **Space.** Freed space is not reused within a session, so a stale
//! pointer is always refused, never led to another object. [`Db::collect`]
//! (or `amber gc PATH`) keeps what the roots reach, reclaims the rest and
//! shrinks the file.
//!
//! **Evolving types.** When a struct changes — fields added with
//! `#[persistent(default)]` or `#[persistent(default = VALUE)]`, renamed
//! with `#[persistent(renamed_from = "old")]`, reordered, dropped, or
//! given another numeric type through a typed conversion — a [`Migration`]
//! converts the stored objects: [`Db::migrate`] (once; later calls find
//! nothing to do), [`Migration::run_file`], or `amber migrate PATH
//! --schema FILE` from a schema file the program saved. Until then, the
//! changed type is refused with an error naming the field.
//!
//! **Errors.** Every fallible call returns [`Result`]; [`Error`] says in
//! one line what is wrong and where (file, page, LSN, field), and its
//! `Debug` is the same line, so `fn main() -> amber::Result<()>` reads
//! well.
//!
//! **Administration.** The read-only [`inspect`] module (files, committed
//! state, verification, deep verification of every pointer, salvage of a
//! damaged or missing log) is what the `amber` command is built on.
//!
//! ```
//! use amber::{Db, Options, PIndex, PRef, PString, Persistent, View};
//! use std::ops::Bound;
//!
//! #[derive(Persistent)]
//! #[repr(C)]
//! struct City {
//!     name: PString,
//!     people: u64,
//! }
//!
//! #[derive(Persistent)]
//! #[repr(C)]
//! struct Atlas {
//!     by_name: PIndex<City, String>,
//! }
//!
//! fn total(r: &impl View, cities: &[PRef<City>]) -> u64 {
//!     cities.iter().map(|&c| r.get(c).people).sum()
//! }
//!
//! # fn main() -> amber::Result<()> {
//! let path = std::env::temp_dir().join(format!("atlas-{}.amber", std::process::id()));
//! let mut db = Db::open_or_create(&path, Options::default())?;
//! let mut tx = db.begin()?;
//! let atlas = tx.alloc(Atlas { by_name: PIndex::new() })?;
//! let mut cities = Vec::new();
//! for (name, people) in [("Lyon", 522_000), ("Nantes", 320_000), ("Lille", 236_000)] {
//!     let c = tx.alloc_with(|tx| Ok(City { name: tx.new_string(name)?, people }))?;
//!     tx.index_insert(atlas, |a| &mut a.by_name, name, c)?;
//!     cities.push(c);
//! }
//! tx.set_root("atlas", atlas)?;
//! assert_eq!(total(&tx, &cities), 1_078_000); // the same read code in a transaction
//! tx.commit()?;
//!
//! let atlas: PRef<Atlas> = db.root("atlas")?.expect("root");
//! let l: Vec<String> = db
//!     .index_range(&db.get(atlas).by_name, (Bound::Included("L"), Bound::Excluded("M")))?
//!     .map(|e| e.map(|(name, _)| name))
//!     .collect::<amber::Result<_>>()?;
//! assert_eq!(l, ["Lille", "Lyon"]);
//! let lyon = db.index_get(&db.get(atlas).by_name, "Lyon")?.expect("Lyon");
//! assert_eq!(db.str(&db.get(lyon).name), "Lyon");
//! assert_eq!(total(&db, &cities), 1_078_000);
//! db.close()?;
//! # for s in ["", "-wal", "-readers"] {
//! #     let mut p = path.clone().into_os_string();
//! #     p.push(s);
//! #     let _ = std::fs::remove_file(p);
//! # }
//! # Ok(())
//! # }
//! ```
//!
//! The public API is what a program needs: [`Db`], [`Tx`], [`Options`], the
//! pointer and collection types, the [`Persistent`] derive, [`Error`], the
//! statistics, and the read-only [`inspect`] module. Everything else (the
//! virtual-memory module, the store, the on-disk formats, the log, the I/O
//! layer) is private: no safe call writes raw bytes into a data block or
//! names a root with an object of another type. Amber's own tests,
//! benchmarks and fuzzers reach the internals through the `internals`
//! cargo feature, which is unstable and can break every invariant this
//! crate keeps; programs must not enable it.
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
    source;
    store;
    translate;
    wal;
    wire;
    #[allow(unsafe_code)]
    vm;
}
mod copy;
mod error;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod fuzzing;
mod gc;
pub mod inspect;
mod ptr;

// Lets `#[derive(Persistent)]`, which names `::amber`, be used inside Amber.
extern crate self as amber;

/// `#[derive(Persistent)]`: see the `amber_derive` crate for what it checks.
pub use amber_derive::Persistent;
pub use copy::{Caching, CopyCache, CopyOptions, CopyPtr, CopyStats, CopyTx, Obj, Swizzle};
pub use db::index::{IndexKey, IndexRange, IndexValues};
pub use db::{CommitStats, Db, DbStats, Detect, Log, Options, Strategy, Tx, View};
pub use error::{Error, FileKind, Location, Result};
pub use gc::{CollectStats, MigrateStats, Migration, Plain};
pub use ptr::{Lazy, PBytes, PIndex, PMultiIndex, PRef, PString, PVec, Smart};
pub use source::Scheme;
pub use source::remote::RemoteOptions;
pub use source::tls::TlsOptions;
pub use store::{StoreOptions, StoreStats};
pub use vm::{Backend, BackendChoice, Field, Persistent};

/// Type descriptors: what `#[derive(Persistent)]` says about a type (its
/// name, size, and each field's offset and kind), as [`Persistent::DESC`]
/// and [`Field::KIND`] hold them.
pub mod desc {
    pub use crate::schema::desc::{
        Evolution, FieldDefault, FieldDesc, FieldKind, Prim, Target, TypeDesc,
    };
}

/// What `#[derive(Persistent)]` expands to needs; not for direct use.
#[doc(hidden)]
pub mod __private {
    pub use crate::schema::desc::PrimitiveDefault;
    pub use crate::vm::check_layout;
}

/// Amber's internals, for its own tests, benchmarks, fuzzers and tools:
/// unstable, undocumented as API, and able to break every invariant the
/// public API keeps (raw writes into data blocks, frame spaces with any
/// fault service). Enabled by the `internals` cargo feature only.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::{
        db, fasthash, format, fuzzing, io, schema, source, store, translate, vm, wal, wire,
    };
}

/// The README, whose Rust examples rustdoc compiles and runs as doctests, so
/// that a change of the API that breaks them fails `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
