//! The OO7 generator: one database, drawn once from the seed, that every
//! engine loads (the Wisconsin generator's rules, as BENCHMARKS.md gives
//! them).
//!
//! Ids are dense and start at 1 in every class. Module `m`'s complex
//! assemblies are numbered breadth-first from its design root, its base
//! assemblies in the order their parents list them, its composite parts
//! `(m − 1)·C + 1 ..= m·C`; the atomic parts of composite part `c` are
//! `(c − 1)·A + 1 ..= c·A`, the first being its root; atomic part `a`'s
//! outgoing connections are `(a − 1)·K ..` in slot order. Document `c`
//! belongs to composite part `c`; manual `m` to module `m`.
//!
//! Every random draw comes from a stream of [`Rng::stream`] named by what it
//! draws ([`Stream`]), so adding a draw to one class does not move the
//! others.

use serde::{Deserialize, Serialize};

use super::params::Params;
use crate::rng::Rng;

/// An object's `kind`: `"type000"`..`"type009"`, NUL-padded to 10 bytes.
pub type Kind = [u8; 10];

/// Kind number `k` (0..10).
pub fn kind_value(k: u64) -> Kind {
    let mut kind = [0u8; 10];
    kind[..6].copy_from_slice(b"type00");
    kind[6] = b'0' + (k % 10) as u8;
    kind
}

/// Build dates of modules, assemblies and atomic parts: uniform in this range.
pub const DATE_MIN: i32 = 1_000;
/// See [`DATE_MIN`].
pub const DATE_MAX: i32 = 1_999;
/// Young composite parts (id a multiple of [`YOUNG_COMP_FRAC`]): dates in
/// `[2000, 2999]`; the others `[0, 999]`.
pub const YOUNG_COMP_FRAC: u32 = 10;
/// `x`, `y` and `length` are uniform in `0..=COORD_MAX`.
pub const COORD_MAX: i32 = 99_999;

/// A module: its design root and its manual (text from [`manual_text`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub id: u32,
    pub kind: Kind,
    pub build_date: i32,
    /// The complex assembly at the top of the hierarchy.
    pub design_root: u32,
}

/// A complex assembly: its sub-assemblies are complex ones above level 2,
/// base assemblies at level 2.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComplexAssembly {
    pub id: u32,
    pub kind: Kind,
    pub build_date: i32,
    pub module: u32,
    /// Level in the hierarchy: `assm_levels` for the design root, 2 for
    /// the parents of base assemblies.
    pub level: u32,
    pub super_assembly: Option<u32>,
    /// Complex assembly ids (level > 2) or base assembly ids (level 2).
    pub subs: Vec<u32>,
}

/// A base assembly and its two bags of composite parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseAssembly {
    pub id: u32,
    pub kind: Kind,
    pub build_date: i32,
    pub module: u32,
    pub super_assembly: u32,
    /// Composite parts of the same module, drawn with replacement.
    pub components_priv: Vec<u32>,
    /// Composite parts of any module, drawn with replacement.
    pub components_shar: Vec<u32>,
}

/// A composite part: its atomic parts are `first_atomic .. first_atomic +
/// atomic_per_comp`, the first being its root; its document has its id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompositePart {
    pub id: u32,
    pub kind: Kind,
    pub build_date: i32,
    pub module: u32,
    pub first_atomic: u32,
    /// Base assemblies listing it privately, one entry per bag entry.
    pub used_in_priv: Vec<u32>,
    /// Base assemblies listing it as shared, one entry per bag entry.
    pub used_in_shar: Vec<u32>,
}

/// An atomic part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AtomicPart {
    pub id: u32,
    pub kind: Kind,
    pub build_date: i32,
    pub x: i32,
    pub y: i32,
    /// A composite part id (uniform over the database's composite parts):
    /// Q8 joins it to the document with that id.
    pub doc_id: u32,
    pub part_of: u32,
}

/// A connection between two atomic parts of one composite part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub from: u32,
    pub to: u32,
    pub kind: Kind,
    pub length: i32,
}

/// The generated database: every class in id order (`v[id − 1]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Oo7Db {
    pub params: Params,
    pub modules: Vec<Module>,
    pub complex: Vec<ComplexAssembly>,
    pub base: Vec<BaseAssembly>,
    pub composites: Vec<CompositePart>,
    pub atomics: Vec<AtomicPart>,
    /// Atomic part `a`'s outgoing connections are
    /// `connections[(a − 1)·K .. a·K]`, in slot order.
    pub connections: Vec<Connection>,
}

/// A new composite part for the structural insert, with everything it owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewComposite {
    /// `used_in_priv` holds the one base assembly it is added to.
    pub part: CompositePart,
    pub atomics: Vec<AtomicPart>,
    /// `atomics.len() · K` connections, as [`Oo7Db::connections`] orders them.
    pub connections: Vec<Connection>,
}

/// The named random streams (see the module documentation).
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub enum Stream {
    Modules = 700,
    Assemblies = 701,
    Composites = 702,
    Atomics = 703,
    Connections = 704,
    Bags = 705,
    Insert = 706,
}

/// Document `id`'s title: `"Composite Part %08d"`.
pub fn title(id: u32) -> String {
    format!("Composite Part {id:08}")
}

/// `line` repeated to `size − 1` bytes (the C generator's NUL-terminated
/// buffer of `size` bytes).
fn repeat_to(line: &str, size: u32) -> String {
    line.chars()
        .cycle()
        .take(size.saturating_sub(1) as usize)
        .collect()
}

/// Document `id`'s text.
pub fn document_text(id: u32, size: u32) -> String {
    repeat_to(
        &format!("I am the documentation for composite part #{id:08}.\n"),
        size,
    )
}

/// Module `id`'s manual.
pub fn manual_text(id: u32, size: u32) -> String {
    repeat_to(&format!("I am the manual for module #{id:08}.\n"), size)
}

fn date(rng: &mut Rng, lo: i32, hi: i32) -> i32 {
    rng.range_i64(i64::from(lo), i64::from(hi)) as i32
}

fn coord(rng: &mut Rng) -> i32 {
    date(rng, 0, COORD_MAX)
}

fn kind(rng: &mut Rng) -> Kind {
    kind_value(rng.below(10))
}

/// Composite part `id`'s build date: young parts in `[2000, 2999]`.
fn comp_date(rng: &mut Rng, id: u32) -> i32 {
    if id.is_multiple_of(YOUNG_COMP_FRAC) {
        date(rng, 2_000, 2_999)
    } else {
        date(rng, 0, 999)
    }
}

/// The atomic parts and connections of composite part `comp`, whose first
/// atomic part is `first`, with documents `1..=doc_ids` to point at.
fn comp_graph(
    params: &Params,
    atoms: &mut Rng,
    conns: &mut Rng,
    comp: u32,
    first: u32,
    doc_ids: u32,
) -> (Vec<AtomicPart>, Vec<Connection>) {
    let n = params.atomic_per_comp;
    let atomics: Vec<AtomicPart> = (0..n)
        .map(|i| AtomicPart {
            id: first + i,
            kind: kind(atoms),
            build_date: date(atoms, DATE_MIN, DATE_MAX),
            x: coord(atoms),
            y: coord(atoms),
            doc_id: 1 + atoms.below(u64::from(doc_ids)) as u32,
            part_of: comp,
        })
        .collect();
    let mut connections = Vec::with_capacity((n * params.conn_per_atomic) as usize);
    for i in 0..n {
        for slot in 0..params.conn_per_atomic {
            // Connection 0 closes the ring; the others go anywhere in the
            // composite part (the part itself included, as in the C code).
            let to = if slot == 0 {
                (i + 1) % n
            } else {
                conns.below(u64::from(n)) as u32
            };
            connections.push(Connection {
                from: first + i,
                to: first + to,
                kind: kind(conns),
                length: coord(conns),
            });
        }
    }
    (atomics, connections)
}

/// Generates the database of `params`.
pub fn generate(params: Params) -> Result<Oo7Db, String> {
    params.validate()?;
    let seed = params.seed;
    let mut mods = Rng::stream(seed, &[Stream::Modules as u64]);
    let mut assm = Rng::stream(seed, &[Stream::Assemblies as u64]);
    let mut comps = Rng::stream(seed, &[Stream::Composites as u64]);
    let mut atoms = Rng::stream(seed, &[Stream::Atomics as u64]);
    let mut conns = Rng::stream(seed, &[Stream::Connections as u64]);
    let mut bags = Rng::stream(seed, &[Stream::Bags as u64]);
    let total_comps = params.composites();
    let mut db = Oo7Db {
        params,
        modules: Vec::new(),
        complex: Vec::new(),
        base: Vec::new(),
        composites: Vec::with_capacity(total_comps as usize),
        atomics: Vec::with_capacity(params.atomics() as usize),
        connections: Vec::with_capacity((params.atomics() * params.conn_per_atomic) as usize),
    };
    for c in 1..=total_comps {
        let module = 1 + (c - 1) / params.comp_per_module;
        let first = (c - 1) * params.atomic_per_comp + 1;
        db.composites.push(CompositePart {
            id: c,
            kind: kind(&mut comps),
            build_date: comp_date(&mut comps, c),
            module,
            first_atomic: first,
            used_in_priv: Vec::new(),
            used_in_shar: Vec::new(),
        });
        let (a, k) = comp_graph(&params, &mut atoms, &mut conns, c, first, total_comps);
        db.atomics.extend(a);
        db.connections.extend(k);
    }
    for m in 1..=params.modules {
        let root = db.complex.len() as u32 + 1;
        db.modules.push(Module {
            id: m,
            kind: kind(&mut mods),
            build_date: date(&mut mods, DATE_MIN, DATE_MAX),
            design_root: root,
        });
        // Breadth-first: each level's assemblies, then their children.
        let mut level_ids = vec![(root, None)];
        for level in (2..=params.assm_levels).rev() {
            let mut next = Vec::new();
            // Children are numbered after every assembly of this level.
            let last = level_ids.last().map_or(root, |&(id, _)| id);
            for (id, parent) in level_ids {
                let first_child = if level > 2 {
                    last + 1 + next.len() as u32
                } else {
                    db.base.len() as u32 + 1 + next.len() as u32
                };
                let subs: Vec<u32> = (0..params.assm_per_assm).map(|i| first_child + i).collect();
                next.extend(subs.iter().map(|&s| (s, Some(id))));
                debug_assert_eq!(db.complex.len() as u32 + 1, id);
                db.complex.push(ComplexAssembly {
                    id,
                    kind: kind(&mut assm),
                    build_date: date(&mut assm, DATE_MIN, DATE_MAX),
                    module: m,
                    level,
                    super_assembly: parent,
                    subs,
                });
            }
            level_ids = next;
            if level == 2 {
                for (id, parent) in level_ids.drain(..) {
                    let parent = parent.ok_or("a base assembly without a parent")?;
                    let own = m - 1;
                    let lo = own * params.comp_per_module + 1;
                    let priv_: Vec<u32> = (0..params.comp_per_assm)
                        .map(|_| lo + bags.below(u64::from(params.comp_per_module)) as u32)
                        .collect();
                    let shar: Vec<u32> = (0..params.comp_per_assm)
                        .map(|_| 1 + bags.below(u64::from(total_comps)) as u32)
                        .collect();
                    for &c in &priv_ {
                        db.composites[(c - 1) as usize].used_in_priv.push(id);
                    }
                    for &c in &shar {
                        db.composites[(c - 1) as usize].used_in_shar.push(id);
                    }
                    debug_assert_eq!(db.base.len() as u32 + 1, id);
                    db.base.push(BaseAssembly {
                        id,
                        kind: kind(&mut assm),
                        build_date: date(&mut assm, DATE_MIN, DATE_MAX),
                        module: m,
                        super_assembly: parent,
                        components_priv: priv_,
                        components_shar: shar,
                    });
                }
            }
        }
    }
    Ok(db)
}

/// The `count` composite parts a structural insert adds: ids from
/// `first_comp`, atomic ids from `first_atomic`, each linked privately to a
/// base assembly drawn from `1..=base_count` (whose module it joins), all
/// drawn from `rng`. Their
/// atomic parts' `doc_id` range over the original composite parts.
pub fn new_composites(
    params: &Params,
    rng: &mut Rng,
    first_comp: u32,
    first_atomic: u32,
    count: u32,
    base_count: u32,
) -> Vec<NewComposite> {
    (0..count)
        .map(|i| {
            let id = first_comp + i;
            let first = first_atomic + i * params.atomic_per_comp;
            let base = 1 + rng.below(u64::from(base_count)) as u32;
            let part = CompositePart {
                id,
                kind: kind(rng),
                build_date: comp_date(rng, id),
                module: params.module_of_base(base),
                first_atomic: first,
                used_in_priv: vec![base],
                used_in_shar: Vec::new(),
            };
            let mut atoms = Rng::seed_from_u64(rng.next_u64());
            let mut conns = Rng::seed_from_u64(rng.next_u64());
            let (atomics, connections) = comp_graph(
                params,
                &mut atoms,
                &mut conns,
                id,
                first,
                params.composites(),
            );
            NewComposite {
                part,
                atomics,
                connections,
            }
        })
        .collect()
}

impl Oo7Db {
    /// Atomic part `id`'s outgoing connections, in slot order.
    pub fn outgoing(&self, id: u32) -> &[Connection] {
        let k = self.params.conn_per_atomic as usize;
        let i = (id as usize - 1) * k;
        &self.connections[i..i + k]
    }

    /// The atomic parts of composite part `c`.
    pub fn parts_of(&self, c: &CompositePart) -> &[AtomicPart] {
        let first = (c.first_atomic - 1) as usize;
        &self.atomics[first..first + self.params.atomic_per_comp as usize]
    }
}
