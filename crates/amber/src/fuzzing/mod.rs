//! Fuzz targets: an entry point per decoder of bytes Amber reads back from
//! its files or from a peer over the wire (`wire.rs`), four over whole
//! files (`files.rs`, `rewrite.rs`) and two over the files beside a
//! database (the reader table, a schema file),
//! each a `fn(&[u8])` that decodes whatever it is given and checks the
//! contract (docs/design.md §9):
//!
//! - no panic and no abort, whatever the bytes (a target panics only to
//!   report a broken contract, which is how a fuzzer learns of it);
//! - bounded time: every loop is bounded by the input's size;
//! - bounded memory: no allocation larger than a small multiple of the
//!   input or a documented cap, whatever a length field says (the fuzzers
//!   enforce it: libFuzzer's `-malloc_limit_mb`, the stable tests' counting
//!   allocator);
//! - for the whole-file targets, every object read back is an error or the
//!   value that was committed (`files.rs` says when that can be checked).
//!
//! The cargo-fuzz targets in `fuzz/` and the stable tests
//! `tests/fuzz_*.rs` call the same entry points, on seeds from real
//! databases (`seeds.rs`), mutated by libFuzzer or by [`mutate`].

mod decoders;
mod files;
pub mod mutate;
mod readers;
mod rewrite;
mod schema;
pub mod seeds;
mod wire;

pub use decoders::{
    catalog_blob, catalog_entry, free_space_map, log_header, log_records, page, root_directory,
    superblock, swizzle,
};
pub use files::{Bundle, FRESH_MAX, open_and_read, recovery, verify_deep};
pub use readers::reader_table;
pub use rewrite::migrate_collect;
pub use schema::{reseal_schema, schema_file};
pub use wire::wire_decode;

use crate::{Db, Migration, Result};

/// A fuzz target: decodes any bytes, panicking only if the contract breaks.
pub type Target = fn(&[u8]);

/// What the seed databases hold, and how the whole-file targets read it
/// back and tell a committed value from another. Implemented outside Amber
/// (`tests/fuzz_common/content.rs`, shared with `fuzz/`): it needs
/// `#[derive(Persistent)]` types, which Amber itself cannot define (the
/// derive's trait implementation may only be expanded in the
/// virtual-memory module, which holds all of Amber's unchecked code).
pub trait Content {
    /// Commits after the first that a crashed seed leaves in its log.
    const REWRITES: u64;
    /// Writes the content: a first commit, then `rewrites` more.
    fn fill(db: &mut Db, rewrites: u64) -> Result<()>;
    /// Reads every root and object back with `try_get` and its kin (never
    /// a plain load of a page not yet fetched, which would abort on a
    /// damaged one); with `strict`, panics on a value that was never
    /// committed. Returns how many objects were read back whole.
    fn read(db: &Db, strict: bool) -> usize;
    /// A migration to the content's next version (a field added with its
    /// default, one renamed): the seed of the schema file target, and what
    /// `migrate_collect` migrates to.
    fn migration() -> Result<Migration>;
    /// [`read`](Self::read), after [`migration`](Self::migration), through
    /// the next version's types (a value read back must be a committed one,
    /// converted).
    fn read_next(db: &Db, strict: bool) -> usize;
    /// A migration to the content's own types (which changes nothing).
    fn unchanged() -> Result<Migration>;
}

/// The decoder targets by name.
pub const DECODER_TARGETS: &[(&str, Target)] = &[
    ("superblock", superblock),
    ("log_header", log_header),
    ("log_records", log_records),
    ("page", page),
    ("catalog_entry", catalog_entry),
    ("catalog_blob", catalog_blob),
    ("free_space_map", free_space_map),
    ("root_directory", root_directory),
    ("swizzle", swizzle),
    ("wire_decode", wire_decode),
];

/// The whole-file targets by name, reading content `C`.
pub fn file_targets<C: Content>() -> [(&'static str, Target); 4] {
    [
        ("open_and_read", open_and_read::<C>),
        ("verify_deep", verify_deep),
        ("recovery", recovery),
        ("migrate_collect", migrate_collect::<C>),
    ]
}

/// The whole-file targets' names (their inputs are [`Bundle`]s).
pub const FILE_TARGETS: [&str; 4] = [
    "open_and_read",
    "verify_deep",
    "recovery",
    "migrate_collect",
];

/// The targets that use the seed databases as they are, beside a mutated
/// file of another kind: the reader table, a schema file.
pub fn beside_targets<C: Content>() -> [(&'static str, Target); 2] {
    [
        ("reader_table", reader_table::<C>),
        ("schema_file", schema_file::<C>),
    ]
}

/// Their names.
pub const BESIDE_TARGETS: [&str; 2] = ["reader_table", "schema_file"];

/// The seed inputs of every target, by name: the seed databases (4, 8 and
/// 16 KiB pages, closed and crashed) as bundles for the whole-file targets,
/// and the pieces of them for the decoders.
pub fn seed_corpus<C: Content>() -> Result<Vec<(&'static str, Vec<u8>)>> {
    let dbs = seeds::databases::<C>()?;
    let mut out = seeds::decoder_seeds(&dbs);
    for b in &dbs {
        for t in FILE_TARGETS {
            out.push((t, b.encode()));
        }
    }
    out.extend(
        readers::table_seeds(&dbs)
            .into_iter()
            .map(|s| ("reader_table", s)),
    );
    out.extend(
        schema::schema_seeds::<C>(dbs.len())
            .into_iter()
            .map(|s| ("schema_file", s)),
    );
    out.extend(wire::wire_seeds().into_iter().map(|s| ("wire_decode", s)));
    Ok(out)
}
