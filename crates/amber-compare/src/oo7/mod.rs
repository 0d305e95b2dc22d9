//! The comparison engines of `amber bench oo7`, each written the way a
//! careful user of it would write OO7:
//!
//! - [`memory`]: the model's plain Rust structs, nothing persisted;
//! - [`snapshot`]: the same structs serialised whole with serde + postcard;
//! - [`sqlite`]: normalised tables and indexes, one object per statement
//!   (and `sqlite-recursive`: T1 and T6 as one recursive query each);
//! - [`postgres`]: the same schema in PostgreSQL, a server the engine
//!   starts itself ([`crate::postgres`]), and `postgres-recursive`;
//! - [`lmdb`] and [`redb`]: records keyed by id with secondary-index
//!   tables ([`normalised`]), and `lmdb-inline` / `redb-inline`: records
//!   holding their relationships ([`inline`]); the OO7 logic written once
//!   over [`kv`].
//!
//! A front end passes [`engines()`] to `amber_bench::oo7::run_oo7` and
//! `amber_bench::oo7::run_oo7_child`.

pub mod inline;
pub mod kv;
pub mod lmdb;
pub mod memory;
pub mod normalised;
pub mod postgres;
pub mod postgres_schema;
pub mod redb;
pub mod snapshot;
pub mod sqlite;

use amber_bench::oo7::Oo7Factory;
use amber_bench::oo7::engine::EngineError;

/// Every OO7 comparison engine, in the default column order: those
/// running in the calling process, then `postgres` and
/// `postgres-recursive` (which start a server: their tests share one, in
/// `tests/postgres.rs`).
pub fn engines() -> Vec<Box<dyn Oo7Factory>> {
    let mut all = in_process_engines();
    all.push(Box::new(postgres::PostgresFactory { recursive: false }));
    all.push(Box::new(postgres::PostgresFactory { recursive: true }));
    all
}

/// The OO7 comparison engines that run in the calling process.
pub fn in_process_engines() -> Vec<Box<dyn Oo7Factory>> {
    vec![
        Box::new(memory::MemoryFactory),
        Box::new(snapshot::SnapshotFactory),
        Box::new(sqlite::SqliteFactory),
        Box::new(sqlite::SqliteRecursiveFactory),
        Box::new(lmdb::LmdbFactory::NORMALISED),
        Box::new(lmdb::LmdbFactory::INLINE),
        Box::new(redb::RedbFactory::NORMALISED),
        Box::new(redb::RedbFactory::INLINE),
    ]
}

/// A depth-first walk of a composite part's graph from its root part with a
/// visited set (`seen`, reused between calls, indexed by id − root: a
/// composite part's atomic ids follow its root's), along the targets `out`
/// returns for a part, in order: the ids in visit order. The SQL engines
/// walk it one query per part.
pub(crate) fn dfs_order(
    root: u32,
    seen: &mut Vec<bool>,
    mut out: impl FnMut(u32) -> Result<Vec<u32>, EngineError>,
) -> Result<Vec<u32>, EngineError> {
    seen.clear();
    let mut order = Vec::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        let i = id.wrapping_sub(root) as usize;
        if seen.len() <= i {
            seen.resize(i + 1, false);
        }
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        order.push(id);
        stack.extend(out(id)?.into_iter().rev());
    }
    Ok(order)
}
