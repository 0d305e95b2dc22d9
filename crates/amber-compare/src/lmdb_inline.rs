//! `lmdb-inline`: LMDB through lmdb-rkv, one database `graph` mapping a part's
//! big-endian id to its [inline record](crate::inline) — the part with its
//! outgoing and incoming connections — read in place from the memory map. A
//! traversal step is one B-tree lookup, where the normalised [`crate::lmdb`]
//! engine makes two.
//!
//! An update rewrites the record of each part it increments; an insert writes
//! the new parts' records, then rewrites the record of every target to add
//! the incoming connection. Durability as [`crate::lmdb`] (its flags).

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, NewPart,
    Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use lmdb_rkv::{
    Database, DatabaseFlags, Environment, RoTransaction, RwTransaction, Transaction, WriteFlags,
};

use crate::inline::{self, InlineRef};
use crate::lmdb::{DURABILITY, INSTALL, get, key, open_db, open_env};

const NAME: &str = "graph";

/// The `lmdb-inline` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct LmdbInlineFactory;

/// The record of `id`, in the transaction's view.
fn record(txn: &impl Transaction, db: Database, id: PartId) -> Result<InlineRef<'_>, EngineError> {
    let bytes = get(txn, db, &key(id))
        .ctx("reading a part")?
        .ok_or(EngineError::MissingPart { id })?;
    InlineRef::new(id, bytes)
}

/// Writes the new parts, then adds each connection to its target's incoming
/// list, in `wtxn`.
fn put_parts(
    db: Database,
    wtxn: &mut RwTransaction<'_>,
    parts: &[NewPart],
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let mut buf = Vec::new();
    for np in parts {
        let p = &np.part;
        inline::new_record(&mut buf, np);
        // NO_OVERWRITE: inserting an id that exists is an error, not an update.
        wtxn.put(db, &key(p.id), &buf, WriteFlags::NO_OVERWRITE)
            .ctx(&format!("inserting part {}", p.id))?;
        tally.visit(p.id, p.x, p.y, &p.kind);
        tally.changed();
    }
    for c in parts.iter().flat_map(|np| &np.connections) {
        let bytes = get(wtxn, db, &key(c.to))
            .ctx("reading a part")?
            .ok_or(EngineError::MissingPart { id: c.to })?;
        InlineRef::new(c.to, bytes)?;
        buf.clear();
        buf.extend_from_slice(bytes);
        inline::push_incoming(&mut buf, c.from);
        wtxn.put(db, &key(c.to), &buf, WriteFlags::empty())
            .ctx("writing an incoming connection")?;
    }
    Ok(())
}

impl EngineFactory for LmdbInlineFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "lmdb-inline",
            summary: "LMDB via lmdb-rkv: one database keyed by big-endian id, a part's record holding its fields, its 3 outgoing connections and the ids of the parts connecting to it, read in place (zero-copy); durable commits",
            schema: "inline: one record per part with its outgoing and incoming connections, keyed by id; a traversal step is one B-tree lookup",
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: false,
        }
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        _options: &EngineOptions,
    ) -> Result<(), EngineError> {
        let env = open_env(dir)?;
        let graph = env
            .create_db(Some(NAME), DatabaseFlags::empty())
            .ctx("creating the graph database")?;
        let mut wtxn = env.begin_rw_txn().ctx("beginning the load")?;
        inline::for_each_record(db, |id, record| {
            // Ids come in increasing order: APPEND writes each at the end of
            // the tree without a search.
            wtxn.put(graph, &key(id), &record, WriteFlags::APPEND)
                .ctx(&format!("loading part {id}"))
        })?;
        wtxn.commit().ctx("committing the load")?;
        Ok(())
    }

    fn open(&self, dir: &Path, _options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let env = open_env(dir)?;
        let graph = open_db(&env, NAME)?;
        Ok(Box::new(LmdbInline { env, graph }))
    }
}

/// An open `lmdb-inline` database.
pub struct LmdbInline {
    env: Environment,
    graph: Database,
}

/// Visits `id` and, below depth 7, walks along its outgoing connections (or
/// its incoming ones when `reverse`), reading each record in place.
fn walk(
    db: Database,
    txn: &RoTransaction<'_>,
    id: PartId,
    depth: u32,
    reverse: bool,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let r = record(txn, db, id)?;
    let p = r.part();
    tally.visit(id, p.x(), p.y(), p.kind());
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    if reverse {
        for from in r.incoming() {
            walk(db, txn, from, depth + 1, reverse, tally)?;
        }
    } else {
        for to in r.targets() {
            walk(db, txn, to, depth + 1, reverse, tally)?;
        }
    }
    Ok(())
}

/// The update traversal: a part to increment is copied into `buf`, changed
/// and written back whole.
fn walk_update(
    db: Database,
    wtxn: &mut RwTransaction<'_>,
    id: PartId,
    depth: u32,
    plan: &UpdatePlan,
    step: &mut (usize, Vec<u8>),
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let bytes = get(wtxn, db, &key(id))
        .ctx("reading a part")?
        .ok_or(EngineError::MissingPart { id })?;
    let r = InlineRef::new(id, bytes)?;
    let p = r.part();
    tally.visit(id, p.x(), p.y(), p.kind());
    let targets = r.targets();
    let (visit, buf) = step;
    if plan.increment_at(*visit) {
        buf.clear();
        buf.extend_from_slice(bytes);
        inline::increment(id, buf)?;
        wtxn.put(db, &key(id), buf, WriteFlags::empty())
            .ctx("writing a part")?;
        tally.changed();
    }
    *visit += 1;
    if depth < TRAVERSAL_DEPTH {
        for to in targets {
            walk_update(db, wtxn, to, depth + 1, plan, step, tally)?;
        }
    }
    Ok(())
}

impl Engine for LmdbInline {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let rtxn = self
            .env
            .begin_ro_txn()
            .ctx("beginning a read transaction")?;
        for &id in ids {
            let p = record(&rtxn, self.graph, id)?.part();
            tally.visit(id, p.x(), p.y(), p.kind());
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let rtxn = self
            .env
            .begin_ro_txn()
            .ctx("beginning a read transaction")?;
        walk(self.graph, &rtxn, root, 0, false, &mut tally)?;
        Ok(tally.finish())
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        let rtxn = self
            .env
            .begin_ro_txn()
            .ctx("beginning a read transaction")?;
        walk(self.graph, &rtxn, root, 0, true, &mut tally)?;
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let mut wtxn = self.env.begin_rw_txn().ctx("beginning the insert")?;
        put_parts(self.graph, &mut wtxn, parts, &mut tally)?;
        wtxn.commit().ctx("committing the insert")?;
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let mut wtxn = self.env.begin_rw_txn().ctx("beginning the update")?;
        let mut step = (0, Vec::new());
        walk_update(self.graph, &mut wtxn, root, 0, plan, &mut step, &mut tally)?;
        wtxn.commit().ctx("committing the update")?;
        Ok(tally.finish())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        // Dropping the environment closes it (`mdb_env_close`).
        Ok(())
    }
}
