//! OO7 (Carey, DeWitt, Naughton, SIGMOD 1993), as BENCHMARKS.md specifies
//! it: an assembly hierarchy, composite parts with private graphs of atomic
//! parts, bags shared between assemblies, documents and manuals, indexes,
//! traversals, queries and structural modifications.
//!
//! - [`params`]: the sizes of BENCHMARKS.md's table, `--modules`, the seed;
//! - [`generate`]: the one generator every engine loads from;
//! - [`model`]: the database as plain Rust structs, the reference every
//!   answer is checked against (and the `memory` engine);
//! - [`ops`]: the operations and each iteration's inputs;
//! - [`engine`]: the contract an engine implements;
//! - [`amber_engine`]: Amber's engines (`amber`, `amber-sigsegv`).

pub mod engine;
pub mod generate;
pub mod model;
pub mod ops;
pub mod params;

#[cfg(test)]
mod invariants;

pub use engine::{Answer, Oo7Engine, Oo7Factory, Tally};
pub use generate::{NewComposite, Oo7Db, generate};
pub use model::Model;
pub use ops::{Input, Op, Protocol, Traversal};
pub use params::{Params, Size};
