//! *mapped*: Amber's own architecture, the analogue of ObjectStore's
//! (White & DeWitt's architecture 4): persistent objects reached by plain
//! loads through `PRef`s swizzled when their page is faulted in, updates
//! made through `&mut` references, detected by page protection and logged
//! at commit as the bytes that changed (ObjectStore logged whole pages:
//! Amber's default log generator diffs; its `wpl` strategy would log whole
//! pages). The client cache is Amber's cache budget (FIFO eviction of
//! clean pages), the same bytes as the baselines' buffer pool.
//!
//! The parts are `texas::schema::all_raw`'s (the same 104 bytes as the
//! baselines' records, connections as `PRef`s); the index is an array of
//! part pointers in chunks of [`CHUNK`] (one page each), as the paper's
//! index was an array of OIDs.
//!
//! **(choice)** Reads that will not update use no Amber transaction: a
//! read in Amber needs none, and a read-only transaction would cost only
//! its begin and commit, which the single-transaction tables leave out. A
//! transaction that will update, or that the experiment commits (one per
//! iteration), is a real one.

use std::path::Path;

use amber::{Db, Options, PRef, PVec, Persistent, Tx, View};

use super::engine::{Engine, Transaction, Work};
use super::schema::Schema;
use crate::oo1::database::{GeneratedDb, PartId};
use crate::oo1::engine::{Answer, EngineError, ResultExt, TRAVERSAL_DEPTH, Tally};
use crate::oo1::ops::Op;
use crate::texas::schema::all_raw::Part;

/// The database file in the mapped version's directory.
pub const FILE: &str = "mapped.amber";

/// The root's name.
pub const ROOT: &str = "epvm";

/// Part pointers per index chunk: a page's object area (4,056 bytes).
pub const CHUNK: usize = 507;

/// One page of the index: parts `c·CHUNK + 1 ..= (c + 1)·CHUNK` of chunk `c`.
#[derive(Persistent)]
#[persistent(name = "epvm::Chunk")]
#[repr(C)]
pub struct Chunk {
    pub parts: [Option<PRef<Part>>; CHUNK],
}

/// The root: the index.
#[derive(Persistent)]
#[persistent(name = "epvm::Root")]
#[repr(C)]
pub struct Root {
    pub chunks: PVec<PRef<Chunk>>,
    pub parts: u64,
}

/// Builds the database of `data` in the empty directory `dir`; returns the
/// file's pages.
pub fn build<S: Schema>(dir: &Path, data: &GeneratedDb) -> Result<u64, EngineError> {
    let path = dir.join(FILE);
    let mut db =
        Db::create(&path, Options::default()).ctx(&format!("creating {}", path.display()))?;
    let refs = S::build_parts(&mut db, data)?;
    let mut tx = db.begin().ctx("beginning the index")?;
    let mut chunks = Vec::new();
    for ids in refs.chunks(CHUNK) {
        let mut parts = [None; CHUNK];
        for (slot, &p) in parts.iter_mut().zip(ids) {
            *slot = Some(p);
        }
        chunks.push(tx.alloc(S::chunk(parts)).ctx("allocating an index chunk")?);
    }
    let chunks = tx.new_vec(chunks).ctx("allocating the chunk list")?;
    let root = tx
        .alloc(S::root(chunks, refs.len() as u64))
        .ctx("allocating the root")?;
    tx.set_root(ROOT, root).ctx("naming the root")?;
    tx.commit().ctx("committing the index")?;
    let pages = db.stats().store.page_count;
    db.close().ctx("closing the database")?;
    Ok(pages)
}

/// The database in `dir`, opened with a cache budget of `cache_bytes`, and
/// its root (the copy versions open it too).
pub fn open_db<S: Schema>(
    dir: &Path,
    cache_bytes: u64,
) -> Result<(Db, PRef<S::Root>), EngineError> {
    let path = dir.join(FILE);
    let db = Db::open(
        &path,
        Options {
            cache_bytes: Some(cache_bytes),
            ..Options::default()
        },
    )
    .ctx(&format!("opening {}", path.display()))?;
    let root = db
        .root::<S::Root>(ROOT)
        .ctx("reading the root")?
        .ok_or_else(|| EngineError::corrupt(format!("no root named {ROOT:?}")))?;
    Ok((db, root))
}

/// The open database.
pub struct Mapped<S: Schema> {
    db: Db,
    root: PRef<S::Root>,
    /// Integers an update changes (Figure 11).
    ints: usize,
}

impl<S: Schema> Mapped<S> {
    /// Opens the database in `dir` with a cache budget of `cache_bytes`;
    /// an update changes `ints` integers (Figure 11; OO1's x and y else).
    pub fn open(dir: &Path, cache_bytes: u64, ints: usize) -> Result<Self, EngineError> {
        let (db, root) = open_db::<S>(dir, cache_bytes)?;
        Ok(Mapped { db, root, ints })
    }

    /// The database (for reading it back).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The fault backend.
    pub fn backend(&self) -> String {
        self.db.backend().to_string()
    }

    /// Visits parts `1..=n` in id order (outside any transaction).
    /// Calls `each` on every part too.
    pub fn read_all(
        &self,
        n: u32,
        tally: &mut Tally,
        mut each: impl FnMut(&S::Part),
    ) -> Result<(), EngineError> {
        for id in 1..=n {
            let part = self.db.get(lookup::<S>(&self.db, self.root, id)?);
            let (id, x, y, kind) = S::values(part);
            tally.visit(id, x, y, kind);
            each(part);
        }
        Ok(())
    }

    /// Closes the database.
    pub fn close(self) -> Result<(), EngineError> {
        self.db.close().ctx("closing the database")
    }
}

/// A transaction of the mapped version: reads through the database, or a
/// real transaction.
pub enum MappedTx<'a, S: Schema> {
    Read {
        db: &'a Db,
        root: PRef<S::Root>,
    },
    Write {
        tx: Box<Tx<'a>>,
        root: PRef<S::Root>,
        ints: usize,
    },
}

impl<S: Schema> Engine for Mapped<S> {
    type Tx<'a> = MappedTx<'a, S>;

    fn begin(&mut self, real: bool) -> Result<MappedTx<'_, S>, EngineError> {
        let root = self.root;
        Ok(if real {
            MappedTx::Write {
                tx: Box::new(self.db.begin().ctx("beginning a transaction")?),
                root,
                ints: self.ints,
            }
        } else {
            MappedTx::Read { db: &self.db, root }
        })
    }

    fn reads(&self) -> u64 {
        self.db.stats().fetched
    }
}

/// The part of id `id`, through the index.
fn lookup<S: Schema>(
    v: &impl View,
    root: PRef<S::Root>,
    id: PartId,
) -> Result<PRef<S::Part>, EngineError> {
    let (chunks, parts) = S::index(v.get(root));
    let i = (id as usize)
        .checked_sub(1)
        .filter(|&i| (i as u64) < parts)
        .ok_or(EngineError::MissingPart { id })?;
    let chunk = *v
        .slice(chunks)
        .get(i / CHUNK)
        .ok_or_else(|| EngineError::corrupt(format!("no index chunk for part {id}")))?;
    S::entry(v.get(chunk), i % CHUNK).ok_or(EngineError::MissingPart { id })
}

/// The target of connection `slot` of `p`.
#[inline]
fn target<S: Schema>(
    v: &impl View,
    p: PRef<S::Part>,
    slot: usize,
) -> Result<PRef<S::Part>, EngineError> {
    S::to(v.get(p), slot).ok_or_else(|| EngineError::corrupt("a part's connection is null"))
}

/// A read-only traversal.
fn read<S: Schema>(
    v: &impl View,
    p: PRef<S::Part>,
    depth: u32,
    visit: &mut usize,
    work: &mut Work<'_>,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let (id, x, y, kind) = S::values(v.get(p));
    tally.visit(id, x, y, kind);
    if work.updates(*visit) {
        return Err(EngineError::bad_input(
            "an update asked of a traversal outside a transaction",
        ));
    }
    *visit += 1;
    if depth < TRAVERSAL_DEPTH {
        for slot in 0..3 {
            read::<S>(v, target::<S>(v, p, slot)?, depth + 1, visit, work, tally)?;
        }
    }
    Ok(())
}

/// A traversal that updates where `work` says.
#[allow(clippy::too_many_arguments)]
fn write<S: Schema>(
    tx: &mut Tx<'_>,
    p: PRef<S::Part>,
    depth: u32,
    visit: &mut usize,
    work: &mut Work<'_>,
    tally: &mut Tally,
    ints: usize,
) -> Result<(), EngineError> {
    let (id, x, y, kind) = S::values(tx.get(p));
    tally.visit(id, x, y, kind);
    if work.updates(*visit) {
        S::update(tx.get_mut(p), ints);
        tally.changed();
    }
    *visit += 1;
    if depth < TRAVERSAL_DEPTH {
        for slot in 0..3 {
            let to = target::<S>(tx, p, slot)?;
            write::<S>(tx, to, depth + 1, visit, work, tally, ints)?;
        }
    }
    Ok(())
}

impl<S: Schema> Transaction for MappedTx<'_, S> {
    fn iterate(&mut self, id: PartId, mut work: Work<'_>) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        match self {
            MappedTx::Read { db, root } => {
                let p = lookup::<S>(*db, *root, id)?;
                read::<S>(*db, p, 0, &mut 0, &mut work, &mut tally)?;
            }
            MappedTx::Write { tx, root, ints } => {
                let p = lookup::<S>(tx.as_ref(), *root, id)?;
                let ints = *ints;
                write::<S>(tx, p, 0, &mut 0, &mut work, &mut tally, ints)?;
            }
        }
        Ok(tally.finish())
    }

    fn reads(&self) -> Option<u64> {
        match self {
            MappedTx::Read { db, .. } => Some(db.stats().fetched),
            MappedTx::Write { .. } => None,
        }
    }

    fn commit(self) -> Result<u64, EngineError> {
        match self {
            MappedTx::Read { .. } => Ok(0),
            MappedTx::Write { tx, .. } => (*tx).commit().map(|c| c.log_bytes).ctx("committing"),
        }
    }
}
