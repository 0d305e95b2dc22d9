//! Adding OO7 objects inside a transaction: the database build and the
//! structural insert share it.

use std::collections::HashMap;

use amber::{PIndex, PMultiIndex, PRef, PVec, Tx, View};

use super::schema::{
    AtomicPart, BaseAssembly, ComplexAssembly, CompositePart, Conn, Document, Manual, Module, Root,
};
use crate::oo7::engine::{EngineError, ResultExt};
use crate::oo7::generate::{self, Connection, Oo7Db, document_text, manual_text, title};

/// Allocates the empty root object.
pub(super) fn create_root(tx: &mut Tx<'_>, document_size: u32) -> Result<PRef<Root>, EngineError> {
    tx.alloc(Root {
        document_size: u64::from(document_size),
        modules: PVec::new(),
        base: PVec::new(),
        composites: PVec::new(),
        atomic_parts: PVec::new(),
        by_date: PMultiIndex::new(),
        by_title: PIndex::new(),
    })
    .ctx("allocating the root")
}

/// Adds composite part `part` with its atomic parts (ids following the
/// last one) and their connections (`conns`, in [`Oo7Db::connections`]'
/// order), indexed by id and build date; its document comes later
/// ([`add_document`]). Returns the composite part.
pub(super) fn add_graph(
    tx: &mut Tx<'_>,
    root: PRef<Root>,
    part: &generate::CompositePart,
    atomics: &[generate::AtomicPart],
    conns: &[Connection],
) -> Result<PRef<CompositePart>, EngineError> {
    let refs = add_atomics(tx, root, atomics)?;
    add_links(tx, root, part, &refs, conns)
}

/// Allocates atomic parts (ids following the last one), without their
/// connections, and indexes them by id and build date. The build
/// allocates a batch of composite parts' atomic parts together, then their
/// connections ([`add_links`]), so that atomic parts fill pages of their
/// own: an update of x and y dirties fewer pages. So the parts are all
/// allocated before any is indexed: an index that grows allocates (a
/// vector's new buffer, a tree's new node), and the allocator's current
/// page moves to where that went.
pub(super) fn add_atomics(
    tx: &mut Tx<'_>,
    root: PRef<Root>,
    atomics: &[generate::AtomicPart],
) -> Result<Vec<PRef<AtomicPart>>, EngineError> {
    let mut refs = Vec::with_capacity(atomics.len());
    let first = tx.get(root).atomic_parts.len() as u64 + 1;
    for (a, next) in atomics.iter().zip(first..) {
        if u64::from(a.id) != next {
            return Err(EngineError::bad_input(format!(
                "atomic part {} added where {next} was expected",
                a.id
            )));
        }
        let r = tx
            .alloc(AtomicPart {
                id: a.id,
                build_date: a.build_date,
                kind: a.kind,
                _pad: [0; 2],
                x: a.x,
                y: a.y,
                doc_id: a.doc_id,
                to: PVec::new(),
                from: PVec::new(),
                part_of: None,
            })
            .ctx("allocating an atomic part")?;
        refs.push(r);
    }
    for (a, &r) in atomics.iter().zip(&refs) {
        index_push(tx, root, r)?;
        tx.multi_insert(root, |r| &mut r.by_date, &a.build_date, r)
            .ctx("indexing a build date")?;
    }
    Ok(refs)
}

/// Links the atomic parts `refs` (from [`add_atomics`]) of composite part
/// `part` by their connections and allocates the composite part.
pub(super) fn add_links(
    tx: &mut Tx<'_>,
    root: PRef<Root>,
    part: &generate::CompositePart,
    refs: &[PRef<AtomicPart>],
    conns: &[Connection],
) -> Result<PRef<CompositePart>, EngineError> {
    let first = part.first_atomic;
    let local = |id: u32| -> Result<PRef<AtomicPart>, EngineError> {
        refs.get(id.wrapping_sub(first) as usize)
            .copied()
            .ok_or_else(|| {
                EngineError::bad_input(format!(
                    "connection to atomic part {id} leaves composite part {}",
                    part.id
                ))
            })
    };
    let mut from: HashMap<u32, Vec<PRef<AtomicPart>>> = HashMap::new();
    let k = conns.len() / refs.len().max(1);
    for (i, &r) in refs.iter().enumerate() {
        let out = conns
            .get(i * k..(i + 1) * k)
            .ok_or_else(|| EngineError::bad_input("too few connections"))?;
        let mut to = Vec::with_capacity(k);
        for c in out {
            to.push(Conn {
                to: local(c.to)?,
                kind: c.kind,
                _pad: [0; 2],
                length: c.length,
            });
            from.entry(c.to).or_default().push(r);
        }
        let v = tx.new_vec(to).ctx("allocating connections")?;
        tx.get_mut(r).to = v;
    }
    for (i, &r) in refs.iter().enumerate() {
        let incoming = from.remove(&(first + i as u32)).unwrap_or_default();
        let v = tx
            .new_vec(incoming)
            .ctx("allocating incoming connections")?;
        tx.get_mut(r).from = v;
    }
    let root_part = *refs
        .first()
        .ok_or_else(|| EngineError::bad_input("a composite part without atomic parts"))?;
    let parts = tx.new_vec(refs.iter().copied()).ctx("allocating parts")?;
    let c = tx
        .alloc(CompositePart {
            id: part.id,
            build_date: part.build_date,
            kind: part.kind,
            _pad: [0; 6],
            documentation: None,
            root_part,
            parts,
            used_in_priv: PVec::new(),
            used_in_shar: PVec::new(),
        })
        .ctx("allocating a composite part")?;
    for &r in refs {
        tx.get_mut(r).part_of = Some(c);
    }
    let have = tx.get(root).composites.len() as u32;
    if part.id <= have {
        return Err(EngineError::bad_input(format!(
            "composite part {} added after {have}",
            part.id
        )));
    }
    for _ in have + 1..part.id {
        tx.push(root, |r| &mut r.composites, None)
            .ctx("indexing a composite part")?;
    }
    tx.push(root, |r| &mut r.composites, Some(c))
        .ctx("indexing a composite part")?;
    Ok(c)
}

/// Allocates composite part `c`'s document (id `id`, text of `size − 1`
/// bytes) and indexes its title.
pub(super) fn add_document(
    tx: &mut Tx<'_>,
    root: PRef<Root>,
    c: PRef<CompositePart>,
    size: u32,
) -> Result<(), EngineError> {
    let id = tx.get(c).id;
    let t = title(id);
    let d = tx
        .alloc_with(|tx| {
            Ok(Document {
                id,
                _pad: 0,
                title: tx.new_string(&t)?,
                text: tx.new_string(&document_text(id, size))?,
                part: c,
            })
        })
        .ctx("allocating a document")?;
    tx.get_mut(c).documentation = Some(d);
    tx.index_insert(root, |r| &mut r.by_title, t.as_str(), d)
        .ctx("indexing a title")?;
    Ok(())
}

/// Appends atomic part `part` to the id index.
fn index_push(
    tx: &mut Tx<'_>,
    root: PRef<Root>,
    part: PRef<AtomicPart>,
) -> Result<(), EngineError> {
    tx.push(root, |r| &mut r.atomic_parts, Some(part))
        .ctx("indexing an atomic part")
}

/// The composite part with id `id`.
pub(super) fn composite(
    r: &impl View,
    root: PRef<Root>,
    id: u32,
) -> Result<PRef<CompositePart>, EngineError> {
    r.slice(&r.get(root).composites)
        .get((id as usize).wrapping_sub(1))
        .copied()
        .flatten()
        .ok_or_else(|| {
            EngineError::bad_input(format!("composite part {id} is not in the database"))
        })
}

/// Links base assembly `b` to composite part `c` in both directions.
pub(super) fn link(
    tx: &mut Tx<'_>,
    b: PRef<BaseAssembly>,
    c: PRef<CompositePart>,
    private: bool,
) -> Result<(), EngineError> {
    if private {
        tx.push(b, |b| &mut b.components_priv, c)
            .ctx("adding a private component")?;
        tx.push(c, |c| &mut c.used_in_priv, b)
            .ctx("adding a user")?;
    } else {
        tx.push(b, |b| &mut b.components_shar, c)
            .ctx("adding a shared component")?;
        tx.push(c, |c| &mut c.used_in_shar, b)
            .ctx("adding a user")?;
    }
    Ok(())
}

/// Adds module `m` of `db`: its assemblies (breadth-first, as the
/// generator numbers them), their bags, its manual; returns the module.
pub(super) fn add_module(
    tx: &mut Tx<'_>,
    root: PRef<Root>,
    db: &Oo7Db,
    m: &generate::Module,
) -> Result<PRef<Module>, EngineError> {
    let mut complex: HashMap<u32, PRef<ComplexAssembly>> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([m.design_root]);
    while let Some(id) = queue.pop_front() {
        let ca = db
            .complex
            .get((id - 1) as usize)
            .ok_or_else(|| EngineError::bad_input(format!("no complex assembly {id}")))?;
        let parent = ca.super_assembly.and_then(|p| complex.get(&p).copied());
        let r = tx
            .alloc(ComplexAssembly {
                id,
                build_date: ca.build_date,
                kind: ca.kind,
                _pad: [0; 2],
                level: ca.level,
                super_assembly: parent,
                module: None,
                sub_complex: PVec::new(),
                sub_base: PVec::new(),
            })
            .ctx("allocating a complex assembly")?;
        if let Some(p) = parent {
            tx.push(p, |p| &mut p.sub_complex, r)
                .ctx("adding a sub-assembly")?;
        }
        complex.insert(id, r);
        if ca.level > 2 {
            queue.extend(&ca.subs);
            continue;
        }
        for &b in &ca.subs {
            let ba = db
                .base
                .get((b - 1) as usize)
                .ok_or_else(|| EngineError::bad_input(format!("no base assembly {b}")))?;
            let br = tx
                .alloc(BaseAssembly {
                    id: ba.id,
                    build_date: ba.build_date,
                    kind: ba.kind,
                    _pad: [0; 6],
                    super_assembly: r,
                    components_priv: PVec::new(),
                    components_shar: PVec::new(),
                })
                .ctx("allocating a base assembly")?;
            tx.push(r, |p| &mut p.sub_base, br)
                .ctx("adding a base assembly")?;
            if tx.get(root).base.len() as u32 + 1 != ba.id {
                return Err(EngineError::bad_input(format!(
                    "base assembly {} out of order",
                    ba.id
                )));
            }
            tx.push(root, |r| &mut r.base, br)
                .ctx("indexing a base assembly")?;
            for &c in &ba.components_priv {
                let c = composite(tx, root, c)?;
                link(tx, br, c, true)?;
            }
            for &c in &ba.components_shar {
                let c = composite(tx, root, c)?;
                link(tx, br, c, false)?;
            }
        }
    }
    let design_root = *complex
        .get(&m.design_root)
        .ok_or_else(|| EngineError::bad_input("no design root"))?;
    let size = db.params.manual_size;
    let manual = tx
        .alloc_with(|tx| {
            Ok(Manual {
                id: m.id,
                _pad: 0,
                title: tx.new_string(&format!("Manual {:08}", m.id))?,
                text: tx.new_string(&manual_text(m.id, size))?,
            })
        })
        .ctx("allocating a manual")?;
    let module = tx
        .alloc(Module {
            id: m.id,
            build_date: m.build_date,
            kind: m.kind,
            _pad: [0; 6],
            manual,
            design_root,
        })
        .ctx("allocating a module")?;
    tx.get_mut(design_root).module = Some(module);
    tx.push(root, |r| &mut r.modules, module)
        .ctx("indexing a module")?;
    Ok(module)
}
