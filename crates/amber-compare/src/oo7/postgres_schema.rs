//! The `postgres` OO7 engines' tables, indexes, load and statements: the
//! `sqlite` engine's schema ([`super::sqlite`]) in PostgreSQL's types.
//! Bags are `components` rows and connections rows of their own, each with
//! an identity column following creation order (SQLite's rowid), so that
//! `ORDER BY id` reads a part's connections in slot order off the index.

use amber_bench::oo7::engine::{EngineError, ResultExt};
use amber_bench::oo7::generate::{
    AtomicPart, Connection, Oo7Db, document_text, manual_text, title,
};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql, Type};
use postgres::{Client, Statement};

use crate::postgres::int;

const SCHEMA: &str = r#"
CREATE TABLE modules (id integer PRIMARY KEY, kind bytea NOT NULL, build_date integer NOT NULL,
    design_root integer NOT NULL, manual text NOT NULL);
CREATE TABLE complex_assemblies (id integer PRIMARY KEY, kind bytea NOT NULL,
    build_date integer NOT NULL, module integer NOT NULL, level integer NOT NULL,
    super_assembly integer);
CREATE TABLE base_assemblies (id integer PRIMARY KEY, kind bytea NOT NULL,
    build_date integer NOT NULL, module integer NOT NULL, super_assembly integer NOT NULL);
CREATE TABLE composite_parts (id integer PRIMARY KEY, kind bytea NOT NULL,
    build_date integer NOT NULL, module integer NOT NULL, root_part integer NOT NULL);
CREATE TABLE components (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    base integer NOT NULL, composite integer NOT NULL, private boolean NOT NULL);
CREATE TABLE documents (id integer PRIMARY KEY, title text NOT NULL, text text NOT NULL);
CREATE TABLE atomic_parts (id integer PRIMARY KEY, kind bytea NOT NULL,
    build_date integer NOT NULL, x integer NOT NULL, y integer NOT NULL,
    doc_id integer NOT NULL, part_of integer NOT NULL);
CREATE TABLE connections (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "from" integer NOT NULL, "to" integer NOT NULL, kind bytea NOT NULL, length integer NOT NULL);
"#;
const INDEXES: &str = r#"
CREATE INDEX complex_super ON complex_assemblies (super_assembly);
CREATE INDEX base_super ON base_assemblies (super_assembly);
CREATE INDEX components_base ON components (base, private);
CREATE INDEX components_composite ON components (composite);
CREATE UNIQUE INDEX documents_title ON documents (title);
CREATE INDEX atomic_date ON atomic_parts (build_date);
CREATE INDEX atomic_part_of ON atomic_parts (part_of);
CREATE INDEX connections_from ON connections ("from", id);
"#;

/// The assembly hierarchy of module `$1` and its composite-part visits
/// (one row per `components_priv` entry): `sqlite-recursive`'s
/// [`HIERARCHY`](super::sqlite) in PostgreSQL's spelling.
const HIERARCHY: &str = r#"WITH RECURSIVE
  asm(id) AS (SELECT design_root FROM modules WHERE id = $1
              UNION ALL SELECT c.id FROM complex_assemblies AS c JOIN asm ON c.super_assembly = asm.id),
  visits(cid) AS (SELECT k.composite FROM asm JOIN base_assemblies AS b ON b.super_assembly = asm.id
                  JOIN components AS k ON k.base = b.id AND k.private)"#;

/// T1 as one query (`sqlite-recursive`'s): per composite part the atomic
/// parts reachable from its root (`UNION` is the visited set), joined to
/// every visit of the composite part.
const T1_TAIL: &str = r#",
  reach(cid, id) AS (SELECT c.id, c.root_part FROM composite_parts AS c WHERE c.id IN (SELECT cid FROM visits)
                     UNION SELECT reach.cid, k."to" FROM reach JOIN connections AS k ON k."from" = reach.id)
SELECT a.id, a.x, a.y, a.build_date FROM visits JOIN reach ON reach.cid = visits.cid
  JOIN atomic_parts AS a ON a.id = reach.id"#;

/// T6 as one query: every visit's root part.
const T6_TAIL: &str = r#"
SELECT a.id, a.x, a.y, a.build_date FROM visits JOIN composite_parts AS c ON c.id = visits.cid
  JOIN atomic_parts AS a ON a.id = c.root_part"#;

/// Every statement of the engines, prepared once per connection.
pub(crate) struct Statements {
    pub design_root: Statement,
    pub sub_complex: Statement,
    pub sub_base: Statement,
    pub private: Statement,
    pub users: Statement,
    pub root_part: Statement,
    pub atomic: Statement,
    pub out: Statement,
    pub increment: Statement,
    pub set_date: Statement,
    pub document: Statement,
    pub set_document: Statement,
    pub composite_date: Statement,
    pub base: Statement,
    pub complex: Statement,
    pub module_date: Statement,
    pub manual: Statement,
    pub date_range: Statement,
    pub title: Statement,
    pub q5: Statement,
    pub q6_base: Statement,
    pub q6_complex: Statement,
    pub scan: Statement,
    pub join: Statement,
    pub insert_composite: Statement,
    pub insert_atomic: Statement,
    pub insert_connection: Statement,
    pub insert_document: Statement,
    pub insert_component: Statement,
    pub parts_of: Statement,
    pub delete_connections: Statement,
    pub delete_atomics: Statement,
    pub delete_components: Statement,
    pub delete_document: Statement,
    pub delete_composite: Statement,
    pub t1_recursive: Statement,
    pub t6_recursive: Statement,
}

impl Statements {
    pub(crate) fn prepare(client: &mut Client) -> Result<Statements, EngineError> {
        let mut p = |sql: &str| client.prepare(sql).ctx("preparing a statement");
        Ok(Statements {
            design_root: p("SELECT design_root FROM modules WHERE id = $1")?,
            sub_complex: p("SELECT id FROM complex_assemblies WHERE super_assembly = $1")?,
            sub_base: p("SELECT id FROM base_assemblies WHERE super_assembly = $1")?,
            private: p("SELECT composite FROM components WHERE base = $1 AND private")?,
            users: p("SELECT base FROM components WHERE composite = $1")?,
            root_part: p("SELECT root_part FROM composite_parts WHERE id = $1")?,
            atomic: p("SELECT x, y, build_date, part_of FROM atomic_parts WHERE id = $1")?,
            out: p(r#"SELECT "to" FROM connections WHERE "from" = $1 ORDER BY id"#)?,
            increment: p("UPDATE atomic_parts SET x = x + 1, y = y + 1 WHERE id = $1")?,
            set_date: p("UPDATE atomic_parts SET build_date = $2 WHERE id = $1")?,
            document: p("SELECT text FROM documents WHERE id = $1")?,
            set_document: p("UPDATE documents SET text = $2 WHERE id = $1")?,
            composite_date: p("SELECT build_date FROM composite_parts WHERE id = $1")?,
            base: p("SELECT build_date, super_assembly FROM base_assemblies WHERE id = $1")?,
            complex: p(
                "SELECT build_date, super_assembly, module FROM complex_assemblies WHERE id = $1",
            )?,
            module_date: p("SELECT build_date FROM modules WHERE id = $1")?,
            manual: p("SELECT manual FROM modules WHERE id = $1")?,
            date_range: p(
                "SELECT id, x, y, build_date FROM atomic_parts WHERE build_date BETWEEN $1 AND $2",
            )?,
            title: p("SELECT id FROM documents WHERE title = $1")?,
            q5: p(
                "SELECT DISTINCT b.id, b.build_date FROM base_assemblies AS b \
                   JOIN components AS k ON k.base = b.id \
                   JOIN composite_parts AS c ON c.id = k.composite \
                   WHERE c.build_date > b.build_date",
            )?,
            q6_base: p(
                "SELECT b.id, b.build_date, b.super_assembly, MAX(c.build_date) \
                        FROM base_assemblies AS b JOIN components AS k ON k.base = b.id \
                        JOIN composite_parts AS c ON c.id = k.composite GROUP BY b.id",
            )?,
            q6_complex: p(
                "SELECT id, build_date, super_assembly FROM complex_assemblies ORDER BY id DESC",
            )?,
            scan: p("SELECT id, x, y, build_date FROM atomic_parts")?,
            join: p(
                "SELECT a.id, d.id FROM atomic_parts AS a JOIN documents AS d ON d.id = a.doc_id",
            )?,
            insert_composite: p("INSERT INTO composite_parts VALUES ($1, $2, $3, $4, $5)")?,
            insert_atomic: p("INSERT INTO atomic_parts VALUES ($1, $2, $3, $4, $5, $6, $7)")?,
            insert_connection: p(
                r#"INSERT INTO connections ("from", "to", kind, length) VALUES ($1, $2, $3, $4)"#,
            )?,
            insert_document: p("INSERT INTO documents VALUES ($1, $2, $3)")?,
            insert_component: p(
                "INSERT INTO components (base, composite, private) VALUES ($1, $2, $3)",
            )?,
            parts_of: p("SELECT id FROM atomic_parts WHERE part_of = $1")?,
            delete_connections: p(r#"DELETE FROM connections WHERE "from" = $1"#)?,
            delete_atomics: p("DELETE FROM atomic_parts WHERE part_of = $1")?,
            delete_components: p("DELETE FROM components WHERE composite = $1")?,
            delete_document: p("DELETE FROM documents WHERE id = $1")?,
            delete_composite: p("DELETE FROM composite_parts WHERE id = $1")?,
            t1_recursive: p(&format!("{HIERARCHY}{T1_TAIL}"))?,
            t6_recursive: p(&format!("{HIERARCHY}{T6_TAIL}"))?,
        })
    }
}

/// A binary `COPY` into `table` of rows of `types`.
fn copy<'a>(
    client: &'a mut postgres::Transaction<'_>,
    table: &str,
    types: &'a [Type],
) -> Result<BinaryCopyInWriter<'a>, EngineError> {
    let sink = client
        .copy_in(&format!("COPY {table} FROM STDIN (FORMAT binary)"))
        .ctx(&format!("copying into {table}"))?;
    Ok(BinaryCopyInWriter::new(sink, types))
}

const I4: Type = Type::INT4;
const BYTES: Type = Type::BYTEA;
const TEXT: Type = Type::TEXT;

/// Loads `db` with binary `COPY`, table by table in the order `sqlite`
/// inserts, then creates the indexes (what `build` does before it
/// analyses and checkpoints).
pub fn load(client: &mut Client, db: &Oo7Db) -> Result<(), EngineError> {
    client.batch_execute(SCHEMA).ctx("creating the schema")?;
    let mut tx = client.transaction().ctx("beginning the load")?;
    let p = &db.params;
    let types = [I4, BYTES, I4, I4, TEXT];
    let mut w = copy(&mut tx, "modules", &types)?;
    for m in &db.modules {
        let manual = manual_text(m.id, p.manual_size);
        let row: [&(dyn ToSql + Sync); 5] = [
            &int(m.id)?,
            &&m.kind[..],
            &m.build_date,
            &int(m.design_root)?,
            &manual,
        ];
        w.write(&row).ctx("copying a module")?;
    }
    w.finish().ctx("copying modules")?;
    let types = [I4, BYTES, I4, I4, I4, I4];
    let mut w = copy(&mut tx, "complex_assemblies", &types)?;
    for c in &db.complex {
        let up = c.super_assembly.map(int).transpose()?;
        let row: [&(dyn ToSql + Sync); 6] = [
            &int(c.id)?,
            &&c.kind[..],
            &c.build_date,
            &int(c.module)?,
            &int(c.level)?,
            &up,
        ];
        w.write(&row).ctx("copying a complex assembly")?;
    }
    w.finish().ctx("copying complex assemblies")?;
    let types = [I4, BYTES, I4, I4, I4];
    let mut w = copy(&mut tx, "base_assemblies", &types)?;
    for b in &db.base {
        let row: [&(dyn ToSql + Sync); 5] = [
            &int(b.id)?,
            &&b.kind[..],
            &b.build_date,
            &int(b.module)?,
            &int(b.super_assembly)?,
        ];
        w.write(&row).ctx("copying a base assembly")?;
    }
    w.finish().ctx("copying base assemblies")?;
    let types = [I4, I4, Type::BOOL];
    let mut w = copy(&mut tx, "components (base, composite, private)", &types)?;
    for b in &db.base {
        for (private, bag) in [(true, &b.components_priv), (false, &b.components_shar)] {
            for &c in bag {
                let row: [&(dyn ToSql + Sync); 3] = [&int(b.id)?, &int(c)?, &private];
                w.write(&row).ctx("copying a component")?;
            }
        }
    }
    w.finish().ctx("copying components")?;
    load_composites(&mut tx, db)?;
    tx.batch_execute(INDEXES).ctx("creating the indexes")?;
    tx.commit().ctx("committing the load")
}

/// The composite parts with their atomic parts, connections and documents.
fn load_composites(tx: &mut postgres::Transaction<'_>, db: &Oo7Db) -> Result<(), EngineError> {
    let k = db.params.conn_per_atomic as usize;
    let conns_of = |first_atomic: u32, atomics: usize| -> &[Connection] {
        let first = (first_atomic - 1) as usize * k;
        &db.connections[first..first + atomics * k]
    };
    let types = [I4, BYTES, I4, I4, I4];
    let mut w = copy(tx, "composite_parts", &types)?;
    for c in &db.composites {
        let root = root_of(db.parts_of(c))?;
        let row: [&(dyn ToSql + Sync); 5] = [
            &int(c.id)?,
            &&c.kind[..],
            &c.build_date,
            &int(c.module)?,
            &int(root)?,
        ];
        w.write(&row).ctx("copying a composite part")?;
    }
    w.finish().ctx("copying composite parts")?;
    let types = [I4, BYTES, I4, I4, I4, I4, I4];
    let mut w = copy(tx, "atomic_parts", &types)?;
    for a in db.composites.iter().flat_map(|c| db.parts_of(c)) {
        w.write(&atomic_row(a)?.each())
            .ctx("copying an atomic part")?;
    }
    w.finish().ctx("copying atomic parts")?;
    let types = [I4, I4, BYTES, I4];
    let mut w = copy(tx, r#"connections ("from", "to", kind, length)"#, &types)?;
    for c in &db.composites {
        for conn in conns_of(c.first_atomic, db.parts_of(c).len()) {
            let row: [&(dyn ToSql + Sync); 4] = [
                &int(conn.from)?,
                &int(conn.to)?,
                &&conn.kind[..],
                &conn.length,
            ];
            w.write(&row).ctx("copying a connection")?;
        }
    }
    w.finish().ctx("copying connections")?;
    let types = [I4, TEXT, TEXT];
    let mut w = copy(tx, "documents", &types)?;
    for c in &db.composites {
        let text = document_text(c.id, db.params.document_size);
        let row: [&(dyn ToSql + Sync); 3] = [&int(c.id)?, &title(c.id), &text];
        w.write(&row).ctx("copying a document")?;
    }
    w.finish().ctx("copying documents")?;
    Ok(())
}

/// A composite part's root part: its first atomic part.
pub(crate) fn root_of(atomics: &[AtomicPart]) -> Result<u32, EngineError> {
    atomics
        .first()
        .map(|a| a.id)
        .ok_or_else(|| EngineError::bad_input("a composite part without atomic parts"))
}

/// An atomic part's columns, in table order.
pub(crate) struct AtomicRow {
    id: i32,
    kind: Vec<u8>,
    build_date: i32,
    x: i32,
    y: i32,
    doc_id: i32,
    part_of: i32,
}

pub(crate) fn atomic_row(a: &AtomicPart) -> Result<AtomicRow, EngineError> {
    Ok(AtomicRow {
        id: int(a.id)?,
        kind: a.kind.to_vec(),
        build_date: a.build_date,
        x: a.x,
        y: a.y,
        doc_id: int(a.doc_id)?,
        part_of: int(a.part_of)?,
    })
}

impl AtomicRow {
    /// The columns as statement parameters.
    pub(crate) fn each(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.id,
            &self.kind,
            &self.build_date,
            &self.x,
            &self.y,
            &self.doc_id,
            &self.part_of,
        ]
    }
}
