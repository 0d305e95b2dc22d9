//! OO7 on an ordered key-value store, written once for `redb` and `lmdb`
//! (each adapts its own transactions to [`KvRead`] / [`KvWrite`]) and for
//! two layouts of the objects in it (each a [`Layout`]):
//!
//! - [`super::normalised`] (`lmdb`, `redb`): records keyed by id, one table
//!   per class, every relationship in a secondary-index table of composite
//!   keys; a traversal step is a range scan of the part's connections plus
//!   one lookup of the part;
//! - [`super::inline`] (`lmdb-inline`, `redb-inline`): the same records
//!   with their relationships serialised in them (an atomic part with its
//!   connections, an assembly with its bags or sub-assemblies, a composite
//!   part with its atomic parts and the assemblies using it); a traversal
//!   step is one lookup.
//!
//! **(choice)** Both keep the build-date and title indexes as tables of
//! their own (`dates`: (date, atomic id) → (), `titles`: title → document
//! id), as a user of either store would index. Records are fixed-layout
//! byte strings beginning with the class's fields ([`rec`]), so every
//! operation reads a field at the same offset in both layouts. Every
//! operation is one transaction (a read transaction, or one durable write
//! transaction).

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

/// The key of id `a`.
pub(super) fn k1(a: u32) -> [u8; 4] {
    a.to_be_bytes()
}

/// The key of the pair `(a, b)`.
pub(super) fn k2(a: u32, b: u32) -> [u8; 8] {
    let mut k = [0; 8];
    k[..4].copy_from_slice(&a.to_be_bytes());
    k[4..].copy_from_slice(&b.to_be_bytes());
    k
}

/// A build date as an order-preserving key.
pub(super) fn date_key(d: i32) -> u32 {
    (d as u32) ^ (1 << 31)
}

/// The big-endian `u32` at `at`.
pub(super) fn u32_at(b: &[u8], at: usize) -> Result<u32, EngineError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| EngineError::corrupt(format!("a record of {} bytes", b.len())))
}

/// Bytes before a record's first field: the kind.
pub(super) const KIND_LEN: usize = 10;

/// A record: `kind` (10 bytes) then 32-bit fields, big-endian.
pub(super) fn rec(kind: &[u8; KIND_LEN], fields: &[u32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(KIND_LEN + 4 * fields.len());
    v.extend_from_slice(kind);
    for f in fields {
        v.extend_from_slice(&f.to_be_bytes());
    }
    v
}

/// Field `i` (after the kind) of a record.
pub(super) fn field(b: &[u8], i: usize) -> Result<u32, EngineError> {
    u32_at(b, KIND_LEN + 4 * i)
}

/// The error for an id that is not in `what`.
pub(super) fn missing(what: &str, id: u32) -> EngineError {
    EngineError::bad_input(format!("{what} {id} is not in the database"))
}

/// The record of `id` in `t`, which must exist.
pub(super) fn need<R: KvRead + ?Sized>(r: &R, t: T, id: u32) -> Result<Vec<u8>, EngineError> {
    r.get(t, &k1(id))?.ok_or_else(|| missing(t.name(), id))
}

/// The fields of an atomic part's record, in order (`part_of` last): both
/// layouts begin an atomic part's record with them.
pub(super) fn atomic_rec(a: &generate::AtomicPart) -> Vec<u8> {
    rec(
        &a.kind,
        &[
            a.build_date as u32,
            a.x as u32,
            a.y as u32,
            a.doc_id,
            a.part_of,
        ],
    )
}

/// Adds an atomic part's entry to the build-date index.
pub(super) fn index_date<W: KvWrite + ?Sized>(
    w: &mut W,
    a: &generate::AtomicPart,
) -> Result<(), EngineError> {
    w.put(T::Dates, &k2(date_key(a.build_date), a.id), &[])
}

/// Stores composite part `c`'s document and its title's index entry.
pub(super) fn put_document<W: KvWrite + ?Sized>(
    w: &mut W,
    c: u32,
    document_size: u32,
) -> Result<(), EngineError> {
    w.put(T::Docs, &k1(c), document_text(c, document_size).as_bytes())?;
    w.put(T::Titles, title(c).as_bytes(), &k1(c))
}

/// Removes an atomic part's record and its build-date index entry.
pub(super) fn delete_atomic<W: KvWrite + ?Sized>(w: &mut W, a: u32) -> Result<(), EngineError> {
    let date = field(&need(w, T::Atomic, a)?, 0)? as i32;
    w.del(T::Dates, &k2(date_key(date), a))?;
    w.del(T::Atomic, &k1(a))
}

/// Removes composite part `c`'s record, document and title entry.
pub(super) fn delete_composite_record<W: KvWrite + ?Sized>(
    w: &mut W,
    c: u32,
) -> Result<(), EngineError> {
    w.del(T::Titles, title(c).as_bytes())?;
    w.del(T::Docs, &k1(c))?;
    w.del(T::Composite, &k1(c))
}

/// The modules and their manuals (the same records in both layouts), and
/// the document size the insert needs.
pub(super) fn load_modules<W: KvWrite + ?Sized>(w: &mut W, db: &Oo7Db) -> Result<(), EngineError> {
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
    Ok(())
}

/// Where the objects' relationships live: the part of OO7 that differs
/// between [`super::normalised`] and [`super::inline`]. Records begin with
/// the class's fields in both (modules `date, design root`; complex
/// assemblies `date, module, level, super`; base assemblies `date, module,
/// super`; composite parts `date, module, root part`; atomic parts
/// [`atomic_rec`]).
pub trait Layout: Sync {
    /// The tables the layout uses.
    fn tables(&self) -> &'static [T];
    /// The layout, as the report names it.
    fn schema(&self) -> &'static str;
    /// Loads the generated database (in one write transaction).
    fn load(&self, w: &mut dyn KvWrite, db: &Oo7Db) -> Result<(), EngineError>;
    /// Complex assembly `ca`'s level and sub-assemblies, in order.
    fn subs(&self, r: &dyn KvRead, ca: u32) -> Result<(u32, Vec<u32>), EngineError>;
    /// Base assembly `b`'s private bag, in order.
    fn private_bag(&self, r: &dyn KvRead, b: u32) -> Result<Vec<u32>, EngineError>;
    /// Atomic part `id`'s record ([`atomic_rec`]'s fields first) and the
    /// targets of its connections in slot order.
    fn node(&self, r: &dyn KvRead, id: u32) -> Result<(Vec<u8>, Vec<u32>), EngineError>;
    /// The base assemblies using composite part `c`, one per bag entry.
    fn users(&self, r: &dyn KvRead, c: u32) -> Result<Vec<u32>, EngineError>;
    /// Calls `f(base, composite)` on every bag entry, private or shared.
    fn bag_entries(
        &self,
        r: &dyn KvRead,
        f: &mut dyn FnMut(u32, u32) -> Result<(), EngineError>,
    ) -> Result<(), EngineError>;
    /// Adds a new composite part with its atomic parts, connections and
    /// document to the private bag of base assembly `base` (which exists),
    /// every index updated.
    fn insert(
        &self,
        w: &mut dyn KvWrite,
        nc: &NewComposite,
        base: u32,
        document_size: u32,
    ) -> Result<(), EngineError>;
    /// Deletes composite part `c` (which exists) with its atomic parts,
    /// connections and document, unlinked from every bag and index; returns
    /// how many atomic parts it had.
    fn delete(&self, w: &mut dyn KvWrite, c: u32) -> Result<u64, EngineError>;
}

/// `(x, y, build_date, part_of)` of an atomic part's record.
fn atomic_fields(b: &[u8]) -> Result<(i32, i32, i32, u32), EngineError> {
    Ok((
        field(b, 1)? as i32,
        field(b, 2)? as i32,
        field(b, 0)? as i32,
        field(b, 4)?,
    ))
}

/// `(x, y, build_date, part_of)` of atomic part `id`.
fn atomic<R: KvRead + ?Sized>(r: &R, id: u32) -> Result<(i32, i32, i32, u32), EngineError> {
    atomic_fields(&need(r, T::Atomic, id)?)
}

/// The composite parts a traversal of module `m` visits.
fn composite_visits(l: &dyn Layout, r: &dyn KvRead, m: u32) -> Result<Vec<u32>, EngineError> {
    let root = field(&need(r, T::Modules, m)?, 1)?;
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(ca) = stack.pop() {
        let (level, subs) = l.subs(r, ca)?;
        if level > 2 {
            stack.extend(subs.into_iter().rev());
        } else {
            for b in subs {
                out.extend(l.private_bag(r, b)?);
            }
        }
    }
    Ok(out)
}

/// Depth-first over composite part `c`'s graph from its root part: every
/// part reached, once, with its record as read when reached.
fn graph_order(
    l: &dyn Layout,
    r: &dyn KvRead,
    c: u32,
    root_only: bool,
) -> Result<Vec<(u32, Vec<u8>)>, EngineError> {
    let root = field(&need(r, T::Composite, c)?, 2)?;
    if root_only {
        return Ok(vec![(root, need(r, T::Atomic, root)?)]);
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
        let (record, to) = l.node(r, id)?;
        order.push((id, record));
        stack.extend(to.into_iter().rev());
    }
    Ok(order)
}

fn set_atomic<W: KvWrite + ?Sized>(
    w: &mut W,
    id: u32,
    f: impl FnOnce(&mut [u8]) -> Result<(), EngineError>,
) -> Result<(), EngineError> {
    let mut b = need(w, T::Atomic, id)?;
    f(&mut b)?;
    w.put(T::Atomic, &k1(id), &b)
}

/// Sets field `i` (after the kind) of a record.
fn put_field(b: &mut [u8], i: usize, v: u32) -> Result<(), EngineError> {
    let at = KIND_LEN + 4 * i;
    let len = b.len();
    b.get_mut(at..at + 4)
        .ok_or_else(|| EngineError::corrupt(format!("a record of {len} bytes")))?
        .copy_from_slice(&v.to_be_bytes());
    Ok(())
}

/// An updating traversal, in one write transaction.
fn traverse(
    l: &dyn Layout,
    w: &mut dyn KvWrite,
    m: u32,
    t: Traversal,
) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    let mut updates = 0u64;
    for c in composite_visits(l, w, m)? {
        for (index, (id, record)) in graph_order(l, w, c, t.root_only())?.into_iter().enumerate() {
            let (x, y, date, _) = atomic_fields(&record)?;
            tally.atomic(id, x, y, date);
            for _ in 0..t.updates_at(index) {
                updates += 1;
                match t.update().map(|u| u.0) {
                    Some(Field::Xy) => set_atomic(w, id, |b| {
                        put_field(b, 1, field(b, 1)?.wrapping_add(1))?;
                        put_field(b, 2, field(b, 2)?.wrapping_add(1))
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
    Ok(tally.finish_with(updates))
}

/// A read-only traversal (T1, T6), in one read transaction.
fn read_traverse(
    l: &dyn Layout,
    r: &dyn KvRead,
    m: u32,
    t: Traversal,
) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for c in composite_visits(l, r, m)? {
        for (id, record) in graph_order(l, r, c, t.root_only())? {
            let (x, y, date, _) = atomic_fields(&record)?;
            tally.atomic(id, x, y, date);
        }
    }
    Ok(tally.finish())
}

/// T5: every visited document's prefix toggled, in one write transaction.
fn update_documents(l: &dyn Layout, w: &mut dyn KvWrite, m: u32) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for c in composite_visits(l, w, m)? {
        let text = String::from_utf8(need(w, T::Docs, c)?)
            .map_err(|_| EngineError::corrupt("a document's text"))?;
        let new = toggle_document(&text)
            .ok_or_else(|| EngineError::corrupt(format!("document {c}'s text")))?;
        w.put(T::Docs, &k1(c), new.as_bytes())?;
        tally.object(Tag::Document, c, new.len() as i64);
    }
    Ok(tally.finish())
}

/// T4: the `'I'`s of every visited document.
fn count_documents(l: &dyn Layout, r: &dyn KvRead, m: u32) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for c in composite_visits(l, r, m)? {
        let n = count_i(&need(r, T::Docs, c)?);
        tally.fold(Tag::Document, [i64::from(c), n as i64, 0]);
        tally.add(n);
    }
    Ok(tally.finish())
}

fn up(l: &dyn Layout, r: &dyn KvRead, atomics: &[u32]) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for &id in atomics {
        let (x, y, date, c) = atomic(r, id)?;
        tally.atomic(id, x, y, date);
        let comp = need(r, T::Composite, c)?;
        tally.object(Tag::Composite, c, i64::from(field(&comp, 0)? as i32));
        for b in l.users(r, c)? {
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

fn by_title(l: &dyn Layout, r: &dyn KvRead, titles: &[String]) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for t in titles {
        let Some(d) = r.get(T::Titles, t.as_bytes())? else {
            continue;
        };
        let d = u32_at(&d, 0)?;
        for b in l.users(r, d)? {
            tally.object(Tag::Base, b, i64::from(d));
        }
    }
    Ok(tally.finish())
}

/// Every base assembly: (id, build date, super assembly, latest composite date).
fn base_latest(l: &dyn Layout, r: &dyn KvRead) -> Result<Vec<(u32, i32, u32, i32)>, EngineError> {
    let mut comp_date: HashMap<u32, i32> = HashMap::new();
    r.scan(T::Composite, &[], &[0xff; 5], &mut |k, v| {
        comp_date.insert(u32_at(k, 0)?, field(v, 0)? as i32);
        Ok(())
    })?;
    let mut latest: HashMap<u32, i32> = HashMap::new();
    l.bag_entries(r, &mut |b, c| {
        let d = comp_date
            .get(&c)
            .copied()
            .ok_or_else(|| missing("composite part", c))?;
        let e = latest.entry(b).or_insert(i32::MIN);
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

fn q5(l: &dyn Layout, r: &dyn KvRead) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for (id, date, _, latest) in base_latest(l, r)? {
        if latest > date {
            tally.object(Tag::Base, id, i64::from(date));
        }
    }
    Ok(tally.finish())
}

fn q6(l: &dyn Layout, r: &dyn KvRead) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    let mut latest: HashMap<u32, i32> = HashMap::new();
    for (id, date, up, l) in base_latest(l, r)? {
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
        let (x, y, date, _) = atomic_fields(v)?;
        tally.atomic(u32_at(k, 0)?, x, y, date);
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

fn insert(
    l: &dyn Layout,
    w: &mut dyn KvWrite,
    parts: &[NewComposite],
) -> Result<Answer, EngineError> {
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
        l.insert(w, nc, b, size)?;
        tally.object(Tag::Composite, nc.part.id, i64::from(b));
    }
    Ok(tally.finish())
}

fn delete(l: &dyn Layout, w: &mut dyn KvWrite, ids: &[u32]) -> Result<Answer, EngineError> {
    let mut tally = Tally::new();
    for &c in ids {
        need(w, T::Composite, c)?;
        let parts = l.delete(w, c)?;
        tally.object(Tag::Composite, c, parts as i64);
    }
    Ok(tally.finish())
}

/// An OO7 engine over a key-value store in one layout.
pub struct KvEngine<S: KvStore> {
    pub store: Box<S>,
    pub layout: &'static dyn Layout,
}

impl<S: KvStore> Oo7Engine for KvEngine<S> {
    fn traverse(&mut self, m: u32, t: Traversal) -> Result<Answer, EngineError> {
        let l = self.layout;
        if t.update().is_some() {
            self.store.write(&mut |w| traverse(l, w, m, t))
        } else {
            self.store.read(&mut |r| read_traverse(l, r, m, t))
        }
    }
    fn documents(&mut self, m: u32, update: bool) -> Result<Answer, EngineError> {
        let l = self.layout;
        if update {
            self.store.write(&mut |w| update_documents(l, w, m))
        } else {
            self.store.read(&mut |r| count_documents(l, r, m))
        }
    }
    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        let l = self.layout;
        self.store.read(&mut |r| up(l, r, atomics))
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
        let l = self.layout;
        self.store.read(&mut |r| by_title(l, r, titles))
    }
    fn q5(&mut self) -> Result<Answer, EngineError> {
        let l = self.layout;
        self.store.read(&mut |r| q5(l, r))
    }
    fn q6(&mut self) -> Result<Answer, EngineError> {
        let l = self.layout;
        self.store.read(&mut |r| q6(l, r))
    }
    fn scan(&mut self) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| scan(r))
    }
    fn join(&mut self) -> Result<Answer, EngineError> {
        self.store.read(&mut |r| join(r))
    }
    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        let l = self.layout;
        self.store.write(&mut |w| insert(l, w, parts))
    }
    fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        let l = self.layout;
        self.store.write(&mut |w| delete(l, w, ids))
    }
    fn close(self: Box<Self>) -> Result<(), EngineError> {
        self.store.close()
    }
}
