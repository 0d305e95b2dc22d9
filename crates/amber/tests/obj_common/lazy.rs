//! `Lazy<T>`, swizzled upon discovery, beside `PRef<T>` and `Smart<T>` in
//! one struct:
//!
//! - `never_logged`: a read that rewrites a lazy field is not a write — a
//!   transaction of such reads detects no written block and logs what an
//!   empty one does (under every scheme the binary runs, whole-page logging
//!   included), a commit that writes the field's page logs only the byte
//!   changed, and no swizzled word (a virtual address with bit 0 set) is in
//!   the log or the page file, while the database is open or after it is
//!   closed; reopened, every lazy field is a persistent address again;
//! - `mixed_granularity`: a struct with all three kinds (and a vector of
//!   lazy pointers) round-trips through the schema catalog across sessions,
//!   and a program that declares a `Lazy` field as `Smart` (the same bytes
//!   on disk, another form in memory) is refused, naming the field;
//! - `discovery`: the lazy variant leaves a field whose target is not
//!   resident unswizzled and swizzles it once the target is; the eager one
//!   swizzles at the first read;
//! - `concurrent`: threads following the same lazy fields under a cache
//!   budget (targets evicted and fetched again) all reach the right
//!   objects, one through the plain forms, two also through `smart` and
//!   `try_lazy`, which run the fault service in the calling thread: with
//!   userfaultfd the handler can then read a fault message whose page that
//!   service installed meanwhile, from a thread that has gone on and holds
//!   locks of its own (a stale message, not a touch under a lock:
//!   `docs/design.md` §4.3, "Stale fault messages").
//!
//! The write path's property and kill tests follow lazy fields too
//! (`graph.rs`).

use super::{Cfg, cached, check_backend, open, opts};
use amber::{Db, Error, Lazy, PRef, PVec, Persistent, Smart, View};
use std::path::Path;

/// A target: about a quarter of a 4 KiB page.
#[derive(Persistent)]
#[repr(C)]
pub struct LLeaf {
    pub id: u64,
    pub data: [u8; 1000],
}

/// The three pointer kinds in one struct.
#[derive(Persistent)]
#[repr(C)]
pub struct Mixed {
    pub id: u64,
    pub r: PRef<LLeaf>,
    pub s: Smart<LLeaf>,
    pub l: Lazy<LLeaf>,
    pub o: Option<PRef<LLeaf>>,
    pub ls: PVec<Lazy<LLeaf>>,
    /// Null in every third object.
    pub n: Lazy<LLeaf>,
    pub count: u64,
}

/// `Mixed` as a program that took its lazy field for a smart one declares it.
#[derive(Persistent)]
#[repr(C)]
#[persistent(name = "Mixed")]
pub struct MixedSmart {
    pub id: u64,
    pub r: PRef<LLeaf>,
    pub s: Smart<LLeaf>,
    pub l: Smart<LLeaf>,
    pub o: Option<PRef<LLeaf>>,
    pub ls: PVec<Lazy<LLeaf>>,
    pub n: Lazy<LLeaf>,
    pub count: u64,
}

#[derive(Persistent)]
#[repr(C)]
pub struct LRoot {
    pub leaves: PVec<PRef<LLeaf>>,
    pub mixed: PVec<PRef<Mixed>>,
}

const LEAVES: u64 = 64;
const MIXED: u64 = 32;

/// Creates `LEAVES` leaves and `MIXED` mixed objects pointing to them in
/// three ways; returns nothing (the root is "lazy").
fn create(path: &Path, b: Cfg) {
    let mut db = Db::create(path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let mut leaves = Vec::new();
    for id in 0..LEAVES {
        leaves.push(
            tx.alloc(LLeaf {
                id,
                data: [id as u8; 1000],
            })
            .expect("leaf"),
        );
    }
    let mut mixed = Vec::new();
    for id in 0..MIXED {
        let at = |k: u64| leaves[((id * 7 + k) % LEAVES) as usize];
        let s = tx.to_smart(at(1)).expect("smart");
        let ls = tx
            .new_vec((2..5).map(|k| Lazy::from(at(k))))
            .expect("vector of lazy pointers");
        let m = Mixed {
            id,
            r: at(0),
            s,
            // Half from a persistent address, half from a direct one: a
            // commit stores both as persistent addresses.
            l: if id % 2 == 0 {
                Lazy::from(tx.to_smart(at(5)).expect("smart"))
            } else {
                Lazy::from(at(5))
            },
            o: (id % 3 != 0).then(|| at(6)),
            ls,
            n: if id % 3 == 0 {
                Lazy::null()
            } else {
                Lazy::from(at(6))
            },
            count: 0,
        };
        mixed.push(tx.alloc(m).expect("mixed"));
    }
    let root = LRoot {
        leaves: tx.new_vec(leaves).expect("leaves"),
        mixed: tx.new_vec(mixed).expect("mixed"),
    };
    let root = tx.alloc(root).expect("root");
    tx.set_root("lazy", root).expect("set root");
    tx.commit().expect("commit");
    db.close().expect("close");
}

fn root(v: &impl View) -> PRef<LRoot> {
    v.root("lazy").expect("root").expect("a root")
}

/// Follows every pointer of every mixed object, checking where each leads;
/// returns how many lazy fields are swizzled afterwards, and how many
/// there are.
fn check_all(v: &impl View) -> (u64, u64) {
    check(v, false)
}

/// [`check_all`]; `plain`: only through the plain reads (`get`, `lazy`),
/// which never run the fault service in the calling thread.
fn check(v: &impl View, plain: bool) -> (u64, u64) {
    let r = v.get(root(v));
    let (mut swizzled, mut all) = (0, 0);
    for &m in v.slice(&r.mixed) {
        let m = v.get(m);
        let want = |k: u64| (m.id * 7 + k) % LEAVES;
        assert_eq!(v.get(m.r).id, want(0), "mixed {}: r", m.id);
        let l = v.lazy(&m.l).expect("not null");
        assert_eq!(
            (l.id, l.data[999]),
            (want(5), want(5) as u8),
            "mixed {}: l",
            m.id
        );
        if !plain {
            assert_eq!(
                v.smart(m.s).expect("smart").id,
                want(1),
                "mixed {}: s",
                m.id
            );
            assert_eq!(
                v.try_lazy(&m.l).expect("try_lazy").map(|l| l.id),
                Some(want(5))
            );
            assert_eq!(
                v.try_lazy(&m.n).expect("try_lazy").map(|l| l.id),
                (m.id % 3 != 0).then(|| want(6))
            );
        }
        assert_eq!(m.o.map(|o| v.get(o).id), (m.id % 3 != 0).then(|| want(6)));
        assert_eq!(v.lazy(&m.n).map(|l| l.id), (m.id % 3 != 0).then(|| want(6)));
        assert_eq!(m.n.is_null(), m.id % 3 == 0);
        let ls: Vec<u64> = (v.slice(&m.ls).iter())
            .map(|l| v.lazy(l).expect("not null").id)
            .collect();
        assert_eq!(ls, [want(2), want(3), want(4)], "mixed {}: ls", m.id);
        let n = (!m.n.is_null()).then_some(&m.n);
        for l in std::iter::once(&m.l).chain(n).chain(v.slice(&m.ls)) {
            swizzled += u64::from(l.is_swizzled());
            all += 1;
        }
    }
    (swizzled, all)
}

/// The virtual addresses of every leaf, as the swizzled words of lazy
/// pointers to them would hold them (bit 0 set).
fn swizzled_words(db: &Db) -> Vec<[u8; 8]> {
    let r = db.get(root(db));
    (db.slice(&r.leaves).iter())
        .map(|p| (p.addr() | 1).to_le_bytes())
        .collect()
}

/// Fails if any file in `dir` holds one of `words`.
fn none_on_disk(dir: &Path, words: &[[u8; 8]], when: &str) {
    for e in std::fs::read_dir(dir).expect("dir") {
        let path = e.expect("entry").path();
        let bytes = std::fs::read(&path).expect("read");
        for w in words {
            if let Some(at) = bytes.windows(8).position(|x| x == w) {
                panic!(
                    "{when}: {} holds the swizzled word {:#x} at byte {at}",
                    path.display(),
                    u64::from_le_bytes(*w)
                );
            }
        }
    }
}

pub fn never_logged(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("lazy.amber");
    create(&path, b);
    let mut o = opts(b);
    // No checkpoint folds the log into the page file while we look at it.
    o.store.checkpoint_log_bytes = 1 << 30;
    let mut db = open(&path, o.clone());
    // The empty commit's log bytes, for comparison.
    let empty = db
        .begin()
        .expect("begin")
        .commit()
        .expect("empty commit")
        .log_bytes;
    // Reads between transactions swizzle (the targets are resident once
    // `check_all` has followed them: a second pass swizzles the rest).
    check_all(&db);
    let (swizzled, all) = check_all(&db);
    assert_eq!(
        swizzled, all,
        "every lazy field with a resident target is swizzled"
    );
    // Reads inside a transaction (the fields are rewritten again after a
    // reopening below) and nothing else: no block is written, nothing but
    // the commit record is logged.
    let tx = db.begin().expect("begin");
    check_all(&tx);
    let stats = tx.commit().expect("commit");
    assert_eq!(stats.blocks, 0, "rewrites detected as writes: {stats:?}");
    assert_eq!(stats.log_bytes, empty, "rewrites logged: {stats:?}");
    // A write next to swizzled fields: diffing logs the byte it changed
    // (the other generators log the page or the recorded range whole, in
    // persistent form: the scan of the files below).
    let first = db.slice(&db.get(root(&db)).mixed)[0];
    assert!(db.get(first).l.is_swizzled());
    let mut tx = db.begin().expect("begin");
    tx.get_mut(first).count = 1;
    let stats = tx.commit().expect("commit");
    assert_eq!(stats.blocks, 1, "{stats:?}");
    if stats.strategy.log == amber::Log::Diff {
        assert_eq!(stats.changed_bytes, 1, "{stats:?}");
    }
    // A write of a lazy field itself (to the target it had, in the other
    // form) stores the persistent address.
    let leaf = db.slice(&db.get(root(&db)).leaves)[5];
    assert_eq!(db.lazy(&db.get(first).l).map(|l| l.id), Some(5));
    let mut tx = db.begin().expect("begin");
    tx.get_mut(first).l = Lazy::from(leaf);
    tx.commit().expect("commit");
    assert_eq!(
        db.lazy(&db.get(first).l).map(|l| l.id),
        Some(db.get(leaf).id)
    );
    let words = swizzled_words(&db);
    none_on_disk(dir.path(), &words, "open");
    db.close().expect("close");
    none_on_disk(dir.path(), &words, "closed");
    // Reopened (also after a crash: the log replayed), every lazy field is
    // a persistent address until followed.
    for crash in [false, true] {
        let mut db = open(&path, o.clone());
        let r = db.get(root(&db));
        for &m in db.slice(&r.mixed) {
            let m = db.get(m);
            assert!(!m.l.is_swizzled(), "mixed {} fetched swizzled", m.id);
            assert!(db.slice(&m.ls).iter().all(|l| !l.is_swizzled()));
        }
        check_all(&db);
        let tx = db.begin().expect("begin");
        let stats = tx.commit().expect("commit");
        assert_eq!(stats.blocks, 0, "{stats:?}");
        if crash {
            drop(db);
        } else {
            db.close().expect("close");
        }
    }
}

pub fn mixed_granularity(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mixed.amber");
    create(&path, b);
    for _ in 0..2 {
        let db = open(&path, opts(b));
        db.check_type::<Mixed>()
            .expect("the stored layout is the program's");
        check_all(&db);
        db.close().expect("close");
    }
    // Inspection reads a lazy field as what it is on disk, and deep
    // verification follows it.
    let mut db = open(&path, opts(b));
    let (m0, leaf5) = {
        let tx = db.begin().expect("begin");
        let r = tx.get(root(&tx));
        let m0 = tx.to_smart(tx.slice(&r.mixed)[0]).expect("paddr").paddr();
        let leaf5 = tx.to_smart(tx.slice(&r.leaves)[5]).expect("paddr").paddr();
        (m0, leaf5)
    };
    db.close().expect("close");
    {
        use amber::inspect::{Inspector, ObjectValue, Value};
        let ins = Inspector::open(&path).expect("inspect");
        let o = ins.object(m0).expect("mixed 0");
        let ObjectValue::Struct { fields, .. } = &o.value else {
            panic!("{:?}", o.value)
        };
        let field = |name: &str| &fields.iter().find(|f| f.name == name).expect(name).value;
        assert_eq!(*field("l"), Value::Lazy(leaf5));
        assert_eq!(*field("n"), Value::Lazy(0), "mixed 0's n is null");
        assert!(matches!(field("s"), Value::Smart(_)));
        assert!(ins.verify_deep().expect("deep").is_clean());
    }
    let db = open(&path, opts(b));
    let e = db
        .check_type::<MixedSmart>()
        .expect_err("Lazy read as Smart");
    let Error::SchemaMismatch { what, .. } = &e else {
        panic!("{e}")
    };
    assert!(
        what.contains("field `l` is `Smart<LLeaf>` in the program, `Lazy<LLeaf>` in the database"),
        "{what}"
    );
}

pub fn discovery(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("discovery.amber");
    create(&path, b);
    // One page per fault: a target on another page than its holder is not
    // resident until something touches it.
    let mut o = opts(b);
    o.fetch_cluster = 1;
    o.fetch_adaptive = false;
    let db = open(&path, o.clone());
    let r = db.get(root(&db));
    let mixed: Vec<PRef<Mixed>> = db.slice(&r.mixed).to_vec();
    let leaves: Vec<PRef<LLeaf>> = db.slice(&r.leaves).to_vec();
    let mapped = db.backend() == amber::Backend::MappedUnverified;
    let mut lazy_cold = 0;
    for (i, &m) in mixed.iter().enumerate() {
        let m = db.get(m);
        let target = leaves[((m.id * 7 + 5) % LEAVES) as usize];
        let fs = db.frame_space();
        let resident = (fs.frame_at(target.addr() as usize)).is_some_and(|f| fs.is_resident(f));
        let first = if i % 2 == 0 {
            db.lazy(&m.l)
        } else {
            db.lazy_eager(&m.l)
        };
        assert_eq!(first.map(|l| l.id), Some(db.get(target).id));
        if i % 2 == 1 || resident {
            assert!(
                m.l.is_swizzled(),
                "mixed {i}: eager or resident, not swizzled"
            );
        } else {
            lazy_cold += 1;
            assert!(
                !m.l.is_swizzled(),
                "mixed {i}: swizzled though its target was not resident"
            );
            // Now it is: the next read swizzles.
            assert_eq!(db.lazy(&m.l).map(|l| l.id), Some(db.get(target).id));
            assert!(
                m.l.is_swizzled(),
                "mixed {i}: resident target, not swizzled"
            );
        }
    }
    // The mapped backend maps the whole file: every target is resident.
    assert!(
        mapped || lazy_cold > 0,
        "no lazy read met a target that was not resident"
    );
}

pub fn concurrent(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("concurrent.amber");
    create(&path, b);
    let mut o = cached(b, 6 * b.page_size as u64);
    if b.backend == amber::BackendChoice::MappedUnverified {
        o = opts(b); // it serves no cache budget
    }
    let db = open(&path, o);
    std::thread::scope(|sc| {
        for t in 0..3 {
            let db = &db;
            sc.spawn(move || {
                for _ in 0..10 {
                    check(db, t == 0);
                }
            });
        }
    });
    check_all(&db);
    db.close().expect("close");
}
