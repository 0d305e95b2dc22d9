//! `redb-inline`: one redb table `graph` mapping a part's id to its [inline
//! record](crate::inline) — the part with its outgoing and incoming
//! connections. A traversal step is one B-tree lookup, where the normalised
//! [`crate::redb`] engine makes two.
//!
//! An update rewrites the record of each part it increments; an insert writes
//! the new parts' records, then rewrites the record of every target to add
//! the incoming connection. Durability as [`crate::redb`]; `--cache-mib` sets
//! redb's cache size.

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, NewPart,
    Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use redb::{Database, ReadOnlyTable, ReadableDatabase, ReadableTable, Table, TableDefinition};

use crate::inline::{self, InlineRef};
use crate::redb::{DURABILITY, INSTALL, begin_write, builder};

const DB_FILE: &str = "oo1-inline.redb";

const GRAPH: TableDefinition<u32, &[u8]> = TableDefinition::new("graph");

/// The `redb-inline` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedbInlineFactory;

/// Writes the new parts, then adds each connection to its target's incoming
/// list.
fn put_parts(
    table: &mut Table<'_, u32, &'static [u8]>,
    parts: &[NewPart],
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let mut buf = Vec::new();
    for np in parts {
        let p = &np.part;
        inline::new_record(&mut buf, np);
        if table
            .insert(p.id, buf.as_slice())
            .ctx("writing a part")?
            .is_some()
        {
            return Err(EngineError::bad_input(format!(
                "part {} already exists",
                p.id
            )));
        }
        tally.visit(p.id, p.x, p.y, &p.kind);
        tally.changed();
    }
    for c in parts.iter().flat_map(|np| &np.connections) {
        {
            let guard = table
                .get(c.to)
                .ctx("reading a part")?
                .ok_or(EngineError::MissingPart { id: c.to })?;
            let bytes = guard.value();
            InlineRef::new(c.to, bytes)?;
            buf.clear();
            buf.extend_from_slice(bytes);
        }
        inline::push_incoming(&mut buf, c.from);
        table
            .insert(c.to, buf.as_slice())
            .ctx("writing an incoming connection")?;
    }
    Ok(())
}

impl EngineFactory for RedbInlineFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "redb-inline",
            summary: "redb: one table keyed by id, a part's record holding its fields, its 3 outgoing connections and the ids of the parts connecting to it; Durability::Immediate commits",
            schema: "inline: one record per part with its outgoing and incoming connections, keyed by id; a traversal step is one B-tree lookup",
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: true,
        }
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        options: &EngineOptions,
    ) -> Result<(), EngineError> {
        let path = dir.join(DB_FILE);
        let database = builder(options)
            .create(&path)
            .ctx(&format!("creating {}", path.display()))?;
        let wtxn = begin_write(&database, "beginning the load")?;
        {
            let mut table = wtxn.open_table(GRAPH).ctx("opening the graph table")?;
            inline::for_each_record(db, |id, record| {
                table.insert(id, record).ctx("loading a part").map(drop)
            })?;
        }
        wtxn.commit().ctx("committing the load")?;
        database.close().ctx("closing")
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return Err(EngineError::io(
                format!("opening {}", path.display()),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        let database = builder(options)
            .open(&path)
            .ctx(&format!("opening {}", path.display()))?;
        Ok(Box::new(RedbInline { database }))
    }
}

/// An open `redb-inline` database.
pub struct RedbInline {
    database: Database,
}

/// Visits `id` and, below depth 7, walks along its outgoing connections (or
/// its incoming ones when `reverse`), reading the record in place while it
/// recurses.
fn walk(
    table: &ReadOnlyTable<u32, &'static [u8]>,
    id: PartId,
    depth: u32,
    reverse: bool,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let guard = table
        .get(id)
        .ctx("reading a part")?
        .ok_or(EngineError::MissingPart { id })?;
    let r = InlineRef::new(id, guard.value())?;
    let p = r.part();
    tally.visit(id, p.x(), p.y(), p.kind());
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    if reverse {
        for from in r.incoming() {
            walk(table, from, depth + 1, reverse, tally)?;
        }
    } else {
        for to in r.targets() {
            walk(table, to, depth + 1, reverse, tally)?;
        }
    }
    Ok(())
}

/// The update traversal: a part to increment is copied into `buf`, changed
/// and written back whole.
fn walk_update(
    table: &mut Table<'_, u32, &'static [u8]>,
    id: PartId,
    depth: u32,
    plan: &UpdatePlan,
    step: &mut (usize, Vec<u8>),
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let (visit, buf) = step;
    let targets = {
        let guard = table
            .get(id)
            .ctx("reading a part")?
            .ok_or(EngineError::MissingPart { id })?;
        let r = InlineRef::new(id, guard.value())?;
        let p = r.part();
        tally.visit(id, p.x(), p.y(), p.kind());
        if plan.increment_at(*visit) {
            buf.clear();
            buf.extend_from_slice(guard.value());
        }
        r.targets()
    };
    if plan.increment_at(*visit) {
        inline::increment(id, buf)?;
        table.insert(id, buf.as_slice()).ctx("writing a part")?;
        tally.changed();
    }
    *visit += 1;
    if depth < TRAVERSAL_DEPTH {
        for to in targets {
            walk_update(table, to, depth + 1, plan, step, tally)?;
        }
    }
    Ok(())
}

impl RedbInline {
    fn read_walk(&self, root: PartId, op: Op) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(op);
        let rtxn = self
            .database
            .begin_read()
            .ctx("beginning a read transaction")?;
        let table = rtxn.open_table(GRAPH).ctx("opening the graph table")?;
        walk(&table, root, 0, op == Op::Reverse, &mut tally)?;
        Ok(tally.finish())
    }
}

impl Engine for RedbInline {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let rtxn = self
            .database
            .begin_read()
            .ctx("beginning a read transaction")?;
        let table = rtxn.open_table(GRAPH).ctx("opening the graph table")?;
        for &id in ids {
            let guard = table
                .get(id)
                .ctx("reading a part")?
                .ok_or(EngineError::MissingPart { id })?;
            let p = InlineRef::new(id, guard.value())?.part();
            tally.visit(id, p.x(), p.y(), p.kind());
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.read_walk(root, Op::Traversal)
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.read_walk(root, Op::Reverse)
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let wtxn = begin_write(&self.database, "beginning the insert")?;
        {
            let mut table = wtxn.open_table(GRAPH).ctx("opening the graph table")?;
            put_parts(&mut table, parts, &mut tally)?;
        }
        wtxn.commit().ctx("committing the insert")?;
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let wtxn = begin_write(&self.database, "beginning the update")?;
        {
            let mut table = wtxn.open_table(GRAPH).ctx("opening the graph table")?;
            let mut step = (0, Vec::new());
            walk_update(&mut table, root, 0, plan, &mut step, &mut tally)?;
        }
        wtxn.commit().ctx("committing the update")?;
        Ok(tally.finish())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.database.close().ctx("closing")
    }
}
