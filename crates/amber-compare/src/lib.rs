//! Comparison engines for Amber's benchmarks, each written the way a careful
//! user of that engine would write OO1:
//!
//! - [`memory`]: plain Rust structs in memory, nothing persisted (the speed limit);
//! - [`snapshot`]: the same structs serialised whole with serde + postcard;
//! - [`sqlite`]: SQLite through rusqlite, WAL, `synchronous = FULL`;
//!   normalised (a parts table and a connections table);
//! - [`lmdb`]: LMDB through lmdb-rkv, fixed-size records read in place,
//!   normalised (parts, outgoing and incoming connections apart);
//! - [`lmdb_inline`]: LMDB with one record per part holding its connections;
//! - [`redb`]: redb tables keyed by id, normalised as `lmdb`;
//! - [`redb_inline`]: redb with one record per part holding its connections;
//! - [`postgres`]: PostgreSQL, a server the engine starts itself, normalised
//!   as `sqlite`.
//!
//! Every engine that persists syncs each commit; each says how, and how it
//! lays out the graph, in its `EngineInfo`.
//!
//! [`index_peer`] is redb as the peer of `amber bench index`; [`oo7`] holds
//! the engines of `amber bench oo7`.
//!
//! A front end passes [`engines()`] to `amber_bench::oo1::run_oo1` and to
//! `amber_bench::oo1::run_oo1_child`.
#![deny(clippy::unwrap_used)]

pub mod graph;
pub mod index_peer;
pub mod inline;
pub mod lmdb;
pub mod lmdb_inline;
pub mod memory;
pub mod oo7;
pub mod postgres;
pub mod record;
pub mod redb;
pub mod redb_inline;
pub mod snapshot;
pub mod sqlite;

use amber_bench::oo1::EngineFactory;

/// Every comparison engine, in the default column order: those running in
/// the calling process, then `postgres` (which starts a server: its tests
/// share one, in `tests/postgres.rs`).
pub fn engines() -> Vec<Box<dyn EngineFactory>> {
    let mut all = in_process_engines();
    all.push(Box::new(postgres::oo1::PostgresFactory));
    all
}

/// The comparison engines that run in the calling process.
pub fn in_process_engines() -> Vec<Box<dyn EngineFactory>> {
    vec![
        Box::new(memory::MemoryFactory),
        Box::new(snapshot::SnapshotFactory),
        Box::new(sqlite::SqliteFactory),
        Box::new(lmdb::LmdbFactory),
        Box::new(lmdb_inline::LmdbInlineFactory),
        Box::new(redb::RedbFactory),
        Box::new(redb_inline::RedbInlineFactory),
    ]
}
