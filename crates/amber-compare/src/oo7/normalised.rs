//! The normalised layout of [`super::kv`] (`lmdb`, `redb`): records keyed
//! by id, one table per class, and every relationship in a secondary-index
//! table whose keys are composite (big-endian fields concatenated, the
//! value empty or one id), as a careful user of a key-value store indexes:
//! bags in `bags` ((base, private, slot) → composite) and `used_in`
//! ((composite, base, private, slot) → ()), sub-assemblies in `subs`
//! ((parent, child) → ()), connections in `conns` ((from, slot) → to, kind,
//! length), a composite part's atomic parts in `parts_of` ((composite,
//! atomic) → ()). A traversal step is a range scan of the part's
//! connections plus one lookup of the part.
//!
//! **(choice)** Composite keys in plain tables rather than LMDB's
//! `DUP_SORT` or redb's multimaps: a bag may hold the same composite part
//! twice, which a multimap's set of values cannot; the slot in the key
//! keeps both.

use amber_bench::oo7::NewComposite;
use amber_bench::oo7::engine::EngineError;
use amber_bench::oo7::generate::{self, Oo7Db};

use super::kv::{
    KvRead, KvWrite, Layout, T, atomic_rec, delete_atomic, delete_composite_record, field,
    index_date, k1, k2, load_modules, need, put_document, rec, u32_at,
};

/// See the module documentation.
#[derive(Clone, Copy, Debug)]
pub struct Normalised;

/// The layout, as the report names it.
pub const SCHEMA: &str = "records keyed by id, a table per class, with secondary-index tables of composite keys: bags (base, private, slot) → composite and used_in (composite, base, private, slot), subs (parent, child), connections (from, slot) → to/kind/length, dates (build date, atomic id), titles → document id, parts_of (composite, atomic); a traversal step is a range scan of the part's connections and a lookup per target";

/// The second ids of the keys `(a, b, …)` of `t` with first id `a`.
fn children<R: KvRead + ?Sized>(r: &R, t: T, a: u32) -> Result<Vec<u32>, EngineError> {
    let mut out = Vec::new();
    r.scan(t, &k1(a), &k1(a + 1), &mut |k, _| {
        out.push(u32_at(k, 4)?);
        Ok(())
    })?;
    Ok(out)
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
        w.put(T::Atomic, &k1(a.id), &atomic_rec(a))?;
        index_date(w, a)?;
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
    put_document(w, c.id, document_size)
}

impl Layout for Normalised {
    fn tables(&self) -> &'static [T] {
        &T::ALL
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

    fn subs(&self, r: &dyn KvRead, ca: u32) -> Result<(u32, Vec<u32>), EngineError> {
        let level = field(&need(r, T::Complex, ca)?, 2)?;
        Ok((level, children(r, T::Subs, ca)?))
    }

    fn private_bag(&self, r: &dyn KvRead, b: u32) -> Result<Vec<u32>, EngineError> {
        let mut out = Vec::new();
        r.scan(
            T::Bags,
            &bag_key(b, 1, 0),
            &bag_key(b, 2, 0),
            &mut |_, v| {
                out.push(u32_at(v, 0)?);
                Ok(())
            },
        )?;
        Ok(out)
    }

    fn node(&self, r: &dyn KvRead, id: u32) -> Result<(Vec<u8>, Vec<u32>), EngineError> {
        let mut to = Vec::new();
        r.scan(T::Conns, &k1(id), &k1(id + 1), &mut |_, v| {
            to.push(field(v, 0)?);
            Ok(())
        })?;
        Ok((need(r, T::Atomic, id)?, to))
    }

    fn users(&self, r: &dyn KvRead, c: u32) -> Result<Vec<u32>, EngineError> {
        children(r, T::UsedIn, c)
    }

    fn bag_entries(
        &self,
        r: &dyn KvRead,
        f: &mut dyn FnMut(u32, u32) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        r.scan(T::Bags, &[], &[0xff; 7], &mut |k, v| {
            f(u32_at(k, 0)?, u32_at(v, 0)?)
        })
    }

    fn insert(
        &self,
        w: &mut dyn KvWrite,
        nc: &NewComposite,
        base: u32,
        document_size: u32,
    ) -> Result<(), EngineError> {
        add_composite(w, &nc.part, &nc.atomics, &nc.connections, document_size)?;
        let mut slot = 0u8;
        w.scan(
            T::Bags,
            &bag_key(base, 1, 0),
            &bag_key(base, 2, 0),
            &mut |k, _| {
                slot = k[5].saturating_add(1);
                Ok(())
            },
        )?;
        link(w, base, nc.part.id, 1, slot)
    }

    fn delete(&self, w: &mut dyn KvWrite, c: u32) -> Result<u64, EngineError> {
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
            let mut conns = Vec::new();
            w.scan(T::Conns, &k1(a), &k1(a + 1), &mut |k, _| {
                conns.push(k.to_vec());
                Ok(())
            })?;
            for key in conns {
                w.del(T::Conns, &key)?;
            }
            delete_atomic(w, a)?;
            w.del(T::PartsOf, &k2(c, a))?;
        }
        delete_composite_record(w, c)?;
        Ok(parts.len() as u64)
    }
}
