//! Comparison engines for Amber's benchmarks, each written the way a careful
//! user of that engine would write OO1:
//!
//! - [`memory`]: plain Rust structs in memory, nothing persisted (the speed limit);
//! - [`snapshot`]: the same structs serialised whole with serde + postcard;
//! - [`sqlite`]: SQLite through rusqlite, WAL, `synchronous = FULL`;
//! - [`lmdb`]: LMDB through heed, fixed-size records read in place;
//! - [`redb`]: redb tables keyed by id.
//!
//! A front end passes [`engines()`] to `amber_bench::oo1::run_oo1` and to
//! `amber_bench::oo1::run_oo1_child`.
#![deny(clippy::unwrap_used)]

pub mod graph;
pub mod lmdb;
pub mod memory;
pub mod record;
pub mod redb;
pub mod snapshot;
pub mod sqlite;

use amber_bench::oo1::EngineFactory;

/// Every comparison engine, in the default column order.
pub fn engines() -> Vec<Box<dyn EngineFactory>> {
    vec![
        Box::new(memory::MemoryFactory),
        Box::new(snapshot::SnapshotFactory),
        Box::new(sqlite::SqliteFactory),
        Box::new(lmdb::LmdbFactory),
        Box::new(redb::RedbFactory),
    ]
}
