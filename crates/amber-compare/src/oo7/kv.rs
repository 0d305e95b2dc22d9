//! OO7 on an ordered key-value store, written once for `redb` and `lmdb`
//! (each adapts its own transactions to [`KvRead`] / [`KvWrite`]).
//!
//! **(choice)** Records keyed by id, one table per class, with
//! secondary-index tables whose keys are composite (big-endian fields
//! concatenated, the value empty or one id), as a careful user of a
//! key-value store indexes: bags in `bags` ((base, private, slot) →
//! composite) and `used_in` ((composite, base, private, slot) → ()),
//! sub-assemblies in `subs` ((parent, child) → ()), connections in `conns`
//! ((from, slot) → to, kind, length), build dates in `dates` ((date, atomic
//! id) → ()), titles in `titles` (title → document id), a composite part's
//! atomic parts in `parts_of` ((composite, atomic) → ()). Records are
//! fixed-layout byte strings. Every operation is one transaction (a read
//! transaction, or one durable write transaction); a traversal step is a
//! range scan of the part's connections plus one lookup per target.

use std::collections::HashMap;

use amber_bench::oo7::engine::{
    Answer, EngineError, Tag, Tally, count_i, toggle_date, toggle_document,
};
use amber_bench::oo7::generate::{self, Oo7Db, document_text, manual_text, title};
use amber_bench::oo7::model::manual_answer;
use amber_bench::oo7::ops::Field;
use amber_bench::oo7::{NewComposite, Oo7Engine, Traversal};

/// The tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum T {
    Modules,
    Manuals,
    Complex,
    Subs,
    Base,
    Bags,
    UsedIn,
    Composite,
    Docs,
    Titles,
    Atomic,
    Conns,
    Dates,
    PartsOf,
    Meta,
}

impl T {
    /// Every table.
    pub const ALL: [T; 15] = [
        T::Modules,
        T::Manuals,
        T::Complex,
        T::Subs,
        T::Base,
        T::Bags,
        T::UsedIn,
        T::Composite,
        T::Docs,
        T::Titles,
        T::Atomic,
        T::Conns,
        T::Dates,
        T::PartsOf,
        T::Meta,
    ];

    /// The table's name in the store.
    pub fn name(self) -> &'static str {
        match self {
            T::Modules => "modules",
            T::Manuals => "manuals",
            T::Complex => "complex_assemblies",
            T::Subs => "subs",
            T::Base => "base_assemblies",
            T::Bags => "bags",
            T::UsedIn => "used_in",
            T::Composite => "composite_parts",
            T::Docs => "documents",
            T::Titles => "titles",
            T::Atomic => "atomic_parts",
            T::Conns => "connections",
            T::Dates => "dates",
            T::PartsOf => "parts_of",
            T::Meta => "meta",
        }
    }
}

/// The layout, as the table names it.
pub const SCHEMA: &str = "records keyed by id, a table per class, with secondary-index tables of composite keys: bags (base, private, slot) → composite and used_in (composite, base, private, slot), subs (parent, child), connections (from, slot) → to/kind/length, dates (build date, atomic id), titles → document id, parts_of (composite, atomic); a traversal step is a range scan of the part's connections and a lookup per target";

/// What a scan calls on every entry (key, value).
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), EngineError> + 'a;

/// Reads in one transaction.
pub trait KvRead {
    /// The value under `key` in `t`.
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError>;
    /// Calls `f` on every entry of `t` with `lo <= key < hi`, in key order.
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError>;
}

/// Writes in one transaction.
pub trait KvWrite: KvRead {
    /// Sets `key` to `value` in `t`.
    fn put(&mut self, t: T, key: &[u8], value: &[u8]) -> Result<(), EngineError>;
    /// Removes `key` from `t`.
    fn del(&mut self, t: T, key: &[u8]) -> Result<(), EngineError>;
}

/// A store: one closure per transaction.
pub trait KvStore {
    /// Runs `f` in a read transaction.
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn KvRead) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError>;
    /// Runs `f` in a write transaction and commits it durably (unless `f`
    /// fails, which aborts it).
    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn KvWrite) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError>;
    /// Releases the store.
    fn close(self: Box<Self>) -> Result<(), EngineError>;
}

fn k1(a: u32) -> [u8; 4] {
    a.to_be_bytes()
}

fn k2(a: u32, b: u32) -> [u8; 8] {
    let mut k = [0; 8];
    k[..4].copy_from_slice(&a.to_be_bytes());
    k[4..].copy_from_slice(&b.to_be_bytes());
    k
}

/// A build date as an order-preserving key.
fn date_key(d: i32) -> u32 {
    (d as u32) ^ (1 << 31)
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, EngineError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| EngineError::corrupt(format!("a record of {} bytes", b.len())))
}

/// A record: `kind` (10 bytes) then 32-bit fields, big-endian.
fn rec(kind: &[u8; 10], fields: &[u32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(10 + 4 * fields.len());
    v.extend_from_slice(kind);
    for f in fields {
        v.extend_from_slice(&f.to_be_bytes());
    }
    v
}

/// Field `i` (after the kind) of a record.
fn field(b: &[u8], i: usize) -> Result<u32, EngineError> {
    u32_at(b, 10 + 4 * i)
}

fn missing(what: &str, id: u32) -> EngineError {
    EngineError::bad_input(format!("{what} {id} is not in the database"))
}

fn need<R: KvRead + ?Sized>(r: &R, t: T, id: u32) -> Result<Vec<u8>, EngineError> {
    r.get(t, &k1(id))?.ok_or_else(|| missing(t.name(), id))
}

/// The second ids of the keys `(a, b, …)` of `t` with first id `a`.
fn children<R: KvRead + ?Sized>(r: &R, t: T, a: u32) -> Result<Vec<u32>, EngineError> {
    let mut out = Vec::new();
    r.scan(t, &k1(a), &k1(a + 1), &mut |k, _| {
        out.push(u32_at(k, 4)?);
        Ok(())
    })?;
    Ok(out)
}

/// Loads the generated database in one write transaction.
pub fn load<W: KvWrite + ?Sized>(w: &mut W, db: &Oo7Db) -> Result<(), EngineError> {
    let p = &db.params;
    w.put(T::Meta, b"document_size", &k1(p.document_size))?;
    for m in &db.modules {
        w.put(
            T::Modules,
            &k1(m.id),
            &rec(&m.kind, &[m.build_date as u32, m.design_root]),
        )?;
        w.put(
            T::Manuals,
            &k1(m.id),
            manual_text(m.id, p.manual_size).as_bytes(),
        )?;
    }
    for c in &db.complex {
        let up = c.super_assembly.unwrap_or(0);
        w.put(
            T::Complex,
            &k1(c.id),
            &rec(&c.kind, &[c.build_date as u32, c.module, c.level, up]),
        )?;
        for &s in &c.subs {
            w.put(T::Subs, &k2(c.id, s), &[])?;
        }
    }
    for b in &db.base {
        w.put(
            T::Base,
            &k1(b.id),
            &rec(&b.kind, &[b.build_date as u32, b.module, b.super_assembly]),
        )?;
        for (private, bag) in [(1u8, &b.components_priv), (0, &b.components_shar)] {
            for (slot, &c) in bag.iter().enumerate() {
                link(w, b.id, c, private, slot as u8)?;
            }
        }
    }
    let k = p.conn_per_atomic as usize;
    for c in &db.composites {
        let atomics = db.parts_of(c);
        let first = (c.first_atomic - 1) as usize * k;
        add_composite(
            w,
            c,
            atomics,
            &db.connections[first..first + atomics.len() * k],
            p.document_size,
        )?;
    }
    Ok(())
}

fn bag_key(base: u32, private: u8, slot: u8) -> [u8; 6] {
    let mut key = [0; 6];
    key[..4].copy_from_slice(&base.to_be_bytes());
    key[4] = private;
    key[5] = slot;
    key
}

fn used_key(c: u32, base: u32, private: u8, slot: u8) -> [u8; 10] {
    let mut key = [0; 10];
    key[..4].copy_from_slice(&c.to_be_bytes());
    key[4..].copy_from_slice(&bag_key(base, private, slot));
    key
}

fn link<W: KvWrite + ?Sized>(
    w: &mut W,
    base: u32,
    c: u32,
    private: u8,
    slot: u8,
) -> Result<(), EngineError> {
    w.put(T::Bags, &bag_key(base, private, slot), &k1(c))?;
    w.put(T::UsedIn, &used_key(c, base, private, slot), &[])
}

fn add_composite<W: KvWrite + ?Sized>(
    w: &mut W,
    c: &generate::CompositePart,
    atomics: &[generate::AtomicPart],
    conns: &[generate::Connection],
    document_size: u32,
) -> Result<(), EngineError> {
    let root = atomics.first().map_or(0, |a| a.id);
    w.put(
        T::Composite,
        &k1(c.id),
        &rec(&c.kind, &[c.build_date as u32, c.module, root]),
    )?;
    for a in atomics {
        w.put(
            T::Atomic,
            &k1(a.id),
            &rec(
                &a.kind,
                &[
                    a.build_date as u32,
                    a.x as u32,
                    a.y as u32,
                    a.doc_id,
                    a.part_of,
                ],
            ),
        )?;
        w.put(T::Dates, &k2(date_key(a.build_date), a.id), &[])?;
        w.put(T::PartsOf, &k2(c.id, a.id), &[])?;
    }
    let k = conns.len() / atomics.len().max(1);
    for (i, conn) in conns.iter().enumerate() {
        let mut key = [0; 5];
        key[..4].copy_from_slice(&conn.from.to_be_bytes());
        key[4] = (i % k.max(1)) as u8;
        w.put(
            T::Conns,
            &key,
            &rec(&conn.kind, &[conn.to, conn.length as u32]),
        )?;
    }
    let t = title(c.id);
    w.put(
        T::Docs,
        &k1(c.id),
        document_text(c.id, document_size).as_bytes(),
    )?;
    w.put(T::Titles, t.as_bytes(), &k1(c.id))
}

/// `(x, y, build_date, part_of)` of atomic part `id`.
fn atomic<R: KvRead + ?Sized>(r: &R, id: u32) -> Result<(i32, i32, i32, u32), EngineError> {
    let b = need(r, T::Atomic, id)?;
    Ok((
        field(&b, 1)? as i32,
        field(&b, 2)? as i32,
        field(&b, 0)? as i32,
        field(&b, 4)?,
    ))
}

/// The composite parts a traversal of module `m` visits.
fn composite_visits<R: KvRead + ?Sized>(r: &R, m: u32) -> Result<Vec<u32>, EngineError> {
    let root = field(&need(r, T::Modules, m)?, 1)?;
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(ca) = stack.pop() {
        let level = field(&need(r, T::Complex, ca)?, 2)?;
        let subs = children(r, T::Subs, ca)?;
        if level > 2 {
            stack.extend(subs.into_iter().rev());
        } else {
            for b in subs {
                r.scan(
                    T::Bags,
                    &bag_key(b, 1, 0),
                    &bag_key(b, 2, 0),
                    &mut |_, v| {
                        out.push(u32_at(v, 0)?);
                        Ok(())
                    },
                )?;
            }
        }
    }
    Ok(out)
}

/// Depth-first over composite part `c`'s graph from its root part.
fn graph_order<R: KvRead + ?Sized>(
    r: &R,
    c: u32,
    root_only: bool,
) -> Result<Vec<u32>, EngineError> {
    let root = field(&need(r, T::Composite, c)?, 2)?;
    if root_only {
        return Ok(vec![root]);
    }
    let mut seen: Vec<bool> = Vec::new();
    let mut order = Vec::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        let i = id.wrapping_sub(root) as usize;
        if seen.len() <= i {
            seen.resize(i + 1, false);
        }
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        order.push(id);
        let mut to = Vec::new();
        r.scan(T::Conns, &k1(id), &k1(id + 1), &mut |_, v| {
            to.push(field(v, 0)?);
            Ok(())
        })?;
        stack.extend(to.into_iter().rev());
    }
    Ok(order)
}

fn set_atomic<W: KvWrite + ?Sized>(
    w: &mut W,
    id: u32,
    f: impl FnOnce(&mut [u8]),
) -> Result<(), EngineError> {
    let mut b = need(w, T::Atomic, id)?;
    f(&mut b);
    w.put(T::Atomic, &k1(id), &b)
}

fn put_field(b: &mut [u8], i: usize, v: u32) {
    b[10 + 4 * i..14 + 4 * i].copy_from_slice(&v.to_be_bytes());
}

/// A traversal in `r` (read-only ones) or `w` (updating ones).
fn traverse<W: KvWrite + ?Sized>(w: &mut W, m: u32, t: Traversal) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    let mut updates = 0u64;
    for c in composite_visits(w, m)? {
        for (index, id) in graph_order(w, c, t.root_only())?.into_iter().enumerate() {
            let (x, y, date, _) = atomic(w, id)?;
            tally.atomic(id, x, y, date);
            for _ in 0..t.updates_at(index) {
                updates += 1;
                match t.update().map(|u| u.0) {
                    Some(Field::Xy) => set_atomic(w, id, |b| {
                        let x = u32::from_be_bytes([b[14], b[15], b[16], b[17]]);
                        let y = u32::from_be_bytes([b[18], b[19], b[20], b[21]]);
                        put_field(b, 1, x.wrapping_add(1));
                        put_field(b, 2, y.wrapping_add(1));
                    })?,
                    Some(Field::Date) => {
                        let old = atomic(w, id)?.2;
                        let new = toggle_date(old);
                        set_atomic(w, id, |b| put_field(b, 0, new as u32))?;
                        w.del(T::Dates, &k2(date_key(old), id))?;
                        w.put(T::Dates, &k2(date_key(new), id), &[])?;
                    }
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

fn read_traverse<R: KvRead + ?Sized>(r: &R, m: u32, t: Traversal) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for c in composite_visits(r, m)? {
        for id in graph_order(r, c, t.root_only())? {
            let (x, y, date, _) = atomic(r, id)?;
            tally.atomic(id, x, y, date);
        }
    }
    Ok(tally.finish())
}

fn documents<W: KvWrite + ?Sized>(w: &mut W, m: u32, update: bool) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for c in composite_visits(w, m)? {
        let text = need(w, T::Docs, c)?;
        if update {
            let text =
                String::from_utf8(text).map_err(|_| EngineError::corrupt("a document's text"))?;
            let new = toggle_document(&text)
                .ok_or_else(|| EngineError::corrupt(format!("document {c}'s text")))?;
            w.put(T::Docs, &k1(c), new.as_bytes())?;
            tally.object(Tag::Document, c, new.len() as i64);
        } else {
            let n = count_i(&text);
            tally.fold(Tag::Document, [i64::from(c), n as i64, 0]);
            tally.add(n);
        }
    }
    Ok(tally.finish())
}

fn users<R: KvRead + ?Sized>(r: &R, c: u32) -> Result<Vec<u32>, EngineError> {
    children(r, T::UsedIn, c)
}

fn up<R: KvRead + ?Sized>(r: &R, atomics: &[u32]) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for &id in atomics {
        let (x, y, date, c) = atomic(r, id)?;
        tally.atomic(id, x, y, date);
        let comp = need(r, T::Composite, c)?;
        tally.object(Tag::Composite, c, i64::from(field(&comp, 0)? as i32));
        for b in users(r, c)? {
            let base = need(r, T::Base, b)?;
            tally.object(Tag::Base, b, i64::from(field(&base, 0)? as i32));
            let mut ca = field(&base, 2)?;
            let mut module = 0;
            while ca != 0 {
                let rec = need(r, T::Complex, ca)?;
                tally.object(Tag::Complex, ca, i64::from(field(&rec, 0)? as i32));
                module = field(&rec, 1)?;
                ca = field(&rec, 3)?;
            }
            let m = need(r, T::Modules, module)?;
            tally.object(Tag::Module, module, i64::from(field(&m, 0)? as i32));
        }
    }
    Ok(tally.finish())
}

fn atomics_in<R: KvRead + ?Sized>(
    r: &R,
    ids: impl IntoIterator<Item = u32>,
) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for id in ids {
        let (x, y, date, _) = atomic(r, id)?;
        tally.atomic(id, x, y, date);
    }
    Ok(tally.finish())
}

fn date_range<R: KvRead + ?Sized>(r: &R, lo: i32, hi: i32) -> Result<Answer, EngineError> {
    let mut ids = Vec::new();
    let end = date_key(hi)
        .checked_add(1)
        .map_or(vec![0xff; 9], |e| k1(e).to_vec());
    r.scan(T::Dates, &k1(date_key(lo)), &end, &mut |k, _| {
        ids.push(u32_at(k, 4)?);
        Ok(())
    })?;
    atomics_in(r, ids)
}

fn by_title<R: KvRead + ?Sized>(r: &R, titles: &[String]) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for t in titles {
        let Some(d) = r.get(T::Titles, t.as_bytes())? else {
            continue;
        };
        let d = u32_at(&d, 0)?;
        for b in users(r, d)? {
            tally.object(Tag::Base, b, i64::from(d));
        }
    }
    Ok(tally.finish())
}

/// Every base assembly: (id, build date, super assembly, latest composite date).
fn base_latest<R: KvRead + ?Sized>(r: &R) -> Result<Vec<(u32, i32, u32, i32)>, EngineError> {
    let mut comp_date: HashMap<u32, i32> = HashMap::new();
    r.scan(T::Composite, &[], &[0xff; 5], &mut |k, v| {
        comp_date.insert(u32_at(k, 0)?, field(v, 0)? as i32);
        Ok(())
    })?;
    let mut latest: HashMap<u32, i32> = HashMap::new();
    r.scan(T::Bags, &[], &[0xff; 7], &mut |k, v| {
        let c = u32_at(v, 0)?;
        let d = comp_date
            .get(&c)
            .copied()
            .ok_or_else(|| missing("composite part", c))?;
        let e = latest.entry(u32_at(k, 0)?).or_insert(i32::MIN);
        *e = (*e).max(d);
        Ok(())
    })?;
    let mut out = Vec::new();
    r.scan(T::Base, &[], &[0xff; 5], &mut |k, v| {
        let id = u32_at(k, 0)?;
        out.push((
            id,
            field(v, 0)? as i32,
            field(v, 2)?,
            latest.get(&id).copied().unwrap_or(i32::MIN),
        ));
        Ok(())
    })?;
    Ok(out)
}

fn q5<R: KvRead + ?Sized>(r: &R) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for (id, date, _, latest) in base_latest(r)? {
        if latest > date {
            tally.object(Tag::Base, id, i64::from(date));
        }
    }
    Ok(tally.finish())
}

fn q6<R: KvRead + ?Sized>(r: &R) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    let mut latest: HashMap<u32, i32> = HashMap::new();
    for (id, date, up, l) in base_latest(r)? {
        if l > date {
            tally.object(Tag::Base, id, i64::from(date));
        }
        let e = latest.entry(up).or_insert(i32::MIN);
        *e = (*e).max(l);
    }
    let mut complex = Vec::new();
    r.scan(T::Complex, &[], &[0xff; 5], &mut |k, v| {
        complex.push((u32_at(k, 0)?, field(v, 0)? as i32, field(v, 3)?));
        Ok(())
    })?;
    // Children have higher ids than their parents.
    for (id, date, up) in complex.into_iter().rev() {
        let l = latest.get(&id).copied().unwrap_or(i32::MIN);
        if l > date {
            tally.object(Tag::Complex, id, i64::from(date));
        }
        if up != 0 {
            let e = latest.entry(up).or_insert(i32::MIN);
            *e = (*e).max(l);
        }
    }
    Ok(tally.finish())
}

fn scan<R: KvRead + ?Sized>(r: &R) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    r.scan(T::Atomic, &[], &[0xff; 5], &mut |k, v| {
        tally.atomic(
            u32_at(k, 0)?,
            field(v, 1)? as i32,
            field(v, 2)? as i32,
            field(v, 0)? as i32,
        );
        Ok(())
    })?;
    Ok(tally.finish())
}

fn join<R: KvRead + ?Sized>(r: &R) -> Result<Answer, EngineError> {
    let mut pairs = Vec::new();
    r.scan(T::Atomic, &[], &[0xff; 5], &mut |k, v| {
        pairs.push((u32_at(k, 0)?, field(v, 3)?));
        Ok(())
    })?;
    let mut tally = Tally::new();
    for (a, d) in pairs {
        if r.get(T::Docs, &k1(d))?.is_some() {
            tally.fold(Tag::Pair, [i64::from(a), i64::from(d), 0]);
            tally.add(1);
        }
    }
    Ok(tally.finish())
}

fn insert<W: KvWrite + ?Sized>(w: &mut W, parts: &[NewComposite]) -> Result<Answer, EngineError> {
    let size = u32_at(&w.get(T::Meta, b"document_size")?.unwrap_or_default(), 0)?;
    let mut tally = Tally::new();
    for nc in parts {
        let b = *nc.part.used_in_priv.first().ok_or_else(|| {
            EngineError::bad_input("a new composite part without a base assembly")
        })?;
        need(w, T::Base, b)?;
        if w.get(T::Composite, &k1(nc.part.id))?.is_some() {
            return Err(EngineError::bad_input(format!(
                "composite part {} exists",
                nc.part.id
            )));
        }
        add_composite(w, &nc.part, &nc.atomics, &nc.connections, size)?;
        let mut slot = 0u8;
        w.scan(
            T::Bags,
            &bag_key(b, 1, 0),
            &bag_key(b, 2, 0),
            &mut |k, _| {
                slot = k[5].saturating_add(1);
                Ok(())
            },
        )?;
        link(w, b, nc.part.id, 1, slot)?;
        tally.object(Tag::Composite, nc.part.id, i64::from(b));
    }
    Ok(tally.finish())
}

fn delete<W: KvWrite + ?Sized>(w: &mut W, ids: &[u32]) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for &c in ids {
        need(w, T::Composite, c)?;
        let mut used = Vec::new();
        w.scan(T::UsedIn, &k1(c), &k1(c + 1), &mut |k, _| {
            used.push(k.to_vec());
            Ok(())
        })?;
        for key in used {
            w.del(T::Bags, &key[4..])?;
            w.del(T::UsedIn, &key)?;
        }
        let parts = children(w, T::PartsOf, c)?;
        for &a in &parts {
            let date = atomic(w, a)?.2;
            let mut conns = Vec::new();
            w.scan(T::Conns, &k1(a), &k1(a + 1), &mut |k, _| {
                conns.push(k.to_vec());
                Ok(())
            })?;
            for key in conns {
                w.del(T::Conns, &key)?;
            }
            w.del(T::Dates, &k2(date_key(date), a))?;
            w.del(T::Atomic, &k1(a))?;
            w.del(T::PartsOf, &k2(c, a))?;
        }
        w.del(T::Titles, title(c).as_bytes())?;
        w.del(T::Docs, &k1(c))?;
        w.del(T::Composite, &k1(c))?;
        tally.object(Tag::Composite, c, parts.len() as i64);
    }
    Ok(tally.finish())
}

/// An OO7 engine over a key-value store.
pub struct KvEngine<S: KvStore> {
    pub store: Box<S>,
}

impl<S: KvStore> Oo7Engine for KvEngine<S> {
    fn traverse(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        if t.update().is_some() {
            self.store.write(&mut |w| traverse(w, m, t))
        } else {
            self.store.read(&mut |r| read_traverse(r, m, t))
        }
    }
    fn documents(&mut self, m: u32, update: bool) -> Result<Answer, EngineError> {
        if update {
            self.store.write(&mut |w| documents(w, m, true))
        } else {
            self.store.read(&mut |r| {
                let mut tally = Tally::new();
                for c in composite_visits(r, m)? {
                    let n = count_i(&need(r, T::Docs, c)?);
                    tally.fold(Tag::Document, [i64::from(c), n as i64, 0]);
                    tally.add(n);
                }
                Ok(tally.finish())
            })
        }
    }
    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| up(r, atomics))
    }
    fn manual(&mut self, m: u32, scan: bool) -> Result<Answer, EngineError> {
        self.store
            .read(&mut |r| Ok(manual_answer(m, &need(r, T::Manuals, m)?, scan)))
    }
    fn lookup(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| atomics_in(r, ids.iter().copied()))
    }
    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| date_range(r, lo, hi))
    }
    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| by_title(r, titles))
    }
    fn q5(&mut self) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| q5(r))
    }
    fn q6(&mut self) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| q6(r))
    }
    fn scan(&mut self) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| scan(r))
    }
    fn join(&mut self) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| join(r))
    }
    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        self.store.write(&mut |w| insert(w, parts))
    }
    fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        self.store.write(&mut |w| delete(w, ids))
    }
    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.store.close()
    }
}
