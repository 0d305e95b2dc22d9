//! `sqlite`: OO7 in normalised tables through rusqlite, with OO1's
//! connection settings ([`crate::sqlite::connect`]: WAL, `synchronous =
//! FULL`, read back at open; `--cache-mib` as `cache_size`). Every
//! operation is one transaction of cached prepared statements that read or
//! write one object per statement, as OO1's SQLite engine does, except the
//! queries SQL states as one set (Q2, Q3, Q5, Q7, Q8: one statement each).
//!
//! Tables: `modules`, `complex_assemblies`, `base_assemblies`,
//! `composite_parts`, `components` (one row per bag entry: base, composite,
//! private), `documents`, `atomic_parts`, `connections`; indexes on the
//! parent of each assembly, `components(base, private)` and
//! `(composite)`, `documents(title)` (unique), `atomic_parts(build_date)`
//! and `(part_of)`, `connections("from")`.

use std::collections::HashMap;
use std::path::Path;

use amber_bench::oo7::engine::{
    Answer, EngineError, EngineInfo, EngineOptions, ResultExt, Tag, Tally, count_i, toggle_date,
    toggle_document,
};
use amber_bench::oo7::generate::{document_text, manual_text, title};
use amber_bench::oo7::model::manual_answer;
use amber_bench::oo7::ops::Field;
use amber_bench::oo7::{NewComposite, Oo7Db, Oo7Engine, Oo7Factory, Traversal};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};

use crate::sqlite::connect;

const DB_FILE: &str = "oo7.sqlite";

const SCHEMA: &str = r#"
CREATE TABLE modules (id INTEGER PRIMARY KEY, kind BLOB NOT NULL, build_date INTEGER NOT NULL,
    design_root INTEGER NOT NULL, manual TEXT NOT NULL);
CREATE TABLE complex_assemblies (id INTEGER PRIMARY KEY, kind BLOB NOT NULL,
    build_date INTEGER NOT NULL, module INTEGER NOT NULL, level INTEGER NOT NULL,
    super_assembly INTEGER);
CREATE TABLE base_assemblies (id INTEGER PRIMARY KEY, kind BLOB NOT NULL,
    build_date INTEGER NOT NULL, module INTEGER NOT NULL, super_assembly INTEGER NOT NULL);
CREATE TABLE composite_parts (id INTEGER PRIMARY KEY, kind BLOB NOT NULL,
    build_date INTEGER NOT NULL, module INTEGER NOT NULL, root_part INTEGER NOT NULL);
CREATE TABLE components (id INTEGER PRIMARY KEY, base INTEGER NOT NULL,
    composite INTEGER NOT NULL, private INTEGER NOT NULL);
CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE atomic_parts (id INTEGER PRIMARY KEY, kind BLOB NOT NULL,
    build_date INTEGER NOT NULL, x INTEGER NOT NULL, y INTEGER NOT NULL,
    doc_id INTEGER NOT NULL, part_of INTEGER NOT NULL);
CREATE TABLE connections (id INTEGER PRIMARY KEY, "from" INTEGER NOT NULL,
    "to" INTEGER NOT NULL, kind BLOB NOT NULL, length INTEGER NOT NULL);
"#;
const INDEXES: &str = r#"
CREATE INDEX complex_super ON complex_assemblies(super_assembly);
CREATE INDEX base_super ON base_assemblies(super_assembly);
CREATE INDEX components_base ON components(base, private);
CREATE INDEX components_composite ON components(composite);
CREATE UNIQUE INDEX documents_title ON documents(title);
CREATE INDEX atomic_date ON atomic_parts(build_date);
CREATE INDEX atomic_part_of ON atomic_parts(part_of);
CREATE INDEX connections_from ON connections("from");
"#;

const INSERT_COMPOSITE: &str = "INSERT INTO composite_parts VALUES (?1, ?2, ?3, ?4, ?5)";
const INSERT_ATOMIC: &str = "INSERT INTO atomic_parts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const INSERT_CONNECTION: &str =
    r#"INSERT INTO connections ("from", "to", kind, length) VALUES (?1, ?2, ?3, ?4)"#;
const INSERT_DOCUMENT: &str = "INSERT INTO documents VALUES (?1, ?2, ?3)";
const INSERT_COMPONENT: &str =
    "INSERT INTO components (base, composite, private) VALUES (?1, ?2, ?3)";
const SUB_COMPLEX: &str = "SELECT id FROM complex_assemblies WHERE super_assembly = ?1";
const SUB_BASE: &str = "SELECT id FROM base_assemblies WHERE super_assembly = ?1";
const PRIVATE: &str = "SELECT composite FROM components WHERE base = ?1 AND private = 1";
const USERS: &str = "SELECT base FROM components WHERE composite = ?1";
const ROOT_PART: &str = "SELECT root_part FROM composite_parts WHERE id = ?1";
const ATOMIC: &str = "SELECT x, y, build_date, part_of FROM atomic_parts WHERE id = ?1";
const OUT: &str = r#"SELECT "to" FROM connections WHERE "from" = ?1 ORDER BY id"#;
const INCREMENT: &str = "UPDATE atomic_parts SET x = x + 1, y = y + 1 WHERE id = ?1";
const SET_DATE: &str = "UPDATE atomic_parts SET build_date = ?2 WHERE id = ?1";

/// The `sqlite` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct SqliteFactory;

/// `sqlite-recursive`: the `sqlite` engine whose read-only traversals (T1,
/// T6) are one recursive query each ([`T1_RECURSIVE`], [`T6_RECURSIVE`]);
/// every other operation as `sqlite`'s.
#[derive(Clone, Copy, Debug, Default)]
pub struct SqliteRecursiveFactory;

/// The assembly hierarchy of module `?1` and its composite-part visits
/// (one row per `components_priv` entry).
const HIERARCHY: &str = r#"WITH RECURSIVE
  asm(id) AS (SELECT design_root FROM modules WHERE id = ?1
              UNION ALL SELECT c.id FROM complex_assemblies AS c JOIN asm ON c.super_assembly = asm.id),
  visits(cid) AS (SELECT k.composite FROM asm JOIN base_assemblies AS b ON b.super_assembly = asm.id
                  JOIN components AS k ON k.base = b.id AND k.private = 1)"#;

/// T1 as one query: the hierarchy, then per composite part the atomic
/// parts reachable from its root (`UNION` is the visited set), joined to
/// every visit of the composite part.
pub const T1_RECURSIVE: &str = r#",
  reach(cid, id) AS (SELECT c.id, c.root_part FROM composite_parts AS c WHERE c.id IN (SELECT cid FROM visits)
                     UNION SELECT reach.cid, k."to" FROM reach JOIN connections AS k ON k."from" = reach.id)
SELECT a.id, a.x, a.y, a.build_date FROM visits JOIN reach ON reach.cid = visits.cid
  JOIN atomic_parts AS a ON a.id = reach.id"#;

/// T6 as one query: the hierarchy, then every visit's root part.
pub const T6_RECURSIVE: &str = r#"
SELECT a.id, a.x, a.y, a.build_date FROM visits JOIN composite_parts AS c ON c.id = visits.cid
  JOIN atomic_parts AS a ON a.id = c.root_part"#;

impl Oo7Factory for SqliteRecursiveFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "sqlite-recursive",
            summary: "the sqlite engine with T1 and T6 as one recursive query each (WITH RECURSIVE over the hierarchy and each composite part's graph); every other operation as sqlite's",
            ..SqliteFactory.info()
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, options: &EngineOptions) -> Result<(), EngineError> {
        SqliteFactory.build(dir, db, options)
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let mut engine = open(dir, options)?;
        engine.recursive = true;
        Ok(Box::new(engine))
    }
}

fn open(dir: &Path, options: &EngineOptions) -> Result<Sqlite, EngineError> {
    let path = dir.join(DB_FILE);
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = connect(&path, flags, options)?;
    let document_size: i64 = conn
        .query_row("SELECT length(text) + 1 FROM documents LIMIT 1", [], |r| {
            r.get(0)
        })
        .ctx("reading the document size")?;
    Ok(Sqlite {
        conn,
        document_size: document_size as u32,
        recursive: false,
    })
}

/// The schema, as the table names it.
pub const SCHEMA_SUMMARY: &str = "normalised: a table per class, bags as a components table (base, composite, private), connections in their own table; indexes on each parent, components by base and by composite, documents by title, atomic parts by build date and by composite; a traversal step is an index lookup of the part's connections and a primary-key lookup per part";

impl Oo7Factory for SqliteFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "sqlite",
            summary: "SQLite (bundled) via rusqlite: normalised tables and indexes, cached prepared statements, one object per statement, WAL, synchronous=FULL",
            schema: SCHEMA_SUMMARY,
            durability: "WAL journal, synchronous = FULL (read back at open): each commit fsyncs the WAL before returning; SQLite's auto-checkpoint copies the WAL into the database file now and then",
            install: "PRAGMA wal_checkpoint(TRUNCATE)",
            cache_budget: true,
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, options: &EngineOptions) -> Result<(), EngineError> {
        let path = dir.join(DB_FILE);
        let mut conn = connect(&path, OpenFlags::default(), options)?;
        conn.execute_batch(SCHEMA).ctx("creating the schema")?;
        let tx = conn.transaction().ctx("beginning the load")?;
        {
            let mut s = tx
                .prepare("INSERT INTO modules VALUES (?1, ?2, ?3, ?4, ?5)")
                .ctx("preparing")?;
            for m in &db.modules {
                s.execute(params![
                    m.id,
                    m.kind,
                    m.build_date,
                    m.design_root,
                    manual_text(m.id, db.params.manual_size)
                ])
                .ctx("inserting a module")?;
            }
            let mut s = tx
                .prepare("INSERT INTO complex_assemblies VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .ctx("preparing")?;
            for c in &db.complex {
                s.execute(params![
                    c.id,
                    c.kind,
                    c.build_date,
                    c.module,
                    c.level,
                    c.super_assembly
                ])
                .ctx("inserting a complex assembly")?;
            }
            let mut s = tx
                .prepare("INSERT INTO base_assemblies VALUES (?1, ?2, ?3, ?4, ?5)")
                .ctx("preparing")?;
            let mut k = tx.prepare(INSERT_COMPONENT).ctx("preparing")?;
            for b in &db.base {
                s.execute(params![
                    b.id,
                    b.kind,
                    b.build_date,
                    b.module,
                    b.super_assembly
                ])
                .ctx("inserting a base assembly")?;
                for &c in &b.components_priv {
                    k.execute(params![b.id, c, 1])
                        .ctx("inserting a component")?;
                }
                for &c in &b.components_shar {
                    k.execute(params![b.id, c, 0])
                        .ctx("inserting a component")?;
                }
            }
        }
        for c in &db.composites {
            let atomics = db.parts_of(c);
            let n = db.params.conn_per_atomic as usize;
            let first = (c.first_atomic - 1) as usize * n;
            let conns = &db.connections[first..first + atomics.len() * n];
            add_composite(
                &tx,
                c.id,
                c.kind,
                c.build_date,
                c.module,
                atomics,
                conns,
                db.params.document_size,
            )?;
        }
        tx.execute_batch(INDEXES).ctx("creating the indexes")?;
        tx.execute_batch("ANALYZE").ctx("analyzing")?;
        tx.commit().ctx("committing the load")?;
        conn.close()
            .map_err(|(_, e)| EngineError::backend("closing", e))
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Oo7Engine>, EngineError> {
        Ok(Box::new(open(dir, options)?))
    }
}

/// Inserts a composite part, its atomic parts, connections and document.
#[allow(clippy::too_many_arguments)]
fn add_composite(
    tx: &Transaction<'_>,
    id: u32,
    kind: [u8; 10],
    build_date: i32,
    module: u32,
    atomics: &[amber_bench::oo7::generate::AtomicPart],
    conns: &[amber_bench::oo7::generate::Connection],
    document_size: u32,
) -> Result<(), EngineError> {
    let root = atomics
        .first()
        .ok_or_else(|| EngineError::bad_input("a composite part without atomic parts"))?
        .id;
    tx.prepare_cached(INSERT_COMPOSITE)
        .ctx("preparing")?
        .execute(params![id, kind, build_date, module, root])
        .ctx("inserting a composite part")?;
    let mut a = tx.prepare_cached(INSERT_ATOMIC).ctx("preparing")?;
    for p in atomics {
        a.execute(params![
            p.id,
            p.kind,
            p.build_date,
            p.x,
            p.y,
            p.doc_id,
            p.part_of
        ])
        .ctx("inserting an atomic part")?;
    }
    let mut k = tx.prepare_cached(INSERT_CONNECTION).ctx("preparing")?;
    for c in conns {
        k.execute(params![c.from, c.to, c.kind, c.length])
            .ctx("inserting a connection")?;
    }
    tx.prepare_cached(INSERT_DOCUMENT)
        .ctx("preparing")?
        .execute(params![id, title(id), document_text(id, document_size)])
        .ctx("inserting a document")?;
    Ok(())
}

/// An open `sqlite` database.
pub struct Sqlite {
    conn: Connection,
    document_size: u32,
    /// `sqlite-recursive`: T1 and T6 as one recursive query.
    recursive: bool,
}

fn missing(what: &str, id: u32) -> EngineError {
    EngineError::bad_input(format!("{what} {id} is not in the database"))
}

fn ids(tx: &Transaction<'_>, sql: &str, id: u32) -> Result<Vec<u32>, EngineError> {
    tx.prepare_cached(sql)
        .ctx("preparing")?
        .query_map([id], |r| r.get(0))
        .ctx("querying")?
        .collect::<rusqlite::Result<_>>()
        .ctx("reading")
}

/// `(x, y, build_date, part_of)` of atomic part `id`.
fn atomic(tx: &Transaction<'_>, id: u32) -> Result<(i32, i32, i32, u32), EngineError> {
    tx.prepare_cached(ATOMIC)
        .ctx("preparing")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()
        .ctx("reading an atomic part")?
        .ok_or_else(|| missing("atomic part", id))
}

/// The composite parts a traversal of module `m` visits.
fn composite_visits(tx: &Transaction<'_>, m: u32) -> Result<Vec<u32>, EngineError> {
    let root: u32 = tx
        .prepare_cached("SELECT design_root FROM modules WHERE id = ?1")
        .ctx("preparing")?
        .query_row([m], |r| r.get(0))
        .optional()
        .ctx("reading a module")?
        .ok_or_else(|| missing("module", m))?;
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(ca) = stack.pop() {
        let subs = ids(tx, SUB_COMPLEX, ca)?;
        if subs.is_empty() {
            for b in ids(tx, SUB_BASE, ca)? {
                out.extend(ids(tx, PRIVATE, b)?);
            }
        }
        stack.extend(subs.into_iter().rev());
    }
    Ok(out)
}

/// Depth-first over composite part `c`'s graph: the atomic ids in visit order.
fn graph_order(
    tx: &Transaction<'_>,
    c: u32,
    seen: &mut Vec<bool>,
) -> Result<Vec<u32>, EngineError> {
    let root: u32 = tx
        .prepare_cached(ROOT_PART)
        .ctx("preparing")?
        .query_row([c], |r| r.get(0))
        .optional()
        .ctx("reading a composite part")?
        .ok_or_else(|| missing("composite part", c))?;
    let mut out = tx.prepare_cached(OUT).ctx("preparing")?;
    super::dfs_order(root, seen, |id| {
        out.query_map([id], |r| r.get(0))
            .ctx("querying connections")?
            .collect::<rusqlite::Result<_>>()
            .ctx("reading connections")
    })
}

impl Sqlite {
    fn commit(tx: Transaction<'_>) -> Result<(), EngineError> {
        tx.commit().ctx("committing")
    }
}

impl Oo7Engine for Sqlite {
    fn traverse(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning a traversal")?;
        if self.recursive && t.update().is_none() {
            let tail = if t.root_only() {
                T6_RECURSIVE
            } else {
                T1_RECURSIVE
            };
            let tally = atomics_of(&tx, &format!("{HIERARCHY}{tail}"), [m])?;
            Self::commit(tx)?;
            return Ok(tally.finish());
        }
        let mut tally = Tally::new();
        let mut updates = 0u64;
        let mut seen = Vec::new();
        for c in composite_visits(&tx, m)? {
            let order = if t.root_only() {
                ids(&tx, ROOT_PART, c)?
            } else {
                graph_order(&tx, c, &mut seen)?
            };
            for (index, id) in order.into_iter().enumerate() {
                let (x, y, date, _) = atomic(&tx, id)?;
                tally.atomic(id, x, y, date);
                let mut date = date;
                for _ in 0..t.updates_at(index) {
                    updates += 1;
                    match t.update().map(|u| u.0) {
                        Some(Field::Xy) => {
                            tx.prepare_cached(INCREMENT)
                                .ctx("preparing")?
                                .execute([id])
                                .ctx("updating a part")?;
                        }
                        Some(Field::Date) => {
                            date = toggle_date(date);
                            tx.prepare_cached(SET_DATE)
                                .ctx("preparing")?
                                .execute(params![id, date])
                                .ctx("updating a date")?;
                        }
                        None => {}
                    }
                }
            }
        }
        Self::commit(tx)?;
        Ok(if t.update().is_some() {
            tally.finish_with(updates)
        } else {
            tally.finish()
        })
    }

    fn documents(&mut self, m: u32, update: bool) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning T4/T5")?;
        let mut tally = Tally::new();
        for c in composite_visits(&tx, m)? {
            let text: String = tx
                .prepare_cached("SELECT text FROM documents WHERE id = ?1")
                .ctx("preparing")?
                .query_row([c], |r| r.get(0))
                .optional()
                .ctx("reading a document")?
                .ok_or_else(|| missing("document", c))?;
            if update {
                let new = toggle_document(&text)
                    .ok_or_else(|| EngineError::corrupt(format!("document {c}'s text")))?;
                tx.prepare_cached("UPDATE documents SET text = ?2 WHERE id = ?1")
                    .ctx("preparing")?
                    .execute(params![c, new])
                    .ctx("updating a document")?;
                tally.object(Tag::Document, c, new.len() as i64);
            } else {
                let n = count_i(text.as_bytes());
                tally.fold(Tag::Document, [i64::from(c), n as i64, 0]);
                tally.add(n);
            }
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning T7")?;
        let mut tally = Tally::new();
        for &id in atomics {
            let (x, y, date, c) = atomic(&tx, id)?;
            tally.atomic(id, x, y, date);
            let cdate: i32 = tx
                .prepare_cached("SELECT build_date FROM composite_parts WHERE id = ?1")
                .ctx("preparing")?
                .query_row([c], |r| r.get(0))
                .ctx("reading a composite part")?;
            tally.object(Tag::Composite, c, i64::from(cdate));
            for b in ids(&tx, USERS, c)? {
                let (bdate, mut up): (i32, Option<u32>) = tx
                    .prepare_cached(
                        "SELECT build_date, super_assembly FROM base_assemblies WHERE id = ?1",
                    )
                    .ctx("preparing")?
                    .query_row([b], |r| Ok((r.get(0)?, r.get(1)?)))
                    .ctx("reading a base assembly")?;
                tally.object(Tag::Base, b, i64::from(bdate));
                let mut module = 0;
                while let Some(ca) = up {
                    let (d, s, m): (i32, Option<u32>, u32) = tx
                        .prepare_cached("SELECT build_date, super_assembly, module FROM complex_assemblies WHERE id = ?1")
                        .ctx("preparing")?
                        .query_row([ca], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .ctx("reading a complex assembly")?;
                    tally.object(Tag::Complex, ca, i64::from(d));
                    up = s;
                    module = m;
                }
                let mdate: i32 = tx
                    .prepare_cached("SELECT build_date FROM modules WHERE id = ?1")
                    .ctx("preparing")?
                    .query_row([module], |r| r.get(0))
                    .ctx("reading a module")?;
                tally.object(Tag::Module, module, i64::from(mdate));
            }
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn manual(&mut self, m: u32, scan: bool) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning T8/T9")?;
        let text: String = tx
            .prepare_cached("SELECT manual FROM modules WHERE id = ?1")
            .ctx("preparing")?
            .query_row([m], |r| r.get(0))
            .optional()
            .ctx("reading a manual")?
            .ok_or_else(|| missing("module", m))?;
        Self::commit(tx)?;
        Ok(manual_answer(m, text.as_bytes(), scan))
    }

    fn lookup(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q1")?;
        let mut tally = Tally::new();
        for &id in atomics {
            let (x, y, date, _) = atomic(&tx, id)?;
            tally.atomic(id, x, y, date);
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q2/Q3")?;
        let tally = atomics_of(
            &tx,
            "SELECT id, x, y, build_date FROM atomic_parts WHERE build_date BETWEEN ?1 AND ?2",
            params![lo, hi],
        )?;
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q4")?;
        let mut tally = Tally::new();
        for t in titles {
            let doc: Option<u32> = tx
                .prepare_cached("SELECT id FROM documents WHERE title = ?1")
                .ctx("preparing")?
                .query_row([t], |r| r.get(0))
                .optional()
                .ctx("reading the title index")?;
            let Some(d) = doc else { continue };
            for b in ids(&tx, USERS, d)? {
                tally.object(Tag::Base, b, i64::from(d));
            }
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn q5(&mut self) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q5")?;
        let mut tally = Tally::new();
        {
            let mut s = tx
                .prepare_cached(
                    "SELECT DISTINCT b.id, b.build_date FROM base_assemblies AS b \
                     JOIN components AS k ON k.base = b.id \
                     JOIN composite_parts AS c ON c.id = k.composite \
                     WHERE c.build_date > b.build_date",
                )
                .ctx("preparing")?;
            let rows = s.query_map([], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, i32>(1)?)));
            for row in rows.ctx("querying Q5")? {
                let (id, date) = row.ctx("reading Q5")?;
                tally.object(Tag::Base, id, i64::from(date));
            }
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn q6(&mut self) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q6")?;
        let mut tally = Tally::new();
        let mut latest: HashMap<(bool, u32), i32> = HashMap::new();
        {
            let mut s = tx
                .prepare_cached(
                    "SELECT b.id, b.build_date, b.super_assembly, MAX(c.build_date) \
                     FROM base_assemblies AS b JOIN components AS k ON k.base = b.id \
                     JOIN composite_parts AS c ON c.id = k.composite GROUP BY b.id",
                )
                .ctx("preparing")?;
            let rows = s.query_map([], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, i32>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, i32>(3)?,
                ))
            });
            for row in rows.ctx("querying Q6")? {
                let (id, date, up, l) = row.ctx("reading Q6")?;
                if l > date {
                    tally.object(Tag::Base, id, i64::from(date));
                }
                let e = latest.entry((true, up)).or_insert(i32::MIN);
                *e = (*e).max(l);
            }
            // Children have higher ids than their parents.
            let mut s = tx
                .prepare_cached(
                    "SELECT id, build_date, super_assembly FROM complex_assemblies ORDER BY id DESC",
                )
                .ctx("preparing")?;
            let rows = s.query_map([], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, i32>(1)?,
                    r.get::<_, Option<u32>>(2)?,
                ))
            });
            for row in rows.ctx("querying Q6")? {
                let (id, date, up) = row.ctx("reading Q6")?;
                let l = latest.get(&(true, id)).copied().unwrap_or(i32::MIN);
                if l > date {
                    tally.object(Tag::Complex, id, i64::from(date));
                }
                if let Some(up) = up {
                    let e = latest.entry((true, up)).or_insert(i32::MIN);
                    *e = (*e).max(l);
                }
            }
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn scan(&mut self) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q7")?;
        let tally = atomics_of(&tx, "SELECT id, x, y, build_date FROM atomic_parts", [])?;
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn join(&mut self) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning Q8")?;
        let mut tally = Tally::new();
        {
            let mut s = tx
                .prepare_cached(
                    "SELECT a.id, d.id FROM atomic_parts AS a JOIN documents AS d ON d.id = a.doc_id",
                )
                .ctx("preparing")?;
            let rows = s.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)));
            for row in rows.ctx("querying Q8")? {
                let (a, d) = row.ctx("reading Q8")?;
                tally.fold(Tag::Pair, [a, d, 0]);
                tally.add(1);
            }
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        let size = self.document_size;
        let tx = self.conn.transaction().ctx("beginning the insert")?;
        let mut tally = Tally::new();
        for nc in parts {
            let b = *nc.part.used_in_priv.first().ok_or_else(|| {
                EngineError::bad_input("a new composite part without a base assembly")
            })?;
            let p = &nc.part;
            add_composite(
                &tx,
                p.id,
                p.kind,
                p.build_date,
                p.module,
                &nc.atomics,
                &nc.connections,
                size,
            )?;
            tx.prepare_cached(INSERT_COMPONENT)
                .ctx("preparing")?
                .execute(params![b, p.id, 1])
                .ctx("inserting a component")?;
            tally.object(Tag::Composite, p.id, i64::from(b));
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn delete(&mut self, composites: &[u32]) -> Result<Answer, EngineError> {
        let tx = self.conn.transaction().ctx("beginning the delete")?;
        let mut tally = Tally::new();
        for &c in composites {
            let parts = ids(&tx, "SELECT id FROM atomic_parts WHERE part_of = ?1", c)?;
            for &a in &parts {
                tx.prepare_cached(r#"DELETE FROM connections WHERE "from" = ?1"#)
                    .ctx("preparing")?
                    .execute([a])
                    .ctx("deleting connections")?;
            }
            for sql in [
                "DELETE FROM atomic_parts WHERE part_of = ?1",
                "DELETE FROM components WHERE composite = ?1",
                "DELETE FROM documents WHERE id = ?1",
            ] {
                tx.prepare_cached(sql)
                    .ctx("preparing")?
                    .execute([c])
                    .ctx("deleting")?;
            }
            let n = tx
                .prepare_cached("DELETE FROM composite_parts WHERE id = ?1")
                .ctx("preparing")?
                .execute([c])
                .ctx("deleting a composite part")?;
            if n != 1 {
                return Err(missing("composite part", c));
            }
            tally.object(Tag::Composite, c, parts.len() as i64);
        }
        Self::commit(tx)?;
        Ok(tally.finish())
    }

    fn install(&mut self) -> Result<(), EngineError> {
        crate::sqlite::checkpoint(&self.conn)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.conn
            .close()
            .map_err(|(_, e)| EngineError::backend("closing", e))
    }
}

/// The atomic parts of a query returning `(id, x, y, build_date)`.
fn atomics_of(
    tx: &Transaction<'_>,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Tally, EngineError> {
    let mut tally = Tally::new();
    let mut s = tx.prepare_cached(sql).ctx("preparing")?;
    let rows = s.query_map(params, |r| {
        Ok((
            r.get::<_, u32>(0)?,
            r.get::<_, i32>(1)?,
            r.get::<_, i32>(2)?,
            r.get::<_, i32>(3)?,
        ))
    });
    for row in rows.ctx("querying atomic parts")? {
        let (id, x, y, d) = row.ctx("reading atomic parts")?;
        tally.atomic(id, x, y, d);
    }
    Ok(tally)
}
