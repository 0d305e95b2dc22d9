//! Deep verification: every pointer of every live object checked against
//! the objects that exist and the field's declared type.
//!
//! Checksums prove that a page holds what was written; they cannot tell
//! whether what was written makes sense. A pointer stored 4 KiB away from
//! its target (the misaligned-reservation bug of issue 11) has a valid
//! checksum. This check reads the committed state and, with the schema
//! catalog's descriptors, finds every pointer field
//! (`PRef`/`Option<PRef>`, `Smart`/`Option<Smart>`, the buffer of a
//! `PVec`/`PBytes`, the nodes and values of a `PIndex`, the named roots):
//!
//! 1. one pass over every block builds the map of object starts
//!    (`map.rs`; 16 bytes per object);
//! 2. a second pass walks every live object of every data block field by
//!    field (`walk.rs`); a vector's elements (up to its length) and an
//!    index's nodes are checked from their owner, through a small cache of
//!    block images, so that a finding names the owner's field
//!    (`Part.to[2]`).
//!
//! Findings are of two classes ([`FindingClass`]): damage (a pointer to no
//! object, into the middle of one, to an object of another type, a buffer
//! too small for its capacity, a null in a non-null field, a broken index)
//! and dangling references (a committed pointer to an object the program
//! freed: the program's mistake, which reading refuses with
//! [`Error::Dangling`](crate::Error::Dangling); the database is sound).

pub(crate) mod map;
pub(crate) mod visit;
mod walk;

use super::Inspector;
use crate::Db;
use crate::error::{Error, FileKind, Location, Result};
use crate::format::objects::walk as walk_objects;
use crate::format::page::PageHeader;
use crate::schema::desc::{Shape, StoredType};
use crate::store::Store;
use map::{Block, Blocks, Held, ObjectMap, Start};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use walk::Walker;

/// Findings kept in a report; the counts go on past it.
const MAX_FINDINGS: usize = 10_000;

/// Whether a finding is damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingClass {
    /// The bytes cannot be what Amber wrote for a sound program: a pointer
    /// to no object, into an object, to an object of another type, a buffer
    /// too small, a null in a non-null field, a broken index. A disk, a
    /// tool or a bug in Amber put it there. `amber verify --deep` exits 1.
    Damage,
    /// A committed pointer to an object the program freed: following it
    /// gives [`Error::Dangling`](crate::Error::Dangling), never another
    /// object's bytes. The database is sound; the program stored a pointer
    /// and freed its target. Reported, not counted as damage.
    Dangling,
}

impl FindingClass {
    /// Its name as `amber verify --deep` prints it: `damage`, `dangling`.
    pub fn name(self) -> &'static str {
        match self {
            FindingClass::Damage => "damage",
            FindingClass::Dangling => "dangling",
        }
    }
}

/// Where a finding is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A pointer field of an object.
    Field {
        /// Persistent address of the object's body.
        object: u64,
        /// The page it is on (`object / page size`).
        page: u64,
        /// Its offset in that page.
        offset: u64,
        /// The field, from the object's type: `Part.to[2]`,
        /// `Node.idx[key 17]`.
        path: String,
    },
    /// An object as a whole (its type id, its size).
    Object {
        /// Persistent address of the object's body.
        object: u64,
        /// The page it is on.
        page: u64,
        /// Its offset in that page.
        offset: u64,
    },
    /// A named root.
    Root {
        /// Its name.
        name: String,
    },
    /// A whole block (unreadable, or its object map damaged).
    Block {
        /// Its first page.
        page: u64,
    },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Field {
                page, offset, path, ..
            } => write!(
                f,
                "object {page}:{offset} (page {page}, offset {offset}), field `{path}`"
            ),
            Place::Object { page, offset, .. } => {
                write!(f, "object {page}:{offset} (page {page}, offset {offset})")
            }
            Place::Root { name } => write!(f, "root {name:?}"),
            Place::Block { page } => write!(f, "page {page}"),
        }
    }
}

/// One thing deep verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Damage, or a dangling reference.
    pub class: FindingClass,
    /// Where.
    pub place: Place,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.what)
    }
}

/// What deep verification found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeepReport {
    /// The findings, in page order (the first 10,000; the counts below are
    /// complete).
    pub findings: Vec<Finding>,
    /// Findings of class [`FindingClass::Damage`].
    pub damage: u64,
    /// Findings of class [`FindingClass::Dangling`].
    pub dangling: u64,
    /// What was not checked, and why (types whose descriptors do not decode).
    pub notes: Vec<String>,
    /// Blocks read.
    pub blocks: u64,
    /// Objects found (free slots included).
    pub objects: u64,
    /// Non-null pointers checked (fields, buffer pointers, index nodes and
    /// values, roots).
    pub pointers: u64,
    /// Pointers into blocks that could not be read, so not checked.
    pub unchecked: u64,
}

impl DeepReport {
    /// Whether anything is damaged.
    pub fn is_damaged(&self) -> bool {
        self.damage > 0
    }

    /// Whether nothing at all was found: no damage and no dangling
    /// reference.
    pub fn is_clean(&self) -> bool {
        self.damage == 0 && self.dangling == 0
    }

    fn add(&mut self, class: FindingClass, place: Place, what: String) {
        match class {
            FindingClass::Damage => self.damage += 1,
            FindingClass::Dangling => self.dangling += 1,
        }
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(Finding { class, place, what });
        }
    }
}

/// Deep-verifies the database at `path`: opens it read-only (recovery runs
/// in memory) and checks every pointer of its committed state. The database
/// must not be open elsewhere, in this process included: use
/// [`Db::verify_deep`] on an open one.
pub fn verify_deep(path: impl AsRef<Path>) -> Result<DeepReport> {
    Inspector::open(path)?.verify_deep()
}

impl Inspector {
    /// Deep-verifies the committed state this inspector sees.
    pub fn verify_deep(&self) -> Result<DeepReport> {
        check(&self.store)
    }
}

impl Db {
    /// Deep verification of this open database's committed state (see
    /// [`amber::inspect`](crate::inspect)): every pointer field of every
    /// live object, every vector buffer, every index and every root checked
    /// against the objects that exist and the declared types. Reads the
    /// committed images through the store, so it sees what a reopen would,
    /// and never faults a page into this `Db`'s memory. The database needs
    /// no transaction open (none can be, while `&self` is borrowed).
    ///
    /// Reads every block twice; holds 16 bytes per object (see
    /// `docs/design.md`, "Deep verification").
    pub fn verify_deep(&self) -> Result<DeepReport> {
        check(self.local("deep verification")?)
    }
}

/// The catalog's types by id, decoded (`None`: the descriptor does not
/// decode, which is noted, and objects of it are not checked).
pub(crate) type Types = HashMap<u32, Option<StoredType>>;

fn types(store: &Store, report: &mut DeepReport) -> Types {
    let mut out = HashMap::new();
    for (id, bytes) in store.types() {
        let t = StoredType::decode(&bytes)
            .map_err(|e| {
                report.notes.push(format!(
                    "type id {id}: its descriptor does not decode ({e}): objects of it, and roots naming it, are not checked"
                ));
            })
            .ok();
        out.insert(id, t);
    }
    out
}

/// Runs both passes over `store`'s committed state.
fn check(store: &Store) -> Result<DeepReport> {
    verified_map(store).map(|(report, ..)| report)
}

/// Deep verification of `store`'s committed state, keeping what it built:
/// the map of object starts and the decoded catalog, which the collector
/// marks and relocates with (after refusing a database the report finds
/// damaged).
pub(crate) fn verified_map(store: &Store) -> Result<(DeepReport, ObjectMap, Types)> {
    // A checkpoint allocates its new metadata blobs at its cut, writes them
    // later and frees the old ones at its end: a block list taken meanwhile
    // would meet blobs not written yet or freed since. The checkpointer
    // thread's work (the installation of what an open recovered, or one a
    // commit asked for) ends first; nothing commits during the check.
    store.wait_for_checkpointer();
    let mut report = DeepReport::default();
    let types = types(store, &mut report);
    let map = map_objects(store, &types, &mut report)?;
    let mut blocks = Blocks::new(store);
    let mut w = Walker::new(&map, &types, &mut report);
    for b in &map.blocks {
        if b.held != Held::Data {
            continue;
        }
        let Some(image) = blocks.get(b.start) else {
            continue;
        };
        w.block(&image, b.start, &mut blocks);
    }
    for r in store.roots() {
        w.root(&r);
    }
    blocks.result()?;
    Ok((report, map, types))
}

/// Live objects per type id in `store`'s committed state: the first pass
/// of deep verification, counted. Reads every block; damage met on the way
/// is an error naming it, not a count that silently leaves objects out.
pub(crate) fn census(store: &Store) -> Result<HashMap<u32, u64>> {
    let mut report = DeepReport::default();
    let types = types(store, &mut report);
    let map = map_objects(store, &types, &mut report)?;
    if let Some(f) = report
        .findings
        .iter()
        .find(|f| f.class == FindingClass::Damage)
    {
        let page = match f.place {
            Place::Field { page, .. } | Place::Object { page, .. } | Place::Block { page } => page,
            Place::Root { .. } => 0,
        };
        return Err(Error::Corrupt {
            file: FileKind::PageFile,
            path: store.path().to_path_buf(),
            at: Location::Page(page),
            what: format!("counting objects: {f}"),
        });
    }
    let mut counts = HashMap::new();
    for s in map.starts.iter().filter(|s| !s.is_free()) {
        *counts.entry(s.type_id()).or_default() += 1;
    }
    Ok(counts)
}

/// The first pass: every block's kind and every object's start. Damage met
/// here (a damaged block or object map, an object of a type not in the
/// catalog or smaller than its type) is reported; an I/O error ends the
/// check.
fn map_objects(store: &Store, types: &Types, report: &mut DeepReport) -> Result<ObjectMap> {
    let ps = store.page_size() as u64;
    let mut blocks = Vec::new();
    let mut starts = Vec::new();
    for (start, pages) in store.committed_blocks() {
        report.blocks += 1;
        let image = match store.read_block(start) {
            Ok(i) => i,
            Err(e) if !e.is_corruption() => return Err(e),
            Err(e) => {
                report.add(
                    FindingClass::Damage,
                    Place::Block { page: start },
                    format!("cannot be read: {e}"),
                );
                blocks.push(Block {
                    start,
                    pages,
                    held: Held::Unreadable,
                });
                continue;
            }
        };
        let (kind, used) = PageHeader::read(&image).map_or((0, 0), |h| (h.kind, h.used));
        let held = map::held(kind);
        blocks.push(Block { start, pages, held });
        if held != Held::Data {
            continue;
        }
        for e in walk_objects(&image, used as usize) {
            let e = match e {
                Ok(e) => e,
                Err(err) => {
                    report.add(
                        FindingClass::Damage,
                        Place::Block { page: start },
                        format!("{err}; objects after it are not checked"),
                    );
                    break;
                }
            };
            report.objects += 1;
            let addr = start * ps + e.body as u64;
            starts.push(Start::new(addr, e.type_id, e.flags, e.size as u32));
            let place = || Place::Object {
                object: addr,
                page: addr / ps,
                offset: addr % ps,
            };
            match types.get(&e.type_id) {
                None => report.add(
                    FindingClass::Damage,
                    place(),
                    format!("its type id {} is not in the schema catalog", e.type_id),
                ),
                Some(Some(t))
                    if matches!(t.shape, Shape::Struct(_)) && e.size < t.size as usize =>
                {
                    report.add(
                        FindingClass::Damage,
                        place(),
                        format!(
                            "it is {} bytes, its type `{}` needs {}",
                            e.size, t.name, t.size
                        ),
                    )
                }
                _ => {}
            }
        }
    }
    // Blocks and objects come in address order; sorting is a check.
    starts.sort_unstable_by_key(|s| s.addr);
    Ok(ObjectMap {
        page_size: ps,
        home: store.home(),
        first_page: store.first_data_page(),
        page_count: store.page_count(),
        blocks,
        starts,
    })
}
