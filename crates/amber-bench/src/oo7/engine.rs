//! The OO7 engine contract: what an engine implements for the harness to
//! measure it, and what every operation returns.
//!
//! Engines reuse OO1's [`EngineInfo`], [`EngineOptions`], [`EngineError`] and
//! [`ResultExt`]: the same words in the table and the same errors.
//!
//! # Answers
//!
//! Every operation returns an [`Answer`]: a count (what the operation's
//! row in [`super::ops::Op`] says: parts visited, updates made, rows found)
//! and a checksum, the wrapping sum of a hash per object read ([`Tally`]).
//! A sum does not depend on the order of the visits, so engines may walk a
//! graph or scan an index in any order; and since the `k`-th visit of an
//! object in an updating traversal reads it after `k − 1` updates whatever
//! the order, updates are checked too. All engines must give the same
//! answers in every iteration: a difference fails the run.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::oo1::{EngineError, EngineInfo, EngineOptions, ResultExt};

use super::generate::{NewComposite, Oo7Db};
use super::ops::Traversal;
use crate::procfs::ProcessTree;
use crate::rng::mix64;

/// What one operation returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Answer {
    pub count: u64,
    pub checksum: u64,
}

/// What a checksum term says an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Tag {
    Atomic = 1,
    Composite = 2,
    Base = 3,
    Complex = 4,
    Module = 5,
    Document = 6,
    Manual = 7,
    Pair = 8,
}

/// Accumulates an [`Answer`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    count: u64,
    checksum: u64,
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `words`, tagged, to the checksum, without counting.
    #[inline]
    pub fn fold(&mut self, tag: Tag, words: [i64; 3]) {
        let mut h = mix64(tag as u64 ^ 0x6F6F_375F_7461_6C79);
        for w in words {
            h = mix64(h ^ w as u64);
        }
        self.checksum = self.checksum.wrapping_add(h);
    }

    /// An atomic part read as it is now: counts one and folds
    /// `(id, x, y, build_date)` (two mixes: the traversals' inner loop).
    #[inline]
    pub fn atomic(&mut self, id: u32, x: i32, y: i32, build_date: i32) {
        self.count += 1;
        let a = (u64::from(id) << 32) | u64::from(build_date as u32);
        let b = (u64::from(x as u32) << 32) | u64::from(y as u32);
        let h = mix64(a ^ mix64(b ^ Tag::Atomic as u64));
        self.checksum = self.checksum.wrapping_add(h);
    }

    /// Counts one and folds `(tag, id, value)`.
    #[inline]
    pub fn object(&mut self, tag: Tag, id: u32, value: i64) {
        self.count += 1;
        self.fold(tag, [i64::from(id), value, 0]);
    }

    /// Adds `n` to the count.
    #[inline]
    pub fn add(&mut self, n: u64) {
        self.count += n;
    }

    /// The answer so far.
    pub fn finish(self) -> Answer {
        Answer {
            count: self.count,
            checksum: self.checksum,
        }
    }

    /// The checksum with `count` in place of the tally's own count (updating
    /// traversals count updates, not visits).
    pub fn finish_with(self, count: u64) -> Answer {
        Answer {
            count,
            checksum: self.checksum,
        }
    }
}

/// Makes databases of one engine.
pub trait Oo7Factory: Send + Sync {
    /// Name and description; the name is what `--engines` takes.
    fn info(&self) -> EngineInfo;

    /// Whether the engine can run on this machine (OO1's
    /// [`EngineFactory::available`](crate::oo1::EngineFactory::available)).
    fn available(&self) -> Result<(), String> {
        Ok(())
    }

    /// Creates the engine's database in `dir` (existing, empty) from `db`,
    /// durably, and closes it; only files inside `dir` may be used.
    fn build(&self, dir: &Path, db: &Oo7Db, options: &EngineOptions) -> Result<(), EngineError>;

    /// Opens the database `build` made in `dir` (possibly a copy).
    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Oo7Engine>, EngineError>;

    /// The engine whose database this one opens: itself, or for a scheme
    /// of an engine ([`with_scheme`](Self::with_scheme)) that engine, whose
    /// build is shared.
    fn build_of(&self) -> &'static str {
        self.info().name
    }

    /// This engine opening its databases under update strategy `scheme`
    /// (`amber bench oo7 --schemes`), named `ENGINE/SCHEME`; an error for
    /// an engine without strategies, or a scheme it does not know.
    fn with_scheme(&self, scheme: &str) -> Result<Box<dyn Oo7Factory>, String> {
        Err(format!(
            "{scheme}: engine {} has no update strategies",
            self.info().name
        ))
    }
}

/// An open OO7 database: the operations of [`super::ops::Op`], each one
/// transaction (one durable commit for those that change anything).
///
/// Traversals walk module `module`'s assembly hierarchy from its design
/// root to every base assembly, then every composite part of its
/// `components_priv` (once per bag entry), then depth-first along outgoing
/// connections from the root part with a visited set per composite-part
/// visit. Ids that are not in the database are an error, except the
/// titles of `by_title`, which skips them (a deleted part's document).
pub trait Oo7Engine {
    /// T1, T2a–c, T3a–c, T6 (see [`Traversal`]).
    fn traverse(&mut self, module: u32, t: Traversal) -> Result<Answer, EngineError>;
    /// T4 (`update` false): per composite-part visit, count the `'I'`s of
    /// its document; count = their total, checksum over (document id,
    /// count). T5 (`update` true): per visit, replace the document's
    /// leading `"I am"` by `"This is"`, or the reverse; count = updates,
    /// checksum over (document id, new length). One commit for T5.
    fn documents(&mut self, module: u32, update: bool) -> Result<Answer, EngineError>;
    /// T7: from each atomic part, up to its composite part, to every base
    /// assembly of its `used_in_priv` and `used_in_shar` bags, up their
    /// super assemblies to the design root and its module; count = objects
    /// visited.
    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError>;
    /// T8 (`scan` true): count the `'I'`s of module `module`'s manual;
    /// T9: count 1 when its first and last bytes are equal, else 0.
    fn manual(&mut self, module: u32, scan: bool) -> Result<Answer, EngineError>;
    /// Q1: atomic parts by id, through the id index.
    fn lookup(&mut self, ids: &[u32]) -> Result<Answer, EngineError>;
    /// Q2, Q3: atomic parts with `lo <= build_date <= hi`, through the
    /// build-date index.
    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError>;
    /// Q4: documents by title, then the base assemblies of their composite
    /// parts' `used_in_priv` and `used_in_shar` bags (one per bag entry);
    /// count = base assemblies.
    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError>;
    /// Q5: base assemblies with a composite part (private or shared) whose
    /// build date is later than theirs; count distinct.
    fn q5(&mut self) -> Result<Answer, EngineError>;
    /// Q6: assemblies of every level (base and complex) with a composite
    /// part anywhere below them whose build date is later than theirs.
    fn q6(&mut self) -> Result<Answer, EngineError>;
    /// Q7: every atomic part.
    fn scan(&mut self) -> Result<Answer, EngineError>;
    /// Q8: every (atomic part, document) pair with `doc_id` = document id;
    /// checksum over (atomic id, the document's stored id).
    fn join(&mut self) -> Result<Answer, EngineError>;
    /// Structural insert: the composite parts with their atomic parts,
    /// connections and documents, each added to the `components_priv` of
    /// its base assembly (`used_in_priv[0]`), every index updated; count =
    /// composite parts, checksum over (id, base assembly).
    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError>;
    /// Structural delete: the composite parts with their atomic parts,
    /// connections and documents, unlinked from every bag and index;
    /// count = composite parts, checksum over (id, atomic parts deleted).
    fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError>;
    /// Forces the installation work commits deferred (OO1's `install`).
    fn install(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    /// Log bytes of the last commit by the engine's own account.
    fn last_commit_log_bytes(&self) -> Option<u64> {
        None
    }
    /// The server doing the engine's work in other processes (OO1's
    /// [`Engine::server`](crate::oo1::Engine::server)).
    fn server(&self) -> Option<ProcessTree> {
        None
    }
    /// Flushes and releases the database.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
}

/// T5's edit of a document's text: the new text, or `None` when it starts
/// with neither prefix.
pub fn toggle_document(text: &str) -> Option<String> {
    if let Some(rest) = text.strip_prefix("I am") {
        Some(format!("This is{rest}"))
    } else {
        text.strip_prefix("This is")
            .map(|rest| format!("I am{rest}"))
    }
}

/// T3's change of a build date: flips the lowest bit, so a date stays in
/// its range and two toggles restore it.
#[inline]
pub fn toggle_date(date: i32) -> i32 {
    date ^ 1
}

/// `'I'`s in `text` (T4, T8).
pub fn count_i(text: &[u8]) -> u64 {
    text.iter().filter(|&&b| b == b'I').count() as u64
}
