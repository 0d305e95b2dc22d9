//! OO1, the Object Operations Benchmark (Cattell & Skeen, ACM TODS 17(1), 1992),
//! as BENCHMARKS.md specifies it.
//!
//! - [`database`]: the database and its generator (the locality rule);
//! - [`ops`]: the operations and each iteration's inputs;
//! - [`engine`]: the contract every engine implements;
//! - [`reference`]: the plain evaluator every answer is checked against;
//! - [`child`]: one measured process; [`harness`]: the whole run;
//! - [`report`] and [`plot`]: the table, the JSON and the SVG.
//!
//! A front end (the `amber` CLI) calls [`Oo1Args::parse`] and [`run_oo1`] for
//! `amber bench oo1 …`, and routes the hidden subcommand [`CHILD_SUBCOMMAND`] to
//! [`run_oo1_child`], passing the same engine factories to both.

pub mod args;
pub mod child;
pub mod database;
pub mod engine;
pub mod error;
pub mod harness;
pub mod ops;
pub mod plot;
pub mod reference;
pub mod report;

pub use args::{Oo1Args, USAGE};
pub use child::{CHILD_SUBCOMMAND, ChildRequest, JobResult, run_job, run_oo1_child};
pub use database::{Connection, GenParams, GeneratedDb, Kind, NewPart, Part, PartId, generate};
pub use engine::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, ResultExt,
    TRAVERSAL_DEPTH, TRAVERSAL_VISITS, Tally, UpdatePlan, null_proc,
};
pub use error::BenchError;
pub use harness::run_oo1;
pub use ops::{Job, Op, Phase, Protocol};
pub use report::Oo1Report;

/// Amber's own OO1 engines. Empty until the engine exists; the `amber` and
/// `amber-sigsegv` engines will be added here (implementing [`EngineFactory`]),
/// and front ends pass `builtin_engines()` followed by the comparison engines.
pub fn builtin_engines() -> Vec<Box<dyn EngineFactory>> {
    Vec::new()
}
