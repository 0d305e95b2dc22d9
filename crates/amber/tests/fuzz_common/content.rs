//! The content of the fuzz targets' seed databases, and how the whole-file
//! targets read it back: a list of nodes, each also in an index by id.
//!
//! A model the targets check reads against without keeping a copy: every
//! [`Node`] carries its id and a version, and every other byte of it (its
//! check word, its name, its vector) is a function of the two. A node read
//! back whose bytes do not agree is a value that was never committed,
//! whatever mutation the file went through.
//!
//! Shared by the stable tests (`tests/fuzz_*.rs`) and the cargo-fuzz
//! targets (`fuzz/`, which include this file by path): Amber cannot define
//! `#[derive(Persistent)]` types itself.

use amber::internals::fuzzing::Content;
use amber::{Db, Error, Migration, PIndex, PRef, PString, PVec, Persistent, Result, Tx, View};

/// A node: a list, each node in an index by id.
#[derive(Persistent)]
#[repr(C)]
#[persistent(name = "FuzzNode")]
pub struct Node {
    /// Which node (0..[`NODES`]).
    pub id: u64,
    /// How many times it was rewritten.
    pub ver: u64,
    /// [`mix`]`(id, ver)`.
    pub check: u64,
    /// The next node of the list.
    pub next: Option<PRef<Node>>,
    /// [`name`]`(id, ver)`.
    pub name: PString,
    /// [`data`]`(id, ver)`.
    pub data: PVec<u64>,
    /// The low bytes of [`mix`]`(id, ver)`: a fixed array, so that the
    /// catalog holds one for mutations to reach.
    pub tags: [u16; 4],
}

/// The root object: the list's head and the index.
#[derive(Persistent)]
#[repr(C)]
#[persistent(name = "FuzzTop")]
pub struct Top {
    /// First node.
    pub head: Option<PRef<Node>>,
    /// Every node by id.
    pub by_id: PIndex<Node, u64>,
    /// Nodes written.
    pub nodes: u64,
}

/// The content's next version, the seed of the schema file target: a
/// node's fixed array renamed, and a field added with its default.
pub mod next {
    use amber::{PIndex, PRef, PString, PVec, Persistent};

    /// A node, next version.
    #[derive(Persistent)]
    #[repr(C)]
    #[persistent(name = "FuzzNode")]
    pub struct Node {
        /// As before.
        pub id: u64,
        /// As before.
        pub ver: u64,
        /// As before.
        pub check: u64,
        /// As before.
        pub next: Option<PRef<Node>>,
        /// As before.
        pub name: PString,
        /// As before.
        pub data: PVec<u64>,
        /// Was `tags`.
        #[persistent(renamed_from = "tags")]
        pub labels: [u16; 4],
        /// New: zero in migrated nodes.
        #[persistent(default)]
        pub extra: u64,
    }

    /// The root object, next version (its node type's).
    #[derive(Persistent)]
    #[repr(C)]
    #[persistent(name = "FuzzTop")]
    pub struct Top {
        /// As before.
        pub head: Option<PRef<Node>>,
        /// As before.
        pub by_id: PIndex<Node, u64>,
        /// As before.
        pub nodes: u64,
    }
}

/// Nodes in a seed database.
pub const NODES: u64 = 24;
/// Versions a node can reach.
pub const MAX_VER: u64 = 3;
/// The name of the root.
pub const ROOT: &str = "fuzz";

/// The check word of node `id` at version `ver`.
pub fn mix(id: u64, ver: u64) -> u64 {
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ver.wrapping_add(0xD1B5_4A32_D192_ED03);
    x ^= x >> 31;
    x.wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// The name of node `id` at version `ver`.
pub fn name(id: u64, ver: u64) -> String {
    format!("node-{id}-v{ver}")
}

/// The vector of node `id` at version `ver`: two nodes have vectors longer
/// than a 16 KiB page, so that every seed holds multi-page blocks.
pub fn data(id: u64, ver: u64) -> Vec<u64> {
    let len = if id % 11 == 5 { 2500 } else { (id % 7) * 3 };
    (0..len).map(|i| mix(id, ver) ^ i).collect()
}

/// The fixed array of node `id` at version `ver`.
pub fn tags(id: u64, ver: u64) -> [u16; 4] {
    let m = mix(id, ver);
    [
        m as u16,
        (m >> 16) as u16,
        (m >> 32) as u16,
        (m >> 48) as u16,
    ]
}

fn new_node(tx: &mut Tx<'_>, id: u64, ver: u64, next: Option<PRef<Node>>) -> Result<Node> {
    Ok(Node {
        id,
        ver,
        check: mix(id, ver),
        next,
        name: tx.new_string(&name(id, ver))?,
        data: tx.new_vec(data(id, ver))?,
        tags: tags(id, ver),
    })
}

/// The seed content.
#[derive(Debug)]
pub struct Nodes;

impl Content for Nodes {
    const REWRITES: u64 = MAX_VER;

    fn fill(db: &mut Db, rewrites: u64) -> Result<()> {
        let mut tx = db.begin()?;
        let top = tx.alloc(Top {
            head: None,
            by_id: PIndex::new(),
            nodes: NODES,
        })?;
        let mut prev: Option<PRef<Node>> = None;
        for id in (0..NODES).rev() {
            let n = new_node(&mut tx, id, 0, prev)?;
            let n = tx.alloc(n)?;
            tx.index_insert(top, |t| &mut t.by_id, &id, n)?;
            prev = Some(n);
        }
        tx.get_mut(top).head = prev;
        tx.set_root(ROOT, top)?;
        tx.commit()?;
        for round in 1..=rewrites.min(MAX_VER) {
            let mut tx = db.begin()?;
            let top: PRef<Top> = tx
                .root(ROOT)?
                .ok_or_else(|| Error::Invalid("no root".into()))?;
            for id in (round..NODES).step_by(5) {
                let Some(n) = tx.index_get(&tx.get(top).by_id, &id)? else {
                    continue;
                };
                let next = tx.get(n).next;
                let fresh = new_node(&mut tx, id, round, next)?;
                *tx.get_mut(n) = fresh;
            }
            tx.commit()?;
        }
        Ok(())
    }

    fn read(db: &Db, strict: bool) -> usize {
        let _ = db.roots();
        let Ok(Some(top)) = db.root::<Top>(ROOT) else {
            return 0;
        };
        let Ok(t) = db.try_get(top) else {
            return 0;
        };
        let mut whole = 1;
        // The list: at most as many steps as nodes were written (a damaged
        // `next` may make a cycle).
        let mut at = t.head;
        for _ in 0..NODES {
            let Some(n) = at else { break };
            let Ok(node) = db.try_get(n) else { break };
            whole += usize::from(check_node(db, node, strict));
            at = node.next;
        }
        for id in 0..t.nodes.min(NODES) {
            if let Ok(Some(n)) = db.index_get(&t.by_id, &id)
                && let Ok(node) = db.try_get(n)
            {
                whole += usize::from(check_node(db, node, strict));
            }
        }
        let _ = db.count::<Node>();
        whole
    }

    fn migration() -> Result<Migration> {
        let mut m = Migration::new();
        m.upgrade::<next::Top>()?;
        Ok(m)
    }

    fn read_next(db: &Db, strict: bool) -> usize {
        let Ok(Some(top)) = db.root::<next::Top>(ROOT) else {
            return 0;
        };
        let Ok(t) = db.try_get(top) else {
            return 0;
        };
        let mut whole = 1;
        let mut at = t.head;
        for _ in 0..NODES {
            let Some(n) = at else { break };
            let Ok(node) = db.try_get(n) else { break };
            whole += usize::from(check_next(db, node, strict));
            at = node.next;
        }
        for id in 0..t.nodes.min(NODES) {
            if let Ok(Some(n)) = db.index_get(&t.by_id, &id)
                && let Ok(node) = db.try_get(n)
            {
                whole += usize::from(check_next(db, node, strict));
            }
        }
        whole
    }

    fn unchanged() -> Result<Migration> {
        let mut m = Migration::new();
        m.upgrade::<Top>()?;
        Ok(m)
    }
}

/// [`check_node`] for a node of the next version: a committed node,
/// converted (its array renamed, its new field zero).
fn check_next(db: &Db, n: &next::Node, strict: bool) -> bool {
    let text = db.try_str(&n.name);
    let vec = db.try_slice(&n.data);
    let whole = text.is_ok() && vec.is_ok();
    if !strict {
        return whole;
    }
    let (id, ver) = (n.id, n.ver);
    assert!(
        id < NODES
            && ver <= MAX_VER
            && n.check == mix(id, ver)
            && n.labels == tags(id, ver)
            && n.extra == 0,
        "a migrated node read back that was never committed: id {id}, ver {ver}"
    );
    if let Ok(s) = text {
        assert_eq!(s, name(id, ver), "node {id} v{ver}: wrong name");
    }
    if let Ok(d) = vec {
        assert!(d == data(id, ver), "node {id} v{ver}: wrong vector");
    }
    whole
}

/// Checks a node read back: with `strict`, every byte of it must agree with
/// its id and version. Whether its string and vector were read too.
fn check_node(db: &Db, n: &Node, strict: bool) -> bool {
    let text = db.try_str(&n.name);
    let vec = db.try_slice(&n.data);
    let whole = text.is_ok() && vec.is_ok();
    if !strict {
        return whole;
    }
    let (id, ver) = (n.id, n.ver);
    assert!(
        id < NODES && ver <= MAX_VER && n.check == mix(id, ver) && n.tags == tags(id, ver),
        "a node read back that was never committed: id {id}, ver {ver}, check {:#x}",
        n.check
    );
    if let Ok(s) = text {
        assert_eq!(s, name(id, ver), "node {id} v{ver}: wrong name");
    }
    if let Ok(d) = vec {
        assert!(d == data(id, ver), "node {id} v{ver}: wrong vector");
    }
    whole
}
