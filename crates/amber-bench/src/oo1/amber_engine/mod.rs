//! Amber's OO1 engines: `amber` (the default fault backend: userfaultfd where
//! the kernel offers everything it needs, else SIGSEGV) and `amber-sigsegv`
//! (the SIGSEGV backend, forced).
//!
//! The database is the object graph of [`schema`], shaped as the `memory`
//! engine's arena: parts holding their outgoing connections inline (target
//! `PRef`, kind, length) and a vector of the parts that connect to them, linked
//! by `PRef`s swizzled to plain virtual addresses when their page is faulted
//! in, so that lookups and traversals are `db.get(p)` — a range check and a
//! load — once the pages are resident, one per traversal step. `insert`
//! allocates in one transaction and commits; `update` writes through
//! `tx.get_mut` and commits once at the end, logging only the changed bytes.
//!
//! **(choice)** Schema: no connection objects; see [`schema`] for why.
//!
//! **(choice)** Options: Amber's defaults — 4 KiB pages, a fetch window that
//! adapts to the faults up to 64 pages (64 from the first fault on the
//! 20,000-part database, a small file); the cache budget is `--cache-mib` when given (applied at
//! `open`; `build` runs without one, since a transaction's new pages stay
//! resident until it commits). The build adds parts in id order and commits
//! every [`BUILD_BATCH`] parts.

pub mod schema;

mod load;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use amber::BackendChoice;
use amber::CommitStats;
use amber::{Db, Options, PRef, Strategy, Tx};

use self::load::Loader;
use self::schema::{CHUNK, Chunk, Part, ROOT, Root};
use super::database::{GeneratedDb, NewPart, PartId};
use super::engine::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, ResultExt,
    TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use super::ops::Op;

/// The database file inside the engine's directory (the log is `oo1.amber-wal`).
pub const FILE: &str = "oo1.amber";

/// Parts per transaction while building.
pub const BUILD_BATCH: usize = 50_000;

/// Makes Amber databases with one fault backend.
#[derive(Clone, Copy, Debug)]
pub struct AmberFactory {
    name: &'static str,
    summary: &'static str,
    backend: BackendChoice,
    strategy: Strategy,
}

/// Amber's OO1 schema ([`schema`]), as the table names it.
pub const SCHEMA: &str = "inline objects: a part object holds its 3 outgoing connections (target PRef, kind, length) and a PVec of the PRefs of the parts connecting to it; a traversal step is one pointer load; ids through a two-level index (a PVec of chunks of 128 part PRefs)";

/// What an Amber commit makes durable.
pub const DURABILITY: &str = "fdatasync per commit: a commit appends its changed bytes to the log and fdatasyncs it before returning (Amber has no setting that skips it)";

/// What [`Engine::install`] does for Amber.
pub const INSTALL: &str = "Db::checkpoint(): the logged changes written into the page file with new metadata, synced, the superblock switched (otherwise a checkpoint comes after 64 MiB of log)";

impl AmberFactory {
    /// `amber`: the backend Amber chooses (userfaultfd when available).
    pub const DEFAULT: AmberFactory = AmberFactory {
        name: "amber",
        summary: "Amber, default fault backend (userfaultfd where available): PRefs swizzled at fault time, reads are plain loads; commit logs changed bytes (page diff) and fdatasyncs the log",
        backend: BackendChoice::Auto,
        strategy: Strategy::DEFAULT,
    };

    /// `amber-sigsegv`: the SIGSEGV backend.
    pub const SIGSEGV: AmberFactory = AmberFactory {
        name: "amber-sigsegv",
        summary: "Amber as `amber`, with the SIGSEGV fault backend (PROT_NONE reservation, mprotect per page, recovery buffer)",
        backend: BackendChoice::Sigsegv,
        strategy: Strategy::DEFAULT,
    };

    /// `amber-mapped-unverified`: the page file mapped at the database's
    /// home, pages served by the kernel and not checked when first read.
    pub const MAPPED: AmberFactory = AmberFactory {
        name: "amber-mapped-unverified",
        summary: "Amber as `amber`, with the mapped-unverified fault backend: the page file mapped copy-on-write at the database's home, pointers stored as the addresses they have there, pages served by the kernel's own faults and not checked when first read (Db::try_get checks; amber verify finds damage); with a cache budget it is served as `amber`",
        backend: BackendChoice::MappedUnverified,
        strategy: Strategy::DEFAULT,
    };

    /// `amber-mapped`: the same mapping, each window of pages verified at
    /// its first touch.
    pub const MAPPED_VERIFIED: AmberFactory = AmberFactory {
        name: "amber-mapped",
        summary: "Amber as `amber`, with the mapped fault backend: the page file mapped copy-on-write at the database's home as with amber-mapped-unverified, each window of 16 pages inaccessible until its first touch, whose fault (SIGSEGV to a service thread) verifies every block of the window as a fetch does (checksum, object walk) before opening it; with a cache budget it is served as `amber`",
        backend: BackendChoice::Mapped,
        strategy: Strategy::DEFAULT,
    };

    /// The same engine with another fault backend (same name and summary).
    pub const fn with_backend(self, backend: BackendChoice) -> AmberFactory {
        AmberFactory { backend, ..self }
    }

    /// The same, detecting updates as `strategy` says.
    pub const fn with_strategy(self, strategy: Strategy) -> AmberFactory {
        AmberFactory { strategy, ..self }
    }

    /// The fault backend asked for at open.
    pub const fn backend(&self) -> BackendChoice {
        self.backend
    }

    /// Opens the database in `dir` as [`EngineFactory::open`] does, keeping
    /// the concrete type (for benchmarks that look inside).
    pub fn open_amber(&self, dir: &Path, options: &EngineOptions) -> Result<AmberOo1, EngineError> {
        let path = file(dir);
        let db = Db::open(&path, self.options(options.cache_mib))
            .ctx(&format!("opening {}", path.display()))?;
        AmberOo1::over(db)
    }

    /// The file of the database this factory builds in `dir`.
    pub fn file(dir: &Path) -> PathBuf {
        file(dir)
    }

    fn options(&self, cache_mib: Option<u64>) -> Options {
        Options {
            backend: self.backend,
            cache_bytes: cache_mib.map(|m| m << 20),
            strategy: self.strategy,
            ..Options::default()
        }
    }
}

fn file(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

impl EngineFactory for AmberFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: self.name,
            summary: self.summary,
            schema: SCHEMA,
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: true,
        }
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        _options: &EngineOptions,
    ) -> Result<(), EngineError> {
        let path = file(dir);
        let mut adb =
            Db::create(&path, self.options(None)).ctx(&format!("creating {}", path.display()))?;
        let parts: Vec<NewPart> = db
            .parts
            .iter()
            .map(|p| match db.outgoing(p.id) {
                [a, b, c] => Ok(NewPart {
                    part: *p,
                    connections: [*a, *b, *c],
                }),
                out => Err(EngineError::bad_input(format!(
                    "part {} has {} connections",
                    p.id,
                    out.len()
                ))),
            })
            .collect::<Result<_, _>>()?;
        let mut tx = adb.begin().ctx("beginning the build")?;
        let root = tx
            .alloc(Root {
                chunks: amber::PVec::new(),
                parts: 0,
            })
            .ctx("allocating the root")?;
        tx.set_root(ROOT, root).ctx("naming the root")?;
        tx.commit().ctx("committing the root")?;
        let mut loader = Loader::default();
        for batch in parts.chunks(BUILD_BATCH) {
            let mut tx = adb.begin().ctx("beginning the build")?;
            for np in batch {
                loader.add(&mut tx, root, np)?;
            }
            tx.commit().ctx("committing the build")?;
        }
        loader.finish()?;
        adb.close().ctx("closing the database")
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(self.open_amber(dir, options)?))
    }
}

/// An open Amber OO1 database.
pub struct AmberOo1 {
    db: Db,
    root: PRef<Root>,
    last_log_bytes: Option<u64>,
}

/// What one update cost, measured inside [`AmberOo1::update_timed`].
#[derive(Clone, Copy, Debug)]
pub struct UpdateCost {
    /// The traversal with its increments (first writes to clean pages
    /// included), from `begin` to just before `commit`.
    pub traverse: Duration,
    /// `Tx::commit`, wall time.
    pub commit: Duration,
    /// The commit's own account: detect / diff / write times, bytes, blocks.
    pub stats: CommitStats,
}

impl AmberOo1 {
    /// The OO1 database `db` however it was opened (read-only, or through
    /// a server, for benchmarks that compare the ways).
    pub fn over(db: Db) -> Result<AmberOo1, EngineError> {
        db.check_type::<Part>().ctx("checking the part type")?;
        let root = db
            .root::<Root>(ROOT)
            .ctx("reading the root")?
            .ok_or_else(|| EngineError::corrupt(format!("the database has no root {ROOT:?}")))?;
        Ok(AmberOo1 {
            db,
            root,
            last_log_bytes: None,
        })
    }

    /// The open database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The open database, for transactions outside the OO1 operations.
    pub fn db_mut(&mut self) -> &mut Db {
        &mut self.db
    }

    /// The part with id `id`.
    pub fn part(&self, id: PartId) -> Result<PRef<Part>, EngineError> {
        find(&self.db, self.root, id)
    }

    /// A long transaction: the OO1 update traversal from each of `roots`
    /// in turn, all with `plan`'s decisions, then one commit; timed as
    /// [`update_timed`](Self::update_timed). Returns the answers of the
    /// traversals.
    pub fn update_many_timed(
        &mut self,
        roots: &[PartId],
        plan: &UpdatePlan,
    ) -> Result<(Vec<Answer>, UpdateCost), EngineError> {
        let starts = roots
            .iter()
            .map(|&r| find(&self.db, self.root, r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut answers = Vec::with_capacity(starts.len());
        let t0 = Instant::now();
        let mut tx = self.db.begin().ctx("beginning the update")?;
        for start in starts {
            let mut tally = Tally::for_op(Op::Update);
            let mut visit_no = 0;
            walk_update(&mut tx, start, 0, plan, &mut visit_no, &mut tally);
            answers.push(tally.finish());
        }
        let t1 = Instant::now();
        let stats = tx.commit().ctx("committing the update")?;
        let t2 = Instant::now();
        self.last_log_bytes = Some(stats.log_bytes);
        Ok((
            answers,
            UpdateCost {
                traverse: t1 - t0,
                commit: t2 - t1,
                stats,
            },
        ))
    }

    /// The OO1 update ([`Engine::update`]), with its traversal and its commit
    /// timed apart and the commit's statistics.
    pub fn update_timed(
        &mut self,
        root: PartId,
        plan: &UpdatePlan,
    ) -> Result<(Answer, UpdateCost), EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let start = find(&self.db, self.root, root)?;
        let t0 = Instant::now();
        let mut tx = self.db.begin().ctx("beginning the update")?;
        let mut visit_no = 0;
        walk_update(&mut tx, start, 0, plan, &mut visit_no, &mut tally);
        let t1 = Instant::now();
        let stats = tx.commit().ctx("committing the update")?;
        let t2 = Instant::now();
        self.last_log_bytes = Some(stats.log_bytes);
        Ok((
            tally.finish(),
            UpdateCost {
                traverse: t1 - t0,
                commit: t2 - t1,
                stats,
            },
        ))
    }
}

/// The id index as a lookup sees it: the root's chunk list, read once per
/// batch of lookups.
struct Index<'a> {
    db: &'a Db,
    chunks: &'a [PRef<Chunk>],
}

impl<'a> Index<'a> {
    fn new(db: &'a Db, root: PRef<Root>) -> Self {
        Index {
            db,
            chunks: db.slice(&db.get(root).chunks),
        }
    }

    /// The part with id `id`.
    #[inline(always)]
    fn find(&self, id: PartId) -> Result<PRef<Part>, EngineError> {
        // Id 0 wraps around and fails the bound check too; ids past the
        // last part find `None` in the last chunk, or no chunk.
        let i = (id as usize).wrapping_sub(1);
        self.chunks
            .get(i / CHUNK)
            .and_then(|&c| self.db.get(c).parts[i % CHUNK])
            .ok_or_else(|| EngineError::MissingPart { id })
    }
}

/// The part with id `id`, through the index.
fn find(db: &Db, root: PRef<Root>, id: PartId) -> Result<PRef<Part>, EngineError> {
    Index::new(db, root).find(id)
}

fn visit(tally: &mut Tally, part: &Part) {
    tally.visit(part.id, part.x, part.y, &part.kind);
}

fn walk_out(db: &Db, p: PRef<Part>, depth: u32, tally: &mut Tally) {
    let part = db.get(p);
    visit(tally, part);
    if depth < TRAVERSAL_DEPTH {
        for to in part.out.iter().filter_map(|o| o.to) {
            walk_out(db, to, depth + 1, tally);
        }
    }
}

fn walk_in(db: &Db, p: PRef<Part>, depth: u32, tally: &mut Tally) {
    let part = db.get(p);
    visit(tally, part);
    if depth < TRAVERSAL_DEPTH {
        for &from in db.slice(&part.incoming) {
            walk_in(db, from, depth + 1, tally);
        }
    }
}

fn walk_update(
    tx: &mut Tx<'_>,
    p: PRef<Part>,
    depth: u32,
    plan: &UpdatePlan,
    visit_no: &mut usize,
    tally: &mut Tally,
) {
    let out = {
        let part = tx.get(p);
        visit(tally, part);
        part.out.map(|o| o.to)
    };
    if plan.increment_at(*visit_no) {
        let part = tx.get_mut(p);
        part.x += 1;
        part.y += 1;
        tally.changed();
    }
    *visit_no += 1;
    if depth < TRAVERSAL_DEPTH {
        for to in out.into_iter().flatten() {
            walk_update(tx, to, depth + 1, plan, visit_no, tally);
        }
    }
}

impl Engine for AmberOo1 {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let index = Index::new(&self.db, self.root);
        for &id in ids {
            visit(&mut tally, self.db.get(index.find(id)?));
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let p = find(&self.db, self.root, root)?;
        walk_out(&self.db, p, 0, &mut tally);
        Ok(tally.finish())
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        let p = find(&self.db, self.root, root)?;
        walk_in(&self.db, p, 0, &mut tally);
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let root = self.root;
        let mut tx = self.db.begin().ctx("beginning the insert")?;
        let mut loader = Loader::default();
        for np in parts {
            loader.add(&mut tx, root, np)?;
            tally.visit(np.part.id, np.part.x, np.part.y, &np.part.kind);
            tally.changed();
        }
        loader.finish()?;
        let stats = tx.commit().ctx("committing the insert")?;
        self.last_log_bytes = Some(stats.log_bytes);
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        self.update_timed(root, plan).map(|(answer, _)| answer)
    }

    fn last_commit_log_bytes(&self) -> Option<u64> {
        self.last_log_bytes
    }

    fn install(&mut self) -> Result<(), EngineError> {
        self.db.checkpoint().ctx("checkpointing")
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db.close().ctx("closing the database")
    }
}
