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
//! - [`amber_engine`]: Amber's engines (`amber`, `amber-sigsegv`);
//! - [`child`]: one measured process; [`harness`]: the whole run;
//! - [`clients`] and [`client`]: QuickStore's client-server experiment
//!   (`--server --clients 1..5`), its client processes;
//! - [`report`] and [`plot`]: the JSON, the table, the targets, the SVG.
//!
//! A front end calls [`Oo7Args::parse`] and [`run_oo7`] for `amber bench
//! oo7 …` and routes the hidden subcommand [`CHILD_SUBCOMMAND`] to
//! [`run_oo7_child`], passing the same engine factories to both, as OO1's
//! front end does.

pub mod amber_engine;
pub mod args;
pub mod child;
pub mod client;
pub mod clients;
pub mod engine;
pub mod generate;
pub mod harness;
pub mod model;
pub mod ops;
pub mod params;
pub mod plot;
pub mod report;

#[cfg(test)]
mod invariants;

pub use args::{Oo7Args, USAGE};
pub use child::{CHILD_SUBCOMMAND, run_job, run_oo7_child};
pub use engine::{Answer, Oo7Engine, Oo7Factory, Tally};
pub use generate::{NewComposite, Oo7Db, generate};
pub use harness::run_oo7;
pub use model::Model;
pub use ops::{Input, Op, Protocol, Traversal};
pub use params::{Params, Size};
pub use report::Oo7Report;

/// Amber's own OO7 engines: `amber` and `amber-sigsegv`. Front ends pass
/// them followed by the comparison engines.
pub fn builtin_engines() -> Vec<Box<dyn Oo7Factory>> {
    vec![
        Box::new(amber_engine::AmberOo7Factory::DEFAULT),
        Box::new(amber_engine::AmberOo7Factory::SIGSEGV),
    ]
}
