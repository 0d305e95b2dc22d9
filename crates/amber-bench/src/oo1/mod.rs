//! OO1, the Object Operations Benchmark (Cattell & Skeen, ACM TODS 17(1), 1992),
//! as BENCHMARKS.md specifies it.
//!
//! - [`database`]: the database and its generator (the locality rule);
//! - [`ops`]: the operations and each iteration's inputs;
//! - [`engine`]: the contract every engine implements;
//! - [`amber_engine`]: Amber's own engines (`amber`, `amber-sigsegv`,
//!   `amber-mapped-unverified`, `amber-mapped`);
//! - [`reference`](mod@reference): the plain evaluator every answer is checked against;
//! - [`child`]: one measured process; [`harness`]: the whole run;
//! - [`report`], [`table`] and [`plot`]: the JSON, the printed table and the SVG.
//!
//! A front end (the `amber` CLI) calls [`Oo1Args::parse`] and [`run_oo1`] for
//! `amber bench oo1 …`, and routes the hidden subcommand [`CHILD_SUBCOMMAND`] to
//! [`run_oo1_child`], passing the same engine factories to both:
//!
//! ```no_run
//! # fn engines() -> Vec<Box<dyn amber_bench::oo1::EngineFactory>> { amber_bench::oo1::builtin_engines() }
//! use amber_bench::oo1::{self, BenchError, CHILD_SUBCOMMAND, Oo1Args};
//! let args: Vec<String> = std::env::args().skip(1).collect(); // after `amber bench oo1`
//! let outcome = if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
//!     oo1::run_oo1_child(engines())
//! } else {
//!     Oo1Args::parse(&args).and_then(|a| oo1::run_oo1(a, engines()).map(drop))
//! };
//! match outcome {
//!     Ok(()) => {}
//!     Err(BenchError::Help(usage)) => print!("{usage}"),
//!     Err(e) => { eprintln!("amber bench oo1: {e}"); std::process::exit(1) }
//! }
//! ```
//!
//! If the hidden subcommand is not the binary's first argument (say `amber
//! bench __oo1-child`), set [`Oo1Args::child_args`] to what must be passed.
//!
//! # Adding an engine
//!
//! 1. Implement [`EngineFactory`] (`info`, `build`, `open`) and [`Engine`] (the
//!    five operations, `install` if commits defer work, and `close`) as the
//!    [`engine`] module specifies; create each operation's [`Tally`] with
//!    [`Tally::for_op`] and call [`Tally::visit`] for every visit, which
//!    calls [`null_proc`]. Sync every commit, and say in [`EngineInfo`] how
//!    (`durability`), how the graph is laid out (`schema`: normalised or
//!    inline) and what `install` forces.
//! 2. Keep every file of the database inside the directory given to `build`:
//!    the harness copies it to give each measured process a pristine database.
//! 3. Add the factory to [`builtin_engines`] (Amber's engines, here) or to
//!    `amber_compare::engines()` (the comparison engines).
//! 4. Run `cargo test` (the comparison crate's tests run every engine of
//!    `amber_compare::engines()` against the reference; an Amber engine should
//!    get the same test) and `oo1 --parts 2000 --engines NAME`: a wrong answer
//!    fails the run.

pub mod amber_engine;
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
pub mod table;

pub use args::{Oo1Args, USAGE};
pub use child::{Amortized, CHILD_SUBCOMMAND, ChildRequest, JobResult, run_job, run_oo1_child};
pub use database::{Connection, GenParams, GeneratedDb, Kind, NewPart, Part, PartId, generate};
pub use engine::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, ResultExt,
    TRAVERSAL_DEPTH, TRAVERSAL_VISITS, Tally, UpdatePlan, null_proc,
};
pub use error::BenchError;
pub use harness::run_oo1;
pub use ops::{Job, Op, Phase, Protocol};
pub use report::Oo1Report;

/// Amber's own OO1 engines ([`amber_engine`]): `amber` (the default fault
/// backend), `amber-sigsegv`, `amber-mapped-unverified` and `amber-mapped`. Front ends pass
/// `builtin_engines()` followed by the comparison engines.
pub fn builtin_engines() -> Vec<Box<dyn EngineFactory>> {
    vec![
        Box::new(amber_engine::AmberFactory::DEFAULT),
        Box::new(amber_engine::AmberFactory::SIGSEGV),
        Box::new(amber_engine::AmberFactory::MAPPED),
        Box::new(amber_engine::AmberFactory::MAPPED_VERIFIED),
    ]
}
