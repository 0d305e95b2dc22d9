//! `PIndex` and `PMultiIndex` against `BTreeMap` models, property-style:
//! string and u64 keys (empty, sharing prefixes, holding 0 bytes, long, and
//! one past the key limit), several values per key, random inserts and
//! removes (also in bulk, so that nodes split and empty nodes are freed
//! down to an empty tree), point lookups, and ranges with every kind of
//! bound on both ends, in transactions that commit, abort or are dropped,
//! with reopenings (a clean close, or a drop without close: recovery from
//! the log). Lookups are checked through the transaction after every
//! operation; everything, including a deep verification, after every
//! transaction and reopening.
//!
//! `AMBER_OBJ_SEED=N` runs one seed; `AMBER_OBJ_LONG=1` runs more and longer.

use super::{Cfg, check_backend, env_num, long, open, opts};
use amber::internals::io::crash::SplitMix;
use amber::{Db, Error, PIndex, PMultiIndex, PRef, Persistent};
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::ops::Bound;

/// An index value.
#[derive(Persistent)]
#[repr(C)]
pub struct IxVal {
    pub v: u64,
}

/// The indexes under test.
#[derive(Persistent)]
#[repr(C)]
pub struct IxRoot {
    pub names: PIndex<IxVal, String>,
    pub nums: PIndex<IxVal>,
    pub dates: PMultiIndex<IxVal, u32>,
    pub tags: PMultiIndex<IxVal, String>,
    pub vals: [Option<PRef<IxVal>>; VALS],
}

/// Value objects, named by their `v`.
const VALS: usize = 16;
/// The longest key an index takes (encoded bytes).
const MAX_KEY: usize = 1024;

/// What the indexes should hold.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    names: BTreeMap<String, u64>,
    nums: BTreeMap<u64, u64>,
    dates: BTreeMap<u32, Vec<u64>>,
    tags: BTreeMap<String, Vec<u64>>,
}

/// A string key: from a pool where many share prefixes, hold 0 bytes or are
/// empty, so that equal keys come back and separators cut inside keys.
fn name(rng: &mut SplitMix) -> String {
    const PARTS: [&str; 6] = ["", "a", "ab", "\0", "b\0c", "zz"];
    match rng.below(10) {
        0 => String::new(),
        1 => "k".repeat(1 + rng.below(600) as usize),
        _ => {
            let mut s = String::new();
            for _ in 0..rng.below(4) {
                s.push_str(PARTS[rng.below(PARTS.len() as u64) as usize]);
            }
            s.push_str(&format!("{:x}", rng.below(300)));
            s
        }
    }
}

fn num(rng: &mut SplitMix) -> u64 {
    match rng.below(8) {
        0 => u64::MAX - rng.below(2),
        1 => rng.next_u64(),
        _ => rng.below(3000),
    }
}

fn date(rng: &mut SplitMix) -> u32 {
    match rng.below(8) {
        0 => u32::MAX,
        _ => rng.below(40) as u32,
    }
}

/// A bound of each kind, at a key from `pick`.
fn bound<K>(rng: &mut SplitMix, pick: impl Fn(&mut SplitMix) -> K) -> Bound<K> {
    match rng.below(3) {
        0 => Bound::Included(pick(rng)),
        1 => Bound::Excluded(pick(rng)),
        _ => Bound::Unbounded,
    }
}

/// Whether `k` is within `(lo, hi)`.
fn within<K: Ord + ?Sized>(k: &K, lo: Bound<&K>, hi: Bound<&K>) -> bool {
    let above = match lo {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => k <= h,
        Bound::Excluded(h) => k < h,
        Bound::Unbounded => true,
    };
    above && below
}

/// The value objects' numbers.
fn vals<T>(r: amber::Result<T>) -> T {
    r.expect("index read")
}

/// The entries an index iteration gave, with their values' numbers.
fn entries<K>(
    it: amber::Result<impl Iterator<Item = amber::Result<(K, PRef<IxVal>)>>>,
    val: impl Fn(PRef<IxVal>) -> u64,
) -> Vec<(K, u64)> {
    vals(it).map(vals).map(|(k, p)| (k, val(p))).collect()
}

/// A map model's entries with keys within `(lo, hi)`.
fn in_map<K: Ord + Clone + Borrow<Q>, Q: Ord + ?Sized>(
    m: &BTreeMap<K, u64>,
    lo: Bound<&Q>,
    hi: Bound<&Q>,
) -> Vec<(K, u64)> {
    m.iter()
        .filter(|(k, _)| within((*k).borrow(), lo, hi))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// A multi-map model's entries with keys within `(lo, hi)`, in key order
/// and, within a key, in the order of the values' addresses (the values
/// are allocated in the order of their `v`, so the model keeps each key's
/// values sorted: `add_one`).
fn in_multi<K: Ord + Clone + Borrow<Q>, Q: Ord + ?Sized>(
    m: &BTreeMap<K, Vec<u64>>,
    lo: Bound<&Q>,
    hi: Bound<&Q>,
) -> Vec<(K, u64)> {
    m.iter()
        .filter(|(k, _)| within((*k).borrow(), lo, hi))
        .flat_map(|(k, vs)| vs.iter().map(|v| (k.clone(), *v)))
        .collect()
}

/// Reads through `$v` (a `Db` or a `Tx`) and compares with the model:
/// point lookups of `$n` random keys and ranges, or (`full`) every entry.
macro_rules! check {
    ($v:expr, $root:expr, $m:expr, $rng:expr, $full:expr) => {{
        let (v, m, rng) = ($v, $m, $rng);
        let r = v.get($root);
        let val = |p: PRef<IxVal>| v.get(p).v;
        assert_eq!(r.names.len(), m.names.len() as u64, "names len");
        assert_eq!(r.nums.len(), m.nums.len() as u64, "nums len");
        let dates: usize = m.dates.values().map(Vec::len).sum();
        let tags: usize = m.tags.values().map(Vec::len).sum();
        assert_eq!(r.dates.len(), dates as u64, "dates len");
        assert_eq!(r.tags.len(), tags as u64, "tags len");
        for _ in 0..4 {
            let k = name(rng);
            let got = vals(v.index_get(&r.names, k.as_str())).map(val);
            assert_eq!(got, m.names.get(&k).copied(), "names[{k:?}]");
            assert_eq!(vals(v.index_contains(&r.names, k.as_str())), got.is_some());
            let k = num(rng);
            let got = vals(v.index_get(&r.nums, &k)).map(val);
            assert_eq!(got, m.nums.get(&k).copied(), "nums[{k}]");
            let k = date(rng);
            let got: Vec<u64> = vals(v.multi_get(&r.dates, &k))
                .map(|p| val(vals(p)))
                .collect();
            assert_eq!(
                got,
                m.dates.get(&k).cloned().unwrap_or_default(),
                "dates[{k}]"
            );
            assert_eq!(vals(v.multi_contains(&r.dates, &k)), !got.is_empty());
            let k = name(rng);
            let got: Vec<u64> = vals(v.multi_get(&r.tags, k.as_str()))
                .map(|p| val(vals(p)))
                .collect();
            assert_eq!(
                got,
                m.tags.get(&k).cloned().unwrap_or_default(),
                "tags[{k:?}]"
            );
        }
        for _ in 0..3 {
            let (lo, hi) = (bound(rng, name), bound(rng, name));
            let (lo, hi) = (
                lo.as_ref().map(String::as_str),
                hi.as_ref().map(String::as_str),
            );
            let got = entries(v.index_range(&r.names, (lo, hi)), val);
            assert_eq!(got, in_map(&m.names, lo, hi), "names in {lo:?}..{hi:?}");
            let (lo, hi) = (bound(rng, num), bound(rng, num));
            let got = entries(v.index_range(&r.nums, (lo, hi)), val);
            let want = in_map(&m.nums, lo.as_ref(), hi.as_ref());
            assert_eq!(got, want, "nums in {lo:?}..{hi:?}");
            let (lo, hi) = (bound(rng, date), bound(rng, date));
            let got = entries(v.multi_range(&r.dates, (lo, hi)), val);
            let want = in_multi(&m.dates, lo.as_ref(), hi.as_ref());
            assert_eq!(got, want, "dates in {lo:?}..{hi:?}");
        }
        if $full {
            use Bound::Unbounded as U;
            let got = entries(v.index_iter(&r.names), val);
            assert_eq!(got, in_map::<_, str>(&m.names, U, U), "all names");
            let got = entries(v.index_range(&r.nums, ..=u64::MAX), val);
            assert_eq!(got, in_map::<_, u64>(&m.nums, U, U), "all nums");
            let got = entries(v.multi_iter(&r.dates), val);
            assert_eq!(got, in_multi::<_, u32>(&m.dates, U, U), "all dates");
            let got = entries(v.multi_iter(&r.tags), val);
            assert_eq!(got, in_multi::<_, str>(&m.tags, U, U), "all tags");
        }
    }};
}

fn create(db: &mut Db) -> PRef<IxRoot> {
    let mut tx = db.begin().expect("begin");
    let root = tx
        .alloc(IxRoot {
            names: PIndex::new(),
            nums: PIndex::new(),
            dates: PMultiIndex::new(),
            tags: PMultiIndex::new(),
            vals: [None; VALS],
        })
        .expect("alloc");
    for i in 0..VALS {
        let v = tx.alloc(IxVal { v: i as u64 }).expect("alloc");
        tx.get_mut(root).vals[i] = Some(v);
    }
    tx.set_root("ix", root).expect("root");
    tx.commit().expect("commit");
    root
}

/// Adds `v` under `k` to a multi-map model, among the key's values in
/// order.
fn add_one<K: Ord>(m: &mut BTreeMap<K, Vec<u64>>, k: K, v: u64) {
    let vs = m.entry(k).or_default();
    vs.insert(vs.partition_point(|&x| x <= v), v);
}

/// Removes one `v` under `k` from a multi-map model; whether there was
/// one.
fn remove_one<K: Ord>(m: &mut BTreeMap<K, Vec<u64>>, k: &K, v: u64) -> bool {
    let Some(vs) = m.get_mut(k) else {
        return false;
    };
    let Some(i) = vs.iter().position(|&x| x == v) else {
        return false;
    };
    vs.remove(i);
    if vs.is_empty() {
        m.remove(k);
    }
    true
}

/// One random change, made in `tx` and in `m`.
fn step(tx: &mut amber::Tx<'_>, root: PRef<IxRoot>, m: &mut Model, rng: &mut SplitMix) {
    let vi = rng.below(VALS as u64);
    let value = tx.get(root).vals[vi as usize].expect("value");
    let val = |tx: &amber::Tx<'_>, p: PRef<IxVal>| tx.get(p).v;
    match rng.below(12) {
        0 | 1 => {
            let k = name(rng);
            let old = tx
                .index_insert(root, |r| &mut r.names, k.as_str(), value)
                .expect("insert")
                .map(|p| val(tx, p));
            assert_eq!(old, m.names.insert(k, vi));
        }
        2 => {
            let k = match m
                .names
                .keys()
                .nth(rng.below(m.names.len() as u64 + 1) as usize)
            {
                Some(k) if rng.below(4) > 0 => k.clone(),
                _ => name(rng),
            };
            let old = tx
                .index_remove(root, |r| &mut r.names, k.as_str())
                .expect("remove")
                .map(|p| val(tx, p));
            assert_eq!(old, m.names.remove(&k));
        }
        3 => {
            let k = num(rng);
            let old = tx
                .index_insert(root, |r| &mut r.nums, &k, value)
                .expect("insert")
                .map(|p| val(tx, p));
            assert_eq!(old, m.nums.insert(k, vi));
        }
        4 => {
            let k = match m
                .nums
                .keys()
                .nth(rng.below(m.nums.len() as u64 + 1) as usize)
            {
                Some(k) if rng.below(4) > 0 => *k,
                _ => num(rng),
            };
            let old = tx
                .index_remove(root, |r| &mut r.nums, &k)
                .expect("remove")
                .map(|p| val(tx, p));
            assert_eq!(old, m.nums.remove(&k));
        }
        5 => {
            let k = date(rng);
            tx.multi_insert(root, |r| &mut r.dates, &k, value)
                .expect("insert");
            add_one(&mut m.dates, k, vi);
        }
        6 => {
            let k = date(rng);
            let removed = tx
                .multi_remove(root, |r| &mut r.dates, &k, value)
                .expect("remove");
            assert_eq!(
                removed,
                remove_one(&mut m.dates, &k, vi),
                "dates remove {k} {vi}"
            );
        }
        7 => {
            let k = name(rng);
            tx.multi_insert(root, |r| &mut r.tags, k.as_str(), value)
                .expect("insert");
            add_one(&mut m.tags, k, vi);
        }
        8 => {
            let k = name(rng);
            let removed = tx
                .multi_remove(root, |r| &mut r.tags, k.as_str(), value)
                .expect("remove");
            assert_eq!(
                removed,
                remove_one(&mut m.tags, &k, vi),
                "tags remove {k:?} {vi}"
            );
        }
        9 => {
            // Bulk: enough keys to split nodes, then (at times) most of
            // them removed again, to free nodes and shrink the tree.
            for _ in 0..150 {
                let k = format!("{:016x}", rng.next_u64());
                tx.index_insert(root, |r| &mut r.names, k.as_str(), value)
                    .expect("insert");
                m.names.insert(k, vi);
                let d = date(rng);
                tx.multi_insert(root, |r| &mut r.dates, &d, value)
                    .expect("insert");
                add_one(&mut m.dates, d, vi);
            }
        }
        10 => {
            let keep = rng.below(3) as usize;
            let names: Vec<String> = m.names.keys().skip(keep).cloned().collect();
            for k in names {
                tx.index_remove(root, |r| &mut r.names, k.as_str())
                    .expect("remove");
                m.names.remove(&k);
            }
            let dates: Vec<(u32, u64)> = m
                .dates
                .iter()
                .flat_map(|(k, vs)| vs.iter().map(|v| (*k, *v)))
                .collect();
            for (k, v) in dates {
                let p = tx.get(root).vals[v as usize].expect("value");
                assert!(
                    tx.multi_remove(root, |r| &mut r.dates, &k, p)
                        .expect("remove")
                );
            }
            m.dates.clear();
        }
        _ => {
            // A key past the limit is refused, and changes nothing.
            let k = "x".repeat(MAX_KEY + 1 + rng.below(100) as usize);
            match tx.index_insert(root, |r| &mut r.names, k.as_str(), value) {
                Err(Error::Invalid(why)) => assert!(why.contains("1024"), "{why}"),
                other => panic!("a key of {} bytes: {other:?}", k.len()),
            }
            assert!(matches!(
                tx.multi_insert(root, |r| &mut r.tags, k.as_str(), value),
                Err(Error::Invalid(_))
            ));
        }
    }
}

/// Deep verification of the open database finds nothing.
fn verify(db: &Db, ctx: &str) {
    let rep = db.verify_deep().expect("verify_deep");
    assert!(rep.findings.is_empty(), "{ctx}: {:#?}", rep.findings);
}

fn run_seed(b: Cfg, seed: u64, txs: u64) {
    let mut rng = SplitMix::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut root = create(&mut db);
    let mut committed = Model::default();
    for t in 0..txs {
        let ctx = format!("{b:?} seed {seed:#x} tx {t}");
        let mut m = committed.clone();
        {
            let mut tx = db.begin().expect("begin");
            for _ in 0..1 + rng.below(12) {
                step(&mut tx, root, &mut m, &mut rng);
                check!(&tx, root, &m, &mut rng, false);
            }
            check!(&tx, root, &m, &mut rng, true);
            match rng.below(5) {
                0 => tx.abort().expect("abort"),
                1 => drop(tx),
                _ => {
                    tx.commit().expect(&ctx);
                    committed = m;
                }
            }
        }
        check!(&db, root, &committed, &mut rng, true);
        match rng.below(8) {
            0 => {
                db.close().expect("close");
                db = open(&path, opts(b));
                verify(&db, &ctx);
            }
            1 => {
                drop(db);
                db = open(&path, opts(b));
                verify(&db, &ctx);
            }
            _ => {}
        }
        root = db.root("ix").expect("root").expect("set");
        check!(&db, root, &committed, &mut rng, true);
    }
    verify(&db, "the end");
    db.close().expect("close");
}

/// Runs the seeds.
pub fn run(b: Cfg) {
    let (seeds, txs) = if long() { (12, 300) } else { (2, 40) };
    let list: Vec<u64> = match std::env::var("AMBER_OBJ_SEED") {
        Ok(_) => vec![env_num("AMBER_OBJ_SEED", 0)],
        Err(_) => (0..seeds).map(|i| 0x1d00 + i).collect(),
    };
    for seed in list {
        run_seed(b, seed, txs);
    }
}
