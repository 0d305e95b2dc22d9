//! `postgres` for OO7: the `sqlite` engine ([`super::sqlite`]) written for
//! PostgreSQL — the same normalised tables and indexes
//! ([`super::postgres_schema`]), statements prepared once per connection,
//! one object per statement except the queries SQL states as one set (Q2,
//! Q3, Q5, Q7, Q8 one statement each, Q6 two), one transaction per
//! operation, committed synchronously ([`crate::postgres::Session`]). The
//! server is the harness's own ([`crate::postgres`]).
//!
//! `postgres-recursive` is the same engine with T1 and T6 as one
//! `WITH RECURSIVE` query each, as `sqlite-recursive`.

use std::collections::HashMap;
use std::path::Path;

use amber_bench::oo7::engine::{
    Answer, EngineError, EngineInfo, EngineOptions, ResultExt, Tag, Tally, count_i, toggle_date,
    toggle_document,
};
use amber_bench::oo7::generate::{document_text, title};
use amber_bench::oo7::model::manual_answer;
use amber_bench::oo7::ops::Field;
use amber_bench::oo7::{NewComposite, Oo7Db, Oo7Engine, Oo7Factory, Traversal};
use amber_bench::procfs::ProcessTree;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, Statement};

use super::postgres_schema::{Statements, atomic_row, load, root_of};
use crate::postgres::{DURABILITY, INSTALL, Session, available, build, int};

/// The `postgres` OO7 engine, or with `recursive` `postgres-recursive`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PostgresFactory {
    pub recursive: bool,
}

/// The schema, as the table names it.
pub const SCHEMA_SUMMARY: &str = "normalised, as sqlite's: a table per class, bags as a components table (base, composite, private), connections in their own table; indexes on each parent, components by base and by composite, documents by title, atomic parts by build date and by composite, connections by (from, id); a traversal step is an index lookup of the part's connections and a primary-key lookup per part, one query each";

impl Oo7Factory for PostgresFactory {
    fn info(&self) -> EngineInfo {
        if self.recursive {
            return EngineInfo {
                name: "postgres-recursive",
                summary: "the postgres engine with T1 and T6 as one recursive query each (WITH RECURSIVE over the hierarchy and each composite part's graph); every other operation as postgres's",
                ..PostgresFactory { recursive: false }.info()
            };
        }
        EngineInfo {
            name: "postgres",
            summary: "PostgreSQL (Debian's package, a server per process on a Unix socket) via the rust postgres client: normalised tables and indexes, prepared statements, one object per statement",
            schema: SCHEMA_SUMMARY,
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: true,
        }
    }

    fn available(&self) -> Result<(), String> {
        available()
    }

    fn build(&self, dir: &Path, db: &Oo7Db, options: &EngineOptions) -> Result<(), EngineError> {
        build(dir, options, |client| load(client, db))
    }

    fn build_of(&self) -> &'static str {
        "postgres"
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let session = Session::open(dir, options)?;
        Ok(Box::new(PostgresOo7::new(session, self.recursive)?))
    }
}

/// An open `postgres` (or `postgres-recursive`) OO7 database.
pub struct PostgresOo7 {
    session: Session,
    s: Statements,
    document_size: u32,
    /// `postgres-recursive`: T1 and T6 as one recursive query.
    recursive: bool,
}

fn missing(what: &str, id: u32) -> EngineError {
    EngineError::bad_input(format!("{what} {id} is not in the database"))
}

/// The one `integer` of the row `stmt` returns for `id`, if any.
fn one(c: &mut Client, stmt: &Statement, id: u32) -> Result<Option<u32>, EngineError> {
    Ok(c.query_opt(stmt, &[&int(id)?])
        .ctx("reading a row")?
        .map(|r| r.get::<_, i32>(0) as u32))
}

/// The first column (`integer`) of every row `stmt` returns for `id`.
fn ids(c: &mut Client, stmt: &Statement, id: u32) -> Result<Vec<u32>, EngineError> {
    Ok(c.query(stmt, &[&int(id)?])
        .ctx("reading rows")?
        .iter()
        .map(|r| r.get::<_, i32>(0) as u32)
        .collect())
}

/// `(x, y, build_date, part_of)` of atomic part `id`.
fn atomic(c: &mut Client, s: &Statements, id: u32) -> Result<(i32, i32, i32, u32), EngineError> {
    let r = c
        .query_opt(&s.atomic, &[&int(id)?])
        .ctx("reading an atomic part")?
        .ok_or_else(|| missing("atomic part", id))?;
    Ok((r.get(0), r.get(1), r.get(2), r.get::<_, i32>(3) as u32))
}

/// The composite parts a traversal of module `m` visits.
fn composite_visits(c: &mut Client, s: &Statements, m: u32) -> Result<Vec<u32>, EngineError> {
    let root = one(c, &s.design_root, m)?.ok_or_else(|| missing("module", m))?;
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(ca) = stack.pop() {
        let subs = ids(c, &s.sub_complex, ca)?;
        if subs.is_empty() {
            for b in ids(c, &s.sub_base, ca)? {
                out.extend(ids(c, &s.private, b)?);
            }
        }
        stack.extend(subs.into_iter().rev());
    }
    Ok(out)
}

/// Depth-first over composite part `cp`'s graph: the atomic ids in visit
/// order.
fn graph_order(
    c: &mut Client,
    s: &Statements,
    cp: u32,
    seen: &mut Vec<bool>,
) -> Result<Vec<u32>, EngineError> {
    let root = one(c, &s.root_part, cp)?.ok_or_else(|| missing("composite part", cp))?;
    super::dfs_order(root, seen, |id| ids(c, &s.out, id))
}

/// The atomic parts a statement returns as `(id, x, y, build_date)`,
/// streamed.
fn atomics_of(
    c: &mut Client,
    stmt: &Statement,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Tally, EngineError> {
    let mut tally = Tally::new();
    let mut rows = c
        .query_raw(stmt, params.iter().copied())
        .ctx("querying atomic parts")?;
    while let Some(r) = rows.next().ctx("reading atomic parts")? {
        tally.atomic(r.get::<_, i32>(0) as u32, r.get(1), r.get(2), r.get(3));
    }
    Ok(tally)
}

/// Inserts a composite part, its atomic parts, connections and document,
/// one statement each.
fn add_composite(
    c: &mut Client,
    s: &Statements,
    nc: &NewComposite,
    document_size: u32,
) -> Result<(), EngineError> {
    let p = &nc.part;
    let root = root_of(&nc.atomics)?;
    c.execute(
        &s.insert_composite,
        &[
            &int(p.id)?,
            &&p.kind[..],
            &p.build_date,
            &int(p.module)?,
            &int(root)?,
        ],
    )
    .ctx("inserting a composite part")?;
    for a in &nc.atomics {
        c.execute(&s.insert_atomic, &atomic_row(a)?.each())
            .ctx("inserting an atomic part")?;
    }
    for k in &nc.connections {
        c.execute(
            &s.insert_connection,
            &[&int(k.from)?, &int(k.to)?, &&k.kind[..], &k.length],
        )
        .ctx("inserting a connection")?;
    }
    c.execute(
        &s.insert_document,
        &[
            &int(p.id)?,
            &title(p.id),
            &document_text(p.id, document_size),
        ],
    )
    .ctx("inserting a document")?;
    Ok(())
}

impl PostgresOo7 {
    /// The engine on `session`'s connection; with `recursive`,
    /// `postgres-recursive`.
    pub fn new(mut session: Session, recursive: bool) -> Result<PostgresOo7, EngineError> {
        let c = session.client();
        let s = Statements::prepare(c)?;
        let document_size = c
            .query_one("SELECT length(text) + 1 FROM documents LIMIT 1", &[])
            .ctx("reading the document size")?
            .get::<_, i32>(0) as u32;
        Ok(PostgresOo7 {
            session,
            s,
            document_size,
            recursive,
        })
    }

    /// A traversal that changes nothing, one object per statement.
    fn walk(
        c: &mut Client,
        s: &Statements,
        m: u32,
        t: Traversal,
        mut visit: impl FnMut(&mut Client, usize, u32, i32) -> Result<(), EngineError>,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let mut seen = Vec::new();
        for cp in composite_visits(c, s, m)? {
            let order = if t.root_only() {
                ids(c, &s.root_part, cp)?
            } else {
                graph_order(c, s, cp, &mut seen)?
            };
            for (index, id) in order.into_iter().enumerate() {
                let (x, y, date, _) = atomic(c, s, id)?;
                tally.atomic(id, x, y, date);
                visit(c, index, id, date)?;
            }
        }
        Ok(())
    }
}

impl Oo7Engine for PostgresOo7 {
    fn traverse(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        let s = &self.s;
        let Some((field, _, _)) = t.update() else {
            let recursive = self.recursive;
            return self.session.read(|c| {
                let tally = if recursive {
                    let stmt = if t.root_only() {
                        &s.t6_recursive
                    } else {
                        &s.t1_recursive
                    };
                    atomics_of(c, stmt, &[&int(m)?])?
                } else {
                    let mut tally = Tally::new();
                    Self::walk(c, s, m, t, |_, _, _, _| Ok(()), &mut tally)?;
                    tally
                };
                Ok(tally.finish())
            });
        };
        self.session.write(|c| {
            let mut tally = Tally::new();
            let mut updates = 0u64;
            let update = |c: &mut Client, index: usize, id: u32, date: i32| {
                let mut date = date;
                for _ in 0..t.updates_at(index) {
                    updates += 1;
                    match field {
                        Field::Xy => c.execute(&s.increment, &[&int(id)?]),
                        Field::Date => {
                            date = toggle_date(date);
                            c.execute(&s.set_date, &[&int(id)?, &date])
                        }
                    }
                    .ctx("updating an atomic part")?;
                }
                Ok(())
            };
            Self::walk(c, s, m, t, update, &mut tally)?;
            Ok(tally.finish_with(updates))
        })
    }

    fn documents(&mut self, m: u32, update: bool) -> Result<Answer, EngineError> {
        let s = &self.s;
        let run = |c: &mut Client| {
            let mut tally = Tally::new();
            for cp in composite_visits(c, s, m)? {
                let text: String = c
                    .query_opt(&s.document, &[&int(cp)?])
                    .ctx("reading a document")?
                    .ok_or_else(|| missing("document", cp))?
                    .get(0);
                if update {
                    let new = toggle_document(&text)
                        .ok_or_else(|| EngineError::corrupt(format!("document {cp}'s text")))?;
                    c.execute(&s.set_document, &[&int(cp)?, &new])
                        .ctx("updating a document")?;
                    tally.object(Tag::Document, cp, new.len() as i64);
                } else {
                    let n = count_i(text.as_bytes());
                    tally.fold(Tag::Document, [i64::from(cp), n as i64, 0]);
                    tally.add(n);
                }
            }
            Ok(tally.finish())
        };
        if update {
            self.session.write(run)
        } else {
            self.session.read(run)
        }
    }

    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::new();
            for &id in atomics {
                let (x, y, date, cp) = atomic(c, s, id)?;
                tally.atomic(id, x, y, date);
                let cdate: i32 = c
                    .query_one(&s.composite_date, &[&int(cp)?])
                    .ctx("reading a composite part")?
                    .get(0);
                tally.object(Tag::Composite, cp, i64::from(cdate));
                for b in ids(c, &s.users, cp)? {
                    let r = c
                        .query_one(&s.base, &[&int(b)?])
                        .ctx("reading a base assembly")?;
                    tally.object(Tag::Base, b, i64::from(r.get::<_, i32>(0)));
                    let mut up = Some(r.get::<_, i32>(1));
                    let mut module = 0;
                    while let Some(ca) = up {
                        let r = c
                            .query_one(&s.complex, &[&ca])
                            .ctx("reading a complex assembly")?;
                        tally.object(Tag::Complex, ca as u32, i64::from(r.get::<_, i32>(0)));
                        up = r.get(1);
                        module = r.get::<_, i32>(2);
                    }
                    let mdate: i32 = c
                        .query_one(&s.module_date, &[&module])
                        .ctx("reading a module")?
                        .get(0);
                    tally.object(Tag::Module, module as u32, i64::from(mdate));
                }
            }
            Ok(tally.finish())
        })
    }

    fn manual(&mut self, m: u32, scan: bool) -> Result<Answer, EngineError> {
        let s = &self.s;
        let text: String = self.session.read(|c| {
            Ok(c.query_opt(&s.manual, &[&int(m)?])
                .ctx("reading a manual")?
                .ok_or_else(|| missing("module", m))?
                .get(0))
        })?;
        Ok(manual_answer(m, text.as_bytes(), scan))
    }

    fn lookup(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::new();
            for &id in atomics {
                let (x, y, date, _) = atomic(c, s, id)?;
                tally.atomic(id, x, y, date);
            }
            Ok(tally.finish())
        })
    }

    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session
            .read(|c| Ok(atomics_of(c, &s.date_range, &[&lo, &hi])?.finish()))
    }

    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::new();
            for t in titles {
                let doc = c.query_opt(&s.title, &[t]).ctx("reading the title index")?;
                let Some(d) = doc.map(|r| r.get::<_, i32>(0) as u32) else {
                    continue;
                };
                for b in ids(c, &s.users, d)? {
                    tally.object(Tag::Base, b, i64::from(d));
                }
            }
            Ok(tally.finish())
        })
    }

    fn q5(&mut self) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::new();
            for r in c.query(&s.q5, &[]).ctx("querying Q5")? {
                tally.object(
                    Tag::Base,
                    r.get::<_, i32>(0) as u32,
                    i64::from(r.get::<_, i32>(1)),
                );
            }
            Ok(tally.finish())
        })
    }

    fn q6(&mut self) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::new();
            let mut latest: HashMap<i32, i32> = HashMap::new();
            for r in c.query(&s.q6_base, &[]).ctx("querying Q6")? {
                let (id, date, up, l): (i32, i32, i32, i32) =
                    (r.get(0), r.get(1), r.get(2), r.get(3));
                if l > date {
                    tally.object(Tag::Base, id as u32, i64::from(date));
                }
                let e = latest.entry(up).or_insert(i32::MIN);
                *e = (*e).max(l);
            }
            // Children have higher ids than their parents.
            for r in c.query(&s.q6_complex, &[]).ctx("querying Q6")? {
                let (id, date, up): (i32, i32, Option<i32>) = (r.get(0), r.get(1), r.get(2));
                let l = latest.get(&id).copied().unwrap_or(i32::MIN);
                if l > date {
                    tally.object(Tag::Complex, id as u32, i64::from(date));
                }
                if let Some(up) = up {
                    let e = latest.entry(up).or_insert(i32::MIN);
                    *e = (*e).max(l);
                }
            }
            Ok(tally.finish())
        })
    }

    fn scan(&mut self) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session
            .read(|c| Ok(atomics_of(c, &s.scan, &[])?.finish()))
    }

    fn join(&mut self) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.read(|c| {
            let mut tally = Tally::new();
            let none: [&(dyn ToSql + Sync); 0] = [];
            let mut rows = c.query_raw(&s.join, none).ctx("querying Q8")?;
            while let Some(r) = rows.next().ctx("reading Q8")? {
                let (a, d): (i32, i32) = (r.get(0), r.get(1));
                tally.fold(Tag::Pair, [i64::from(a), i64::from(d), 0]);
                tally.add(1);
            }
            Ok(tally.finish())
        })
    }

    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        let (s, size) = (&self.s, self.document_size);
        self.session.write(|c| {
            let mut tally = Tally::new();
            for nc in parts {
                let b = *nc.part.used_in_priv.first().ok_or_else(|| {
                    EngineError::bad_input("a new composite part without a base assembly")
                })?;
                add_composite(c, s, nc, size)?;
                c.execute(&s.insert_component, &[&int(b)?, &int(nc.part.id)?, &true])
                    .ctx("inserting a component")?;
                tally.object(Tag::Composite, nc.part.id, i64::from(b));
            }
            Ok(tally.finish())
        })
    }

    fn delete(&mut self, composites: &[u32]) -> Result<Answer, EngineError> {
        let s = &self.s;
        self.session.write(|c| {
            let mut tally = Tally::new();
            for &cp in composites {
                let parts = ids(c, &s.parts_of, cp)?;
                for &a in &parts {
                    c.execute(&s.delete_connections, &[&int(a)?])
                        .ctx("deleting connections")?;
                }
                for stmt in [&s.delete_atomics, &s.delete_components, &s.delete_document] {
                    c.execute(stmt, &[&int(cp)?]).ctx("deleting")?;
                }
                let n = c
                    .execute(&s.delete_composite, &[&int(cp)?])
                    .ctx("deleting a composite part")?;
                if n != 1 {
                    return Err(missing("composite part", cp));
                }
                tally.object(Tag::Composite, cp, parts.len() as i64);
            }
            Ok(tally.finish())
        })
    }

    fn install(&mut self) -> Result<(), EngineError> {
        self.session.checkpoint()
    }

    fn last_commit_log_bytes(&self) -> Option<u64> {
        self.session.wal_bytes()
    }

    fn server(&self) -> Option<ProcessTree> {
        self.session.server()
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.session.close()
    }
}
