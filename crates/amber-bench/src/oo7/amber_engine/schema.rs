//! The OO7 schema as persistent Amber types: OO7's classes with `PRef`s
//! for its references, `PVec`s for its bags, `PString`s for titles and
//! texts, and the indexes of BENCHMARKS.md in the root object.
//!
//! **(choice)** Connections are stored inside their from-part, in a
//! `PVec<Conn>` (target, kind, length; the from-part is the owner), with
//! the incoming side as a `PVec<PRef<AtomicPart>>`: a traversal step is one
//! pointer load, as in OO1's Amber schema and the `memory` engine.
//! A complex assembly's sub-assemblies are two typed vectors, one of them
//! empty (complex assemblies above level 2, base assemblies at level 2):
//! Amber has no polymorphic pointer. Only a design root points to its
//! module (`module`), which T7 reaches by walking up; a module points to
//! its design root and its manual.
//!
//! **(choice)** Indexes: atomic parts, composite parts, base assemblies
//! and modules by id are vectors indexed by id − 1 (their ids are dense; a
//! deleted part leaves `None`), so a lookup is one bounds-checked index and
//! one checked dereference; atomic parts by build date are a
//! `PMultiIndex<AtomicPart, i32>` (about ten parts per date on small);
//! documents by title a `PIndex<Document, String>`.
//!
//! The atomic parts' vector is OO7's largest index: 10,000 pointers per
//! module on small (one 128 KiB buffer once grown), 100,000 on medium
//! (1 MiB). A buffer is one block, and a block is the unit of fetch,
//! swizzling, diffing and installation (docs/design.md §6): the first
//! lookup fetches and swizzles the whole vector, and a commit that changes
//! an entry diffs and a checkpoint writes all of it. OO1's Amber engine
//! splits its 200,000-part index into chunks of 128 pointers for that
//! reason; here a two-level index cost a second checked dereference per
//! lookup, which was most of the gap between Amber's Q1 and the arena's,
//! and the whole vector costs the first lookup of a process and the
//! commits that change it (both measured in docs/results/oo7.md).

use amber::{PIndex, PMultiIndex, PRef, PString, PVec, Persistent};

/// An atomic part: 72 bytes.
#[derive(Persistent)]
#[persistent(name = "oo7::AtomicPart")]
#[repr(C)]
pub struct AtomicPart {
    pub id: u32,
    pub build_date: i32,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub x: i32,
    pub y: i32,
    pub doc_id: u32,
    /// Outgoing connections, in slot order.
    pub to: PVec<Conn>,
    /// The parts connecting to this one, one entry per connection.
    pub from: PVec<PRef<AtomicPart>>,
    /// `None` only between the part's allocation and its composite part's,
    /// in the same transaction.
    pub part_of: Option<PRef<CompositePart>>,
}

/// A connection, inside its from-part: 24 bytes.
#[derive(Persistent, Clone, Copy)]
#[persistent(name = "oo7::Conn")]
#[repr(C)]
pub struct Conn {
    pub to: PRef<AtomicPart>,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub length: i32,
}

/// A composite part.
#[derive(Persistent)]
#[persistent(name = "oo7::CompositePart")]
#[repr(C)]
pub struct CompositePart {
    pub id: u32,
    pub build_date: i32,
    pub kind: [u8; 10],
    pub _pad: [u8; 6],
    /// `None` only while the database is built (documents are allocated
    /// after every graph, away from the atomic parts T1 reads).
    pub documentation: Option<PRef<Document>>,
    pub root_part: PRef<AtomicPart>,
    pub parts: PVec<PRef<AtomicPart>>,
    pub used_in_priv: PVec<PRef<BaseAssembly>>,
    pub used_in_shar: PVec<PRef<BaseAssembly>>,
}

/// A document.
#[derive(Persistent)]
#[persistent(name = "oo7::Document")]
#[repr(C)]
pub struct Document {
    pub id: u32,
    pub _pad: u32,
    pub title: PString,
    pub text: PString,
    pub part: PRef<CompositePart>,
}

/// A base assembly.
#[derive(Persistent)]
#[persistent(name = "oo7::BaseAssembly")]
#[repr(C)]
pub struct BaseAssembly {
    pub id: u32,
    pub build_date: i32,
    pub kind: [u8; 10],
    pub _pad: [u8; 6],
    pub super_assembly: PRef<ComplexAssembly>,
    pub components_priv: PVec<PRef<CompositePart>>,
    pub components_shar: PVec<PRef<CompositePart>>,
}

/// A complex assembly.
#[derive(Persistent)]
#[persistent(name = "oo7::ComplexAssembly")]
#[repr(C)]
pub struct ComplexAssembly {
    pub id: u32,
    pub build_date: i32,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub level: u32,
    pub super_assembly: Option<PRef<ComplexAssembly>>,
    /// Set on design roots only.
    pub module: Option<PRef<Module>>,
    pub sub_complex: PVec<PRef<ComplexAssembly>>,
    pub sub_base: PVec<PRef<BaseAssembly>>,
}

/// A module.
#[derive(Persistent)]
#[persistent(name = "oo7::Module")]
#[repr(C)]
pub struct Module {
    pub id: u32,
    pub build_date: i32,
    pub kind: [u8; 10],
    pub _pad: [u8; 6],
    pub manual: PRef<Manual>,
    pub design_root: PRef<ComplexAssembly>,
}

/// A module's manual.
#[derive(Persistent)]
#[persistent(name = "oo7::Manual")]
#[repr(C)]
pub struct Manual {
    pub id: u32,
    pub _pad: u32,
    pub title: PString,
    pub text: PString,
}

/// The root object: the indexes.
#[derive(Persistent)]
#[persistent(name = "oo7::Root")]
#[repr(C)]
pub struct Root {
    /// DocumentSize: a new document's text has `document_size − 1` bytes.
    pub document_size: u64,
    pub modules: PVec<PRef<Module>>,
    pub base: PVec<PRef<BaseAssembly>>,
    pub composites: PVec<Option<PRef<CompositePart>>>,
    /// Atomic parts by id − 1 (ids are dense: `1..=len` were allocated);
    /// `None` for a deleted part.
    pub atomic_parts: PVec<Option<PRef<AtomicPart>>>,
    pub by_date: PMultiIndex<AtomicPart, i32>,
    pub by_title: PIndex<Document, String>,
}

/// The name of the root object.
pub const ROOT: &str = "oo7";
