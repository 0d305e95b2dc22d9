//! Swizzle/unswizzle round trips for every pointer kind and layout.
//!
//! A random specification (plain Rust data) says which object every pointer
//! of every object points to; the database is built from it, then read back
//! in the same session, after a clean close, after a crash (recovery from the
//! log), with a cache so small that pages are evicted and faulted in again
//! between and during traversals, and with a fetch cluster. Each check
//! compares every value, every pointer's target *identity* (the `PRef` read
//! from a field equals the `PRef` of the intended object, read from the
//! catalog), every smart pointer's persistent address, and the committed
//! bytes in the store: every pointer field there holds the target's
//! persistent address (the unswizzled form), whatever the session did.

use super::Cfg;
use super::types::{Big, Catalog, Hub, Inner, Leaf, Pair};
use super::{cached, check_backend, open, opts, paddr_of};
use amber::internals::io::crash::SplitMix;
use amber::{Db, Options, PBytes, PIndex, PRef, PVec, Smart, Tx};
use std::collections::BTreeMap;
use std::mem::offset_of;

const LEAVES: usize = 300;
const HUBS: usize = 40;
const BIGS: usize = 6;

#[derive(Debug, Clone, PartialEq)]
struct HubSpec {
    x: u32,
    inner_leaf: Option<usize>,
    inner_pair: (usize, Option<usize>),
    arr: [Option<usize>; 5],
    pairs: [(usize, Option<usize>); 3],
    me: bool,
    next: Option<usize>,
    smart: usize,
    osmart: Option<usize>,
    vrefs: Vec<usize>,
    vpairs: Vec<(usize, Option<usize>)>,
    vnums: Vec<u64>,
    name: Vec<u8>,
    blob: Vec<u8>,
    idx: BTreeMap<u64, usize>,
    big: Option<usize>,
    bigs: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
struct BigSpec {
    head: u64,
    back: Option<usize>,
    leaves: [Option<usize>; 4],
    data: Vec<u8>,
    tail: u64,
}

/// What the database must hold. Leaf `i` has value `leaf_v(i)`.
#[derive(Debug, Clone, PartialEq)]
struct Spec {
    hubs: Vec<HubSpec>,
    bigs: Vec<BigSpec>,
}

fn leaf_v(i: usize) -> u64 {
    1_000_000 + i as u64 * 7
}

fn leaf_tag(i: usize) -> [u8; 8] {
    let mut t = *b"leaf----";
    t[4..].copy_from_slice(&(i as u32).to_le_bytes());
    t
}

fn opt(rng: &mut SplitMix, n: usize) -> Option<usize> {
    (rng.below(4) != 0).then(|| rng.below(n as u64) as usize)
}

fn leaf(rng: &mut SplitMix) -> usize {
    rng.below(LEAVES as u64) as usize
}

fn bytes(rng: &mut SplitMix, max: u64) -> Vec<u8> {
    let n = rng.below(max + 1) as usize;
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

impl Spec {
    fn random(rng: &mut SplitMix) -> Spec {
        let bigs = (0..BIGS)
            .map(|i| BigSpec {
                head: 0xB16_0000 + i as u64,
                back: opt(rng, HUBS),
                leaves: [(); 4].map(|()| opt(rng, LEAVES)),
                data: (0..10000).map(|j| (j * 31 + i * 7) as u8).collect(),
                tail: !(i as u64),
            })
            .collect();
        let hubs = (0..HUBS)
            .map(|i| HubSpec {
                x: rng.next_u64() as u32,
                inner_leaf: opt(rng, LEAVES),
                inner_pair: (leaf(rng), opt(rng, LEAVES)),
                arr: [(); 5].map(|()| opt(rng, LEAVES)),
                pairs: [(); 3].map(|()| (leaf(rng), opt(rng, LEAVES))),
                me: rng.below(2) == 0,
                next: (i + 1 < HUBS).then_some(i + 1),
                smart: leaf(rng),
                osmart: opt(rng, BIGS),
                vrefs: (0..rng.below(12)).map(|_| leaf(rng)).collect(),
                vpairs: (0..rng.below(6))
                    .map(|_| (leaf(rng), opt(rng, LEAVES)))
                    .collect(),
                vnums: (0..rng.below(40)).map(|_| rng.next_u64()).collect(),
                name: bytes(rng, 60),
                // Some byte strings are larger than a page: a run of their own.
                blob: if i % 7 == 3 {
                    bytes(rng, 9000)
                } else {
                    bytes(rng, 300)
                },
                idx: (0..rng.below(30))
                    .map(|_| (rng.below(1000), leaf(rng)))
                    .collect(),
                big: opt(rng, BIGS),
                bigs: (0..rng.below(4))
                    .map(|_| rng.below(BIGS as u64) as usize)
                    .collect(),
            })
            .collect();
        Spec { hubs, bigs }
    }
}

/// The objects of the catalog, in order.
struct Objs {
    leaves: Vec<PRef<Leaf>>,
    hubs: Vec<PRef<Hub>>,
    bigs: Vec<PRef<Big>>,
}

fn build(db: &mut Db, spec: &Spec, rng: &mut SplitMix) -> Objs {
    let mut tx = db.begin().expect("begin");
    let cat = tx
        .alloc(Catalog {
            leaves: PVec::new(),
            hubs: PVec::new(),
            bigs: PVec::new(),
            first: None,
        })
        .expect("alloc catalog");
    let leaves: Vec<PRef<Leaf>> = (0..LEAVES)
        .map(|i| {
            tx.alloc(Leaf {
                v: leaf_v(i),
                tag: leaf_tag(i),
            })
            .expect("alloc leaf")
        })
        .collect();
    let l = |i: usize| leaves[i];
    let ol = |i: Option<usize>| i.map(l);
    let bigs: Vec<PRef<Big>> = spec
        .bigs
        .iter()
        .map(|b| {
            let mut data = [0u8; 10000];
            data.copy_from_slice(&b.data);
            tx.alloc(Big {
                head: b.head,
                back: None,
                leaves: b.leaves.map(ol),
                data,
                tail: b.tail,
            })
            .expect("alloc big")
        })
        .collect();
    let mut hubs = Vec::new();
    for (i, h) in spec.hubs.iter().enumerate() {
        let smart = tx.to_smart(l(h.smart)).expect("smart");
        let osmart = h.osmart.map(|b| tx.to_smart(bigs[b]).expect("smart"));
        let value = Hub {
            id: i as u64,
            inner: Inner {
                x: h.x,
                _pad: [0; 4],
                leaf: ol(h.inner_leaf),
                pair: Pair {
                    a: l(h.inner_pair.0),
                    b: ol(h.inner_pair.1),
                },
            },
            arr: h.arr.map(ol),
            pairs: h.pairs.map(|(a, b)| Pair { a: l(a), b: ol(b) }),
            none: None,
            me: None,
            next: None,
            smart,
            osmart,
            vrefs: PVec::new(),
            vpairs: PVec::new(),
            vnums: PVec::new(),
            name: PBytes::new(),
            blob: PBytes::new(),
            idx: PIndex::new(),
            big: h.big.map(|b| bigs[b]),
            bigs: PVec::new(),
        };
        // Half of the hubs share a page with one of their leaves.
        let p = if rng.below(2) == 0 {
            tx.alloc_near(value, l(leaf(rng))).expect("alloc hub")
        } else {
            tx.alloc(value).expect("alloc hub")
        };
        hubs.push(p);
    }
    for (i, h) in spec.hubs.iter().enumerate() {
        let p = hubs[i];
        tx.get_mut(p).me = h.me.then_some(p);
        tx.get_mut(p).next = h.next.map(|n| hubs[n]);
        for &v in &h.vrefs {
            tx.push(p, |g| &mut g.vrefs, l(v)).expect("push");
        }
        for &(a, b) in &h.vpairs {
            let pair = Pair { a: l(a), b: ol(b) };
            tx.push(p, |g| &mut g.vpairs, pair).expect("push");
        }
        for &n in &h.vnums {
            tx.push(p, |g| &mut g.vnums, n).expect("push");
        }
        tx.set_bytes(p, |g| &mut g.name, &h.name).expect("name");
        tx.set_bytes(p, |g| &mut g.blob, &h.blob).expect("blob");
        for (&k, &v) in &h.idx {
            tx.index_insert(p, |g| &mut g.idx, &k, l(v)).expect("index");
        }
        for &b in &h.bigs {
            tx.push(p, |g| &mut g.bigs, bigs[b]).expect("push");
        }
    }
    for (i, b) in spec.bigs.iter().enumerate() {
        tx.get_mut(bigs[i]).back = b.back.map(|h| hubs[h]);
    }
    for &p in &leaves {
        tx.push(cat, |c| &mut c.leaves, p).expect("push");
    }
    for &p in &hubs {
        tx.push(cat, |c| &mut c.hubs, p).expect("push");
    }
    for &p in &bigs {
        tx.push(cat, |c| &mut c.bigs, p).expect("push");
    }
    tx.get_mut(cat).first = hubs.first().copied();
    tx.set_root("catalog", cat).expect("root");
    tx.commit().expect("commit");
    Objs { leaves, hubs, bigs }
}

/// Reads the catalog's object lists.
fn objs(db: &Db) -> (PRef<Catalog>, Objs) {
    let cat: PRef<Catalog> = db.root("catalog").expect("root").expect("catalog");
    let c = db.get(cat);
    (
        cat,
        Objs {
            leaves: db.slice(&c.leaves).to_vec(),
            hubs: db.slice(&c.hubs).to_vec(),
            bigs: db.slice(&c.bigs).to_vec(),
        },
    )
}

/// Persistent addresses of every object of the catalog.
struct Paddrs {
    leaves: Vec<u64>,
    hubs: Vec<u64>,
    bigs: Vec<u64>,
}

fn paddrs(db: &mut Db, o: &Objs) -> Paddrs {
    let tx = db.begin().expect("begin");
    let out = Paddrs {
        leaves: o
            .leaves
            .iter()
            .map(|&p| tx.to_smart(p).expect("paddr").paddr())
            .collect(),
        hubs: o
            .hubs
            .iter()
            .map(|&p| tx.to_smart(p).expect("paddr").paddr())
            .collect(),
        bigs: o
            .bigs
            .iter()
            .map(|&p| tx.to_smart(p).expect("paddr").paddr())
            .collect(),
    };
    tx.abort().expect("abort");
    out
}

/// Checks the database against the spec: values, pointer identities, smart
/// addresses, and the unswizzled committed bytes. Returns the persistent
/// addresses, which must not change across sessions.
fn check(db: &mut Db, spec: &Spec) -> Paddrs {
    let (_, o) = objs(db);
    assert_eq!(o.leaves.len(), LEAVES);
    assert_eq!(o.hubs.len(), HUBS);
    assert_eq!(o.bigs.len(), BIGS);
    let pa = paddrs(db, &o);
    let l = |i: usize| o.leaves[i];
    let ol = |i: Option<usize>| i.map(l);
    for (i, &p) in o.leaves.iter().enumerate() {
        let f = db.get(p);
        assert_eq!((f.v, f.tag), (leaf_v(i), leaf_tag(i)), "leaf {i}");
    }
    for (i, (b, &p)) in spec.bigs.iter().zip(&o.bigs).enumerate() {
        let g = db.get(p);
        assert_eq!(g.head, b.head, "big {i} head");
        assert_eq!(g.tail, b.tail, "big {i} tail (end of its run)");
        assert_eq!(g.back, b.back.map(|h| o.hubs[h]), "big {i} back");
        assert_eq!(g.leaves, b.leaves.map(ol), "big {i} leaves");
        assert!(g.data[..] == b.data[..], "big {i} data");
    }
    for (i, (h, &p)) in spec.hubs.iter().zip(&o.hubs).enumerate() {
        let g = db.get(p);
        assert_eq!(g.id, i as u64, "hub {i}");
        assert_eq!(g.inner.x, h.x, "hub {i} inner.x");
        assert_eq!(g.inner.leaf, ol(h.inner_leaf), "hub {i} inner.leaf");
        assert_eq!(g.inner.pair.a, l(h.inner_pair.0), "hub {i} inner.pair.a");
        assert_eq!(g.inner.pair.b, ol(h.inner_pair.1), "hub {i} inner.pair.b");
        assert_eq!(g.arr, h.arr.map(ol), "hub {i} arr");
        for (k, (a, b)) in h.pairs.iter().enumerate() {
            assert_eq!(g.pairs[k].a, l(*a), "hub {i} pairs[{k}].a");
            assert_eq!(g.pairs[k].b, ol(*b), "hub {i} pairs[{k}].b");
        }
        assert_eq!(g.none, None, "hub {i} none");
        assert_eq!(g.me, h.me.then_some(p), "hub {i} me");
        assert_eq!(g.next, h.next.map(|n| o.hubs[n]), "hub {i} next");
        // Smart pointers stay persistent addresses, and translate to the
        // very object the plain pointer reaches.
        assert_eq!(g.smart.paddr(), pa.leaves[h.smart], "hub {i} smart");
        let via_smart: &Leaf = db.smart(g.smart).expect("smart");
        assert!(std::ptr::eq(via_smart, db.get(l(h.smart))), "hub {i} smart");
        assert_eq!(
            g.osmart.map(Smart::paddr),
            h.osmart.map(|b| pa.bigs[b]),
            "hub {i} osmart"
        );
        if let Some(s) = g.osmart {
            let b: &Big = db.smart(s).expect("smart");
            assert_eq!(b.head, spec.bigs[h.osmart.expect("some")].head);
        }
        let vrefs: Vec<PRef<Leaf>> = h.vrefs.iter().map(|&v| l(v)).collect();
        assert_eq!(db.slice(&g.vrefs), &vrefs[..], "hub {i} vrefs");
        let vp = db.slice(&g.vpairs);
        assert_eq!(vp.len(), h.vpairs.len(), "hub {i} vpairs");
        for (k, (a, b)) in h.vpairs.iter().enumerate() {
            assert_eq!((vp[k].a, vp[k].b), (l(*a), ol(*b)), "hub {i} vpairs[{k}]");
        }
        assert_eq!(db.slice(&g.vnums), &h.vnums[..], "hub {i} vnums");
        assert_eq!(db.bytes(&g.name), &h.name[..], "hub {i} name");
        assert!(db.bytes(&g.blob) == &h.blob[..], "hub {i} blob");
        assert_eq!(g.idx.len(), h.idx.len() as u64, "hub {i} idx len");
        let got: Vec<(u64, PRef<Leaf>)> = db
            .index_range(&g.idx, 0..=u64::MAX)
            .expect("range")
            .collect::<amber::Result<_>>()
            .expect("entries");
        let want: Vec<(u64, PRef<Leaf>)> = h.idx.iter().map(|(&k, &v)| (k, l(v))).collect();
        assert_eq!(got, want, "hub {i} idx");
        for (&k, &v) in h.idx.iter().take(3) {
            assert_eq!(db.index_get(&g.idx, &k).expect("get"), Some(l(v)));
        }
        assert_eq!(g.big, h.big.map(|b| o.bigs[b]), "hub {i} big");
        let bigs: Vec<PRef<Big>> = h.bigs.iter().map(|&b| o.bigs[b]).collect();
        assert_eq!(db.slice(&g.bigs), &bigs[..], "hub {i} bigs");
    }
    // The chain of hubs, from the catalog.
    let (cat, _) = objs(db);
    let mut n = db.get(cat).first;
    let mut seen = 0;
    while let Some(p) = n {
        assert_eq!(db.get(p).id, seen as u64);
        seen += 1;
        n = db.get(p).next;
    }
    assert_eq!(seen, chain_len(spec));
    check_disk(db, spec, &pa);
    pa
}

fn chain_len(spec: &Spec) -> usize {
    let mut i = Some(0);
    let mut n = 0;
    while let Some(k) = i {
        n += 1;
        i = spec.hubs[k].next;
        assert!(n <= spec.hubs.len(), "cycle in the spec");
    }
    n
}

/// Reads `len` committed bytes at persistent address `pa`.
fn disk(db: &Db, pa: u64, len: usize) -> Vec<u8> {
    let ps = db.page_size() as u64;
    let (head, _) = db.store().block_of(pa / ps).expect("allocated");
    let b = db.store().read_block(head).expect("read block");
    let o = (pa - head * ps) as usize;
    b[o..o + len].to_vec()
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The committed bytes hold every pointer field in the database's stored
/// form (docs/design.md §1.1): a `PRef`'s or a buffer's word is the
/// persistent address plus the home (read back through `dec`), a smart
/// pointer's the address.
fn check_disk(db: &Db, spec: &Spec, pa: &Paddrs) {
    let home = db.store().home();
    let dec = |v: u64| if v == 0 { 0 } else { home.paddr(v) };
    let lp = |i: usize| pa.leaves[i];
    let olp = |i: Option<usize>| i.map_or(0, lp);
    for (i, h) in spec.hubs.iter().enumerate() {
        let b = disk(db, pa.hubs[i], std::mem::size_of::<Hub>());
        let inner = offset_of!(Hub, inner);
        let at = |off: usize| dec(word(&b, off));
        let raw = |off: usize| word(&b, off);
        assert_eq!(
            at(inner + offset_of!(Inner, leaf)),
            olp(h.inner_leaf),
            "hub {i} on disk: inner.leaf"
        );
        let pair = inner + offset_of!(Inner, pair);
        assert_eq!(at(pair), lp(h.inner_pair.0), "hub {i} on disk");
        assert_eq!(at(pair + 8), olp(h.inner_pair.1), "hub {i} on disk");
        for k in 0..5 {
            assert_eq!(
                at(offset_of!(Hub, arr) + 8 * k),
                olp(h.arr[k]),
                "hub {i} on disk: arr[{k}]"
            );
        }
        for k in 0..3 {
            let p = offset_of!(Hub, pairs) + 16 * k;
            assert_eq!(at(p), lp(h.pairs[k].0), "hub {i} on disk: pairs[{k}].a");
            assert_eq!(
                at(p + 8),
                olp(h.pairs[k].1),
                "hub {i} on disk: pairs[{k}].b"
            );
        }
        assert_eq!(at(offset_of!(Hub, none)), 0);
        let me = if h.me { pa.hubs[i] } else { 0 };
        assert_eq!(at(offset_of!(Hub, me)), me, "hub {i} on disk: me");
        let next = h.next.map_or(0, |n| pa.hubs[n]);
        assert_eq!(at(offset_of!(Hub, next)), next, "hub {i} on disk: next");
        assert_eq!(raw(offset_of!(Hub, smart)), lp(h.smart), "hub {i} smart");
        let os = h.osmart.map_or(0, |b| pa.bigs[b]);
        assert_eq!(raw(offset_of!(Hub, osmart)), os, "hub {i} osmart");
        let big = h.big.map_or(0, |b| pa.bigs[b]);
        assert_eq!(at(offset_of!(Hub, big)), big, "hub {i} on disk: big");
        // Vector buffers are objects of their own, unswizzled too.
        let vr = at(offset_of!(Hub, vrefs));
        if !h.vrefs.is_empty() {
            let buf = disk(db, vr, 8 * h.vrefs.len());
            for (k, &v) in h.vrefs.iter().enumerate() {
                assert_eq!(dec(word(&buf, 8 * k)), lp(v), "hub {i} on disk: vrefs[{k}]");
            }
        }
        let vp = at(offset_of!(Hub, vpairs));
        if !h.vpairs.is_empty() {
            let buf = disk(db, vp, 16 * h.vpairs.len());
            for (k, &(a, b)) in h.vpairs.iter().enumerate() {
                assert_eq!(dec(word(&buf, 16 * k)), lp(a), "hub {i} on disk: vpairs");
                assert_eq!(
                    dec(word(&buf, 16 * k + 8)),
                    olp(b),
                    "hub {i} on disk: vpairs"
                );
            }
        }
        let bb = at(offset_of!(Hub, blob));
        if !h.blob.is_empty() {
            assert!(disk(db, bb, h.blob.len()) == h.blob, "hub {i} blob on disk");
        }
    }
    let mut long_blobs = 0;
    for (i, h) in spec.hubs.iter().enumerate() {
        let bb = dec(word(
            &disk(db, pa.hubs[i], std::mem::size_of::<Hub>()),
            offset_of!(Hub, blob),
        ));
        if h.blob.len() > 4096 {
            let (_, run) = db.store().block_of(bb >> 12).expect("blob block");
            assert!(
                run >= 2,
                "hub {i}: a {}-byte blob in a run of {run}",
                h.blob.len()
            );
            long_blobs += 1;
        }
    }
    assert!(long_blobs > 0, "no byte string larger than a page");
    for (i, g) in spec.bigs.iter().enumerate() {
        let (head, run) = db.store().block_of(pa.bigs[i] >> 12).expect("big block");
        assert_eq!(
            (run, head),
            (3, pa.bigs[i] >> 12),
            "big {i}: a run of 3 pages"
        );
        let b = disk(db, pa.bigs[i], std::mem::size_of::<Big>());
        let back = g.back.map_or(0, |h| pa.hubs[h]);
        assert_eq!(dec(word(&b, offset_of!(Big, back))), back, "big {i} back");
        for k in 0..4 {
            assert_eq!(
                dec(word(&b, offset_of!(Big, leaves) + 8 * k)),
                olp(g.leaves[k]),
                "big {i} on disk: leaves[{k}]"
            );
        }
        assert_eq!(word(&b, offset_of!(Big, tail)), g.tail, "big {i} tail");
    }
}

/// Random updates in place: rewired pointers of every kind, growing
/// vectors, byte strings and index entries; mirrored in `spec`.
fn mutate(tx: &mut Tx<'_>, o: &Objs, spec: &mut Spec, rng: &mut SplitMix, ops: usize) {
    let l = |i: usize| o.leaves[i];
    for _ in 0..ops {
        let hi = rng.below(HUBS as u64) as usize;
        let p = o.hubs[hi];
        let h = &mut spec.hubs[hi];
        match rng.below(14) {
            0 => {
                let k = rng.below(5) as usize;
                h.arr[k] = opt(rng, LEAVES);
                tx.get_mut(p).arr[k] = h.arr[k].map(l);
            }
            1 => {
                let k = rng.below(3) as usize;
                h.pairs[k] = (leaf(rng), opt(rng, LEAVES));
                tx.get_mut(p).pairs[k] = Pair {
                    a: l(h.pairs[k].0),
                    b: h.pairs[k].1.map(l),
                };
            }
            2 => {
                h.inner_leaf = opt(rng, LEAVES);
                h.inner_pair.1 = opt(rng, LEAVES);
                let g = tx.get_mut(p);
                g.inner.leaf = h.inner_leaf.map(l);
                g.inner.pair.b = h.inner_pair.1.map(l);
            }
            3 => {
                h.me = !h.me;
                tx.get_mut(p).me = h.me.then_some(p);
            }
            4 => {
                h.smart = leaf(rng);
                let s = tx.to_smart(l(h.smart)).expect("smart");
                tx.get_mut(p).smart = s;
            }
            5 => {
                h.osmart = opt(rng, BIGS);
                let s = h.osmart.map(|b| tx.to_smart(o.bigs[b]).expect("smart"));
                tx.get_mut(p).osmart = s;
            }
            6 => {
                let v = leaf(rng);
                h.vrefs.push(v);
                tx.push(p, |g| &mut g.vrefs, l(v)).expect("push");
            }
            7 if !h.vrefs.is_empty() => {
                let k = rng.below(h.vrefs.len() as u64) as usize;
                h.vrefs[k] = leaf(rng);
                tx.slice_mut(p, |g| &mut g.vrefs)[k] = l(h.vrefs[k]);
            }
            8 => {
                let (a, b) = (leaf(rng), opt(rng, LEAVES));
                h.vpairs.push((a, b));
                let pair = Pair {
                    a: l(a),
                    b: b.map(l),
                };
                tx.push(p, |g| &mut g.vpairs, pair).expect("push");
            }
            9 => {
                h.name = bytes(rng, 100);
                tx.set_bytes(p, |g| &mut g.name, &h.name).expect("set");
            }
            10 => {
                let (k, v) = (rng.below(1000), leaf(rng));
                h.idx.insert(k, v);
                tx.index_insert(p, |g| &mut g.idx, &k, l(v))
                    .expect("insert");
            }
            11 if !h.idx.is_empty() => {
                let k = *h
                    .idx
                    .keys()
                    .nth(rng.below(h.idx.len() as u64) as usize)
                    .expect("key");
                h.idx.remove(&k);
                tx.index_remove(p, |g| &mut g.idx, &k).expect("remove");
            }
            12 => {
                h.big = opt(rng, BIGS);
                tx.get_mut(p).big = h.big.map(|b| o.bigs[b]);
                let b = rng.below(BIGS as u64) as usize;
                h.bigs.push(b);
                tx.push(p, |g| &mut g.bigs, o.bigs[b]).expect("push");
            }
            _ => {
                let bi = rng.below(BIGS as u64) as usize;
                let g = &mut spec.bigs[bi];
                let k = rng.below(4) as usize;
                g.leaves[k] = opt(rng, LEAVES);
                g.back = opt(rng, HUBS);
                let at = rng.below(10000) as usize;
                g.data[at] = g.data[at].wrapping_add(1);
                let big = tx.get_mut(o.bigs[bi]);
                big.leaves[k] = g.leaves[k].map(l);
                big.back = g.back.map(|h| o.hubs[h]);
                big.data[at] = g.data[at];
            }
        }
    }
}

/// Builds, checks, mutates and reopens across sessions and cache settings.
pub fn run(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rt.amber");
    let mut rng = SplitMix::new(0x7001);
    let mut spec = Spec::random(&mut rng);
    let small = cached(b, 64 << 10);
    let first;
    {
        let mut db = Db::create(&path, opts(b)).expect("create");
        check_backend(&db, b);
        build(&mut db, &spec, &mut rng);
        // Same session: the objects never left memory.
        first = check(&mut db, &spec);
        db.close().expect("close");
    }
    let session = |o: Options, spec: &mut Spec, rng: &mut SplitMix, close: bool| {
        let mut db = open(&path, o.clone());
        let pa = check(&mut db, spec);
        assert_eq!(pa.leaves, first.leaves, "persistent addresses changed");
        assert_eq!(pa.hubs, first.hubs);
        if o.cache_bytes.is_some() {
            // Again, with most pages evicted in between.
            check(&mut db, spec);
            let st = db.stats();
            assert!(st.evicted > 0, "a 64 KiB cache must evict: {st:?}");
        }
        let (_, o) = objs(&db);
        let mut tx = db.begin().expect("begin");
        mutate(&mut tx, &o, spec, rng, 60);
        tx.commit().expect("commit");
        check(&mut db, spec);
        if close {
            db.close().expect("close");
        }
        // Else dropped: the next open recovers from the log.
    };
    session(opts(b), &mut spec, &mut rng, true);
    session(small.clone(), &mut spec, &mut rng, false);
    let clustered = Options {
        fetch_cluster: 4,
        ..small
    };
    session(clustered, &mut spec, &mut rng, true);
    session(opts(b), &mut spec, &mut rng, false);
    let mut db = open(&path, opts(b));
    check(&mut db, &spec);
    let hub0 = objs(&db).1.hubs[0];
    let pa = paddr_of(&mut db, hub0);
    assert_eq!(pa, first.hubs[0]);
    db.close().expect("close");
}
