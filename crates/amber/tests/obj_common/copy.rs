//! The copy architecture (`Db::copy_cache`, EPVM 2.0's object cache):
//!
//! - `oc_and_pc`: object caching copies one object per miss, page caching
//!   every live object of the page at its first use;
//! - `swizzling`: pointers followed through the cache are looked up every
//!   time without swizzling, swizzled at the second follow lazily (the
//!   target was not cached at the first), at the first eagerly; a handle
//!   whose copy was evicted reads the right object again;
//! - `eager`: White & DeWitt's Figure 4 — a traversal to depth 1 from the
//!   root of a tree of eight parts copies the four it visits lazily and
//!   all eight eagerly (every pointer of a part used is discovered, through
//!   `PRef`, `Smart` and `Lazy` fields alike), the second traversal going
//!   through links only; `read` of one field discovers that field's
//!   pointer alone; a stale pointer is discovered without a copy or an
//!   error, and following it is the error; in caches of a few copies the
//!   discovered targets are evicted before they are used, links found
//!   stale and the objects copied in again, every answer right;
//! - `eviction`: a cache of a few objects evicts modified copies, writing
//!   them back into the transaction first, and the commit keeps them all;
//! - `logged`: a commit through the cache logs what the same updates
//!   through a plain transaction log (the modified ranges, nothing else);
//! - `abort`: an abort (or a drop) leaves the store and the cache at the
//!   last commit, with and without write-backs on the way;
//! - `prop`: the write path's graph (`graph.rs`) updated through caches of
//!   random kinds and sizes, transactions committing or aborting, read back
//!   through the cache and through the database, reopened;
//! - `kill`: a child updating the graph through a cache is killed at random
//!   instants; the database reopens at the last commit it reported or the
//!   one after.

use super::graph::{GBlob, GNode, GRoot, Model, Op, apply_db, create_root, diff, refs, root_of};
use super::kill::Rounds;
use super::{Cfg, check_backend, child_dir, child_scenario, env_num, long, open, opts};
use amber::internals::io::crash::SplitMix;
use amber::{
    Caching, CopyOptions, CopyTx, Db, Error, Lazy, Obj, PRef, Persistent, Smart, Swizzle, View,
};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// A small object: 101 to a 4 KiB page.
#[derive(Persistent)]
#[repr(C)]
pub struct CItem {
    pub id: u64,
    pub val: u64,
    pub next: Option<PRef<CItem>>,
    pub lz: Lazy<CItem>,
}

const ITEMS: u64 = 300;

/// `ITEMS` items in a ring (`next` and `lz` both to the next one), each
/// `val` = `id`; their smart pointers in order.
fn items(path: &Path, b: Cfg) -> (Db, Vec<Smart<CItem>>) {
    let mut db = Db::create(path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let ps: Vec<PRef<CItem>> = (0..ITEMS)
        .map(|id| {
            tx.alloc(CItem {
                id,
                val: id,
                next: None,
                lz: Lazy::null(),
            })
            .expect("alloc")
        })
        .collect();
    for (i, &p) in ps.iter().enumerate() {
        let to = ps[(i + 1) % ps.len()];
        let o = tx.get_mut(p);
        o.next = Some(to);
        o.lz = Lazy::from(to);
    }
    let ss = ps.iter().map(|&p| tx.to_smart(p).expect("smart")).collect();
    tx.set_root("items", ps[0]).expect("root");
    tx.commit().expect("commit");
    (db, ss)
}

fn cache(caching: Caching, swizzle: Swizzle, capacity_bytes: usize) -> CopyOptions {
    CopyOptions {
        caching,
        capacity_bytes,
        swizzle,
    }
}

pub fn oc_and_pc(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut db, ss) = items(&dir.path().join("db"), b);
    let page = |s: Smart<CItem>| s.paddr() / b.page_size as u64;
    let on_first = ss.iter().filter(|&&s| page(s) == page(ss[0])).count() as u64;
    assert!(on_first > 50, "{on_first} items on the first page");
    for caching in [Caching::Object, Caching::Page] {
        let mut c = db.copy_cache(cache(caching, Swizzle::Lazy, 1 << 20));
        let mut tx = c.begin().expect("begin");
        let o = tx.fetch(ss[0]).expect("fetch");
        assert_eq!(tx.get(o).expect("get").id, 0);
        let want = if caching == Caching::Object {
            1
        } else {
            on_first
        };
        assert_eq!(
            tx.stats().copied,
            want,
            "{caching:?}: copied at the first use"
        );
        let o1 = tx.fetch(ss[1]).expect("fetch");
        assert_eq!(tx.get(o1).expect("get").val, 1);
        let want = if caching == Caching::Object {
            2
        } else {
            on_first
        };
        assert_eq!(tx.stats().copied, want, "{caching:?}: the second object");
        assert_eq!(tx.stats().pages_copied, u64::from(caching == Caching::Page));
        // Every item through the cache, as the database holds it.
        for (i, &s) in ss.iter().enumerate() {
            let o = tx.fetch(s).expect("fetch");
            let it = tx.get(o).expect("get");
            assert_eq!((it.id, it.val), (i as u64, i as u64));
        }
        assert_eq!(tx.stats().copied, ITEMS);
        tx.commit().expect("commit");
    }
}

/// Follows `next` (or `lz`) around the ring from item 0, checking ids.
fn ring(tx: &mut CopyTx<'_>, s0: Smart<CItem>, lazy: bool) {
    let mut o = tx.fetch(s0).expect("fetch");
    for i in 0..ITEMS {
        assert_eq!(tx.get(o).expect("get").id, i);
        o = if lazy {
            tx.follow(o, |c: &CItem| &c.lz)
        } else {
            tx.follow(o, |c: &CItem| &c.next)
        }
        .expect("follow")
        .expect("not null");
    }
    assert_eq!(tx.get(o).expect("get").id, 0, "around the ring");
}

pub fn swizzling(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut db, ss) = items(&dir.path().join("db"), b);
    // (swizzle, swizzled by the first traversal and by the second,
    // followed through links in the first and the second).
    for (swizzle, first, second, linked) in [
        (Swizzle::None, 0, 0, [0, 0]),
        (Swizzle::Lazy, 1, ITEMS - 1, [0, 1]),
        // Eagerly, each item's first use discovers both `next` and `lz`
        // and copies in the next item: every follow is through a link.
        (Swizzle::Eager, 2 * ITEMS, 0, [ITEMS, ITEMS]),
    ] {
        for lazy in [false, true] {
            let mut c = db.copy_cache(cache(Caching::Object, swizzle, 1 << 20));
            let mut tx = c.begin().expect("begin");
            ring(&mut tx, ss[0], lazy);
            // Lazily, only the last follow (back to item 0, cached) swizzles.
            let s1 = tx.stats();
            assert_eq!(s1.swizzled, first, "{swizzle:?}: first traversal");
            assert_eq!(s1.followed_swizzled, linked[0], "{swizzle:?}: first");
            ring(&mut tx, ss[0], lazy);
            let s = tx.stats();
            assert_eq!(s.swizzled, first + second, "{swizzle:?}: second traversal");
            assert_eq!(
                s.followed_swizzled - s1.followed_swizzled,
                linked[1],
                "{swizzle:?}: second"
            );
            ring(&mut tx, ss[0], lazy);
            let s3 = tx.stats();
            let all = if swizzle == Swizzle::None { 0 } else { ITEMS };
            assert_eq!(
                s3.followed_swizzled - s.followed_swizzled,
                all,
                "{swizzle:?}: third"
            );
            assert_eq!(s3.copied, ITEMS, "each item copied once");
            let ahead = if swizzle == Swizzle::Eager {
                ITEMS - 1
            } else {
                0
            };
            assert_eq!(s3.copied_on_discovery, ahead, "{swizzle:?}");
            tx.commit().expect("commit");
        }
    }
    // A cache of ten items: handles and links to evicted copies lead to
    // the right objects again.
    let mut c = db.copy_cache(cache(Caching::Page, Swizzle::Eager, 10 * 32));
    let mut tx = c.begin().expect("begin");
    let first: Obj<CItem> = tx.fetch(ss[0]).expect("fetch");
    for _ in 0..3 {
        ring(&mut tx, ss[0], false);
        assert_eq!(tx.get(first).expect("get").id, 0);
    }
    let s = tx.stats();
    assert!(s.evicted > ITEMS && s.objects <= 10 + 101, "{s:?}");
    tx.commit().expect("commit");
}

/// A part of Figure 3 (`pCost`, three sub-parts), one sub-part pointer of
/// each kind the cache follows.
#[derive(Persistent)]
#[repr(C)]
pub struct CPart {
    pub cost: u64,
    pub sub0: Option<PRef<CPart>>,
    pub sub1: Option<Smart<CPart>>,
    pub sub2: Lazy<CPart>,
}

/// Figure 3's `TotalCost` through the cache: the part is used whole
/// (`get`), then its sub-parts followed while `depth` lasts.
fn total_cost(tx: &mut CopyTx<'_>, o: Obj<CPart>, depth: u32) -> u64 {
    let mut total = tx.get(o).expect("get").cost;
    if depth > 0 {
        let subs = [
            tx.follow(o, |p: &CPart| &p.sub0).expect("follow"),
            tx.follow(o, |p: &CPart| &p.sub1).expect("follow"),
            tx.follow(o, |p: &CPart| &p.sub2).expect("follow"),
        ];
        for s in subs.into_iter().flatten() {
            total += total_cost(tx, s, depth - 1);
        }
    }
    total
}

/// Figure 4a's eight parts A..H (costs 1, 2, 4, ..., 128): A's sub-parts
/// B, C, D; B's E and F, C's G, D's H. Returns A, and H.
fn figure_4(path: &Path, b: Cfg) -> (Db, Smart<CPart>, PRef<CPart>) {
    let mut db = Db::create(path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let mut parts = Vec::new();
    for i in 0..8 {
        let p = tx
            .alloc(CPart {
                cost: 1 << i,
                sub0: None,
                sub1: None,
                sub2: Lazy::null(),
            })
            .expect("alloc");
        parts.push(p);
    }
    let ss: Vec<Smart<CPart>> = parts
        .iter()
        .map(|&p| tx.to_smart(p).expect("smart"))
        .collect();
    // Index 8: no sub-part.
    for (at, [i0, i1, i2]) in [
        (0, [1, 2, 3]),
        (1, [4, 5, 8]),
        (2, [6, 8, 8]),
        (3, [8, 8, 7]),
    ] {
        let o = tx.get_mut(parts[at]);
        o.sub0 = parts.get(i0).copied();
        o.sub1 = ss.get(i1).copied();
        o.sub2 = ss.get(i2).map_or_else(Lazy::null, |&s| Lazy::from(s));
    }
    let (a, h) = (ss[0], parts[7]);
    tx.commit().expect("commit");
    (db, a, h)
}

pub fn eager(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut db, a, h) = figure_4(&dir.path().join("db"), b);
    // (swizzle, copied by the first traversal, of which on discovery: eagerly
    // all but A, the four leaves never used among them).
    for (swizzle, copied, ahead) in [(Swizzle::Lazy, 4, 0), (Swizzle::Eager, 8, 7)] {
        let mut c = db.copy_cache(cache(Caching::Object, swizzle, 1 << 20));
        let mut tx = c.begin().expect("begin");
        let root = tx.fetch(a).expect("fetch");
        assert_eq!(total_cost(&mut tx, root, 1), 1 + 2 + 4 + 8, "{swizzle:?}");
        let s = tx.stats();
        assert_eq!(
            (s.copied, s.copied_on_discovery),
            (copied, ahead),
            "{swizzle:?}: Figure 4b (eager) or 4c (lazy)"
        );
        assert_eq!(s.followed_swizzled, if ahead > 0 { 3 } else { 0 });
        // Figure 4d: lazily the second traversal swizzles the three
        // pointers it follows (their targets are cached now); eagerly the
        // first linked them, and the second follows the links.
        assert_eq!(total_cost(&mut tx, root, 1), 15);
        let s2 = tx.stats();
        assert_eq!(s2.copied, copied, "{swizzle:?}: nothing copied again");
        let (swizzled, linked) = if ahead > 0 { (0, 3) } else { (3, 0) };
        assert_eq!(s2.swizzled - s.swizzled, swizzled, "{swizzle:?}");
        assert_eq!(s2.followed_swizzled - s.followed_swizzled, linked);
        // From then on every follow is through a link.
        assert_eq!(total_cost(&mut tx, root, 1), 15);
        assert_eq!(tx.stats().followed_swizzled - s2.followed_swizzled, 3);
        // To depth 2 every part is reached, their costs summed once each.
        assert_eq!(total_cost(&mut tx, root, 2), 255);
        assert_eq!(tx.stats().copied, 8);
        tx.commit().expect("commit");
    }
    // One field read discovers that field's pointer only.
    let mut c = db.copy_cache(cache(Caching::Object, Swizzle::Eager, 1 << 20));
    let mut tx = c.begin().expect("begin");
    let root = tx.fetch(a).expect("fetch");
    assert_eq!(tx.read(root, |p| &p.cost).expect("read"), 1);
    assert_eq!(tx.stats().copied, 1, "a cost discovers nothing");
    let s1 = tx.read(root, |p| &p.sub1).expect("read").expect("C");
    assert_eq!(tx.stats().copied, 2, "C copied in on discovery");
    let c_ = tx.fetch(s1).expect("fetch");
    assert_eq!(tx.stats().copied_on_discovery, 1);
    assert_eq!(tx.read(c_, |p| &p.cost).expect("read"), 4);
    tx.commit().expect("commit");
    drop(c);
    // Caches of three to seven copies (CPart: 32 bytes): a part's targets
    // push out what was discovered before, and the part itself; every sum
    // right.
    for n in 3..8 {
        let mut c = db.copy_cache(cache(Caching::Object, Swizzle::Eager, n * 32));
        let mut tx = c.begin().expect("begin");
        let root = tx.fetch(a).expect("fetch");
        for _ in 0..3 {
            assert_eq!(total_cost(&mut tx, root, 2), 255, "{n} copies");
        }
        let s = tx.stats();
        assert!(s.evicted > 0 && s.objects <= n as u64, "{n} copies: {s:?}");
        tx.commit().expect("commit");
    }
    // A stale pointer (H freed, D's `sub2` still leading to it) is
    // discovered without a copy or an error; following it is the error.
    let mut t = db.begin().expect("begin");
    t.free(h).expect("free");
    t.commit().expect("commit");
    let mut c = db.copy_cache(cache(Caching::Object, Swizzle::Eager, 1 << 20));
    let mut tx = c.begin().expect("begin");
    let root = tx.fetch(a).expect("fetch");
    let d = tx
        .follow(root, |p: &CPart| &p.sub2)
        .expect("follow")
        .expect("D");
    assert_eq!(tx.get(d).expect("get D").cost, 8);
    assert_eq!(tx.stats().undiscovered, 1, "H left unlinked");
    assert!(matches!(
        tx.follow(d, |p: &CPart| &p.sub2),
        Err(Error::Dangling { .. })
    ));
    assert_eq!(total_cost(&mut tx, root, 0), 1, "the cache still serves");
    tx.commit().expect("commit");
    drop(c);
    // Items used in random order through a cache of eight copies: a link
    // whose target was evicted while its owner stayed is found stale, and
    // the follow leads to the right item all the same.
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut db, ss) = items(&dir.path().join("ring"), b);
    let mut c = db.copy_cache(cache(Caching::Object, Swizzle::Eager, 8 * 32));
    let mut tx = c.begin().expect("begin");
    let mut rng = SplitMix::new(0xea6e);
    let near = |rng: &mut SplitMix| rng.below(12) as usize;
    for _ in 0..2000 {
        let i = near(&mut rng);
        let o = tx.fetch(ss[i]).expect("fetch");
        assert_eq!(tx.get(o).expect("get").id, i as u64);
        let to = tx
            .follow(o, |c: &CItem| &c.next)
            .expect("follow")
            .expect("ring");
        assert_eq!(tx.get(to).expect("get").id, i as u64 + 1);
    }
    let s = tx.stats();
    assert!(s.stale_links > 0 && s.followed_swizzled > 0, "{s:?}");
    assert!(s.objects <= 8, "{s:?}");
    tx.commit().expect("commit");
}

pub fn eviction(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (mut db, ss) = items(&path, b);
    for (round, caching) in [Caching::Object, Caching::Page].into_iter().enumerate() {
        let mut c = db.copy_cache(cache(caching, Swizzle::Lazy, 5 * 32));
        let mut tx = c.begin().expect("begin");
        for &s in &ss {
            let o = tx.fetch(s).expect("fetch");
            *tx.field_mut(o, |c| &c.val).expect("field") += 1000;
        }
        let st = tx.stats();
        // Object caching keeps five copies; page caching a page's at a time.
        let least = if caching == Caching::Object {
            ITEMS - 5
        } else {
            101
        };
        assert!(st.evicted_dirty >= least, "{caching:?}: {st:?}");
        // Read back through the cache inside the transaction: what was
        // written back is copied in again.
        for (i, &s) in ss.iter().enumerate() {
            let o = tx.fetch(s).expect("fetch");
            assert_eq!(
                tx.get(o).expect("get").val,
                i as u64 + 1000 * (round as u64 + 1)
            );
        }
        tx.commit().expect("commit");
    }
    for (i, &s) in ss.iter().enumerate() {
        assert_eq!(db.smart(s).expect("smart").val, i as u64 + 2000);
    }
    db.close().expect("close");
    let db = open(&path, opts(b));
    for (i, &s) in ss.iter().enumerate() {
        assert_eq!(
            db.smart(s).expect("smart").val,
            i as u64 + 2000,
            "after reopening"
        );
    }
}

pub fn logged(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut db, ss) = items(&dir.path().join("db"), b);
    let every = |v: u64| v * 0x0101_0101_0101_0101;
    let picks: Vec<Smart<CItem>> = ss.iter().copied().step_by(7).collect();
    // Every byte of every picked value differs from here on.
    let mut tx = db.begin().expect("begin");
    for &s in &picks {
        let p = ring_pref(&tx, tx.smart(s).expect("smart").id);
        *tx.field_mut(p, |c| &c.val) = every(0xff);
    }
    tx.commit().expect("commit");
    for round in 0..2u64 {
        let mut c = db.copy_cache(cache(Caching::Page, Swizzle::Lazy, 1 << 20));
        let mut tx = c.begin().expect("begin");
        // Reads of everything, updates of a few: only those are logged.
        ring(&mut tx, ss[0], false);
        for &s in &picks {
            let o = tx.fetch(s).expect("fetch");
            *tx.field_mut(o, |c| &c.val).expect("field") = every(1 + 2 * round);
        }
        let copied = tx.commit().expect("commit");
        drop(c);
        let mut tx = db.begin().expect("begin");
        for &s in &picks {
            let o = tx.smart(s).expect("smart");
            let id = o.id;
            let p = ring_pref(&tx, id);
            *tx.field_mut(p, |c| &c.val) = every(2 + 2 * round);
        }
        let plain = tx.commit().expect("commit");
        // Whole-page and sub-page logging log without diffing (nothing
        // counted as changed); a diff finds the eight bytes of each value.
        assert!(
            [0, 8 * picks.len() as u64].contains(&plain.changed_bytes),
            "{plain:?}"
        );
        assert_eq!(copied.changed_bytes, plain.changed_bytes, "round {round}");
        assert_eq!(copied.log_bytes, plain.log_bytes, "round {round}");
        assert_eq!(
            copied.minimal_log_bytes, plain.minimal_log_bytes,
            "round {round}"
        );
    }
}

/// The item `id`, by walking `next` from the root.
fn ring_pref(v: &impl View, id: u64) -> PRef<CItem> {
    let mut p: PRef<CItem> = v.root("items").expect("root").expect("a root");
    while v.get(p).id != id {
        p = v.get(p).next.expect("ring");
    }
    p
}

/// A chain linked by nullable smart pointers.
#[derive(Persistent)]
#[repr(C)]
pub struct CLink {
    pub id: u64,
    pub next: Option<Smart<CLink>>,
}

/// A nullable smart pointer field (`Option<Smart<T>>`, as the derive
/// accepts it) is followed through the cache to its target, and to `None`
/// at the end of the chain, under every caching and swizzling.
pub fn nullable_smart(b: Cfg) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("chain.amber");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let mut next = None;
    for id in (0..5).rev() {
        let p = tx.alloc(CLink { id, next }).expect("alloc");
        next = Some(tx.to_smart(p).expect("smart"));
    }
    let first = next.expect("a chain");
    tx.commit().expect("commit");
    for caching in [Caching::Object, Caching::Page] {
        for swizzle in [Swizzle::None, Swizzle::Lazy, Swizzle::Eager] {
            let mut c = db.copy_cache(cache(caching, swizzle, 1 << 20));
            let mut tx = c.begin().expect("begin");
            for _ in 0..2 {
                let mut at = Some(tx.fetch(first).expect("fetch"));
                let mut seen = Vec::new();
                while let Some(o) = at {
                    seen.push(tx.get(o).expect("get").id);
                    at = tx.follow(o, |l| &l.next).expect("follow");
                }
                assert_eq!(seen, [0, 1, 2, 3, 4], "{caching:?} {swizzle:?}");
            }
            tx.commit().expect("commit");
        }
    }
}

pub fn abort(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut db, ss) = items(&dir.path().join("db"), b);
    // A large cache (no write-back) and a small one (write-backs), aborted
    // and dropped.
    for (capacity, how) in [(1 << 20, 0), (5 * 32, 0), (1 << 20, 1), (5 * 32, 1)] {
        let mut c = db.copy_cache(cache(Caching::Object, Swizzle::Lazy, capacity));
        let mut tx = c.begin().expect("begin");
        ring(&mut tx, ss[0], false);
        for &s in &ss {
            let o = tx.fetch(s).expect("fetch");
            *tx.field_mut(o, |c| &c.val).expect("field") = 7;
            *tx.field_mut(o, |c| &c.next).expect("field") = None;
        }
        if how == 0 {
            tx.abort().expect("abort");
        } else {
            drop(tx);
        }
        let mut tx = c.begin().expect("begin");
        for (i, &s) in ss.iter().enumerate() {
            let o = tx.fetch(s).expect("fetch");
            assert_eq!(
                tx.get(o).expect("get").val,
                i as u64,
                "the cache after an abort"
            );
        }
        ring(&mut tx, ss[0], false);
        tx.commit().expect("commit");
        drop(c);
        for (i, &s) in ss.iter().enumerate() {
            assert_eq!(
                db.smart(s).expect("smart").val,
                i as u64,
                "the store after an abort"
            );
        }
    }
}

/// Whether `op` is one a copy transaction does (field updates).
fn is_field(op: &Op) -> bool {
    matches!(
        op,
        Op::SetVal(..)
            | Op::SetPad(..)
            | Op::SetNext(..)
            | Op::SetOther(..)
            | Op::BlobWrite(..)
            | Op::BlobOwned(..)
            | Op::Commit
    )
}

/// `k` field updates planned on (and applied to) `model`.
fn plan_fields(model: &mut Model, rng: &mut SplitMix, k: usize) -> Vec<Op> {
    let mut out = Vec::new();
    while out.len() < k {
        let op = model.random_op(rng, usize::MAX);
        if is_field(&op) && !matches!(op, Op::Commit) {
            model.apply(&op);
            out.push(op);
        }
    }
    out
}

/// Applies a field update through the cache.
fn apply_copy(
    tx: &mut CopyTx<'_>,
    root: PRef<GRoot>,
    refs: &HashMap<u64, PRef<GNode>>,
    op: &Op,
) -> amber::Result<()> {
    let node = |tx: &mut CopyTx<'_>, id: &u64| tx.fetch_ref(refs[id]);
    match op {
        Op::SetVal(id, v) => {
            let o = node(tx, id)?;
            *tx.field_mut(o, |n| &n.val)? = *v;
        }
        Op::SetPad(id, i, v) => {
            let o = node(tx, id)?;
            *tx.field_mut(o, |n| &n.pad[*i])? = *v;
        }
        Op::SetNext(id, t) => {
            let o = node(tx, id)?;
            *tx.field_mut(o, |n| &n.next)? = t.map(|t| refs[&t]);
        }
        Op::SetOther(id, t) => {
            let o = node(tx, id)?;
            *tx.field_mut(o, |n| &n.other)? = t.map(|t| refs[&t]);
        }
        Op::BlobWrite(id, off, bytes) => {
            let o = node(tx, id)?;
            let blob: Obj<GBlob> = tx.follow(o, |n| &n.blob)?.expect("a blob");
            for (i, &x) in bytes.iter().enumerate() {
                *tx.field_mut(blob, |g| &g.data[off + i])? = x;
            }
        }
        Op::BlobOwned(id, owned) => {
            let o = node(tx, id)?;
            let blob: Obj<GBlob> = tx.follow(o, |n| &n.blob)?.expect("a blob");
            *tx.field_mut(blob, |g| &g.owner)? = owned.then(|| refs[id]);
        }
        Op::Commit => {
            let r = tx.fetch_ref(root)?;
            *tx.field_mut(r, |g| &g.commits)? += 1;
        }
        _ => panic!("not a field update: {op:?}"),
    }
    Ok(())
}

/// Compares the fields a copy transaction reads with the model, through
/// the cache (pointers followed through it).
fn diff_copy(
    tx: &mut CopyTx<'_>,
    refs: &HashMap<u64, PRef<GNode>>,
    m: &Model,
) -> Result<(), String> {
    let e = |e: amber::Error| e.to_string();
    for (&id, w) in &m.nodes {
        let o = tx.fetch_ref(refs[&id]).map_err(e)?;
        let n = tx.get(o).map_err(e)?;
        if (n.id, n.val, n.pad) != (id, w.val, w.pad) {
            return Err(format!(
                "node {id}: val {} pad {:?}, model {w:?}",
                n.val, n.pad
            ));
        }
        for (which, want) in [(0, w.next), (1, w.other)] {
            let to = if which == 0 {
                tx.follow(o, |n| &n.next)
            } else {
                tx.follow(o, |n| &n.other)
            }
            .map_err(e)?;
            let got = match to {
                Some(t) => Some(tx.get(t).map_err(e)?.id),
                None => None,
            };
            if got != want {
                return Err(format!(
                    "node {id}: pointer {which} to {got:?}, model {want:?}"
                ));
            }
        }
        let blob = tx.follow(o, |n| &n.blob).map_err(e)?;
        match (blob, &w.blob) {
            (None, None) => {}
            (Some(g), Some(mb)) => {
                let g = tx.get(g).map_err(e)?;
                if g.id != mb.id || g.data[..] != mb.data[..] || g.owner.is_some() != mb.owned {
                    return Err(format!("node {id}: blob {} differs from the model", g.id));
                }
            }
            (got, want) => {
                return Err(format!(
                    "node {id}: blob {got:?}, model {:?}",
                    want.as_ref().map(|b| b.id)
                ));
            }
        }
    }
    Ok(())
}

/// Draws a cache: either caching, each swizzling, from a few objects to
/// everything.
fn draw(rng: &mut SplitMix) -> CopyOptions {
    CopyOptions {
        caching: if rng.below(2) == 0 {
            Caching::Object
        } else {
            Caching::Page
        },
        swizzle: [Swizzle::None, Swizzle::Lazy, Swizzle::Eager][rng.below(3) as usize],
        capacity_bytes: [600, 4000, 40_000, 1 << 22][rng.below(4) as usize],
    }
}

/// One transaction's structural changes (allocations, frees, vectors)
/// through a plain transaction, committed.
fn structural(db: &mut Db, root: PRef<GRoot>, model: &mut Model, rng: &mut SplitMix, k: usize) {
    let ops = model.plan(rng, k, 60);
    let mut tx = db.begin().expect("begin");
    let mut r = refs(&tx, root);
    for op in &ops {
        apply_db(&mut tx, root, &mut r, op).expect("apply");
    }
    apply_db(&mut tx, root, &mut r, &Op::Commit).expect("commit mark");
    model.apply(&Op::Commit);
    tx.commit().expect("commit");
}

pub fn prop(b: Cfg) {
    let seeds = env_num("AMBER_OBJ_COPY_SEEDS", if long() { 12 } else { 3 });
    for seed in 0..seeds {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let mut rng = SplitMix::new(0xc0b1_0000 + seed);
        let mut db = Db::create(&path, opts(b)).expect("create");
        let mut root = create_root(&mut db);
        let mut model = Model::default();
        structural(&mut db, root, &mut model, &mut rng, 30);
        let (mut commits, mut aborts, mut dirty) = (0, 0, 0);
        for round in 0..6 {
            let co = draw(&mut rng);
            let r = refs(&db, root);
            let mut c = db.copy_cache(co);
            for t in 0..8 {
                let mut next = model.clone();
                let k = 1 + rng.below(12) as usize;
                let ops = plan_fields(&mut next, &mut rng, k);
                let mut tx = c.begin().expect("begin");
                for op in &ops {
                    apply_copy(&mut tx, root, &r, op).expect("apply");
                }
                if let Err(d) = diff_copy(&mut tx, &r, &next) {
                    panic!("seed {seed} round {round} tx {t} ({co:?}), in the transaction: {d}");
                }
                match rng.below(4) {
                    0 => {
                        tx.abort().expect("abort");
                        aborts += 1;
                    }
                    1 => {
                        drop(tx);
                        aborts += 1;
                    }
                    _ => {
                        apply_copy(&mut tx, root, &r, &Op::Commit).expect("commit mark");
                        next.apply(&Op::Commit);
                        dirty += tx.stats().evicted_dirty;
                        tx.commit().expect("commit");
                        model = next;
                        commits += 1;
                    }
                }
                let mut tx = c.begin().expect("begin");
                if let Err(d) = diff_copy(&mut tx, &r, &model) {
                    panic!("seed {seed} round {round} tx {t} ({co:?}), after it: {d}");
                }
                tx.commit().expect("commit");
            }
            drop(c);
            if let Err(d) = diff(&db, root, &model) {
                panic!("seed {seed} round {round} ({co:?}), the database: {d}");
            }
            if rng.below(2) == 0 {
                if rng.below(2) == 0 {
                    db.close().expect("close");
                } else {
                    drop(db);
                }
                db = open(&path, opts(b));
                root = root_of(&db).expect("root");
                if let Err(d) = diff(&db, root, &model) {
                    panic!("seed {seed} round {round}, reopened: {d}");
                }
            }
            structural(&mut db, root, &mut model, &mut rng, 6);
        }
        assert!(
            commits > 0 && aborts > 0,
            "seed {seed}: {commits} commits, {aborts} aborts"
        );
        eprintln!(
            "copy prop seed {seed}: {commits} commits, {aborts} aborts, {dirty} dirty evictions"
        );
    }
}

/// Transaction `n` of the kill test: field updates planned on `model`.
fn kill_step(n: u64, model: &mut Model) -> Vec<Op> {
    let mut rng = SplitMix::new(0xc0b1_4b11 ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let k = 1 + rng.below(10) as usize;
    let mut ops = plan_fields(model, &mut rng, k);
    model.apply(&Op::Commit);
    ops.push(Op::Commit);
    ops
}

const KILL_SEED: u64 = 0xc0b1_5747;

/// The graph the kill test starts from (commit 1), built by a plain
/// transaction from a fixed seed; its root.
fn kill_start(db: &mut Db) -> PRef<GRoot> {
    let root = create_root(db);
    let mut rng = SplitMix::new(KILL_SEED);
    structural(db, root, &mut Model::default(), &mut rng, 40);
    root
}

/// The model after commit 1 of the kill test (as `kill_start` plans it).
fn kill_model() -> Model {
    let mut m = Model::default();
    m.plan(&mut SplitMix::new(KILL_SEED), 40, 60);
    m.apply(&Op::Commit);
    m
}

/// `model` advanced to commit `c`.
fn kill_advance(model: &mut Model, c: u64) {
    while model.commits < c {
        let n = model.commits + 1;
        kill_step(n, model);
    }
}

fn kill_child(b: Cfg) {
    let path = child_dir().join("db");
    let mut o = super::cached(b, 64 << 10);
    if matches!(
        b.backend,
        amber::BackendChoice::MappedUnverified | amber::BackendChoice::Mapped
    ) {
        o.cache_bytes = None;
    }
    o.store.checkpoint_log_bytes = 48 << 10;
    let mut db = if path.exists() {
        open(&path, o)
    } else {
        let mut db = Db::create(&path, o).expect("create");
        kill_start(&mut db);
        db
    };
    let root = root_of(&db).expect("root");
    let mut model = kill_model();
    kill_advance(&mut model, db.get(root).commits);
    check_backend(&db, b);
    let r = refs(&db, root);
    let out = std::io::stdout();
    let report = |n: u64| {
        let mut o = out.lock();
        writeln!(o, "committed {n}").expect("stdout");
        o.flush().expect("flush");
    };
    report(model.commits);
    let mut rng = SplitMix::new(model.commits);
    let mut c = db.copy_cache(draw(&mut rng));
    loop {
        let n = model.commits + 1;
        if rng.below(5) == 0 {
            let mut scratch = model.clone();
            let ops = plan_fields(&mut scratch, &mut rng, 6);
            let mut tx = c.begin().expect("begin");
            for op in &ops {
                apply_copy(&mut tx, root, &r, op).expect("apply");
            }
            tx.abort().expect("abort");
        }
        let mut next = model.clone();
        let ops = kill_step(n, &mut next);
        let mut tx = c.begin().expect("begin");
        for op in &ops {
            apply_copy(&mut tx, root, &r, op).expect("apply");
        }
        tx.commit().expect("commit");
        model = next;
        report(n);
    }
}

pub fn kill(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("copy-kill") {
        kill_child(b);
        return;
    }
    let rounds = env_num("AMBER_OBJ_KILLS", if long() { 200 } else { 30 });
    let mut k = Rounds::new(0xc0b1_0c11);
    let mut model: Option<Model> = None;
    for round in 0..rounds {
        let (db, root, _) = k.next(b, test, "copy-kill", round);
        let got = k.last;
        let m = model.get_or_insert_with(kill_model);
        kill_advance(m, got);
        if let Err(d) = diff(&db, root, m) {
            panic!("round {round}, after commit {got}: {d}");
        }
        let deep = db.verify_deep().expect("deep verification runs");
        assert!(deep.is_clean(), "round {round}: {:#?}", deep.findings);
    }
    eprintln!("copy kill test ({b:?}): {rounds} kills, {} commits", k.last);
}
