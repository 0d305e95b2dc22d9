//! The OO1 database of Kakkad & Wilson's experiment, once per granularity:
//! parts with three outgoing connections and a B+tree index by part id, with
//! the pointer kind of each field chosen as the paper's table says.
//!
//! | module | connections (part → part) | index (node → node, leaf → part) | paper's key |
//! |---|---|---|---|
//! | [`all_raw`] | `PRef` | `PRef` | all-raw |
//! | [`smart_index`] | `PRef` | `Smart` | smart-index |
//! | [`all_smart`] | `Smart` | `Smart` | all-smart |
//! | [`all_lazy`] | `Lazy` | `Lazy` | all-lazy (not the paper's) |
//!
//! `PRef` is swizzled when its page is faulted in (a plain load afterwards),
//! `Smart` is translated at each use (Texas's smart pointers, §5.2.2),
//! `Lazy` upon discovery (White & DeWitt's EPVM 2.0: the field rewritten to
//! the direct address when followed while its target is resident). The
//! four databases have the same objects in the same places: every kind is
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

use amber::{Db, Lazy, PRef, Persistent, Smart, Tx, View};

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

/// How a traversal follows a pointer field ([`follow`]): a plain
/// dereference (the measured traversals), one that fetches a missing page
/// itself ([`Ptr::load_checked`]), or one that never rewrites a field
/// ([`Ptr::peek`]: the untimed walks that count what the measured ones did).
pub const LOAD: u8 = 0;
/// See [`LOAD`].
pub const CHECKED: u8 = 1;
/// See [`LOAD`].
pub const PEEK: u8 = 2;

/// A pointer field's kind, as the traversal and the build use it: a
/// nullable `PRef` or `Smart` (`Option`), or a `Lazy` (nullable itself).
/// Fields are followed by reference: a `Lazy` is an atomic, not `Copy`.
pub trait Ptr<T: Persistent>: Sized {
    /// Whether the field is swizzled at fault time (`PRef`) rather than
    /// translated at each use (`Smart`) or upon discovery (`Lazy`).
    const SWIZZLED: bool;

    /// The null field.
    fn null() -> Self;

    /// Whether it is not null.
    fn is_set(&self) -> bool;

    /// Whether the field has been rewritten to its target's direct address
    /// upon discovery (only a `Lazy` is).
    fn discovered(&self) -> bool {
        false
    }

    /// Follows the pointer (`None`: null); a `Lazy` is swizzled upon
    /// discovery.
    fn load<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>>;

    /// Follows the pointer through a dereference that fetches a missing
    /// page itself, in the calling thread, instead of taking a page fault
    /// (`Db::try_get`; a `Smart`'s dereference always does).
    fn load_checked<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>>;

    /// Follows the pointer without rewriting the field: a `Lazy` is
    /// followed through a copy held outside the database's frames, which
    /// the core translates and never rewrites (`translate/lazy.rs`).
    fn peek<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        self.load(db)
    }

    /// The pointer to the object `p` leads to, in this kind.
    fn from_ref(tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self>;
}

impl<T: Persistent> Ptr<T> for Option<PRef<T>> {
    const SWIZZLED: bool = true;

    fn null() -> Self {
        None
    }

    fn is_set(&self) -> bool {
        self.is_some()
    }

    #[inline(always)]
    fn load<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        Ok(self.map(|p| db.get(p)))
    }

    fn load_checked<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        self.map(|p| db.try_get(p)).transpose()
    }

    fn from_ref(_tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self> {
        Ok(Some(p))
    }
}

impl<T: Persistent> Ptr<T> for Option<Smart<T>> {
    const SWIZZLED: bool = false;

    fn null() -> Self {
        None
    }

    fn is_set(&self) -> bool {
        self.is_some()
    }

    #[inline(always)]
    fn load<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        self.map(|s| db.smart(s)).transpose()
    }

    fn load_checked<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        self.load(db)
    }

    fn from_ref(tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self> {
        tx.to_smart(p).map(Some)
    }
}

impl<T: Persistent> Ptr<T> for Lazy<T> {
    const SWIZZLED: bool = false;

    fn null() -> Self {
        Lazy::null()
    }

    fn is_set(&self) -> bool {
        !self.is_null()
    }

    fn discovered(&self) -> bool {
        self.is_swizzled()
    }

    #[inline(always)]
    fn load<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        Ok(db.lazy(self))
    }

    fn load_checked<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        db.try_lazy(self)
    }

    fn peek<'a>(&self, db: &'a Db) -> amber::Result<Option<&'a T>> {
        db.try_lazy(&self.clone())
    }

    fn from_ref(_tx: &Tx<'_>, p: PRef<T>) -> amber::Result<Self> {
        Ok(Lazy::from(p))
    }
}

/// Follows field `p` as a traversal in `MODE` ([`LOAD`], [`CHECKED`],
/// [`PEEK`]) does; `what` names it in the error for a null. A [`PEEK`]
/// reports the field to `seen` first.
#[inline(always)]
fn follow<'a, const MODE: u8, T: Persistent>(
    p: &impl Ptr<T>,
    db: &'a Db,
    what: &str,
    seen: &mut impl FnMut(Seen),
) -> Result<&'a T> {
    if MODE == PEEK {
        seen(Seen::Pointer {
            at: p as *const _ as usize,
            discovered: p.discovered(),
        });
    }
    let target = match MODE {
        LOAD => p.load(db),
        CHECKED => p.load_checked(db),
        _ => p.peek(db),
    };
    match target {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(null(what)),
        Err(e) => Err(e).ctx(&format!("following {what}")),
    }
}

/// What a walk reports besides the parts it visits.
#[derive(Clone, Copy, Debug)]
pub enum Seen {
    /// An object read (its address, whose page is what a fault fetched):
    /// an index node or a part.
    Object(usize),
    /// A pointer field followed (its address), in a [`PEEK`] walk only, and
    /// whether it held its target's direct address by discovery.
    Pointer { at: usize, discovered: bool },
}

/// How many of `fields` hold a direct address: the set ones of a kind
/// swizzled at fault time, the ones rewritten upon discovery of a `Lazy`.
fn swizzled<'f, T: Persistent, P: Ptr<T> + 'f>(fields: impl IntoIterator<Item = &'f P>) -> u64 {
    let direct = |p: &&P| {
        if P::SWIZZLED {
            p.is_set()
        } else {
            p.discovered()
        }
    };
    fields.into_iter().filter(direct).count() as u64
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
}

/// One granularity's schema and the operations on it: the types, the build,
/// the lookup through the index and the depth-first traversal. The field
/// types are given whole (`Option<PRef<Part>>`, `Lazy<Part>`…) so that the
/// derive sees them as written: connections, index children, index parts.
macro_rules! granularity {
    ($module:ident, [$($conn:tt)*], [$($kid:tt)*], [$($leaf:tt)*], $doc:literal) => {
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

            /// An outgoing connection, inside its from-part. Null only
            /// while the database is being built.
            #[derive(Persistent)]
            #[persistent(name = "texas::Out")]
            #[repr(C)]
            pub struct Out {
                pub to: $($conn)*,
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
                pub kids: [$($kid)*; FANOUT],
                pub parts: [$($leaf)*; FANOUT],
            }

            /// The root object.
            #[derive(Persistent)]
            #[persistent(name = "texas::Root")]
            #[repr(C)]
            pub struct Root {
                pub tree: $($kid)*,
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
                                to: Ptr::null(),
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
                            let to = Ptr::from_ref(&tx, part_of(c.to)?)
                                .ctx("linking a connection")?;
                            tx.get_mut(from).out[slot].to = to;
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
                        node.parts[i] =
                            Ptr::from_ref(&tx, part_of(p.id)?).ctx("indexing a part")?;
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
                            node.kids[i] = Ptr::from_ref(&tx, kid).ctx("linking a node")?;
                        }
                        node.count = kids.len() as u32;
                        up.push((kids[0].0, tx.alloc(node).ctx("allocating a node")?));
                    }
                    level = up;
                    height += 1;
                }
                let tree = match level.first() {
                    Some(&(_, top)) => Ptr::from_ref(&tx, top).ctx("linking the root")?,
                    None => Ptr::null(),
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
                    kids: std::array::from_fn(|_| Ptr::null()),
                    parts: std::array::from_fn(|_| Ptr::null()),
                }
            }

            /// The part of id `id`, through the index, following pointers
            /// as `MODE` says ([`follow`]); `seen` gets the address of
            /// every node the descent reads (and, in a [`PEEK`], every
            /// pointer it follows).
            pub fn lookup<'a, const MODE: u8>(
                db: &'a Db,
                root: &Root,
                id: u32,
                seen: &mut impl FnMut(Seen),
            ) -> Result<Option<&'a Part>> {
                let mut node: &Node = follow::<MODE, _>(&root.tree, db, "the index's root", seen)?;
                for _ in 0..MAX_LEVELS {
                    seen(Seen::Object(node as *const Node as usize));
                    let n = (node.count as usize).min(FANOUT);
                    let keys = &node.keys[..n];
                    if node.level == 0 {
                        return match keys.binary_search(&id) {
                            Ok(i) => follow::<MODE, Part>(
                                &node.parts[i],
                                db,
                                "an index leaf's part",
                                seen,
                            )
                            .map(Some),
                            Err(_) => Ok(None),
                        };
                    }
                    let i = keys.partition_point(|&k| k <= id);
                    let Some(i) = i.checked_sub(1) else {
                        return Ok(None);
                    };
                    node = follow::<MODE, Node>(&node.kids[i], db, "an index node's child", seen)?;
                }
                Err(EngineError::corrupt(format!(
                    "the index is deeper than {MAX_LEVELS} levels"
                )))
            }

            /// OO1's traversal from `part`: visit it, then each target of
            /// its connections in slot order, to depth
            /// [`TRAVERSAL_DEPTH`](crate::oo1::TRAVERSAL_DEPTH); `MODE` as
            /// for [`lookup`], `seen` gets every part's address (and, in a
            /// [`PEEK`], every pointer followed).
            pub fn traverse<const MODE: u8>(
                db: &Db,
                part: &Part,
                depth: u32,
                visit: &mut impl FnMut(Visit<'_>),
                seen: &mut impl FnMut(Seen),
            ) -> Result<()> {
                seen(Seen::Object(part as *const Part as usize));
                visit(Visit {
                    id: part.id,
                    x: part.x,
                    y: part.y,
                    kind: &part.kind,
                });
                if depth < crate::oo1::TRAVERSAL_DEPTH {
                    for out in &part.out {
                        let next = follow::<MODE, Part>(&out.to, db, "a part's connection", seen)?;
                        traverse::<MODE>(db, next, depth + 1, visit, seen)?;
                    }
                }
                Ok(())
            }

            /// Calls `f` with the address and the swizzled pointers of
            /// every object of the database (the root, every node and
            /// every part): its non-null fields swizzled at fault time
            /// (`PRef`), or its fields rewritten upon discovery (`Lazy`).
            /// Rewrites none itself ([`PEEK`]).
            pub fn census(db: &Db, root: PRef<Root>, f: &mut impl FnMut(usize, u64)) -> Result<()> {
                let r = db.get(root);
                f(r as *const Root as usize, swizzled::<Node, _>([&r.tree]));
                let none = &mut |_: Seen| {};
                let mut stack = vec![follow::<PEEK, Node>(&r.tree, db, "the index's root", none)?];
                while let Some(node) = stack.pop() {
                    let n = (node.count as usize).min(FANOUT);
                    f(
                        node as *const Node as usize,
                        swizzled::<Node, _>(&node.kids[..n]) + swizzled::<Part, _>(&node.parts[..n]),
                    );
                    for i in 0..n {
                        if node.level > 0 {
                            stack.push(follow::<PEEK, Node>(&node.kids[i], db, "an index node's child", none)?);
                        } else {
                            let part = follow::<PEEK, Part>(&node.parts[i], db, "an index leaf's part", none)?;
                            let conns = part.out.iter().map(|o| &o.to);
                            f(part as *const Part as usize, swizzled::<Part, _>(conns));
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
    [Option<PRef<Part>>],
    [Option<PRef<Node>>],
    [Option<PRef<Part>>],
    "*all-raw*: every pointer a `PRef`, swizzled when its page is faulted in."
);
granularity!(
    smart_index,
    [Option<PRef<Part>>],
    [Option<Smart<Node>>],
    [Option<Smart<Part>>],
    "*smart-index*: the index's pointers `Smart` (translated at each use), the parts' connections `PRef`."
);
granularity!(
    all_smart,
    [Option<Smart<Part>>],
    [Option<Smart<Node>>],
    [Option<Smart<Part>>],
    "*all-smart*: every pointer a `Smart`, translated at each use; nothing is swizzled at fault time."
);
granularity!(
    all_lazy,
    [Lazy<Part>],
    [Lazy<Node>],
    [Lazy<Part>],
    "*all-lazy*: every pointer a `Lazy`, swizzled upon discovery (rewritten when followed while its target is resident); nothing is swizzled at fault time."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<all_raw::Part>(), 104);
        assert_eq!(std::mem::size_of::<all_smart::Part>(), 104);
        assert_eq!(std::mem::size_of::<all_lazy::Part>(), 104);
        assert_eq!(std::mem::size_of::<all_lazy::Node>(), 4_008);
        // A node fills one page's object area (4,096 − 32 − 8 bytes).
        assert_eq!(std::mem::size_of::<all_raw::Node>(), 4_008);
        assert!(std::mem::size_of::<smart_index::Node>() <= 4_056);
    }
}
