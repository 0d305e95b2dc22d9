//! `postgres` for OO1: the `sqlite` engine's schema in PostgreSQL — tables
//! `parts` and `connections`, the connections indexed on `("from", id)`
//! and `("to", id)` — with statements prepared once per connection, one
//! object per query, one transaction per operation ([`super::Session`]).
//!
//! A connection's `id` (an identity column) follows creation order, which
//! is (from, slot) order, so `ORDER BY id` reads the index in slot order
//! without sorting, as SQLite's rowid does.

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, Kind,
    NewPart, Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use amber_bench::procfs::ProcessTree;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql, Type};
use postgres::{Client, Statement};

use super::{Session, build, int as id};

const SCHEMA: &str = r#"
CREATE TABLE parts (
    id    integer PRIMARY KEY,
    kind  bytea   NOT NULL,
    x     integer NOT NULL,
    y     integer NOT NULL,
    build bigint  NOT NULL
);
CREATE TABLE connections (
    id     bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "from" integer NOT NULL,
    "to"   integer NOT NULL,
    kind   bytea   NOT NULL,
    length integer NOT NULL
);
"#;
const INDEXES: &str = r#"
CREATE INDEX connections_from ON connections ("from", id);
CREATE INDEX connections_to ON connections ("to", id);
"#;

const INSERT_PART: &str = "INSERT INTO parts (id, kind, x, y, build) VALUES ($1, $2, $3, $4, $5)";
const INSERT_CONNECTION: &str =
    r#"INSERT INTO connections ("from", "to", kind, length) VALUES ($1, $2, $3, $4)"#;
const SELECT_PART: &str = "SELECT x, y, kind FROM parts WHERE id = $1";
const SELECT_OUT: &str = r#"SELECT p.id, p.x, p.y, p.kind FROM connections AS c JOIN parts AS p ON p.id = c."to" WHERE c."from" = $1 ORDER BY c.id"#;
const SELECT_IN: &str = r#"SELECT p.id, p.x, p.y, p.kind FROM connections AS c JOIN parts AS p ON p.id = c."from" WHERE c."to" = $1 ORDER BY c.id"#;
const SELECT_OUT_IDS: &str = r#"SELECT "to" FROM connections WHERE "from" = $1 ORDER BY id"#;
const INCREMENT: &str = "UPDATE parts SET x = x + 1, y = y + 1 WHERE id = $1";

/// The `postgres` OO1 engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct PostgresFactory;

/// The schema, as the table names it.
pub const SCHEMA_SUMMARY: &str = "normalised: parts table + connections table with indexes on (from, id) and (to, id), as sqlite's; a traversal step is an index lookup of the part's connections joined to a primary-key lookup of each target (two B-tree lookups), one query per step";

impl EngineFactory for PostgresFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "postgres",
            summary: "PostgreSQL (Debian's package, a server per process on a Unix socket) via the rust postgres client: parts and connections tables, indexes on connections(from) and (to), prepared statements, one object per query",
            schema: SCHEMA_SUMMARY,
            durability: super::DURABILITY,
            install: super::INSTALL,
            cache_budget: true,
        }
    }

    fn available(&self) -> Result<(), String> {
        super::available()
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        options: &EngineOptions,
    ) -> Result<(), EngineError> {
        build(dir, options, |client| load(client, db))
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(Postgres::new(Session::open(dir, options)?)?))
    }
}

/// Loads `db` with binary `COPY`, then creates the indexes.
pub fn load(client: &mut Client, db: &GeneratedDb) -> Result<(), EngineError> {
    client.batch_execute(SCHEMA).ctx("creating the schema")?;
    let mut tx = client.transaction().ctx("beginning the load")?;
    let sink = tx
        .copy_in("COPY parts (id, kind, x, y, build) FROM STDIN (FORMAT binary)")
        .ctx("copying parts")?;
    let types = [Type::INT4, Type::BYTEA, Type::INT4, Type::INT4, Type::INT8];
    let mut w = BinaryCopyInWriter::new(sink, &types);
    for p in &db.parts {
        let row: [&(dyn ToSql + Sync); 5] = [&id(p.id)?, &&p.kind[..], &p.x, &p.y, &p.build];
        w.write(&row).ctx("copying a part")?;
    }
    w.finish().ctx("copying parts")?;
    let sink = tx
        .copy_in(r#"COPY connections ("from", "to", kind, length) FROM STDIN (FORMAT binary)"#)
        .ctx("copying connections")?;
    let types = [Type::INT4, Type::INT4, Type::BYTEA, Type::INT4];
    let mut w = BinaryCopyInWriter::new(sink, &types);
    for c in &db.connections {
        let row: [&(dyn ToSql + Sync); 4] = [&id(c.from)?, &id(c.to)?, &&c.kind[..], &c.length];
        w.write(&row).ctx("copying a connection")?;
    }
    w.finish().ctx("copying connections")?;
    tx.batch_execute(INDEXES).ctx("creating the indexes")?;
    tx.commit().ctx("committing the load")
}

fn kind(bytes: &[u8]) -> Result<Kind, EngineError> {
    bytes
        .try_into()
        .map_err(|_| EngineError::corrupt(format!("a kind of {} bytes", bytes.len())))
}

/// The statements, prepared once per connection.
struct Statements {
    part: Statement,
    out: Statement,
    into: Statement,
    out_ids: Statement,
    increment: Statement,
    insert_part: Statement,
    insert_connection: Statement,
}

impl Statements {
    fn prepare(client: &mut Client) -> Result<Statements, EngineError> {
        let mut p = |sql: &str| client.prepare(sql).ctx("preparing a statement");
        Ok(Statements {
            part: p(SELECT_PART)?,
            out: p(SELECT_OUT)?,
            into: p(SELECT_IN)?,
            out_ids: p(SELECT_OUT_IDS)?,
            increment: p(INCREMENT)?,
            insert_part: p(INSERT_PART)?,
            insert_connection: p(INSERT_CONNECTION)?,
        })
    }
}

/// An open `postgres` OO1 database.
pub struct Postgres {
    session: Session,
    s: Statements,
}

impl Postgres {
    /// The engine on `session`'s connection.
    pub fn new(mut session: Session) -> Result<Postgres, EngineError> {
        let s = Statements::prepare(session.client())?;
        Ok(Postgres { session, s })
    }

    fn traversal(&mut self, root: PartId, op: Op) -> Result<Answer, EngineError> {
        let s = &self.s;
        let step = if op == Op::Reverse { &s.into } else { &s.out };
        self.session.read(|c| {
            let mut tally = Tally::for_op(op);
            let (x, y, k) = read_part(c, &s.part, root)?;
            tally.visit(root, x, y, &k);
            walk(c, step, root, 0, &mut tally)?;
            Ok(tally.finish())
        })
    }
}

fn read_part(
    c: &mut Client,
    stmt: &Statement,
    part: PartId,
) -> Result<(i32, i32, Kind), EngineError> {
    let row = c
        .query_opt(stmt, &[&id(part)?])
        .ctx("reading a part")?
        .ok_or(EngineError::MissingPart { id: part })?;
    Ok((row.get(0), row.get(1), kind(row.get(2))?))
}

/// Visits the parts reached by `step` (the outgoing or incoming join) from
/// `part`, depth first.
fn walk(
    c: &mut Client,
    step: &Statement,
    part: PartId,
    depth: u32,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    for row in c.query(step, &[&id(part)?]).ctx("reading connections")? {
        let to = row.get::<_, i32>(0) as PartId;
        tally.visit(to, row.get(1), row.get(2), &kind(row.get(3))?);
        walk(c, step, to, depth + 1, tally)?;
    }
    Ok(())
}

fn walk_update(
    c: &mut Client,
    s: &Statements,
    part: PartId,
    depth: u32,
    plan: &UpdatePlan,
    visit: &mut usize,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let (x, y, k) = read_part(c, &s.part, part)?;
    tally.visit(part, x, y, &k);
    if plan.increment_at(*visit) {
        c.execute(&s.increment, &[&id(part)?])
            .ctx("incrementing x and y")?;
        tally.changed();
    }
    *visit += 1;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let next: Vec<PartId> = c
        .query(&s.out_ids, &[&id(part)?])
        .ctx("reading connections")?
        .iter()
        .map(|r| r.get::<_, i32>(0) as PartId)
        .collect();
    for to in next {
        walk_update(c, s, to, depth + 1, plan, visit, tally)?;
    }
    Ok(())
}

impl Engine for Postgres {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::for_op(Op::Lookup);
            for &part in ids {
                let (x, y, k) = read_part(c, &s.part, part)?;
                tally.visit(part, x, y, &k);
            }
            Ok(tally.finish())
        })
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.traversal(root, Op::Traversal)
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.traversal(root, Op::Reverse)
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.write(|c| {
            let mut tally = Tally::for_op(Op::Insert);
            for np in parts {
                let p = &np.part;
                c.execute(
                    &s.insert_part,
                    &[&id(p.id)?, &&p.kind[..], &p.x, &p.y, &p.build],
                )
                .ctx("inserting a part")?;
                tally.visit(p.id, p.x, p.y, &p.kind);
                tally.changed();
            }
            for k in parts.iter().flat_map(|np| &np.connections) {
                c.execute(
                    &s.insert_connection,
                    &[&id(k.from)?, &id(k.to)?, &&k.kind[..], &k.length],
                )
                .ctx("inserting a connection")?;
            }
            Ok(tally.finish())
        })
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.write(|c| {
            let mut tally = Tally::for_op(Op::Update);
            let mut visit = 0;
            walk_update(c, s, root, 0, plan, &mut visit, &mut tally)?;
            Ok(tally.finish())
        })
    }

    fn install(&mut self) -> Result<(), EngineError> {
        self.session.checkpoint()
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.session.close()
    }

    fn last_commit_log_bytes(&self) -> Option<u64> {
        self.session.wal_bytes()
    }

    fn server(&self) -> Option<ProcessTree> {
        self.session.server()
    }
}
