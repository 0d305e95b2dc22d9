//! The OO7 operations on an open Amber database.

use amber::{CommitStats, Db, PRef, Tx, View};

use super::AmberOo7;
use super::load;
use super::schema::{AtomicPart, BaseAssembly, ComplexAssembly, CompositePart, Module, Root};
use crate::oo7::engine::{
    Answer, EngineError, Oo7Engine, ResultExt, Tag, Tally, count_i, toggle_date, toggle_document,
};
use crate::oo7::generate::NewComposite;
use crate::oo7::model::manual_answer;
use crate::oo7::ops::{Field, Traversal};

fn missing(what: &str, id: u32) -> EngineError {
    EngineError::bad_input(format!("{what} {id} is not in the database"))
}

/// Atomic part `id` in the id index `parts`.
#[inline]
fn find(parts: &[Option<PRef<AtomicPart>>], id: u32) -> Result<PRef<AtomicPart>, EngineError> {
    match parts.get((id as usize).wrapping_sub(1)) {
        Some(&Some(p)) => Ok(p),
        _ => Err(missing("atomic part", id)),
    }
}

/// Atomic part `id`, through the root's id index.
fn atomic(r: &impl View, root: PRef<Root>, id: u32) -> Result<PRef<AtomicPart>, EngineError> {
    find(r.slice(&r.get(root).atomic_parts), id)
}

fn module(r: &impl View, root: PRef<Root>, id: u32) -> Result<PRef<Module>, EngineError> {
    r.slice(&r.get(root).modules)
        .get((id as usize).wrapping_sub(1))
        .copied()
        .ok_or_else(|| missing("module", id))
}

/// The composite parts a traversal of module `m` visits, once per
/// `components_priv` entry.
fn composite_visits(
    r: &impl View,
    root: PRef<Root>,
    m: u32,
) -> Result<Vec<PRef<CompositePart>>, EngineError> {
    let mut out = Vec::new();
    let mut stack = vec![r.get(module(r, root, m)?).design_root];
    while let Some(ca) = stack.pop() {
        let ca = r.get(ca);
        stack.extend(r.slice(&ca.sub_complex).iter().rev());
        for &b in r.slice(&ca.sub_base) {
            out.extend_from_slice(r.slice(&r.get(b).components_priv));
        }
    }
    Ok(out)
}

/// A graph walk's visited set and stack, reused from walk to walk.
#[derive(Default)]
pub(super) struct Scratch {
    seen: Vec<bool>,
    stack: Vec<PRef<AtomicPart>>,
}

/// Depth-first over composite part `c`'s graph from its root part, with a
/// visited set; calls `f` on every part once.
fn walk<V: View>(
    r: &V,
    c: &CompositePart,
    scratch: &mut Scratch,
    mut f: impl FnMut(PRef<AtomicPart>, &AtomicPart),
) {
    let first = r.get(c.root_part).id;
    let Scratch { seen, stack } = scratch;
    seen.clear();
    seen.resize(c.parts.len(), false);
    stack.clear();
    stack.push(c.root_part);
    while let Some(p) = stack.pop() {
        let part = r.get(p);
        let i = part.id.wrapping_sub(first) as usize;
        match seen.get_mut(i) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        f(p, part);
        for conn in r.slice(&part.to).iter().rev() {
            stack.push(conn.to);
        }
    }
}

/// Commits `tx`; what the commit did.
fn commit(tx: Tx<'_>, what: &str) -> Result<CommitStats, EngineError> {
    tx.commit().ctx(what)
}

fn tally_atomic(tally: &mut Tally, a: &AtomicPart) {
    tally.atomic(a.id, a.x, a.y, a.build_date);
}

/// The latest build date of the composite parts base assembly `b` uses.
fn latest_component(r: &impl View, b: &BaseAssembly) -> i32 {
    r.slice(&b.components_priv)
        .iter()
        .chain(r.slice(&b.components_shar))
        .map(|&c| r.get(c).build_date)
        .max()
        .unwrap_or(i32::MIN)
}

/// Q6 below complex assembly `ca`: the latest composite date under it.
fn q6_below(db: &Db, ca: &ComplexAssembly, tally: &mut Tally) -> i32 {
    let mut latest = i32::MIN;
    for &s in db.slice(&ca.sub_complex) {
        latest = latest.max(q6_below(db, db.get(s), tally));
    }
    for &b in db.slice(&ca.sub_base) {
        let b = db.get(b);
        let l = latest_component(db, b);
        if l > b.build_date {
            tally.object(Tag::Base, b.id, i64::from(b.build_date));
        }
        latest = latest.max(l);
    }
    if latest > ca.build_date {
        tally.object(Tag::Complex, ca.id, i64::from(ca.build_date));
    }
    latest
}

impl AmberOo7 {
    fn update_traversal(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        let root = self.root;
        let Some((field, _, _)) = t.update() else {
            return Err(EngineError::bad_input("not an updating traversal"));
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut tally = Tally::new();
        let mut updates = 0u64;
        let mut order = Vec::new();
        let mut tx = self.db.begin().ctx("beginning a traversal")?;
        for c in composite_visits(&tx, root, m)? {
            order.clear();
            walk(&tx, tx.get(c), &mut scratch, |p, part| {
                tally_atomic(&mut tally, part);
                order.push(p);
            });
            for (index, &p) in order.iter().enumerate() {
                for _ in 0..t.updates_at(index) {
                    updates += 1;
                    match field {
                        // Field by field: a software barrier notes the
                        // 8 bytes written, not the whole part.
                        Field::Xy => {
                            *tx.field_mut(p, |o| &o.x) += 1;
                            *tx.field_mut(p, |o| &o.y) += 1;
                        }
                        Field::Date => {
                            let old = tx.get(p).build_date;
                            let new = toggle_date(old);
                            tx.multi_remove(root, |r| &mut r.by_date, &old, p)
                                .ctx("moving a part in the date index")?;
                            tx.multi_insert(root, |r| &mut r.by_date, &new, p)
                                .ctx("moving a part in the date index")?;
                            *tx.field_mut(p, |o| &o.build_date) = new;
                        }
                    }
                }
            }
        }
        self.last_commit = Some(commit(tx, "committing a traversal")?);
        self.scratch = scratch;
        Ok(tally.finish_with(updates))
    }
}

impl Oo7Engine for AmberOo7 {
    fn traverse(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        if t.update().is_some() {
            return self.update_traversal(m, t);
        }
        let db = &self.db;
        let mut tally = Tally::new();
        for c in composite_visits(db, self.root, m)? {
            let comp = db.get(c);
            if t.root_only() {
                tally_atomic(&mut tally, db.get(comp.root_part));
            } else {
                walk(db, comp, &mut self.scratch, |_, part| {
                    tally_atomic(&mut tally, part)
                });
            }
        }
        Ok(tally.finish())
    }

    fn documents(&mut self, m: u32, update: bool) -> Result<Answer, EngineError> {
        let root = self.root;
        let mut tally = Tally::new();
        if !update {
            let db = &self.db;
            for c in composite_visits(db, root, m)? {
                let d = db
                    .get(c)
                    .documentation
                    .ok_or_else(|| missing("document", 0))?;
                let doc = db.get(d);
                let n = count_i(db.str(&doc.text).as_bytes());
                tally.fold(Tag::Document, [i64::from(doc.id), n as i64, 0]);
                tally.add(n);
            }
            return Ok(tally.finish());
        }
        let mut tx = self.db.begin().ctx("beginning T5")?;
        for c in composite_visits(&tx, root, m)? {
            let d = tx
                .get(c)
                .documentation
                .ok_or_else(|| missing("document", 0))?;
            let doc = tx.get(d);
            let id = doc.id;
            let text = toggle_document(tx.str(&doc.text))
                .ok_or_else(|| EngineError::corrupt(format!("document {id}'s text")))?;
            tx.set_str(d, |d| &mut d.text, &text)
                .ctx("changing a document")?;
            tally.object(Tag::Document, id, text.len() as i64);
        }
        self.last_commit = Some(commit(tx, "committing T5")?);
        Ok(tally.finish())
    }

    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let db = &self.db;
        let mut tally = Tally::new();
        for &id in atomics {
            let a = db.get(atomic(db, self.root, id)?);
            tally_atomic(&mut tally, a);
            let c = db.get(a.part_of.ok_or_else(|| missing("composite part of", id))?);
            tally.object(Tag::Composite, c.id, i64::from(c.build_date));
            for &b in db
                .slice(&c.used_in_priv)
                .iter()
                .chain(db.slice(&c.used_in_shar))
            {
                let b = db.get(b);
                tally.object(Tag::Base, b.id, i64::from(b.build_date));
                let mut ca = db.get(b.super_assembly);
                loop {
                    tally.object(Tag::Complex, ca.id, i64::from(ca.build_date));
                    match ca.super_assembly {
                        Some(up) => ca = db.get(up),
                        None => break,
                    }
                }
                let m = db.get(
                    ca.module
                        .ok_or_else(|| missing("module of assembly", ca.id))?,
                );
                tally.object(Tag::Module, m.id, i64::from(m.build_date));
            }
        }
        Ok(tally.finish())
    }

    fn manual(&mut self, m: u32, scan: bool) -> Result<Answer, EngineError> {
        let db = &self.db;
        let manual = db.get(db.get(module(db, self.root, m)?).manual);
        Ok(manual_answer(m, db.str(&manual.text).as_bytes(), scan))
    }

    fn lookup(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        let db = &self.db;
        let parts = db.slice(&db.get(self.root).atomic_parts);
        let mut tally = Tally::new();
        for &id in ids {
            tally_atomic(&mut tally, db.get(find(parts, id)?));
        }
        Ok(tally.finish())
    }

    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        let db = &self.db;
        let mut tally = Tally::new();
        for e in db
            .multi_range(&db.get(self.root).by_date, lo..=hi)
            .ctx("reading the date index")?
        {
            let (_, p) = e.ctx("reading the date index")?;
            tally_atomic(&mut tally, db.get(p));
        }
        Ok(tally.finish())
    }

    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError> {
        let db = &self.db;
        let index = &db.get(self.root).by_title;
        let mut tally = Tally::new();
        for t in titles {
            let Some(d) = db
                .index_get(index, t.as_str())
                .ctx("reading the title index")?
            else {
                continue;
            };
            let doc = db.get(d);
            let c = db.get(doc.part);
            for &b in db
                .slice(&c.used_in_priv)
                .iter()
                .chain(db.slice(&c.used_in_shar))
            {
                tally.object(Tag::Base, db.get(b).id, i64::from(doc.id));
            }
        }
        Ok(tally.finish())
    }

    fn q5(&mut self) -> Result<Answer, EngineError> {
        let db = &self.db;
        let mut tally = Tally::new();
        for &b in db.slice(&db.get(self.root).base) {
            let b = db.get(b);
            if latest_component(db, b) > b.build_date {
                tally.object(Tag::Base, b.id, i64::from(b.build_date));
            }
        }
        Ok(tally.finish())
    }

    fn q6(&mut self) -> Result<Answer, EngineError> {
        let db = &self.db;
        let mut tally = Tally::new();
        for &m in db.slice(&db.get(self.root).modules) {
            q6_below(db, db.get(db.get(m).design_root), &mut tally);
        }
        Ok(tally.finish())
    }

    fn scan(&mut self) -> Result<Answer, EngineError> {
        let db = &self.db;
        let mut tally = Tally::new();
        for p in db.slice(&db.get(self.root).atomic_parts).iter().flatten() {
            tally_atomic(&mut tally, db.get(*p));
        }
        Ok(tally.finish())
    }

    fn join(&mut self) -> Result<Answer, EngineError> {
        let db = &self.db;
        let root = self.root;
        let mut tally = Tally::new();
        for p in db.slice(&db.get(root).atomic_parts).iter().flatten() {
            let a = db.get(*p);
            let Ok(comp) = load::composite(db, root, a.doc_id) else {
                continue;
            };
            if let Some(d) = db.get(comp).documentation {
                tally.fold(Tag::Pair, [i64::from(a.id), i64::from(db.get(d).id), 0]);
                tally.add(1);
            }
        }
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        let root = self.root;
        let mut tally = Tally::new();
        let mut tx = self.db.begin().ctx("beginning the insert")?;
        let size = tx.get(root).document_size as u32;
        for nc in parts {
            let b = *nc.part.used_in_priv.first().ok_or_else(|| {
                EngineError::bad_input("a new composite part without a base assembly")
            })?;
            let base = tx
                .slice(&tx.get(root).base)
                .get((b as usize).wrapping_sub(1))
                .copied()
                .ok_or_else(|| missing("base assembly", b))?;
            let c = load::add_graph(&mut tx, root, &nc.part, &nc.atomics, &nc.connections)?;
            load::add_document(&mut tx, root, c, size)?;
            load::link(&mut tx, base, c, true)?;
            tally.object(Tag::Composite, nc.part.id, i64::from(b));
        }
        self.last_commit = Some(commit(tx, "committing the insert")?);
        Ok(tally.finish())
    }

    fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        let root = self.root;
        let mut tally = Tally::new();
        let mut tx = self.db.begin().ctx("beginning the delete")?;
        for &id in ids {
            let c = load::composite(&tx, root, id)?;
            let comp = tx.get(c);
            let users_priv = tx.slice(&comp.used_in_priv).to_vec();
            let users_shar = tx.slice(&comp.used_in_shar).to_vec();
            let parts = tx.slice(&comp.parts).to_vec();
            let doc = comp.documentation;
            for b in users_priv {
                tx.retain(b, |b| &mut b.components_priv, |&x| x != c)
                    .ctx("unlinking a private component")?;
            }
            for b in users_shar {
                tx.retain(b, |b| &mut b.components_shar, |&x| x != c)
                    .ctx("unlinking a shared component")?;
            }
            if let Some(d) = doc {
                let title = tx.str(&tx.get(d).title).to_string();
                tx.index_remove(root, |r| &mut r.by_title, title.as_str())
                    .ctx("removing a title")?;
                tx.free(d).ctx("freeing a document")?;
            }
            for &p in &parts {
                let (pid, date) = {
                    let a = tx.get(p);
                    (a.id, a.build_date)
                };
                tx.multi_remove(root, |r| &mut r.by_date, &date, p)
                    .ctx("removing a build date")?;
                let slot = tx
                    .slice_mut(root, |r| &mut r.atomic_parts)
                    .get_mut((pid as usize).wrapping_sub(1))
                    .ok_or_else(|| missing("atomic part", pid))?;
                *slot = None;
                tx.free(p).ctx("freeing an atomic part")?;
            }
            if let Some(slot) = tx
                .slice_mut(root, |r| &mut r.composites)
                .get_mut((id as usize).wrapping_sub(1))
            {
                *slot = None;
            }
            tx.free(c).ctx("freeing a composite part")?;
            tally.object(Tag::Composite, id, parts.len() as i64);
        }
        self.last_commit = Some(commit(tx, "committing the delete")?);
        Ok(tally.finish())
    }

    fn install(&mut self) -> Result<(), EngineError> {
        self.db.checkpoint().ctx("checkpointing")
    }

    fn last_commit_log_bytes(&self) -> Option<u64> {
        self.last_commit.map(|s| s.log_bytes)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.db.close().ctx("closing the database")
    }
}
