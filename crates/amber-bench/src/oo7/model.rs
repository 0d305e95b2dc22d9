//! The OO7 database as plain Rust structs in memory: what a careful Rust
//! programmer holds without a database. Arenas (`Vec`s indexed by id − 1)
//! are the id indexes, a `BTreeMap` from date to part ids the build-date
//! index, a `HashMap` the title index; an atomic part holds its outgoing
//! connections and its incoming ones (ids) in `Vec`s.
//!
//! It is the harness's reference (every engine's answers are compared with
//! it) and the state of the `memory` and `snapshot` comparison engines.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::engine::{Answer, EngineError, Tag, Tally, count_i, toggle_date, toggle_document};
use super::generate::{
    AtomicPart, BaseAssembly, ComplexAssembly, CompositePart, Connection, Module, NewComposite,
    Oo7Db, document_text, manual_text, title,
};
use super::ops::{Field, Traversal};
use super::params::Params;

/// A document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    pub id: u32,
    pub title: String,
    pub text: String,
}

/// A composite part with its document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Composite {
    pub part: CompositePart,
    pub document: Document,
    /// Its atomic parts' ids, the root first.
    pub parts: Vec<u32>,
}

/// An atomic part with its connections.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Atomic {
    pub part: AtomicPart,
    /// Outgoing connections, in slot order.
    pub to: Vec<Connection>,
    /// Atomic parts with a connection to this one, one per connection.
    pub from: Vec<u32>,
}

/// The in-memory OO7 database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    pub params: Params,
    pub modules: Vec<(Module, String)>,
    pub complex: Vec<ComplexAssembly>,
    pub base: Vec<BaseAssembly>,
    pub composites: Vec<Option<Composite>>,
    pub atomics: Vec<Option<Atomic>>,
    pub by_date: BTreeMap<i32, Vec<u32>>,
    pub by_title: HashMap<String, u32>,
}

fn missing(what: &str, id: u32) -> EngineError {
    EngineError::bad_input(format!("{what} {id} is not in the database"))
}

fn slot<T>(v: &[T], id: u32) -> Option<&T> {
    v.get((id as usize).wrapping_sub(1))
}

fn slot_mut<T>(v: &mut [T], id: u32) -> Option<&mut T> {
    v.get_mut((id as usize).wrapping_sub(1))
}

impl Model {
    /// Loads the generated database.
    pub fn new(db: &Oo7Db) -> Model {
        let p = db.params;
        let mut m = Model {
            params: p,
            modules: db
                .modules
                .iter()
                .map(|md| (md.clone(), manual_text(md.id, p.manual_size)))
                .collect(),
            complex: db.complex.clone(),
            base: db.base.clone(),
            composites: Vec::with_capacity(db.composites.len()),
            atomics: Vec::with_capacity(db.atomics.len()),
            by_date: BTreeMap::new(),
            by_title: HashMap::new(),
        };
        for c in &db.composites {
            let atomics = db.parts_of(c);
            let conns = atomics.iter().map(|a| db.outgoing(a.id).to_vec());
            m.add_composite(c.clone(), atomics, conns);
        }
        m
    }

    fn add_composite(
        &mut self,
        part: CompositePart,
        atomics: &[AtomicPart],
        conns: impl Iterator<Item = Vec<Connection>>,
    ) {
        let first = part.first_atomic;
        let base = self.atomics.len();
        for (a, to) in atomics.iter().zip(conns) {
            debug_assert_eq!(self.atomics.len() as u32 + 1, a.id);
            self.by_date.entry(a.build_date).or_default().push(a.id);
            self.atomics.push(Some(Atomic {
                part: *a,
                to,
                from: Vec::new(),
            }));
        }
        for i in base..self.atomics.len() {
            let targets: Vec<(u32, u32)> = self.atomics[i]
                .as_ref()
                .map(|a| a.to.iter().map(|c| (c.to, c.from)).collect())
                .unwrap_or_default();
            for (to, from) in targets {
                if let Some(Some(t)) = slot_mut(&mut self.atomics, to) {
                    t.from.push(from);
                }
            }
        }
        let id = part.id;
        let document = Document {
            id,
            title: title(id),
            text: document_text(id, self.params.document_size),
        };
        self.by_title.insert(document.title.clone(), id);
        while self.composites.len() < (id - 1) as usize {
            self.composites.push(None);
        }
        self.composites.push(Some(Composite {
            part,
            document,
            parts: (first..first + atomics.len() as u32).collect(),
        }));
    }

    fn composite(&self, id: u32) -> Result<&Composite, EngineError> {
        slot(&self.composites, id)
            .and_then(Option::as_ref)
            .ok_or_else(|| missing("composite part", id))
    }

    fn atomic(&self, id: u32) -> Result<&Atomic, EngineError> {
        slot(&self.atomics, id)
            .and_then(Option::as_ref)
            .ok_or_else(|| missing("atomic part", id))
    }

    fn atomic_mut(&mut self, id: u32) -> Result<&mut Atomic, EngineError> {
        slot_mut(&mut self.atomics, id)
            .and_then(Option::as_mut)
            .ok_or_else(|| missing("atomic part", id))
    }

    fn module(&self, id: u32) -> Result<&(Module, String), EngineError> {
        slot(&self.modules, id).ok_or_else(|| missing("module", id))
    }

    /// The composite parts a traversal of `module` visits, in order, once
    /// per `components_priv` entry.
    pub fn composite_visits(&self, module: u32) -> Result<Vec<u32>, EngineError> {
        let root = self.module(module)?.0.design_root;
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let ca = slot(&self.complex, id).ok_or_else(|| missing("complex assembly", id))?;
            for &sub in ca.subs.iter().rev() {
                if ca.level > 2 {
                    stack.push(sub);
                } else {
                    let b = slot(&self.base, sub).ok_or_else(|| missing("base assembly", sub))?;
                    out.extend(&b.components_priv);
                }
            }
        }
        Ok(out)
    }

    /// The atomic part ids of [`Model::walk`] in visit order.
    fn graph_order(&self, c: &Composite) -> Result<Vec<u32>, EngineError> {
        let mut order = Vec::with_capacity(c.parts.len());
        self.walk(c, &mut Vec::new(), &mut Vec::new(), |a| order.push(a.id))?;
        Ok(order)
    }

    /// Depth-first from composite part `c`'s root part with a visited set
    /// (`seen` and `stack` are scratch space, reused): calls `f` on every
    /// atomic part once.
    fn walk(
        &self,
        c: &Composite,
        seen: &mut Vec<bool>,
        stack: &mut Vec<u32>,
        mut f: impl FnMut(&AtomicPart),
    ) -> Result<(), EngineError> {
        let first = c.part.first_atomic;
        seen.clear();
        seen.resize(c.parts.len(), false);
        stack.clear();
        stack.push(first);
        while let Some(id) = stack.pop() {
            match seen.get_mut(id.wrapping_sub(first) as usize) {
                Some(s) if !*s => *s = true,
                _ => continue,
            }
            let a = self.atomic(id)?;
            f(&a.part);
            stack.extend(a.to.iter().rev().map(|conn| conn.to));
        }
        Ok(())
    }

    /// T1, T2, T3, T6.
    pub fn traverse(&mut self, module: u32, t: Traversal) -> Result<Answer, EngineError> {
        if t.update().is_none() {
            let mut tally = Tally::new();
            let (mut seen, mut stack) = (Vec::new(), Vec::new());
            for c in self.composite_visits(module)? {
                let comp = self.composite(c)?;
                if t.root_only() {
                    let a = self.atomic(comp.part.first_atomic)?.part;
                    tally.atomic(a.id, a.x, a.y, a.build_date);
                } else {
                    self.walk(comp, &mut seen, &mut stack, |a| {
                        tally.atomic(a.id, a.x, a.y, a.build_date)
                    })?;
                }
            }
            return Ok(tally.finish());
        }
        let mut tally = Tally::new();
        let mut updates = 0u64;
        for c in self.composite_visits(module)? {
            let comp = self.composite(c)?;
            let order = if t.root_only() {
                vec![comp.part.first_atomic]
            } else {
                self.graph_order(comp)?
            };
            for (index, id) in order.into_iter().enumerate() {
                let a = self.atomic(id)?.part;
                tally.atomic(a.id, a.x, a.y, a.build_date);
                for _ in 0..t.updates_at(index) {
                    updates += 1;
                    match t.update().map(|u| u.0) {
                        Some(Field::Xy) => {
                            let p = &mut self.atomic_mut(id)?.part;
                            p.x += 1;
                            p.y += 1;
                        }
                        Some(Field::Date) => self.toggle(id)?,
                        None => {}
                    }
                }
            }
        }
        Ok(if t.update().is_some() {
            tally.finish_with(updates)
        } else {
            tally.finish()
        })
    }

    fn toggle(&mut self, id: u32) -> Result<(), EngineError> {
        let p = &mut self.atomic_mut(id)?.part;
        let old = p.build_date;
        p.build_date = toggle_date(old);
        let new = p.build_date;
        if let Some(ids) = self.by_date.get_mut(&old) {
            ids.retain(|&x| x != id);
            if ids.is_empty() {
                self.by_date.remove(&old);
            }
        }
        self.by_date.entry(new).or_default().push(id);
        Ok(())
    }

    /// T4, T5.
    pub fn documents(&mut self, module: u32, update: bool) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for c in self.composite_visits(module)? {
            let doc = &mut slot_mut(&mut self.composites, c)
                .and_then(Option::as_mut)
                .ok_or_else(|| missing("composite part", c))?
                .document;
            if update {
                let text = toggle_document(&doc.text)
                    .ok_or_else(|| EngineError::corrupt(format!("document {c}'s text")))?;
                doc.text = text;
                tally.object(Tag::Document, doc.id, doc.text.len() as i64);
            } else {
                let n = count_i(doc.text.as_bytes());
                tally.fold(Tag::Document, [i64::from(doc.id), n as i64, 0]);
                tally.add(n);
            }
        }
        Ok(tally.finish())
    }

    /// T7.
    pub fn up(&self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for &id in atomics {
            let a = self.atomic(id)?.part;
            tally.atomic(a.id, a.x, a.y, a.build_date);
            let c = self.composite(a.part_of)?;
            tally.object(Tag::Composite, c.part.id, i64::from(c.part.build_date));
            for &b in c.part.used_in_priv.iter().chain(&c.part.used_in_shar) {
                let base = slot(&self.base, b).ok_or_else(|| missing("base assembly", b))?;
                tally.object(Tag::Base, b, i64::from(base.build_date));
                let mut up = Some(base.super_assembly);
                let mut module = base.module;
                while let Some(ca) = up {
                    let ca =
                        slot(&self.complex, ca).ok_or_else(|| missing("complex assembly", ca))?;
                    tally.object(Tag::Complex, ca.id, i64::from(ca.build_date));
                    up = ca.super_assembly;
                    module = ca.module;
                }
                let m = &self.module(module)?.0;
                tally.object(Tag::Module, m.id, i64::from(m.build_date));
            }
        }
        Ok(tally.finish())
    }

    /// T8, T9.
    pub fn manual(&self, module: u32, scan: bool) -> Result<Answer, EngineError> {
        let text = self.module(module)?.1.as_bytes();
        Ok(manual_answer(module, text, scan))
    }

    /// Q1.
    pub fn lookup(&self, ids: &[u32]) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for &id in ids {
            let a = self.atomic(id)?.part;
            tally.atomic(a.id, a.x, a.y, a.build_date);
        }
        Ok(tally.finish())
    }

    /// Q2, Q3.
    pub fn date_range(&self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for ids in self.by_date.range(lo..=hi).map(|(_, v)| v) {
            for &id in ids {
                let a = self.atomic(id)?.part;
                tally.atomic(a.id, a.x, a.y, a.build_date);
            }
        }
        Ok(tally.finish())
    }

    /// Q4.
    pub fn by_title(&self, titles: &[String]) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for t in titles {
            let Some(&c) = self.by_title.get(t) else {
                continue;
            };
            let c = self.composite(c)?;
            for &b in c.part.used_in_priv.iter().chain(&c.part.used_in_shar) {
                tally.object(Tag::Base, b, i64::from(c.document.id));
            }
        }
        Ok(tally.finish())
    }

    /// The latest build date of a composite part base assembly `b` uses.
    fn latest_component(&self, b: &BaseAssembly) -> Result<i32, EngineError> {
        let mut latest = i32::MIN;
        for &c in b.components_priv.iter().chain(&b.components_shar) {
            latest = latest.max(self.composite(c)?.part.build_date);
        }
        Ok(latest)
    }

    /// Q5.
    pub fn q5(&self) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for b in &self.base {
            if self.latest_component(b)? > b.build_date {
                tally.object(Tag::Base, b.id, i64::from(b.build_date));
            }
        }
        Ok(tally.finish())
    }

    /// Q6.
    pub fn q6(&self) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        let mut base_latest = Vec::with_capacity(self.base.len());
        for b in &self.base {
            let latest = self.latest_component(b)?;
            if latest > b.build_date {
                tally.object(Tag::Base, b.id, i64::from(b.build_date));
            }
            base_latest.push(latest);
        }
        // Children have higher ids than their parents: fill from the end.
        let mut latest = vec![i32::MIN; self.complex.len()];
        for ca in self.complex.iter().rev() {
            let mut l = i32::MIN;
            for &s in &ca.subs {
                let v = if ca.level > 2 {
                    slot(&latest, s)
                } else {
                    slot(&base_latest, s)
                };
                l = l.max(*v.ok_or_else(|| missing("assembly", s))?);
            }
            latest[(ca.id - 1) as usize] = l;
            if l > ca.build_date {
                tally.object(Tag::Complex, ca.id, i64::from(ca.build_date));
            }
        }
        Ok(tally.finish())
    }

    /// Q7.
    pub fn scan(&self) -> Answer {
        let mut tally = Tally::new();
        for a in self.atomics.iter().flatten() {
            tally.atomic(a.part.id, a.part.x, a.part.y, a.part.build_date);
        }
        tally.finish()
    }

    /// Q8.
    pub fn join(&self) -> Answer {
        let mut tally = Tally::new();
        for a in self.atomics.iter().flatten() {
            if let Some(Some(c)) = slot(&self.composites, a.part.doc_id) {
                tally.fold(
                    Tag::Pair,
                    [i64::from(a.part.id), i64::from(c.document.id), 0],
                );
                tally.add(1);
            }
        }
        tally.finish()
    }

    /// Structural insert.
    pub fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for nc in parts {
            let base = nc.part.used_in_priv[0];
            if self.atomics.len() as u32 + 1 != nc.part.first_atomic {
                return Err(EngineError::bad_input(format!(
                    "composite part {} starts at atomic part {}, not {}",
                    nc.part.id,
                    nc.part.first_atomic,
                    self.atomics.len() + 1
                )));
            }
            slot_mut(&mut self.base, base)
                .ok_or_else(|| missing("base assembly", base))?
                .components_priv
                .push(nc.part.id);
            let k = self.params.conn_per_atomic as usize;
            self.add_composite(
                nc.part.clone(),
                &nc.atomics,
                nc.connections.chunks(k).map(<[Connection]>::to_vec),
            );
            tally.object(Tag::Composite, nc.part.id, i64::from(base));
        }
        Ok(tally.finish())
    }

    /// Structural delete.
    pub fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        let mut tally = Tally::new();
        for &id in ids {
            let c = slot_mut(&mut self.composites, id)
                .and_then(Option::take)
                .ok_or_else(|| missing("composite part", id))?;
            for &b in &c.part.used_in_priv {
                if let Some(base) = slot_mut(&mut self.base, b) {
                    base.components_priv.retain(|&x| x != id);
                }
            }
            for &b in &c.part.used_in_shar {
                if let Some(base) = slot_mut(&mut self.base, b) {
                    base.components_shar.retain(|&x| x != id);
                }
            }
            self.by_title.remove(&c.document.title);
            let removed: HashSet<u32> = c.parts.iter().copied().collect();
            for &a in &c.parts {
                let atomic = slot_mut(&mut self.atomics, a)
                    .and_then(Option::take)
                    .ok_or_else(|| missing("atomic part", a))?;
                let date = atomic.part.build_date;
                if let Some(v) = self.by_date.get_mut(&date) {
                    v.retain(|x| !removed.contains(x));
                    if v.is_empty() {
                        self.by_date.remove(&date);
                    }
                }
            }
            tally.object(Tag::Composite, id, c.parts.len() as i64);
        }
        Ok(tally.finish())
    }
}

/// T8's and T9's answer on a manual's text.
pub fn manual_answer(module: u32, text: &[u8], scan: bool) -> Answer {
    let mut tally = Tally::new();
    if scan {
        let n = count_i(text);
        tally.fold(Tag::Manual, [i64::from(module), n as i64, 0]);
        tally.add(n);
    } else {
        let first = text.first().copied().unwrap_or(0);
        let last = text.last().copied().unwrap_or(0);
        tally.fold(Tag::Manual, [i64::from(first), i64::from(last), 0]);
        tally.add(u64::from(first == last));
    }
    tally.finish()
}

/// The model is also an engine: the reference the harness checks answers
/// against, and the `memory` engine's state.
impl super::engine::Oo7Engine for Model {
    fn traverse(&mut self, module: u32, t: Traversal) -> Result<Answer, EngineError> {
        Model::traverse(self, module, t)
    }
    fn documents(&mut self, module: u32, update: bool) -> Result<Answer, EngineError> {
        Model::documents(self, module, update)
    }
    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        Model::up(self, atomics)
    }
    fn manual(&mut self, module: u32, scan: bool) -> Result<Answer, EngineError> {
        Model::manual(self, module, scan)
    }
    fn lookup(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        Model::lookup(self, ids)
    }
    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        Model::date_range(self, lo, hi)
    }
    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError> {
        Model::by_title(self, titles)
    }
    fn q5(&mut self) -> Result<Answer, EngineError> {
        Model::q5(self)
    }
    fn q6(&mut self) -> Result<Answer, EngineError> {
        Model::q6(self)
    }
    fn scan(&mut self) -> Result<Answer, EngineError> {
        Ok(Model::scan(self))
    }
    fn join(&mut self) -> Result<Answer, EngineError> {
        Ok(Model::join(self))
    }
    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        Model::insert(self, parts)
    }
    fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        Model::delete(self, ids)
    }
    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
