//! Vectors and strings against `Vec` and `String` models, and the read
//! trait shared by `Db` and `Tx`.
//!
//! - `run`: a property test. Random `PVec` operations (push, pop, insert,
//!   remove, swap_remove, truncate, clear, retain, extend, reserve,
//!   reserve_exact, shrink_to_fit, slice_mut) on a vector of `u64` and on a
//!   vector of structs that own strings (moved as bytes by insert and
//!   retain), and `PString`/`PBytes` operations (set, push, replacement by
//!   a new string) with multi-byte text and texts larger than a page, in
//!   random transactions that commit, abort or are dropped, with random
//!   reopenings (a clean close, or a drop: recovery from the log). The
//!   database is compared with the model after every operation (through
//!   the transaction), after every transaction (abort restores the model)
//!   and after every reopening (the committed model), all through one
//!   `fn read(&impl View)`. Capacities are checked as `Vec`'s: never below
//!   the length, at least doubling when a push grows them, exact after
//!   `reserve_exact` and `shrink_to_fit`.
//! - `damaged_text`: a string buffer whose bytes on disk are not UTF-8
//!   (a committed store write, so its checksum is valid) is an
//!   `Error::Corrupt` naming its page from `try_str`, a panic naming it
//!   from `str`, and damage found by deep verification.
//! - `roots_and_counts`: `roots`, `count` and `census` through `Db` and
//!   through `Tx` (which sees its own roots, allocations and frees), across
//!   an abort, a commit and a reopening.
//!
//! `AMBER_OBJ_SEED=N` runs one seed of `run`; `AMBER_OBJ_LONG=1` runs more
//! and longer.

use super::{Cfg, cached, check_backend, env_num, long, open, opts};
use amber::inspect::{Inspector, Value};
use amber::internals::io::crash::SplitMix;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};
use amber::{Db, Error, PBytes, PRef, PString, PVec, Persistent, Tx, View};
use std::path::Path;
use std::sync::Arc;

/// A vector element that owns a buffer.
#[derive(Persistent)]
#[persistent(name = "coll::Word")]
#[repr(C)]
pub struct Word {
    pub n: u64,
    pub text: PString,
}

/// One of each collection.
#[derive(Persistent, Default)]
#[persistent(name = "coll::Holder")]
#[repr(C)]
pub struct Holder {
    pub nums: PVec<u64>,
    pub words: PVec<Word>,
    pub text: PString,
    pub raw: PBytes,
}

/// What a `Holder` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    pub nums: Vec<u64>,
    pub words: Vec<(u64, String)>,
    pub text: String,
    pub raw: Vec<u8>,
}

/// Reads a holder, on a `Db` or in a `Tx`, and checks its capacities.
pub fn read(v: &impl View, h: PRef<Holder>) -> Model {
    let o = v.try_get(h).expect("the holder");
    assert!(o.nums.capacity() >= o.nums.len(), "{:?}", o.nums);
    assert!(o.words.capacity() >= o.words.len(), "{:?}", o.words);
    assert!(o.text.capacity() >= o.text.len(), "{:?}", o.text);
    Model {
        nums: v.slice(&o.nums).to_vec(),
        words: v
            .try_slice(&o.words)
            .expect("words")
            .iter()
            .map(|w| (w.n, v.str(&w.text).to_string()))
            .collect(),
        text: v.try_str(&o.text).expect("text").to_string(),
        raw: v.try_bytes(&o.raw).expect("raw").to_vec(),
    }
}

/// A random string: multi-byte characters, now and then longer than a
/// page.
fn text(rng: &mut SplitMix) -> String {
    const CHARS: [char; 8] = ['a', 'b', 'z', ' ', 'é', 'ж', '中', '😀'];
    let n = match rng.below(20) {
        0 => 0,
        1 => 1500 + rng.below(3000) as usize,
        _ => rng.below(12) as usize,
    };
    (0..n)
        .map(|_| CHARS[rng.below(CHARS.len() as u64) as usize])
        .collect()
}

fn at(rng: &mut SplitMix, len: usize) -> usize {
    rng.below(len as u64 + 2) as usize
}

/// Applies one random operation to `h` in `tx` and to `m`; says which.
fn op(tx: &mut Tx<'_>, h: PRef<Holder>, m: &mut Model, rng: &mut SplitMix) -> String {
    let len = m.nums.len();
    let cap = tx.get(h).nums.capacity();
    let k = 1 + rng.below(5);
    let r = rng.below(1000);
    match rng.below(25) {
        0..=2 => {
            tx.push(h, |o| &mut o.nums, r).expect("push");
            m.nums.push(r);
            let new = tx.get(h).nums.capacity();
            if len == cap {
                assert!(new >= (2 * cap).max(4), "push grew {cap} to {new}");
            } else {
                assert_eq!(new, cap, "push with room changed the capacity");
            }
            format!("push {r}")
        }
        3 => {
            assert_eq!(tx.pop(h, |o| &mut o.nums), m.nums.pop(), "pop");
            "pop".into()
        }
        4 => {
            let i = at(rng, len);
            let res = tx.insert(h, |o| &mut o.nums, i, r);
            if i <= len {
                res.expect("insert");
                m.nums.insert(i, r);
            } else {
                assert!(matches!(res, Err(Error::Invalid(_))), "{res:?}");
            }
            format!("insert {r} at {i}")
        }
        5 => {
            let i = at(rng, len);
            let want = (i < len).then(|| m.nums.remove(i));
            assert_eq!(tx.remove(h, |o| &mut o.nums, i), want, "remove {i}");
            format!("remove {i}")
        }
        6 => {
            let i = at(rng, len);
            let want = (i < len).then(|| m.nums.swap_remove(i));
            assert_eq!(tx.swap_remove(h, |o| &mut o.nums, i), want, "swap_remove");
            format!("swap_remove {i}")
        }
        7 => {
            let n = at(rng, len);
            tx.truncate(h, |o| &mut o.nums, n).expect("truncate");
            m.nums.truncate(n);
            assert_eq!(tx.get(h).nums.capacity(), cap, "truncate keeps capacity");
            format!("truncate {n}")
        }
        8 if rng.below(4) == 0 => {
            tx.clear(h, |o| &mut o.nums).expect("clear");
            m.nums.clear();
            "clear".into()
        }
        9 => {
            tx.retain(h, |o| &mut o.nums, |x| x % k != 0)
                .expect("retain");
            m.nums.retain(|x| x % k != 0);
            format!("retain not multiples of {k}")
        }
        10 => {
            let items: Vec<u64> = (0..rng.below(40)).map(|i| r + i).collect();
            if rng.below(2) == 0 {
                tx.extend(h, |o| &mut o.nums, items.iter().copied().filter(|_| true))
                    .expect("extend");
            } else {
                tx.extend_from_slice(h, |o| &mut o.nums, &items)
                    .expect("extend_from_slice");
            }
            m.nums.extend(&items);
            format!("extend by {}", items.len())
        }
        11 => {
            let n = rng.below(50) as usize;
            let exact = rng.below(2) == 0;
            if exact {
                tx.reserve_exact(h, |o| &mut o.nums, n)
                    .expect("reserve_exact");
            } else {
                tx.reserve(h, |o| &mut o.nums, n).expect("reserve");
            }
            let new = tx.get(h).nums.capacity();
            assert!(new >= len + n, "reserve {n} on {len}: capacity {new}");
            if cap >= len + n {
                assert_eq!(new, cap, "reserve with room changed the capacity");
            } else if exact {
                assert_eq!(new, len + n, "reserve_exact");
            } else {
                assert!(new >= 2 * cap, "reserve grew {cap} to {new}");
            }
            format!("reserve {n} (exact {exact})")
        }
        12 => {
            tx.shrink_to_fit(h, |o| &mut o.nums).expect("shrink_to_fit");
            assert_eq!(tx.get(h).nums.capacity(), len, "shrink_to_fit");
            "shrink_to_fit".into()
        }
        13 => {
            tx.slice_mut(h, |o| &mut o.nums).reverse();
            m.nums.reverse();
            "reverse".into()
        }
        14 | 15 => {
            let s = text(rng);
            let i = at(rng, m.words.len()).min(m.words.len());
            let text = tx.new_string(&s).expect("new_string");
            let w = Word { n: r, text };
            if rng.below(2) == 0 {
                tx.push(h, |o| &mut o.words, w).expect("push word");
                m.words.push((r, s));
                "push word".into()
            } else {
                tx.insert(h, |o| &mut o.words, i, w).expect("insert word");
                m.words.insert(i, (r, s));
                format!("insert word at {i}")
            }
        }
        16 => {
            tx.retain(h, |o| &mut o.words, |w| w.n % k != 0)
                .expect("retain");
            m.words.retain(|w| w.0 % k != 0);
            format!("retain words not multiples of {k}")
        }
        17 => {
            let n = at(rng, m.words.len());
            tx.truncate(h, |o| &mut o.words, n).expect("truncate");
            m.words.truncate(n);
            format!("truncate words to {n}")
        }
        18 => {
            let new: Vec<(u64, String)> = (0..rng.below(4)).map(|i| (i, text(rng))).collect();
            let mut words = Vec::new();
            for (n, s) in &new {
                let text = tx.new_string(s).expect("new_string");
                words.push(Word { n: *n, text });
            }
            let v = tx.new_vec(words).expect("new_vec");
            assert_eq!(v.capacity(), new.len());
            tx.get_mut(h).words = v;
            m.words = new;
            "replace words".into()
        }
        19 => {
            let s = text(rng);
            tx.set_str(h, |o| &mut o.text, &s).expect("set_str");
            m.text = s;
            "set_str".into()
        }
        20 => {
            let s = text(rng);
            tx.push_str(h, |o| &mut o.text, &s).expect("push_str");
            m.text.push_str(&s);
            "push_str".into()
        }
        21 => {
            let s = text(rng);
            let t = tx.new_string(&s).expect("new_string");
            tx.get_mut(h).text = t;
            m.text = s;
            "replace text".into()
        }
        22 => {
            let b = text(rng).into_bytes();
            tx.set_bytes(h, |o| &mut o.raw, &b).expect("set_bytes");
            m.raw = b;
            "set_bytes".into()
        }
        23 => {
            let b = text(rng).into_bytes();
            tx.push_bytes(h, |o| &mut o.raw, &b).expect("push_bytes");
            m.raw.extend(&b);
            "push_bytes".into()
        }
        _ => {
            let b = text(rng).into_bytes();
            let raw = tx.new_bytes(&b).expect("new_bytes");
            tx.get_mut(h).raw = raw;
            m.raw = b;
            "replace bytes".into()
        }
    }
}

/// What a run saw, to check that the interesting paths were taken.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    pub commits: u64,
    pub aborts: u64,
    pub reopens: u64,
}

fn holder(db: &Db) -> PRef<Holder> {
    db.root("holder").expect("root").expect("set")
}

/// One seed: `steps` transactions.
pub fn run_seed(b: Cfg, seed: u64, steps: usize) -> Seen {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("coll.amber");
    let mut rng = SplitMix::new(seed);
    let o = if rng.below(2) == 0 {
        opts(b)
    } else {
        cached(b, (8 + rng.below(24)) * 4096)
    };
    let ctx = format!("seed {seed} ({b:?}, cache {:?})", o.cache_bytes);
    let mut db = Db::create(&path, o.clone()).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let h = tx
        .alloc_with(|tx| {
            Ok(Holder {
                nums: tx.new_vec([1, 2, 3])?,
                text: tx.new_string("héllo")?,
                ..Holder::default()
            })
        })
        .expect("alloc_with");
    tx.set_root("holder", h).expect("root");
    tx.commit().expect("commit");
    let mut h = holder(&db);
    let mut model = Model {
        nums: vec![1, 2, 3],
        text: "héllo".into(),
        ..Model::default()
    };
    let mut seen = Seen::default();
    for step in 0..steps {
        let mut tx = db.begin().expect("begin");
        let mut work = model.clone();
        let mut done = Vec::new();
        for _ in 0..1 + rng.below(8) {
            done.push(op(&mut tx, h, &mut work, &mut rng));
            let got = read(&tx, h);
            assert!(
                got == work,
                "{ctx}, step {step}, after {done:?}:\n{got:?}\n{work:?}"
            );
        }
        match rng.below(10) {
            0..=5 => {
                tx.commit().expect("commit");
                model = work;
                seen.commits += 1;
            }
            6..=7 => {
                tx.abort().expect("abort");
                seen.aborts += 1;
            }
            _ => {
                drop(tx);
                seen.aborts += 1;
            }
        }
        let got = read(&db, h);
        assert!(
            got == model,
            "{ctx}, step {step}, after the transaction {done:?}"
        );
        if rng.below(12) == 0 {
            if rng.below(2) == 0 {
                db.close().expect("close");
            } else {
                drop(db);
            }
            db = open(&path, o.clone());
            h = holder(&db);
            assert!(read(&db, h) == model, "{ctx}, step {step}, after reopening");
            seen.reopens += 1;
        }
    }
    db.close().expect("close");
    let db = open(&path, o);
    assert!(read(&db, holder(&db)) == model, "{ctx}, at the end");
    let report = db.verify_deep().expect("verify_deep");
    assert!(report.is_clean(), "{ctx}: {:?}", report.findings);
    seen
}

/// Runs the seeds.
pub fn run(b: Cfg) {
    let (seeds, steps) = if long() { (16, 400) } else { (2, 60) };
    let one = std::env::var("AMBER_OBJ_SEED").is_ok();
    let list: Vec<u64> = if one {
        vec![env_num("AMBER_OBJ_SEED", 0)]
    } else {
        (0..seeds).map(|i| 0xc011 + i).collect()
    };
    let mut total = Seen::default();
    for seed in list {
        let s = run_seed(b, seed, steps);
        total.commits += s.commits;
        total.aborts += s.aborts;
        total.reopens += s.reopens;
    }
    eprintln!("collections property test ({b:?}): {total:?}");
    if !one {
        assert!(
            total.commits > 0 && total.aborts > 0 && total.reopens > 0,
            "{total:?}"
        );
    }
}

/// Overwrites the first bytes of the buffer of `root`'s `text` with bytes
/// that are not UTF-8, in a committed store transaction (the page keeps a
/// valid checksum); returns the buffer's page.
fn damage_text(path: &Path, root: &str) -> u64 {
    let addr = {
        let i = Inspector::open(path).expect("inspect");
        let r = i
            .roots()
            .into_iter()
            .find(|r| r.name == root)
            .expect("root");
        let obj = i.object(r.addr).expect("object");
        let amber::inspect::ObjectValue::Struct { fields, .. } = &obj.value else {
            panic!("a struct: {obj:?}")
        };
        let f = fields.iter().find(|f| f.name == "text").expect("text");
        let Value::Vector { buffer, .. } = &f.value else {
            panic!("a buffer: {f:?}")
        };
        *buffer
    };
    let s = Store::open(Arc::new(RealVfs), path, StoreOptions::default()).expect("open store");
    let mut tx = s.begin().expect("begin");
    tx.write(addr + 1, &[0xff, 0xfe]).expect("write");
    tx.commit().expect("commit");
    let page = addr / s.page_size() as u64;
    s.close().expect("close");
    page
}

/// A string whose bytes on disk are not UTF-8.
pub fn damaged_text(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let mut db = Db::create(&path, opts(b)).expect("create");
        let mut tx = db.begin().expect("begin");
        let h = tx
            .alloc_with(|tx| {
                Ok(Holder {
                    text: tx.new_string("héllo wörld")?,
                    ..Holder::default()
                })
            })
            .expect("alloc");
        tx.set_root("holder", h).expect("root");
        tx.commit().expect("commit");
        db.close().expect("close");
    }
    let page = damage_text(&path, "holder");
    let db = open(&path, opts(b));
    let o = db.get(holder(&db));
    match db.try_str(&o.text) {
        Err(Error::Corrupt { at, what, .. }) => {
            assert_eq!(at, amber::Location::Page(page), "{what}");
            assert!(what.contains("not UTF-8"), "{what}");
            assert!(what.contains(&format!("at {page}:")), "{what}");
        }
        other => panic!("a damaged string read as {other:?}"),
    }
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.str(&o.text).len()))
        .expect_err("str of a damaged string panics");
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("not UTF-8") && msg.contains(&format!("page {page}")),
        "{msg}"
    );
    let report = db.verify_deep().expect("verify_deep");
    assert_eq!(report.damage, 1, "{:?}", report.findings);
    let f = &report.findings[0];
    assert!(f.what.contains("not UTF-8"), "{f}");
    assert!(f.to_string().contains("field `coll::Holder.text`"), "{f}");
}

/// `roots`, `count` and `census`, through `Db` and `Tx`.
pub fn roots_and_counts(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts(b)).expect("create");
    assert!(db.roots().is_empty());
    assert_eq!(db.count::<Holder>().expect("count"), 0);
    let mut tx = db.begin().expect("begin");
    let hs: Vec<PRef<Holder>> = (0..3)
        .map(|_| tx.alloc(Holder::default()).expect("alloc"))
        .collect();
    tx.set_root("b", hs[1]).expect("root");
    tx.set_root("a", hs[0]).expect("root");
    tx.set_str(hs[0], |h| &mut h.text, "x").expect("set_str");
    let named = |names: &[&str]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), "coll::Holder".to_string()))
            .collect()
    };
    assert_eq!(tx.roots(), named(&["a", "b"]));
    assert_eq!(tx.count::<Holder>().expect("count"), 3);
    let a: PRef<Holder> = View::root(&tx, "a").expect("root").expect("set");
    assert_eq!(a, hs[0]);
    tx.commit().expect("commit");
    assert_eq!(db.roots(), named(&["a", "b"]));
    assert_eq!(db.count::<Holder>().expect("count"), 3);
    assert_eq!(
        db.census().expect("census"),
        [("[u8]".to_string(), 1), ("coll::Holder".to_string(), 3)]
    );
    let mut tx = db.begin().expect("begin");
    tx.free(hs[2]).expect("free");
    tx.remove_root("a").expect("remove_root");
    tx.alloc(Holder::default()).expect("alloc");
    tx.alloc(Holder::default()).expect("alloc");
    assert_eq!(tx.count::<Holder>().expect("count"), 4);
    assert_eq!(tx.roots(), named(&["b"]));
    assert!(View::root::<Holder>(&tx, "a").expect("root").is_none());
    tx.abort().expect("abort");
    assert_eq!(db.count::<Holder>().expect("count"), 3);
    assert_eq!(db.roots(), named(&["a", "b"]));
    let mut tx = db.begin().expect("begin");
    tx.free(hs[2]).expect("free");
    tx.remove_root("a").expect("remove_root");
    tx.commit().expect("commit");
    db.close().expect("close");
    let db = open(&path, opts(b));
    assert_eq!(db.count::<Holder>().expect("count"), 2);
    assert_eq!(db.roots(), named(&["b"]));
    assert_eq!(db.count::<Word>().expect("count"), 0);
}
