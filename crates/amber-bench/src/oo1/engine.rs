//! The engine contract: what an engine must do for the OO1 harness to measure it.
//!
//! An engine is added by implementing [`EngineFactory`] (build a database in a
//! directory, open it) and [`Engine`] (the operations on an open database), and
//! passing the factory to [`run_oo1`](crate::oo1::run_oo1) and
//! [`run_oo1_child`](crate::oo1::run_oo1_child). The harness times the calls,
//! runs the cold iteration of every operation in a new process, and compares
//! every [`Answer`] with a reference evaluator: an engine that returns a
//! different answer fails the run.
//!
//! # The operations, precisely
//!
//! *Visiting* a part means: read its `x`, `y` and `kind` as they are now stored
//! (including changes made earlier in the same operation) and pass them with its
//! id to [`Tally::visit`], which calls [`null_proc`].
//!
//! - `lookup(ids)`: visit each id in the given order. An id that is not in the
//!   database is an error ([`EngineError::MissingPart`]).
//! - `traverse(root)`: visit `root` (depth 0), then for each outgoing connection
//!   of a part at depth d < 7, in slot order, visit its target (depth d + 1) and
//!   recurse: a depth-first pre-order walk with no visited set, 3,280 visits.
//! - `reverse(root)`: the same walk along *incoming* connections: for a part, one
//!   step per connection that ends at it (a part connecting twice is visited
//!   twice). The tally is order-insensitive, so the order of incoming connections
//!   is free.
//! - `insert(parts)`: add the parts and their connections, with every index
//!   (by id, outgoing, incoming) updated, and commit durably. The parts have dense
//!   ids following the largest id in the database, in order; a connection may
//!   point to a part of the same batch. Tally each new part once, in order.
//! - `update(root, plan)`: the traversal of `traverse`, where visit number `i`
//!   (0-based, in visit order) first tallies the part as read, then, if
//!   `plan.increment_at(i)`, increments its stored `x` and `y` by 1 and calls
//!   [`Tally::changed`]. One durable commit at the end.
//! - `install()`: force the installation work the commits so far deferred
//!   (Amber: a checkpoint; SQLite: `wal_checkpoint(TRUNCATE)`), durably;
//!   nothing for engines whose commits write their files in place. Called
//!   after a committing job's last iteration, so that the amortized bytes and
//!   time per commit include it.
//! - `close()`: flush whatever is pending and release the database.
//!
//! An engine whose work is done by a server in other processes (PostgreSQL)
//! says so with [`Engine::server`]: its bytes written and memory are the
//! server's. One that needs something the machine may lack says what with
//! [`EngineFactory::available`].
//!
//! **Same durability.** Every engine that persists must sync each commit
//! before `insert` or `update` returns (an `fsync`/`fdatasync` of its log or
//! its files), and say how in [`EngineInfo::durability`]; an engine that
//! persists nothing (`memory`) says so. Engines check the settings they rely
//! on where the library lets them (SQLite's `synchronous`, LMDB's flags).

use std::error::Error as StdError;
use std::fmt;
use std::hint::black_box;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::database::{GeneratedDb, Kind, NewPart, PartId};
use crate::procfs::ProcessTree;

/// OO1's `null_proc(x, y, kind)`: does nothing, but the compiler must believe it
/// reads its arguments, so that fetching them cannot be optimised away.
#[inline]
pub fn null_proc(x: i32, y: i32, kind: &Kind) {
    black_box((x, y, kind));
}

/// The result of one operation: how many parts it visited (or inserted), how
/// many it changed, and a checksum of what it read. Equal answers across engines
/// mean the engines read the same values from the same parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Answer {
    /// Parts visited (lookup, traversals, update) or inserted (insert).
    pub count: u64,
    /// Parts whose `x` and `y` were incremented (update); parts inserted (insert).
    pub changed: u64,
    /// A 64-bit fold of `(id, x, y, kind)` over the visits.
    pub checksum: u64,
}

/// How a [`Tally`] folds visits into its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// The checksum depends on the visit order (lookup, traversal, insert, update).
    Ordered,
    /// The checksum is a sum, independent of the visit order (reverse traversal).
    Unordered,
}

/// Accumulates an operation's [`Answer`]. Engines create one with
/// [`Tally::new`], call [`visit`](Tally::visit) for every visit (which calls
/// [`null_proc`]) and return [`finish`](Tally::finish).
#[derive(Clone, Debug)]
pub struct Tally {
    fold: Fold,
    answer: Answer,
}

impl Tally {
    /// A tally folding visits as `fold` says; use [`Tally::for_op`] to pick the
    /// right fold for an operation.
    pub fn new(fold: Fold) -> Self {
        Self {
            fold,
            answer: Answer::default(),
        }
    }

    /// The tally for an operation: ordered for everything but `reverse`.
    pub fn for_op(op: super::ops::Op) -> Self {
        match op {
            super::ops::Op::Reverse => Self::new(Fold::Unordered),
            _ => Self::new(Fold::Ordered),
        }
    }

    /// One visit: calls `null_proc(x, y, kind)` and folds `(id, x, y, kind)`.
    #[inline]
    pub fn visit(&mut self, id: PartId, x: i32, y: i32, kind: &Kind) {
        null_proc(x, y, kind);
        let mut low = [0u8; 8];
        low.copy_from_slice(&kind[..8]);
        let high = u64::from(u16::from_le_bytes([kind[8], kind[9]]));
        let h = crate::rng::mix64(u64::from(id) | (u64::from(x as u32) << 32))
            ^ crate::rng::mix64(
                u64::from(y as u32) ^ u64::from_le_bytes(low).rotate_left(17) ^ (high << 48),
            );
        self.answer.count += 1;
        self.answer.checksum = match self.fold {
            Fold::Ordered => (self.answer.checksum ^ h).wrapping_mul(0x0000_0100_0000_01B3),
            Fold::Unordered => self.answer.checksum.wrapping_add(h),
        };
    }

    /// The part just visited was changed (its `x` and `y` incremented), or inserted.
    #[inline]
    pub fn changed(&mut self) {
        self.answer.changed += 1;
    }

    /// The answer so far.
    pub fn finish(self) -> Answer {
        self.answer
    }
}

/// Which visits of an update traversal increment the part they visit. The
/// harness derives it from the seed, the iteration and the visit index, so every
/// engine makes the same decisions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdatePlan {
    increments: Vec<bool>,
}

impl UpdatePlan {
    /// A plan from one decision per visit.
    pub fn new(increments: Vec<bool>) -> Self {
        Self { increments }
    }

    /// Whether visit `visit` (0-based, in visit order) increments its part.
    #[inline]
    pub fn increment_at(&self, visit: usize) -> bool {
        self.increments.get(visit).copied().unwrap_or(false)
    }

    /// How many visits increment.
    pub fn increments(&self) -> usize {
        self.increments.iter().filter(|&&b| b).count()
    }
}

/// Options the harness passes to every engine's `build` and `open`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineOptions {
    /// `--cache-mib`: the engine's cache budget in MiB, for engines that have one;
    /// `None` keeps the engine's default.
    pub cache_mib: Option<u64>,
}

/// What an engine says about itself, for the table and the JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EngineInfo {
    /// Short name, used by `--engines` and as the table column: `[a-z0-9-]+`.
    pub name: &'static str,
    /// One line: what is stored how, and what a commit does.
    pub summary: &'static str,
    /// How the OO1 graph is laid out, in the words the table prints: which
    /// engines are `normalised` (parts and connections apart, two lookups per
    /// traversal step) and which `inline` (a part holds its connections), so
    /// that no comparison hides that peers do different work.
    pub schema: &'static str,
    /// What a commit makes durable and how (the sync calls), or that the
    /// engine persists nothing.
    pub durability: &'static str,
    /// What [`Engine::install`] does for this engine.
    pub install: &'static str,
    /// Whether `EngineOptions::cache_mib` means anything to this engine.
    pub cache_budget: bool,
}

/// Makes databases of one engine: builds one from the generated data, opens it.
pub trait EngineFactory: Send + Sync {
    /// Name, summary and whether the engine honours `--cache-mib`.
    fn info(&self) -> EngineInfo;

    /// Whether the engine can run on this machine: `Err` says what is
    /// missing and how to get it (PostgreSQL not installed); the harness
    /// then lists the engine as unavailable instead of running it.
    fn available(&self) -> Result<(), String> {
        Ok(())
    }

    /// Creates the engine's database in `dir` (an existing, empty directory) from
    /// `db`, durably, and closes it. Only files inside `dir` may be used: the
    /// harness copies the directory to give every measured process a pristine
    /// database.
    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        options: &EngineOptions,
    ) -> Result<(), EngineError>;

    /// Opens the database in `dir` built by [`build`](EngineFactory::build)
    /// (possibly copied to another directory, possibly changed by earlier
    /// operations in this process).
    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError>;
}

/// An open database. The module documentation above defines each operation.
pub trait Engine {
    /// Visits each id, in order.
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError>;
    /// Depth-first traversal to depth 7 along outgoing connections.
    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError>;
    /// Depth-first traversal to depth 7 along incoming connections.
    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError>;
    /// Inserts the parts and their connections, one durable commit.
    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError>;
    /// The traversal, incrementing x and y where `plan` says; one durable commit.
    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError>;
    /// Forces, durably, the installation work that earlier commits deferred
    /// (see the module documentation); nothing by default.
    fn install(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    /// Flushes and releases the database.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
    /// Bytes the engine's own accounting says its last commit wrote to its log
    /// (Amber's `CommitStats::log_bytes`), for engines that can say; reported
    /// next to the bytes measured from `/proc`. Called outside the timed region.
    fn last_commit_log_bytes(&self) -> Option<u64> {
        None
    }
    /// The server doing the engine's work in other processes, for engines
    /// that have one (PostgreSQL's postmaster): the harness counts the
    /// bytes its process tree writes in place of this process's (a client
    /// that only sends requests to a socket) and adds its memory to this
    /// process's peak RSS. Called outside the timed region.
    fn server(&self) -> Option<ProcessTree> {
        None
    }
}

/// An engine's failure, with enough context to say what went wrong where.
#[derive(Debug)]
#[non_exhaustive]
pub enum EngineError {
    /// A file system call failed.
    Io { context: String, source: io::Error },
    /// The part is not in the database.
    MissingPart { id: PartId },
    /// The caller broke the contract (for example non-dense insert ids).
    BadInput { message: String },
    /// The stored data is not what the engine wrote.
    Corrupt { context: String },
    /// The underlying library failed.
    Backend {
        context: String,
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
}

impl EngineError {
    /// An I/O error while doing `context`.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// A library error while doing `context`.
    pub fn backend(
        context: impl Into<String>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Self::Backend {
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// Stored data that does not decode.
    pub fn corrupt(context: impl Into<String>) -> Self {
        Self::Corrupt {
            context: context.into(),
        }
    }

    /// A broken contract.
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::BadInput {
            message: message.into(),
        }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { context, source } => write!(f, "{context}: {source}"),
            Self::MissingPart { id } => write!(f, "part {id} is not in the database"),
            Self::BadInput { message } => write!(f, "bad input: {message}"),
            Self::Corrupt { context } => write!(f, "corrupt data: {context}"),
            Self::Backend { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl StdError for EngineError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Backend { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// Adds context to library errors: `db.get(..).ctx("reading part")?`.
pub trait ResultExt<T> {
    /// Wraps the error as [`EngineError::Backend`] with `context`.
    fn ctx(self, context: &str) -> Result<T, EngineError>;
}

impl<T, E: StdError + Send + Sync + 'static> ResultExt<T> for Result<T, E> {
    fn ctx(self, context: &str) -> Result<T, EngineError> {
        self.map_err(|e| EngineError::backend(context, e))
    }
}

/// The depth of the OO1 traversals: the root is at depth 0, the deepest visits
/// at depth 7.
pub const TRAVERSAL_DEPTH: u32 = 7;

/// Visits of a traversal along outgoing connections: 1 + 3 + … + 3^7.
pub const TRAVERSAL_VISITS: u64 = 3_280;
