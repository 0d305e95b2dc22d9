//! `sqlite`: rusqlite with bundled SQLite. Tables `parts` and `connections`,
//! indexes on `connections("from")` and `connections("to")`, cached prepared
//! statements, WAL journal with `synchronous = FULL` (a commit fsyncs the WAL;
//! both settings are read back at open). SQLite's own auto-checkpoint (at
//! 1,000 WAL pages, its default) copies the WAL into the database file now
//! and then; [`Engine::install`] forces a `wal_checkpoint(TRUNCATE)`.
//!
//! A connection's rowid follows creation order, which is (from, slot) order, so
//! `ORDER BY id` walks the indexes in slot order without sorting. Read
//! operations run in one read transaction each.

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, Kind,
    NewPart, Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use rusqlite::{CachedStatement, Connection, OpenFlags, OptionalExtension, Statement, params};

const DB_FILE: &str = "oo1.sqlite";

const SCHEMA: &str = r#"
CREATE TABLE parts (
    id    INTEGER PRIMARY KEY,
    kind  BLOB    NOT NULL,
    x     INTEGER NOT NULL,
    y     INTEGER NOT NULL,
    build INTEGER NOT NULL
);
CREATE TABLE connections (
    id     INTEGER PRIMARY KEY,
    "from" INTEGER NOT NULL,
    "to"   INTEGER NOT NULL,
    kind   BLOB    NOT NULL,
    length INTEGER NOT NULL
);
"#;
const INDEXES: &str = r#"
CREATE INDEX connections_from ON connections("from");
CREATE INDEX connections_to ON connections("to");
"#;

const INSERT_PART: &str = "INSERT INTO parts (id, kind, x, y, build) VALUES (?1, ?2, ?3, ?4, ?5)";
const INSERT_CONNECTION: &str =
    r#"INSERT INTO connections ("from", "to", kind, length) VALUES (?1, ?2, ?3, ?4)"#;
const SELECT_PART: &str = "SELECT x, y, kind FROM parts WHERE id = ?1";
const SELECT_OUT: &str = r#"SELECT p.id, p.x, p.y, p.kind FROM connections AS c JOIN parts AS p ON p.id = c."to" WHERE c."from" = ?1 ORDER BY c.id"#;
const SELECT_IN: &str = r#"SELECT p.id, p.x, p.y, p.kind FROM connections AS c JOIN parts AS p ON p.id = c."from" WHERE c."to" = ?1 ORDER BY c.id"#;
const SELECT_OUT_IDS: &str = r#"SELECT "to" FROM connections WHERE "from" = ?1 ORDER BY id"#;
const INCREMENT: &str = "UPDATE parts SET x = x + 1, y = y + 1 WHERE id = ?1";

/// The `sqlite` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct SqliteFactory;

pub(crate) fn connect(
    path: &Path,
    flags: OpenFlags,
    options: &EngineOptions,
) -> Result<Connection, EngineError> {
    let conn =
        Connection::open_with_flags(path, flags).ctx(&format!("opening {}", path.display()))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .ctx("setting journal_mode = WAL")?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(EngineError::corrupt(format!(
            "SQLite refused WAL mode (journal_mode = {mode})"
        )));
    }
    conn.execute_batch("PRAGMA synchronous = FULL")
        .ctx("setting synchronous = FULL")?;
    // FULL (2) or EXTRA (3): in WAL mode the WAL is synced at every commit.
    let sync: i64 = conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .ctx("reading synchronous")?;
    if sync < 2 {
        return Err(EngineError::corrupt(format!(
            "SQLite kept synchronous = {sync}: commits would not be synced"
        )));
    }
    if let Some(mib) = options.cache_mib {
        conn.execute_batch(&format!(
            "PRAGMA cache_size = -{}",
            mib.saturating_mul(1024)
        ))
        .ctx("setting cache_size")?;
    }
    Ok(conn)
}

impl EngineFactory for SqliteFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "sqlite",
            summary: "SQLite (bundled) via rusqlite: parts and connections tables, indexes on connections(from) and (to), cached prepared statements, WAL, synchronous=FULL",
            schema: "normalised: parts table + connections table with indexes on from and to; a traversal step is an index lookup of the part's connections joined to a primary-key lookup of each target (two B-tree lookups)",
            durability: "WAL journal, synchronous = FULL (read back at open): each commit fsyncs the WAL before returning; SQLite's auto-checkpoint (default, every 1,000 WAL pages) copies the WAL into the database file and fsyncs it",
            install: "PRAGMA wal_checkpoint(TRUNCATE): every WAL frame copied into the database file, which is synced, and the WAL truncated",
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
        let mut conn = connect(&path, OpenFlags::default(), options)?;
        conn.execute_batch(SCHEMA).ctx("creating the schema")?;
        let tx = conn.transaction().ctx("beginning the load")?;
        {
            let mut part = tx.prepare_cached(INSERT_PART).ctx("preparing")?;
            for p in &db.parts {
                part.execute(params![p.id, p.kind, p.x, p.y, p.build])
                    .ctx("inserting a part")?;
            }
            let mut conn_stmt = tx.prepare_cached(INSERT_CONNECTION).ctx("preparing")?;
            for c in &db.connections {
                conn_stmt
                    .execute(params![c.from, c.to, c.kind, c.length])
                    .ctx("inserting a connection")?;
            }
        }
        tx.execute_batch(INDEXES).ctx("creating the indexes")?;
        tx.execute_batch("ANALYZE").ctx("analyzing")?;
        tx.commit().ctx("committing the load")?;
        conn.close()
            .map_err(|(_, e)| EngineError::backend("closing", e))
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let path = dir.join(DB_FILE);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = connect(&path, flags, options)?;
        Ok(Box::new(Sqlite { conn }))
    }
}

/// `PRAGMA wal_checkpoint(TRUNCATE)`: every WAL frame into the database
/// file, synced, the WAL truncated (OO1's and OO7's `install`).
pub(crate) fn checkpoint(conn: &Connection) -> Result<(), EngineError> {
    let busy: i64 = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .ctx("checkpointing the WAL")?;
    if busy != 0 {
        return Err(EngineError::io(
            "PRAGMA wal_checkpoint(TRUNCATE)",
            std::io::Error::other("blocked by another connection (SQLITE_BUSY)"),
        ));
    }
    Ok(())
}

/// An open `sqlite` database.
pub struct Sqlite {
    conn: Connection,
}

type Row = (PartId, i32, i32, Kind);

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

/// Visits the parts reached by `step` (the outgoing or incoming join) from
/// `id`, depth first. The rows are collected before recursing so the one
/// cached statement can be reused at every depth.
fn walk(
    step: &mut Statement<'_>,
    id: PartId,
    depth: u32,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let next: Vec<Row> = step
        .query_map([id], read_row)
        .ctx("querying connections")?
        .collect::<rusqlite::Result<_>>()
        .ctx("reading connections")?;
    for (to, x, y, kind) in next {
        tally.visit(to, x, y, &kind);
        walk(step, to, depth + 1, tally)?;
    }
    Ok(())
}

fn read_part(stmt: &mut Statement<'_>, id: PartId) -> Result<(i32, i32, Kind), EngineError> {
    stmt.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })
}

struct UpdateStatements<'a> {
    part: CachedStatement<'a>,
    increment: CachedStatement<'a>,
    out_ids: CachedStatement<'a>,
}

fn walk_update(
    s: &mut UpdateStatements<'_>,
    id: PartId,
    depth: u32,
    plan: &UpdatePlan,
    visit: &mut usize,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let (x, y, kind) = read_part(&mut s.part, id)?;
    tally.visit(id, x, y, &kind);
    if plan.increment_at(*visit) {
        s.increment.execute([id]).ctx("incrementing x and y")?;
        tally.changed();
    }
    *visit += 1;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let next: Vec<PartId> = s
        .out_ids
        .query_map([id], |r| r.get(0))
        .ctx("querying connections")?
        .collect::<rusqlite::Result<_>>()
        .ctx("reading connections")?;
    for to in next {
        walk_update(s, to, depth + 1, plan, visit, tally)?;
    }
    Ok(())
}

impl Sqlite {
    fn traversal(&mut self, root: PartId, op: Op, step_sql: &str) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(op);
        let tx = self
            .conn
            .transaction()
            .ctx("beginning a read transaction")?;
        {
            let mut part = tx.prepare_cached(SELECT_PART).ctx("preparing")?;
            let (x, y, kind) = read_part(&mut part, root)?;
            tally.visit(root, x, y, &kind);
            let mut step = tx.prepare_cached(step_sql).ctx("preparing")?;
            walk(&mut step, root, 0, &mut tally)?;
        }
        tx.commit().ctx("ending the read transaction")?;
        Ok(tally.finish())
    }
}

impl Engine for Sqlite {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let tx = self
            .conn
            .transaction()
            .ctx("beginning a read transaction")?;
        {
            let mut part = tx.prepare_cached(SELECT_PART).ctx("preparing")?;
            for &id in ids {
                let (x, y, kind) = read_part(&mut part, id)?;
                tally.visit(id, x, y, &kind);
            }
        }
        tx.commit().ctx("ending the read transaction")?;
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.traversal(root, Op::Traversal, SELECT_OUT)
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.traversal(root, Op::Reverse, SELECT_IN)
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let tx = self.conn.transaction().ctx("beginning the insert")?;
        {
            let mut part = tx.prepare_cached(INSERT_PART).ctx("preparing")?;
            for np in parts {
                let p = &np.part;
                part.execute(params![p.id, p.kind, p.x, p.y, p.build])
                    .ctx("inserting a part")?;
                tally.visit(p.id, p.x, p.y, &p.kind);
                tally.changed();
            }
            let mut conn_stmt = tx.prepare_cached(INSERT_CONNECTION).ctx("preparing")?;
            for c in parts.iter().flat_map(|np| &np.connections) {
                conn_stmt
                    .execute(params![c.from, c.to, c.kind, c.length])
                    .ctx("inserting a connection")?;
            }
        }
        tx.commit().ctx("committing the insert")?;
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let tx = self.conn.transaction().ctx("beginning the update")?;
        {
            let mut s = UpdateStatements {
                part: tx.prepare_cached(SELECT_PART).ctx("preparing")?,
                increment: tx.prepare_cached(INCREMENT).ctx("preparing")?,
                out_ids: tx.prepare_cached(SELECT_OUT_IDS).ctx("preparing")?,
            };
            let mut visit = 0;
            walk_update(&mut s, root, 0, plan, &mut visit, &mut tally)?;
        }
        tx.commit().ctx("committing the update")?;
        Ok(tally.finish())
    }

    fn install(&mut self) -> Result<(), EngineError> {
        checkpoint(&self.conn)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.conn
            .close()
            .map_err(|(_, e)| EngineError::backend("closing", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_bench::oo1::{GenParams, generate};

    /// The traversal queries walk the connection indexes in rowid (slot) order:
    /// no full scan and no sort.
    #[test]
    fn traversal_queries_use_the_indexes_without_sorting() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = generate(GenParams {
            parts: 300,
            seed: 1,
        })
        .expect("valid parameters");
        SqliteFactory
            .build(dir.path(), &db, &EngineOptions::default())
            .expect("build");
        let conn = Connection::open(dir.path().join(DB_FILE)).expect("open");
        for (sql, index) in [
            (SELECT_OUT, "connections_from"),
            (SELECT_IN, "connections_to"),
            (SELECT_OUT_IDS, "connections_from"),
        ] {
            let mut stmt = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("explain");
            let plan: Vec<String> = stmt
                .query_map([1], |r| r.get::<_, String>(3))
                .expect("query")
                .collect::<rusqlite::Result<_>>()
                .expect("rows");
            let plan = plan.join("; ");
            assert!(plan.contains(index), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
            assert!(!plan.contains("SCAN"), "{sql}: {plan}");
        }
    }
}
