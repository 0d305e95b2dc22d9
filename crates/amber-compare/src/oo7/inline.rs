//! The inline layout of [`super::kv`] (`lmdb-inline`, `redb-inline`), OO1's
//! inline style ([`crate::inline`]) applied to OO7: every object one record
//! keyed by id holding its relationships, so that following one is one
//! lookup, where the normalised layout ([`super::normalised`]) scans an
//! index table and then looks the object up.
//!
//! Records (big-endian, [`super::kv::rec`]'s fields first):
//!
//! - complex assembly: `date, module, level, super`, then its
//!   sub-assemblies' ids;
//! - base assembly: `date, module, super, n`, then its private bag (`n`
//!   composite part ids) and its shared bag;
//! - composite part: `date, module, root part, n`, then its atomic parts
//!   (`n` ids) and the base assemblies using it, one per bag entry (its
//!   `used_in_priv` and `used_in_shar` together: OO7 only follows them
//!   both);
//! - atomic part: `date, x, y, doc_id, part_of`, then its connections,
//!   18 bytes each (`to`, kind, length), in slot order.
//!
//! **(choice)** Only the build-date and title indexes remain tables of their
//! own (`dates`, `titles`): they order all objects of a class, which no
//! one record can. An update rewrites the record it changes (LMDB and redb
//! write whole values); an insert rewrites the base assembly whose bag gets
//! the new part, a delete every base assembly that held it.

use amber_bench::oo7::NewComposite;
use amber_bench::oo7::engine::EngineError;
use amber_bench::oo7::generate::{AtomicPart, CompositePart, Connection, Kind, Oo7Db};

use super::kv::{
    KIND_LEN, KvRead, KvWrite, Layout, T, atomic_rec, delete_atomic, delete_composite_record,
    field, index_date, k1, load_modules, need, put_document, rec, u32_at,
};

/// See the module documentation.
#[derive(Clone, Copy, Debug)]
pub struct Inline;

/// The layout, as the report names it.
pub const SCHEMA: &str = "inline: one record per object keyed by id holding its relationships (an atomic part its connections, a complex assembly its sub-assemblies, a base assembly its two bags, a composite part its atomic parts and the base assemblies using it); build dates (date, atomic id) and titles → document id in index tables; a traversal step is one lookup";

/// The tables the layout uses.
const TABLES: [T; 10] = [
    T::Modules,
    T::Manuals,
    T::Complex,
    T::Base,
    T::Composite,
    T::Docs,
    T::Titles,
    T::Atomic,
    T::Dates,
    T::Meta,
];

/// Fields of a complex assembly, a base assembly and a composite part
/// before their id lists.
const COMPLEX_FIELDS: usize = 4;
const BASE_FIELDS: usize = 4;
const COMPOSITE_FIELDS: usize = 4;
/// Fields of an atomic part before its connections.
const ATOMIC_FIELDS: usize = 5;
/// Bytes of one connection in an atomic part's record.
const CONN_LEN: usize = 4 + KIND_LEN + 4;

/// A record with `fields` followed by the ids `lists` concatenated.
fn rec_with_ids(kind: &Kind, fields: &[u32], lists: &[&[u32]]) -> Vec<u8> {
    let mut v = rec(kind, fields);
    for id in lists.iter().flat_map(|l| l.iter()) {
        v.extend_from_slice(&id.to_be_bytes());
    }
    v
}

/// The ids after the first `fields` fields of a record.
fn ids_after(b: &[u8], fields: usize) -> Result<Vec<u32>, EngineError> {
    let at = KIND_LEN + 4 * fields;
    let tail = b.get(at..).unwrap_or_default();
    if b.len() < at || !tail.len().is_multiple_of(4) {
        return Err(EngineError::corrupt(format!(
            "an inline record of {} bytes",
            b.len()
        )));
    }
    Ok(tail
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A record's first `n` listed ids and the rest, `n` being field `count`.
fn split_ids(b: &[u8], fields: usize, count: usize) -> Result<(Vec<u32>, Vec<u32>), EngineError> {
    let mut first = ids_after(b, fields)?;
    let n = field(b, count)? as usize;
    if n > first.len() {
        return Err(EngineError::corrupt(format!(
            "an inline record listing {n} of {} ids",
            first.len()
        )));
    }
    let rest = first.split_off(n);
    Ok((first, rest))
}

/// The record of an atomic part with its connections.
fn atomic_record(a: &AtomicPart, conns: &[Connection]) -> Vec<u8> {
    let mut v = atomic_rec(a);
    for c in conns {
        v.extend_from_slice(&c.to.to_be_bytes());
        v.extend_from_slice(&c.kind);
        v.extend_from_slice(&c.length.to_be_bytes());
    }
    v
}

/// Stores a composite part used by `users`, its atomic parts with their
/// connections (`atomics.len() · K`, in slot order), the date index and its
/// document.
fn add_composite<W: KvWrite + ?Sized>(
    w: &mut W,
    c: &CompositePart,
    atomics: &[AtomicPart],
    conns: &[Connection],
    users: &[u32],
    document_size: u32,
) -> Result<(), EngineError> {
    let root = atomics.first().map_or(0, |a| a.id);
    let ids: Vec<u32> = atomics.iter().map(|a| a.id).collect();
    w.put(
        T::Composite,
        &k1(c.id),
        &rec_with_ids(
            &c.kind,
            &[c.build_date as u32, c.module, root, ids.len() as u32],
            &[&ids, users],
        ),
    )?;
    let k = conns.len() / atomics.len().max(1);
    for (i, a) in atomics.iter().enumerate() {
        w.put(
            T::Atomic,
            &k1(a.id),
            &atomic_record(a, &conns[i * k..(i + 1) * k]),
        )?;
        index_date(w, a)?;
    }
    put_document(w, c.id, document_size)
}

/// Rewrites base assembly `b`'s record with `bags` (private, shared).
fn put_base<W: KvWrite + ?Sized>(
    w: &mut W,
    b: u32,
    old: &[u8],
    private: &[u32],
    shared: &[u32],
) -> Result<(), EngineError> {
    let kind: Kind = old
        .get(..KIND_LEN)
        .and_then(|k| k.try_into().ok())
        .ok_or_else(|| EngineError::corrupt(format!("base assembly {b}'s record")))?;
    let fields = [
        field(old, 0)?,
        field(old, 1)?,
        field(old, 2)?,
        private.len() as u32,
    ];
    w.put(
        T::Base,
        &k1(b),
        &rec_with_ids(&kind, &fields, &[private, shared]),
    )
}

impl Layout for Inline {
    fn tables(&self) -> &'static [T] {
        &TABLES
    }

    fn schema(&self) -> &'static str {
        SCHEMA
    }

    fn load(&self, w: &mut dyn KvWrite, db: &Oo7Db) -> Result<(), EngineError> {
        let p = &db.params;
        load_modules(w, db)?;
        for c in &db.complex {
            let up = c.super_assembly.unwrap_or(0);
            w.put(
                T::Complex,
                &k1(c.id),
                &rec_with_ids(
                    &c.kind,
                    &[c.build_date as u32, c.module, c.level, up],
                    &[&c.subs],
                ),
            )?;
        }
        for b in &db.base {
            let fields = [
                b.build_date as u32,
                b.module,
                b.super_assembly,
                b.components_priv.len() as u32,
            ];
            w.put(
                T::Base,
                &k1(b.id),
                &rec_with_ids(&b.kind, &fields, &[&b.components_priv, &b.components_shar]),
            )?;
        }
        let k = p.conn_per_atomic as usize;
        for c in &db.composites {
            let atomics = db.parts_of(c);
            let first = (c.first_atomic - 1) as usize * k;
            let users: Vec<u32> = c
                .used_in_priv
                .iter()
                .chain(&c.used_in_shar)
                .copied()
                .collect();
            add_composite(
                w,
                c,
                atomics,
                &db.connections[first..first + atomics.len() * k],
                &users,
                p.document_size,
            )?;
        }
        Ok(())
    }

    fn subs(&self, r: &dyn KvRead, ca: u32) -> Result<(u32, Vec<u32>), EngineError> {
        let b = need(r, T::Complex, ca)?;
        Ok((field(&b, 2)?, ids_after(&b, COMPLEX_FIELDS)?))
    }

    fn private_bag(&self, r: &dyn KvRead, b: u32) -> Result<Vec<u32>, EngineError> {
        Ok(split_ids(&need(r, T::Base, b)?, BASE_FIELDS, 3)?.0)
    }

    fn node(&self, r: &dyn KvRead, id: u32) -> Result<(Vec<u8>, Vec<u32>), EngineError> {
        let b = need(r, T::Atomic, id)?;
        let at = KIND_LEN + 4 * ATOMIC_FIELDS;
        let conns = b.get(at..).unwrap_or_default();
        if b.len() < at || !conns.len().is_multiple_of(CONN_LEN) {
            return Err(EngineError::corrupt(format!(
                "atomic part {id}: an inline record of {} bytes",
                b.len()
            )));
        }
        let to = conns
            .chunks_exact(CONN_LEN)
            .map(|c| u32_at(c, 0))
            .collect::<Result<_, _>>()?;
        Ok((b, to))
    }

    fn users(&self, r: &dyn KvRead, c: u32) -> Result<Vec<u32>, EngineError> {
        Ok(split_ids(&need(r, T::Composite, c)?, COMPOSITE_FIELDS, 3)?.1)
    }

    fn bag_entries(
        &self,
        r: &dyn KvRead,
        f: &mut dyn FnMut(u32, u32) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        r.scan(T::Base, &[], &[0xff; 5], &mut |k, v| {
            let b = u32_at(k, 0)?;
            for c in ids_after(v, BASE_FIELDS)? {
                f(b, c)?;
            }
            Ok(())
        })
    }

    fn insert(
        &self,
        w: &mut dyn KvWrite,
        nc: &NewComposite,
        base: u32,
        document_size: u32,
    ) -> Result<(), EngineError> {
        add_composite(
            w,
            &nc.part,
            &nc.atomics,
            &nc.connections,
            &[base],
            document_size,
        )?;
        let old = need(w, T::Base, base)?;
        let (mut private, shared) = split_ids(&old, BASE_FIELDS, 3)?;
        private.push(nc.part.id);
        put_base(w, base, &old, &private, &shared)
    }

    fn delete(&self, w: &mut dyn KvWrite, c: u32) -> Result<u64, EngineError> {
        let (parts, mut users) = split_ids(&need(w, T::Composite, c)?, COMPOSITE_FIELDS, 3)?;
        users.sort_unstable();
        users.dedup();
        for b in users {
            let old = need(w, T::Base, b)?;
            let (mut private, mut shared) = split_ids(&old, BASE_FIELDS, 3)?;
            private.retain(|&x| x != c);
            shared.retain(|&x| x != c);
            put_base(w, b, &old, &private, &shared)?;
        }
        for &a in &parts {
            delete_atomic(w, a)?;
        }
        delete_composite_record(w, c)?;
        Ok(parts.len() as u64)
    }
}
