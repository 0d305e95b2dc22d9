//! `redb`: redb tables keyed by part id, with fixed-size records
//! ([`crate::record`]):
//!
//! - `parts`: id → part record;
//! - `out`: multimap from → outgoing connection records (slot first, so values
//!   come back in slot order);
//! - `in`: multimap to → (from, slot) records.
//!
//! Every write transaction asks for `Durability::Immediate` (redb's default,
//! set explicitly): fsynced before `commit` returns. `--cache-mib` sets
//! redb's cache size.

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, NewPart,
    Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use redb::{
    Database, Durability, MultimapTable, MultimapTableDefinition, ReadOnlyMultimapTable,
    ReadOnlyTable, ReadableDatabase, ReadableMultimapTable, ReadableTable, Table, TableDefinition,
    WriteTransaction,
};

use crate::record::{
    IN_LEN, OUT_LEN, PART_LEN, PartRef, encode_in, encode_out, encode_part, in_source, out_target,
};

const DB_FILE: &str = "oo1.redb";

const PARTS: TableDefinition<u32, &[u8; PART_LEN]> = TableDefinition::new("parts");
const OUT: MultimapTableDefinition<u32, &[u8; OUT_LEN]> = MultimapTableDefinition::new("out");
const IN: MultimapTableDefinition<u32, &[u8; IN_LEN]> = MultimapTableDefinition::new("in");

/// How a redb commit is made durable (`redb` and `redb-inline`).
pub const DURABILITY: &str = "Durability::Immediate set on every write transaction (redb's default): the commit fsyncs the file before returning";

/// What the harness's installation step does for redb.
pub const INSTALL: &str =
    "none: a commit writes its copy-on-write B-tree pages into the file itself";

/// Begins a write transaction that syncs at commit.
pub(crate) fn begin_write(
    database: &Database,
    what: &str,
) -> Result<WriteTransaction, EngineError> {
    let mut wtxn = database.begin_write().ctx(what)?;
    wtxn.set_durability(Durability::Immediate)
        .ctx("asking for Durability::Immediate")?;
    Ok(wtxn)
}

/// A database builder with the cache size of `options`.
pub(crate) fn builder(options: &EngineOptions) -> redb::Builder {
    let mut b = Database::builder();
    if let Some(mib) = options.cache_mib {
        b.set_cache_size(usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX));
    }
    b
}

/// The `redb` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedbFactory;

/// Writes parts and both connection tables in `wtxn`.
fn put_parts<'a>(
    wtxn: &WriteTransaction,
    parts: impl Iterator<Item = &'a NewPart> + Clone,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let mut table = wtxn.open_table(PARTS).ctx("opening the parts table")?;
    for np in parts.clone() {
        let p = &np.part;
        let old = table.insert(p.id, &encode_part(p)).ctx("writing a part")?;
        if old.is_some() {
            return Err(EngineError::bad_input(format!(
                "part {} already exists",
                p.id
            )));
        }
        tally.visit(p.id, p.x, p.y, &p.kind);
        tally.changed();
    }
    let mut out = wtxn.open_multimap_table(OUT).ctx("opening the out table")?;
    let mut inc = wtxn.open_multimap_table(IN).ctx("opening the in table")?;
    for np in parts {
        for (slot, c) in np.connections.iter().enumerate() {
            out.insert(c.from, &encode_out(slot as u8, c))
                .ctx("writing an outgoing connection")?;
            inc.insert(c.to, &encode_in(c.from, slot as u8))
                .ctx("writing an incoming connection")?;
        }
    }
    Ok(())
}

impl EngineFactory for RedbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "redb",
            summary: "redb: parts table and out/in multimap tables keyed by id, fixed-size records; Durability::Immediate commits",
            schema: "normalised: parts table + out and in connection multimap tables keyed by id; a traversal step is two B-tree lookups (the part's connections, then each target part)",
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
        let batch: Vec<NewPart> = db
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
        put_parts(&wtxn, batch.iter(), &mut Tally::for_op(Op::Insert))?;
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
        Ok(Box::new(Redb { database }))
    }
}

/// An open `redb` database.
pub struct Redb {
    database: Database,
}

fn visit(
    parts: &impl ReadableTable<u32, &'static [u8; PART_LEN]>,
    id: PartId,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let guard = parts
        .get(id)
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })?;
    let p = PartRef::from_array(guard.value());
    tally.visit(id, p.x(), p.y(), p.kind());
    Ok(())
}

fn walk_out(
    parts: &ReadOnlyTable<u32, &'static [u8; PART_LEN]>,
    out: &ReadOnlyMultimapTable<u32, &'static [u8; OUT_LEN]>,
    id: PartId,
    depth: u32,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    visit(parts, id, tally)?;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    for entry in out.get(id).ctx("reading connections")? {
        let to = out_target(id, entry.ctx("reading a connection")?.value())?;
        walk_out(parts, out, to, depth + 1, tally)?;
    }
    Ok(())
}

fn walk_in(
    parts: &ReadOnlyTable<u32, &'static [u8; PART_LEN]>,
    inc: &ReadOnlyMultimapTable<u32, &'static [u8; IN_LEN]>,
    id: PartId,
    depth: u32,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    visit(parts, id, tally)?;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    for entry in inc.get(id).ctx("reading connections")? {
        let from = in_source(id, entry.ctx("reading a connection")?.value())?;
        walk_in(parts, inc, from, depth + 1, tally)?;
    }
    Ok(())
}

fn walk_update(
    parts: &mut Table<'_, u32, &'static [u8; PART_LEN]>,
    out: &MultimapTable<'_, u32, &'static [u8; OUT_LEN]>,
    id: PartId,
    depth: u32,
    plan: &UpdatePlan,
    visit: &mut usize,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let record: [u8; PART_LEN] = *parts
        .get(id)
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })?
        .value();
    let p = PartRef::from_array(&record);
    tally.visit(id, p.x(), p.y(), p.kind());
    if plan.increment_at(*visit) {
        parts.insert(id, &p.incremented()).ctx("writing a part")?;
        tally.changed();
    }
    *visit += 1;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let mut next = [0 as PartId; 3];
    let mut n = 0;
    for entry in out.get(id).ctx("reading connections")? {
        let slot = next.get_mut(n).ok_or_else(|| {
            EngineError::corrupt(format!("part {id} has more than 3 outgoing connections"))
        })?;
        *slot = out_target(id, entry.ctx("reading a connection")?.value())?;
        n += 1;
    }
    for &to in &next[..n] {
        walk_update(parts, out, to, depth + 1, plan, visit, tally)?;
    }
    Ok(())
}

impl Engine for Redb {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let rtxn = self
            .database
            .begin_read()
            .ctx("beginning a read transaction")?;
        let parts = rtxn.open_table(PARTS).ctx("opening the parts table")?;
        for &id in ids {
            visit(&parts, id, &mut tally)?;
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let rtxn = self
            .database
            .begin_read()
            .ctx("beginning a read transaction")?;
        let parts = rtxn.open_table(PARTS).ctx("opening the parts table")?;
        let out = rtxn.open_multimap_table(OUT).ctx("opening the out table")?;
        walk_out(&parts, &out, root, 0, &mut tally)?;
        Ok(tally.finish())
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        let rtxn = self
            .database
            .begin_read()
            .ctx("beginning a read transaction")?;
        let parts = rtxn.open_table(PARTS).ctx("opening the parts table")?;
        let inc = rtxn.open_multimap_table(IN).ctx("opening the in table")?;
        walk_in(&parts, &inc, root, 0, &mut tally)?;
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let wtxn = begin_write(&self.database, "beginning the insert")?;
        put_parts(&wtxn, parts.iter(), &mut tally)?;
        wtxn.commit().ctx("committing the insert")?;
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let wtxn = begin_write(&self.database, "beginning the update")?;
        {
            let mut parts = wtxn.open_table(PARTS).ctx("opening the parts table")?;
            let out = wtxn.open_multimap_table(OUT).ctx("opening the out table")?;
            let mut visit = 0;
            walk_update(&mut parts, &out, root, 0, plan, &mut visit, &mut tally)?;
        }
        wtxn.commit().ctx("committing the update")?;
        Ok(tally.finish())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.database.close().ctx("closing")
    }
}
