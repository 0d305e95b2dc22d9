//! The OO1 database of Kakkad & Wilson's experiment, once per granularity:
//! parts with three outgoing connections and a B+tree index by part id, with
//! the pointer kind of each field chosen as the paper's table says.
//!
//! | module | connections (part → part) | index (node → node, leaf → part) | paper's key |
//! |---|---|---|---|
//! | [`all_raw`] | `PRef` | `PRef` | all-raw |
//! | [`smart_index`] | `PRef` | `Smart` | smart-index |
//! | [`all_smart`] | `Smart` | `Smart` | all-smart |
//!
//! `PRef` is swizzled when its page is faulted in (a plain load afterwards),
//! `Smart` is translated at each use (Texas's smart pointers, §5.2.2). The
//! three databases have the same objects in the same places: both kinds are
//! 8 bytes, and the builds allocate in the same order.
//!
//! **(choice)** A part is OO1's (id, kind, x, y, build) with its three
//! connections inline (target, kind, length): 104 bytes, 36 to a page. The
//! parts connecting to a part (OO1's reverse traversal) are not stored: the
//! traversal set never reads them, and a vector of them would put a pointer
//! swizzled at fault time into every part of every granularity (a `PVec`'s
//! buffer pointer is always swizzled), which the all-smart database must
//! not have.
//!
//! **(choice)** The index is a B+tree of nodes of [`FANOUT`] keys, one node
//! to a page (an 8-byte count and level, the keys, the children and the
//! parts: 4,008 bytes). A node has both a child array (inner nodes) and a
//! part array (leaves) so that one type serves every level; the other array
//! is null. It is bulk-loaded from the ids in order after the parts, full
//! nodes left to right: 2 levels for 20,000 parts, 3 for 200,000 (Texas's
//! tree was "only three levels deep" on the large database). The paper does
//! not say how its tree was built.

use amber::{Db, PRef, Persistent, Smart, Tx};

use crate::oo1::database::{GeneratedDb, Kind};
use crate::oo1::engine::{EngineError, ResultExt};

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Keys per B+tree node: the most whose node fits a page's object area
/// (4,056 bytes) is 202; 200 keeps the arithmetic plain.
pub const FANOUT: usize = 200;

/// The name of the root object in every granularity's database.
pub const ROOT: &str = "texas";

/// Parts per transaction while building.
const BUILD_BATCH: usize = 50_000;

/// Deepest tree a lookup follows before calling the index damaged (a tree
/// of [`FANOUT`]-key nodes over 2^32 ids has 5 levels).
const MAX_LEVELS: usize = 8;

/// A pointer field's kind, as the traversal and the build use it.
pub trait Ptr<T: Persistent>: Copy {
    /// Whether the field is swizzled at fault time (`PRef`) rather than
    /// translated at each use (`Smart`).
    const SWIZZLED: bool;

    /// Follows the pointer.
    fn load(self, db: &Db) -> amber::Result<&T>;

    /// Follows the pointer through a dereference that fetches a missing
    /// page itself, in the calling thread, instead of taking a page fault
    /// (`Db::try_get`; a `Smart`'s dereference always does).
    fn load_checked(self, db: &Db) -> amber::Result<&T>;

    /// The pointer to the object `p` leads to, in this kind.
    fn from_ref(tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self>;
}

impl<T: Persistent> Ptr<T> for PRef<T> {
    const SWIZZLED: bool = true;

    #[inline(always)]
    fn load(self, db: &Db) -> amber::Result<&T> {
        Ok(db.get(self))
    }

    fn load_checked(self, db: &Db) -> amber::Result<&T> {
        db.try_get(self)
    }

    fn from_ref(_tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self> {
        Ok(p)
    }
}

impl<T: Persistent> Ptr<T> for Smart<T> {
    const SWIZZLED: bool = false;

    #[inline(always)]
    fn load(self, db: &Db) -> amber::Result<&T> {
        db.smart(self)
    }

    fn load_checked(self, db: &Db) -> amber::Result<&T> {
        db.smart(self)
    }

    fn from_ref(tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self> {
        tx.to_smart(p)
    }
}

/// Follows `p` as a traversal with `CHECKED` dereferences does.
#[inline(always)]
fn follow<const CHECKED: bool, T: Persistent>(p: impl Ptr<T>, db: &Db) -> amber::Result<&T> {
    if CHECKED {
        p.load_checked(db)
    } else {
        p.load(db)
    }
}

/// A null where every committed object has a pointer: damage.
fn null(what: &str) -> EngineError {
    EngineError::corrupt(format!("{what} is null"))
}

/// What a traversal step sees of a part, whatever its granularity.
pub struct Visit<'a> {
    pub id: u32,
    pub x: i32,
    pub y: i32,
    pub kind: &'a Kind,
    /// The part's address in memory (its page is what a fault fetched).
    pub addr: usize,
}

/// One granularity's schema and the operations on it: the types, the build,
/// the lookup through the index and the depth-first traversal.
macro_rules! granularity {
    ($module:ident, $conn:ident, $index:ident, $doc:literal) => {
        #[doc = $doc]
        pub mod $module {
            use super::*;

            /// An OO1 part with its outgoing connections.
            #[derive(Persistent)]
            #[persistent(name = "texas::Part")]
            #[repr(C)]
            pub struct Part {
                pub id: u32,
                pub kind: [u8; 10],
                pub _pad: [u8; 2],
                pub x: i32,
                pub y: i32,
                pub build: i64,
                pub out: [Out; 3],
            }

            /// An outgoing connection, inside its from-part. `None` only
            /// while the database is being built.
            #[derive(Persistent, Clone, Copy)]
            #[persistent(name = "texas::Out")]
            #[repr(C)]
            pub struct Out {
                pub to: Option<$conn<Part>>,
                pub kind: [u8; 10],
                pub _pad: [u8; 2],
                pub length: i32,
            }

            /// A B+tree node: `keys[..count]` ascending; an inner node
            /// (`level > 0`) leads to `kids[i]` for the ids from `keys[i]`
            /// to the next key, a leaf (`level == 0`) holds the part of id
            /// `keys[i]` in `parts[i]`.
            #[derive(Persistent)]
            #[persistent(name = "texas::Node")]
            #[repr(C)]
            pub struct Node {
                pub count: u32,
                pub level: u32,
                pub keys: [u32; FANOUT],
                pub kids: [Option<$index<Node>>; FANOUT],
                pub parts: [Option<$index<Part>>; FANOUT],
            }

            /// The root object.
            #[derive(Persistent)]
            #[persistent(name = "texas::Root")]
            #[repr(C)]
            pub struct Root {
                pub tree: Option<$index<Node>>,
                pub parts: u64,
            }

            /// Adds the parts of `data` to `db` in id order, then links
            /// their connections; returns them by id (index `id − 1`).
            pub fn build_parts(db: &mut Db, data: &GeneratedDb) -> Result<Vec<PRef<Part>>> {
                let mut refs: Vec<PRef<Part>> = Vec::with_capacity(data.parts.len());
                for batch in data.parts.chunks(BUILD_BATCH) {
                    let mut tx = db.begin().ctx("beginning the build")?;
                    for p in batch {
                        let out = |slot: usize| {
                            let c = data.outgoing(p.id).get(slot).copied();
                            Out {
                                to: None,
                                kind: c.map_or([0; 10], |c| c.kind),
                                _pad: [0; 2],
                                length: c.map_or(0, |c| c.length),
                            }
                        };
                        refs.push(
                            tx.alloc(Part {
                                id: p.id,
                                kind: p.kind,
                                _pad: [0; 2],
                                x: p.x,
                                y: p.y,
                                build: p.build,
                                out: [out(0), out(1), out(2)],
                            })
                            .ctx("allocating a part")?,
                        );
                    }
                    tx.commit().ctx("committing the parts")?;
                }
                let part_of = |id: u32| part_by_id(&refs, id);
                for batch in data.parts.chunks(BUILD_BATCH) {
                    let mut tx = db.begin().ctx("beginning the build")?;
                    for p in batch {
                        let from = part_of(p.id)?;
                        for (slot, c) in data.outgoing(p.id).iter().enumerate() {
                            let to = <$conn<Part> as Ptr<Part>>::from_ref(&tx, part_of(c.to)?)
                                .ctx("linking a connection")?;
                            tx.get_mut(from).out[slot].to = Some(to);
                        }
                    }
                    tx.commit().ctx("committing the connections")?;
                }
                Ok(refs)
            }

            fn part_by_id(refs: &[PRef<Part>], id: u32) -> Result<PRef<Part>> {
                (id as usize)
                    .checked_sub(1)
                    .and_then(|i| refs.get(i).copied())
                    .ok_or(EngineError::MissingPart { id })
            }

            /// Builds the database of `data` in the empty database `db`:
            /// the parts in id order, then their connections, then the
            /// index bottom-up.
            pub fn build(db: &mut Db, data: &GeneratedDb) -> Result<()> {
                let refs = build_parts(db, data)?;
                let part_of = |id: u32| part_by_id(&refs, id);
                let mut tx = db.begin().ctx("beginning the build")?;
                // The leaves, then each level above, until one node is left.
                let mut level: Vec<(u32, PRef<Node>)> = Vec::new();
                for ids in data.parts.chunks(FANOUT) {
                    let mut node = empty_node(0);
                    for (i, p) in ids.iter().enumerate() {
                        node.keys[i] = p.id;
                        let part = Ptr::from_ref(&tx, part_of(p.id)?).ctx("indexing a part")?;
                        node.parts[i] = Some(part);
                    }
                    node.count = ids.len() as u32;
                    level.push((ids[0].id, tx.alloc(node).ctx("allocating a leaf")?));
                }
                let mut height = 1;
                while level.len() > 1 {
                    let mut up = Vec::with_capacity(level.len().div_ceil(FANOUT));
                    for kids in level.chunks(FANOUT) {
                        let mut node = empty_node(height);
                        for (i, &(key, kid)) in kids.iter().enumerate() {
                            node.keys[i] = key;
                            node.kids[i] = Some(Ptr::from_ref(&tx, kid).ctx("linking a node")?);
                        }
                        node.count = kids.len() as u32;
                        up.push((kids[0].0, tx.alloc(node).ctx("allocating a node")?));
                    }
                    level = up;
                    height += 1;
                }
                let tree = match level.first() {
                    Some(&(_, top)) => Some(Ptr::from_ref(&tx, top).ctx("linking the root")?),
                    None => None,
                };
                let root = tx
                    .alloc(Root {
                        tree,
                        parts: data.parts.len() as u64,
                    })
                    .ctx("allocating the root")?;
                tx.set_root(ROOT, root).ctx("naming the root")?;
                tx.commit().ctx("committing the index").map(drop)
            }

            fn empty_node(level: u32) -> Node {
                Node {
                    count: 0,
                    level,
                    keys: [0; FANOUT],
                    kids: [None; FANOUT],
                    parts: [None; FANOUT],
                }
            }

            /// The part of id `id`, through the index; `on_node` sees the
            /// address of every node the descent reads. `CHECKED`: every
            /// dereference fetches a missing page itself ([`Ptr::load_checked`]).
            pub fn lookup<'a, const CHECKED: bool>(
                db: &'a Db,
                root: &Root,
                id: u32,
                on_node: &mut impl FnMut(usize),
            ) -> Result<Option<&'a Part>> {
                let mut node = root
                    .tree
                    .ok_or_else(|| null("the index's root"))
                    .and_then(|p| follow::<CHECKED, Node>(p, db).ctx("reading the index's root"))?;
                for _ in 0..MAX_LEVELS {
                    on_node(node as *const Node as usize);
                    let n = (node.count as usize).min(FANOUT);
                    let keys = &node.keys[..n];
                    if node.level == 0 {
                        return match keys.binary_search(&id) {
                            Ok(i) => {
                                let p =
                                    node.parts[i].ok_or_else(|| null("an index leaf's part"))?;
                                follow::<CHECKED, Part>(p, db)
                                    .map(Some)
                                    .ctx("reading an indexed part")
                            }
                            Err(_) => Ok(None),
                        };
                    }
                    let i = keys.partition_point(|&k| k <= id);
                    let Some(i) = i.checked_sub(1) else {
                        return Ok(None);
                    };
                    let kid = node.kids[i].ok_or_else(|| null("an index node's child"))?;
                    node = follow::<CHECKED, Node>(kid, db).ctx("reading an index node")?;
                }
                Err(EngineError::corrupt(format!(
                    "the index is deeper than {MAX_LEVELS} levels"
                )))
            }

            /// OO1's traversal from `part`: visit it, then each target of
            /// its connections in slot order, to depth
            /// [`TRAVERSAL_DEPTH`](crate::oo1::TRAVERSAL_DEPTH); `CHECKED`
            /// as for [`lookup`].
            pub fn traverse<const CHECKED: bool>(
                db: &Db,
                part: &Part,
                depth: u32,
                visit: &mut impl FnMut(Visit<'_>),
            ) -> Result<()> {
                visit(Visit {
                    id: part.id,
                    x: part.x,
                    y: part.y,
                    kind: &part.kind,
                    addr: part as *const Part as usize,
                });
                if depth < crate::oo1::TRAVERSAL_DEPTH {
                    for out in &part.out {
                        let to = out.to.ok_or_else(|| null("a part's connection"))?;
                        let next = follow::<CHECKED, Part>(to, db).ctx("following a connection")?;
                        traverse::<CHECKED>(db, next, depth + 1, visit)?;
                    }
                }
                Ok(())
            }

            /// Calls `f` with the address and the swizzled pointers (non-null
            /// `PRef` fields) of every object of the database: the root,
            /// every node and every part.
            pub fn census(db: &Db, root: PRef<Root>, f: &mut impl FnMut(usize, u64)) -> Result<()> {
                let r = db.get(root);
                let swizzled = |yes: bool| u64::from(yes);
                f(
                    r as *const Root as usize,
                    swizzled(<$index<Node> as Ptr<Node>>::SWIZZLED && r.tree.is_some()),
                );
                let top = r.tree.ok_or_else(|| null("the index's root"))?;
                let mut stack = vec![top.load(db).ctx("reading the index's root")?];
                while let Some(node) = stack.pop() {
                    let n = (node.count as usize).min(FANOUT);
                    let kids = node.kids[..n].iter().flatten().count() as u64;
                    let parts = node.parts[..n].iter().flatten().count() as u64;
                    f(
                        node as *const Node as usize,
                        if <$index<Node> as Ptr<Node>>::SWIZZLED {
                            kids + parts
                        } else {
                            0
                        },
                    );
                    if node.level > 0 {
                        for kid in node.kids[..n].iter().flatten() {
                            stack.push(kid.load(db).ctx("reading an index node")?);
                        }
                    } else {
                        for p in node.parts[..n].iter().flatten() {
                            let part = p.load(db).ctx("reading an indexed part")?;
                            let conns = part.out.iter().filter(|o| o.to.is_some()).count();
                            f(
                                part as *const Part as usize,
                                if <$conn<Part> as Ptr<Part>>::SWIZZLED {
                                    conns as u64
                                } else {
                                    0
                                },
                            );
                        }
                    }
                }
                Ok(())
            }
        }
    };
}

granularity!(
    all_raw,
    PRef,
    PRef,
    "*all-raw*: every pointer a `PRef`, swizzled when its page is faulted in."
);
granularity!(
    smart_index,
    PRef,
    Smart,
    "*smart-index*: the index's pointers `Smart` (translated at each use), the parts' connections `PRef`."
);
granularity!(
    all_smart,
    Smart,
    Smart,
    "*all-smart*: every pointer a `Smart`, translated at each use; nothing is swizzled at fault time."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<all_raw::Part>(), 104);
        assert_eq!(std::mem::size_of::<all_smart::Part>(), 104);
        // A node fills one page's object area (4,096 − 32 − 8 bytes).
        assert_eq!(std::mem::size_of::<all_raw::Node>(), 4_008);
        assert!(std::mem::size_of::<smart_index::Node>() <= 4_056);
    }
}
