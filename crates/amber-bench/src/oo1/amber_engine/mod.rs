//! Amber's OO1 engines: `amber` (the default fault backend: userfaultfd where
//! the kernel offers everything it needs, else SIGSEGV) and `amber-sigsegv`
//! (the SIGSEGV backend, forced).
//!
//! The database is the object graph of [`schema`]: parts and connections
//! linked by `PRef`s, swizzled to plain virtual addresses when their page is
//! faulted in, so that lookups and traversals are `db.get(p)` — a range check
//! and a load — once the pages are resident. `insert` allocates in one
//! transaction and commits; `update` writes through `tx.get_mut` and commits
//! once at the end, logging only the changed bytes.
//!
//! **(choice)** Options: 4 KiB pages; fetch cluster 1 (one page per fault,
//! Amber's default); the cache budget is `--cache-mib` when given (applied at
//! `open`; `build` runs without one, since a transaction's new pages stay
//! resident until it commits). The build adds parts in id order and commits
//! every [`BUILD_BATCH`] parts.

pub mod schema;

mod load;

use std::path::{Path, PathBuf};

use amber::vm::BackendChoice;
use amber::{Db, Options, PRef, Tx};

use self::load::Loader;
use self::schema::{Conn, Part, ROOT, Root};
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
}

impl AmberFactory {
    /// `amber`: the backend Amber chooses (userfaultfd when available).
    pub const DEFAULT: AmberFactory = AmberFactory {
        name: "amber",
        summary: "Amber, default fault backend (userfaultfd where available): parts and connections as persistent objects linked by PRefs swizzled at fault time, connections on their part's page, the id index a PVec of PRefs; reads are plain loads; commit logs changed bytes (page diff) and fdatasyncs the log",
        backend: BackendChoice::Auto,
    };

    /// `amber-sigsegv`: the SIGSEGV backend.
    pub const SIGSEGV: AmberFactory = AmberFactory {
        name: "amber-sigsegv",
        summary: "Amber as `amber`, with the SIGSEGV fault backend (PROT_NONE reservation, mprotect per page, recovery buffer)",
        backend: BackendChoice::Sigsegv,
    };

    fn options(&self, cache_mib: Option<u64>) -> Options {
        Options {
            backend: self.backend,
            cache_bytes: cache_mib.map(|m| m << 20),
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
                parts: amber::PVec::new(),
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
        let path = file(dir);
        let db = Db::open(&path, self.options(options.cache_mib))
            .ctx(&format!("opening {}", path.display()))?;
        db.check_type::<Part>().ctx("checking the part type")?;
        db.check_type::<Conn>()
            .ctx("checking the connection type")?;
        let root = db
            .root::<Root>(ROOT)
            .ctx("reading the root")?
            .ok_or_else(|| {
                EngineError::corrupt(format!("{} has no root {ROOT:?}", path.display()))
            })?;
        Ok(Box::new(AmberOo1 {
            db,
            root,
            last_log_bytes: None,
        }))
    }
}

/// An open Amber OO1 database.
pub struct AmberOo1 {
    db: Db,
    root: PRef<Root>,
    last_log_bytes: Option<u64>,
}

/// The part with id `id` in the index `parts`.
#[inline(always)]
fn find_in(parts: &[PRef<Part>], id: PartId) -> Result<PRef<Part>, EngineError> {
    // Id 0 wraps around and fails the bound check too.
    match parts.get((id as usize).wrapping_sub(1)) {
        Some(&p) => Ok(p),
        None => Err(EngineError::MissingPart { id }),
    }
}

/// The part with id `id`, through the index.
fn find(db: &Db, root: PRef<Root>, id: PartId) -> Result<PRef<Part>, EngineError> {
    find_in(db.slice(&db.get(root).parts), id)
}

fn visit(tally: &mut Tally, part: &Part) {
    tally.visit(part.id, part.x, part.y, &part.kind);
}

fn walk_out(db: &Db, p: PRef<Part>, depth: u32, tally: &mut Tally) {
    let part = db.get(p);
    visit(tally, part);
    if depth < TRAVERSAL_DEPTH {
        for &c in part.out.iter().flatten() {
            walk_out(db, db.get(c).to, depth + 1, tally);
        }
    }
}

fn walk_in(db: &Db, p: PRef<Part>, depth: u32, tally: &mut Tally) {
    let part = db.get(p);
    visit(tally, part);
    if depth < TRAVERSAL_DEPTH {
        for &c in db.slice(&part.incoming) {
            walk_in(db, db.get(c).from, depth + 1, tally);
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
        part.out
    };
    if plan.increment_at(*visit_no) {
        let part = tx.get_mut(p);
        part.x += 1;
        part.y += 1;
        tally.changed();
    }
    *visit_no += 1;
    if depth < TRAVERSAL_DEPTH {
        for c in out.into_iter().flatten() {
            let to = tx.get(c).to;
            walk_update(tx, to, depth + 1, plan, visit_no, tally);
        }
    }
}

impl Engine for AmberOo1 {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let db = &self.db;
        let parts = db.slice(&db.get(self.root).parts);
        for &id in ids {
            visit(&mut tally, db.get(find_in(parts, id)?));
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
        let mut tally = Tally::for_op(Op::Update);
        let start = find(&self.db, self.root, root)?;
        let mut tx = self.db.begin().ctx("beginning the update")?;
        let mut visit_no = 0;
        walk_update(&mut tx, start, 0, plan, &mut visit_no, &mut tally);
        let stats = tx.commit().ctx("committing the update")?;
        self.last_log_bytes = Some(stats.log_bytes);
        Ok(tally.finish())
    }

    fn last_commit_log_bytes(&self) -> Option<u64> {
        self.last_log_bytes
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db.close().ctx("closing the database")
    }
}
