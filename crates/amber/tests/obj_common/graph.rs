//! A persistent graph, its in-memory model, random operations on both, and
//! the comparison of the two: shared by the write-path tests (property test,
//! abort, kill).
//!
//! Every live node is listed in the root's `nodes` vector, in the model's
//! `order`; nodes point to each other (`next`, `other`, `kids`), own at most
//! one large blob (two pages), hold numbers and a byte string, and are
//! indexed by the root's `PIndex`. Operations name nodes by id, so one plan
//! applies to the model and to the database alike; planning depends only on
//! the model and the generator, so a plan can be replayed.
//!
//! Beside the swizzled pointers (`PRef`) each node holds lazy ones
//! (`Lazy`, swizzled upon discovery): one to the root and a vector of them
//! to other nodes, followed through `View::lazy` by every comparison, so
//! the fields are rewritten in memory, inside transactions and between
//! them, all along the write path's tests; what they lead to is compared
//! with the model like every other field.

use amber::internals::io::crash::SplitMix;
use amber::{Db, Field, Lazy, PBytes, PIndex, PRef, PVec, Persistent, Tx};
use std::collections::{BTreeMap, HashMap};

pub const PAD: usize = 24;
pub const BLOB: usize = 6000;

#[derive(Persistent)]
#[repr(C)]
pub struct GRoot {
    pub nodes: PVec<PRef<GNode>>,
    pub idx: PIndex<GNode>,
    pub serial: u64,
    pub commits: u64,
}

#[derive(Persistent)]
#[repr(C)]
pub struct GNode {
    pub id: u64,
    pub val: u64,
    pub next: Option<PRef<GNode>>,
    pub other: Option<PRef<GNode>>,
    pub blob: Option<PRef<GBlob>>,
    pub kids: PVec<PRef<GNode>>,
    pub nums: PVec<u64>,
    pub name: PBytes,
    pub pad: [u64; PAD],
    pub lazy_root: Lazy<GRoot>,
    pub lazy_kids: PVec<Lazy<GNode>>,
}

/// Larger than a page: a block of two.
#[derive(Persistent)]
#[repr(C)]
pub struct GBlob {
    pub id: u64,
    pub owner: Option<PRef<GNode>>,
    pub data: [u8; BLOB],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MBlob {
    pub id: u64,
    pub owned: bool,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MNode {
    pub val: u64,
    pub next: Option<u64>,
    pub other: Option<u64>,
    pub blob: Option<MBlob>,
    pub kids: Vec<u64>,
    pub nums: Vec<u64>,
    pub name: Vec<u8>,
    pub pad: [u64; PAD],
    pub lazy_kids: Vec<u64>,
}

/// What the database must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Model {
    pub order: Vec<u64>,
    pub nodes: BTreeMap<u64, MNode>,
    pub idx: BTreeMap<u64, u64>,
    pub serial: u64,
    pub commits: u64,
}

/// One operation, naming nodes by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    SetVal(u64, u64),
    SetPad(u64, usize, u64),
    SetNext(u64, Option<u64>),
    SetOther(u64, Option<u64>),
    /// A new node (id = the model's serial), placed near another if given.
    Alloc(Option<u64>),
    /// Frees a node and clears every reference to it (its index keys listed).
    Free(u64, Vec<u64>),
    PushNum(u64, u64),
    PopNum(u64),
    PushKid(u64, u64),
    SetKid(u64, usize, u64),
    SetName(u64, Vec<u8>),
    PushLazyKid(u64, u64),
    SetLazyKid(u64, usize, u64),
    IdxInsert(u64, u64),
    IdxRemove(u64),
    BlobNew(u64, u8),
    BlobWrite(u64, usize, Vec<u8>),
    BlobOwned(u64, bool),
    /// Counts a committed transaction (the kill test's progress mark).
    Commit,
}

fn blob_data(seed: u8) -> Vec<u8> {
    (0..BLOB)
        .map(|i| seed.wrapping_add((i / 7) as u8))
        .collect()
}

fn new_node(id: u64) -> MNode {
    MNode {
        val: id * 10,
        next: None,
        other: None,
        blob: None,
        kids: Vec::new(),
        nums: Vec::new(),
        name: Vec::new(),
        pad: [id; PAD],
        lazy_kids: Vec::new(),
    }
}

impl Model {
    fn pick(&self, rng: &mut SplitMix) -> u64 {
        self.order[rng.below(self.order.len() as u64) as usize]
    }

    fn pick_opt(&self, rng: &mut SplitMix) -> Option<u64> {
        (rng.below(5) != 0).then(|| self.pick(rng))
    }

    /// Applies `op` to the model.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::SetVal(id, v) => self.node(*id).val = *v,
            Op::SetPad(id, i, v) => self.node(*id).pad[*i] = *v,
            Op::SetNext(id, t) => self.node(*id).next = *t,
            Op::SetOther(id, t) => self.node(*id).other = *t,
            Op::Alloc(_) => {
                let id = self.serial;
                self.serial += 1;
                self.order.push(id);
                self.nodes.insert(id, new_node(id));
            }
            Op::Free(id, _) => {
                let i = self.order.iter().position(|x| x == id).expect("live");
                self.order.swap_remove(i);
                self.nodes.remove(id);
                for n in self.nodes.values_mut() {
                    if n.next == Some(*id) {
                        n.next = None;
                    }
                    if n.other == Some(*id) {
                        n.other = None;
                    }
                    n.kids.retain(|k| k != id);
                    n.lazy_kids.retain(|k| k != id);
                }
                self.idx.retain(|_, v| v != id);
            }
            Op::PushNum(id, x) => self.node(*id).nums.push(*x),
            Op::PopNum(id) => {
                self.node(*id).nums.pop();
            }
            Op::PushKid(id, k) => self.node(*id).kids.push(*k),
            Op::SetKid(id, i, k) => self.node(*id).kids[*i] = *k,
            Op::SetName(id, b) => self.node(*id).name = b.clone(),
            Op::PushLazyKid(id, k) => self.node(*id).lazy_kids.push(*k),
            Op::SetLazyKid(id, i, k) => self.node(*id).lazy_kids[*i] = *k,
            Op::IdxInsert(k, id) => {
                self.idx.insert(*k, *id);
            }
            Op::IdxRemove(k) => {
                self.idx.remove(k);
            }
            Op::BlobNew(id, seed) => {
                let bid = self.serial;
                self.serial += 1;
                self.node(*id).blob = Some(MBlob {
                    id: bid,
                    owned: true,
                    data: blob_data(*seed),
                });
            }
            Op::BlobWrite(id, off, b) => {
                let blob = self.node(*id).blob.as_mut().expect("blob");
                blob.data[*off..*off + b.len()].copy_from_slice(b);
            }
            Op::BlobOwned(id, o) => self.node(*id).blob.as_mut().expect("blob").owned = *o,
            Op::Commit => self.commits += 1,
        }
    }

    fn node(&mut self, id: u64) -> &mut MNode {
        self.nodes.get_mut(&id).expect("live node")
    }

    /// A random operation valid in the current state.
    pub fn random_op(&self, rng: &mut SplitMix, max_nodes: usize) -> Op {
        if self.order.is_empty() {
            return Op::Alloc(None);
        }
        loop {
            let id = self.pick(rng);
            let n = &self.nodes[&id];
            let op = match rng.below(108) {
                0..=9 => Op::SetVal(id, rng.next_u64()),
                10..=14 => Op::SetPad(id, rng.below(PAD as u64) as usize, rng.next_u64()),
                15..=24 => Op::SetNext(id, self.pick_opt(rng)),
                25..=29 => Op::SetOther(id, self.pick_opt(rng)),
                30..=39 if self.order.len() < max_nodes => {
                    Op::Alloc((rng.below(2) == 0).then_some(id))
                }
                40..=44 if self.order.len() > 4 => Op::Free(
                    id,
                    self.idx
                        .iter()
                        .filter(|&(_, v)| *v == id)
                        .map(|(k, _)| *k)
                        .collect(),
                ),
                45..=52 => Op::PushNum(id, rng.next_u64()),
                53..=54 if !n.nums.is_empty() => Op::PopNum(id),
                55..=61 => Op::PushKid(id, self.pick(rng)),
                62..=64 if !n.kids.is_empty() => {
                    Op::SetKid(id, rng.below(n.kids.len() as u64) as usize, self.pick(rng))
                }
                65..=71 => {
                    let len = match rng.below(10) {
                        0 => 0,
                        1 => 4200 + rng.below(3000) as usize,
                        _ => rng.below(120) as usize,
                    };
                    Op::SetName(id, (0..len).map(|_| rng.next_u64() as u8).collect())
                }
                72..=81 => Op::IdxInsert(rng.below(600), id),
                82..=85 if !self.idx.is_empty() => {
                    let k = *self
                        .idx
                        .keys()
                        .nth(rng.below(self.idx.len() as u64) as usize)
                        .expect("key");
                    Op::IdxRemove(k)
                }
                86..=89 => Op::BlobNew(id, rng.next_u64() as u8),
                90..=95 if n.blob.is_some() => {
                    let len = 1 + rng.below(200) as usize;
                    let off = rng.below((BLOB - len) as u64) as usize;
                    Op::BlobWrite(id, off, (0..len).map(|_| rng.next_u64() as u8).collect())
                }
                96..=99 if n.blob.is_some() => Op::BlobOwned(id, rng.below(2) == 0),
                100..=104 => Op::PushLazyKid(id, self.pick(rng)),
                105..=107 if !n.lazy_kids.is_empty() => Op::SetLazyKid(
                    id,
                    rng.below(n.lazy_kids.len() as u64) as usize,
                    self.pick(rng),
                ),
                _ => continue,
            };
            return op;
        }
    }

    /// A transaction's worth of operations, planned against (and applied
    /// to) `self`.
    pub fn plan(&mut self, rng: &mut SplitMix, ops: usize, max_nodes: usize) -> Vec<Op> {
        let mut out = Vec::with_capacity(ops);
        for _ in 0..ops {
            let op = self.random_op(rng, max_nodes);
            self.apply(&op);
            out.push(op);
        }
        out
    }
}

/// The database's root, created if missing, and its nodes by id.
pub fn root_of(db: &Db) -> Option<PRef<GRoot>> {
    db.root("graph").expect("root")
}

/// Creates the root (committing) on an empty database.
pub fn create_root(db: &mut Db) -> PRef<GRoot> {
    let mut tx = db.begin().expect("begin");
    let r = tx
        .alloc(GRoot {
            nodes: PVec::new(),
            idx: PIndex::new(),
            serial: 0,
            commits: 0,
        })
        .expect("alloc root");
    tx.set_root("graph", r).expect("set root");
    tx.commit().expect("commit");
    r
}

/// The nodes of the database by id, read from the root's vector.
pub fn refs(view: &impl View, root: PRef<GRoot>) -> HashMap<u64, PRef<GNode>> {
    let r = view.get(root);
    view.slice(&r.nodes)
        .iter()
        .map(|&p| (view.get(p).id, p))
        .collect()
}

/// Applies `op` in `tx`; `refs` follows allocations and frees.
pub fn apply_db(
    tx: &mut Tx<'_>,
    root: PRef<GRoot>,
    refs: &mut HashMap<u64, PRef<GNode>>,
    op: &Op,
) -> amber::Result<()> {
    let r = |refs: &HashMap<u64, PRef<GNode>>, id: &u64| refs[id];
    match op {
        Op::SetVal(id, v) => tx.get_mut(r(refs, id)).val = *v,
        Op::SetPad(id, i, v) => tx.get_mut(r(refs, id)).pad[*i] = *v,
        Op::SetNext(id, t) => {
            let t = t.map(|t| r(refs, &t));
            tx.get_mut(r(refs, id)).next = t;
        }
        Op::SetOther(id, t) => {
            let t = t.map(|t| r(refs, &t));
            tx.get_mut(r(refs, id)).other = t;
        }
        Op::Alloc(near) => {
            let id = tx.get(root).serial;
            let m = new_node(id);
            let value = GNode {
                id,
                val: m.val,
                next: None,
                other: None,
                blob: None,
                kids: PVec::new(),
                nums: PVec::new(),
                name: PBytes::new(),
                pad: m.pad,
                lazy_root: Lazy::from(root),
                lazy_kids: PVec::new(),
            };
            let p = match near {
                Some(n) => tx.alloc_near(value, r(refs, n))?,
                None => tx.alloc(value)?,
            };
            tx.get_mut(root).serial = id + 1;
            tx.push(root, |g| &mut g.nodes, p)?;
            refs.insert(id, p);
        }
        Op::Free(id, keys) => {
            let p = r(refs, id);
            // Out of the directory (swap with the last, as the model does).
            let all = tx.slice_mut(root, |g| &mut g.nodes);
            let i = all.iter().position(|&x| x == p).expect("listed");
            let last = all.len() - 1;
            all.swap(i, last);
            tx.pop(root, |g| &mut g.nodes);
            // No pointer to it is left.
            let others: Vec<PRef<GNode>> = refs.values().copied().filter(|&x| x != p).collect();
            for o in others {
                let n = tx.get_mut(o);
                if n.next == Some(p) {
                    n.next = None;
                }
                if n.other == Some(p) {
                    n.other = None;
                }
                let kids = tx.slice_mut(o, |g| &mut g.kids);
                let mut keep = 0;
                for j in 0..kids.len() {
                    if kids[j] != p {
                        kids[keep] = kids[j];
                        keep += 1;
                    }
                }
                let extra = kids.len() - keep;
                for _ in 0..extra {
                    tx.pop(o, |g| &mut g.kids);
                }
                // Lazy pointers are compared by what they lead to.
                let n = tx.get(o);
                let keep: Vec<PRef<GNode>> = (tx.slice(&n.lazy_kids).iter())
                    .map(|l| refs[&tx.lazy(l).expect("a kid").id])
                    .filter(|&k| k != p)
                    .collect();
                let lazy = tx.slice_mut(o, |g| &mut g.lazy_kids);
                for (slot, &k) in lazy.iter_mut().zip(&keep) {
                    *slot = Lazy::from(k);
                }
                tx.truncate(o, |g| &mut g.lazy_kids, keep.len())?;
            }
            for &k in keys {
                tx.index_remove(root, |g| &mut g.idx, &k)?;
            }
            if let Some(b) = tx.get(p).blob {
                tx.free(b)?;
            }
            tx.free(p)?;
            refs.remove(id);
        }
        Op::PushNum(id, x) => tx.push(r(refs, id), |g| &mut g.nums, *x)?,
        Op::PopNum(id) => {
            tx.pop(r(refs, id), |g| &mut g.nums);
        }
        Op::PushKid(id, k) => {
            let k = r(refs, k);
            tx.push(r(refs, id), |g| &mut g.kids, k)?;
        }
        Op::SetKid(id, i, k) => {
            let k = r(refs, k);
            tx.slice_mut(r(refs, id), |g| &mut g.kids)[*i] = k;
        }
        Op::SetName(id, b) => tx.set_bytes(r(refs, id), |g| &mut g.name, b)?,
        Op::PushLazyKid(id, k) => {
            let k = Lazy::from(r(refs, k));
            tx.push(r(refs, id), |g| &mut g.lazy_kids, k)?;
        }
        Op::SetLazyKid(id, i, k) => {
            let k = Lazy::from(r(refs, k));
            tx.slice_mut(r(refs, id), |g| &mut g.lazy_kids)[*i] = k;
        }
        Op::IdxInsert(k, id) => {
            tx.index_insert(root, |g| &mut g.idx, k, r(refs, id))?;
        }
        Op::IdxRemove(k) => {
            tx.index_remove(root, |g| &mut g.idx, k)?;
        }
        Op::BlobNew(id, seed) => {
            let p = r(refs, id);
            if let Some(old) = tx.get(p).blob {
                tx.free(old)?;
            }
            let bid = tx.get(root).serial;
            let mut data = [0u8; BLOB];
            data.copy_from_slice(&blob_data(*seed));
            let b = tx.alloc(GBlob {
                id: bid,
                owner: Some(p),
                data,
            })?;
            tx.get_mut(root).serial = bid + 1;
            tx.get_mut(p).blob = Some(b);
        }
        Op::BlobWrite(id, off, bytes) => {
            let b = tx.get(r(refs, id)).blob.expect("blob");
            tx.get_mut(b).data[*off..*off + bytes.len()].copy_from_slice(bytes);
        }
        Op::BlobOwned(id, o) => {
            let p = r(refs, id);
            let b = tx.get(p).blob.expect("blob");
            tx.get_mut(b).owner = o.then_some(p);
        }
        Op::Commit => tx.get_mut(root).commits += 1,
    }
    Ok(())
}

/// Read access shared by [`Db`] and [`Tx`].
pub trait View {
    fn get<T: Persistent>(&self, p: PRef<T>) -> &T;
    fn slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> &'a [T];
    fn bytes<'a>(&'a self, b: &'a PBytes) -> &'a [u8];
    fn index_get<V: Persistent>(&self, i: &PIndex<V>, k: u64) -> amber::Result<Option<PRef<V>>>;
    fn lazy<'a, T: Persistent>(&'a self, l: &Lazy<T>) -> Option<&'a T>;
}

macro_rules! view {
    ($t:ty) => {
        impl View for $t {
            fn get<T: Persistent>(&self, p: PRef<T>) -> &T {
                <$t>::get(self, p)
            }
            fn slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> &'a [T] {
                <$t>::slice(self, v)
            }
            fn bytes<'a>(&'a self, b: &'a PBytes) -> &'a [u8] {
                <$t>::bytes(self, b)
            }
            fn index_get<V: Persistent>(
                &self,
                i: &PIndex<V>,
                k: u64,
            ) -> amber::Result<Option<PRef<V>>> {
                <$t>::index_get(self, i, &k)
            }
            fn lazy<'a, T: Persistent>(&'a self, l: &Lazy<T>) -> Option<&'a T> {
                amber::View::lazy(self, l)
            }
        }
    };
}
view!(Db);
view!(Tx<'_>);

/// Follows every lazy pointer of the graph, as a program reading it does
/// (swizzling those whose targets are resident).
pub fn follow_lazy(view: &impl View, root: PRef<GRoot>) {
    let r = view.get(root);
    for &p in view.slice(&r.nodes) {
        let n = view.get(p);
        view.lazy(&n.lazy_root);
        for l in view.slice(&n.lazy_kids) {
            view.lazy(l);
        }
    }
}

/// The lazy pointers of the graph (every node's root pointer and lazy
/// kids): how many hold a direct address (swizzled upon discovery), and
/// how many there are.
pub fn lazy_swizzled(view: &impl View, root: PRef<GRoot>) -> (u64, u64) {
    let r = view.get(root);
    let (mut swizzled, mut all) = (0, 0);
    for &p in view.slice(&r.nodes) {
        let n = view.get(p);
        let kids = view.slice(&n.lazy_kids).iter().map(|l| l.is_swizzled());
        for s in std::iter::once(n.lazy_root.is_swizzled()).chain(kids) {
            swizzled += u64::from(s);
            all += 1;
        }
    }
    (swizzled, all)
}

/// Compares the graph reached from `root` with `m`; returns the first
/// difference.
pub fn diff(view: &impl View, root: PRef<GRoot>, m: &Model) -> Result<(), String> {
    let r = view.get(root);
    if (r.serial, r.commits) != (m.serial, m.commits) {
        return Err(format!(
            "root serial/commits {:?}, model {:?}",
            (r.serial, r.commits),
            (m.serial, m.commits)
        ));
    }
    let list = view.slice(&r.nodes);
    let ids: Vec<u64> = list.iter().map(|&p| view.get(p).id).collect();
    if ids != m.order {
        return Err(format!("node list {ids:?}, model {:?}", m.order));
    }
    let refs: HashMap<u64, PRef<GNode>> = ids.iter().copied().zip(list.iter().copied()).collect();
    let to = |t: Option<u64>| t.map(|t| refs[&t]);
    for (&id, w) in &m.nodes {
        let p = refs[&id];
        let n = view.get(p);
        let kids: Vec<PRef<GNode>> = w.kids.iter().map(|k| refs[k]).collect();
        let lazy_kids: Vec<u64> = (view.slice(&n.lazy_kids).iter())
            .map(|l| view.lazy(l).expect("a lazy kid").id)
            .collect();
        let lazy_root = view.lazy(&n.lazy_root).is_some_and(|l| std::ptr::eq(l, r));
        let checks = [
            ("val", n.val == w.val),
            ("pad", n.pad == w.pad),
            ("next", n.next == to(w.next)),
            ("other", n.other == to(w.other)),
            ("kids", view.slice(&n.kids) == &kids[..]),
            ("nums", view.slice(&n.nums) == &w.nums[..]),
            ("name", view.bytes(&n.name) == &w.name[..]),
            ("blob", n.blob.is_some() == w.blob.is_some()),
            ("lazy_kids", lazy_kids == w.lazy_kids),
            ("lazy_root", lazy_root),
        ];
        if let Some((what, _)) = checks.iter().find(|(_, ok)| !ok) {
            return Err(format!("node {id}: {what} differs"));
        }
        if let (Some(b), Some(wb)) = (n.blob, &w.blob) {
            let g = view.get(b);
            if g.id != wb.id || g.owner != wb.owned.then_some(p) || g.data[..] != wb.data[..] {
                let at = (0..BLOB).find(|&i| g.data[i] != wb.data[i]);
                return Err(format!(
                    "node {id}: blob {} differs (id {}, owner {:?} for {:?}, first data byte differing {at:?})",
                    wb.id,
                    g.id,
                    g.owner,
                    wb.owned.then_some(p)
                ));
            }
        }
    }
    if r.idx.len() != m.idx.len() as u64 {
        return Err(format!("index has {}, model {}", r.idx.len(), m.idx.len()));
    }
    // Every key of the model, and a sample of the others.
    let keys = m.idx.keys().copied().chain((0..600).step_by(7));
    for k in keys {
        let got = view.index_get(&r.idx, k).map_err(|e| e.to_string())?;
        let want = m.idx.get(&k).map(|id| refs[id]);
        if got != want {
            let got_id = got.map(|p| view.get(p).id);
            return Err(format!(
                "index key {k} differs: node {got_id:?}, model {:?}",
                m.idx.get(&k)
            ));
        }
    }
    Ok(())
}
