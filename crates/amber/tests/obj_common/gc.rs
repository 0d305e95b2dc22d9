//! Collection (`Db::collect`, `Db::collect_file`): what the roots reach is
//! kept with its identity (cycles, shared objects, objects reached only
//! through an index, a smart pointer or a vector of pointers), everything
//! else is reclaimed and counted, and the file shrinks; the random graph of
//! `graph.rs` survives a collection unchanged; a crash at every crash point
//! of a collection (crash model) and a SIGKILL at random instants (a child
//! process committing and collecting) leave every reachable object present
//! and unchanged.
//!
//! `AMBER_GC_KILLS=N` sets the number of kills (default 20; 100 with
//! `AMBER_OBJ_LONG`); `AMBER_GC_CRASH_SEEDS=N` the crash-model seeds per
//! crash point (default 1; 3 with `AMBER_OBJ_LONG`).

use super::graph::{Model, apply_db, create_root, diff, refs, root_of};
use super::kill::{advance, commit_forever};
use super::killer::kill_after_commits;
use super::{Cfg, check_backend, child_command, child_scenario, env_num, long, open, opts};
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::readers::readers_path;
use amber::{Db, Error, PBytes, PIndex, PRef, PVec, Persistent, Smart};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[derive(Persistent)]
#[repr(C)]
pub struct CNode {
    pub id: u64,
    pub next: Option<PRef<CNode>>,
    pub smart: Option<Smart<CNode>>,
    pub big: Option<PRef<CBig>>,
    pub kids: PVec<PRef<CNode>>,
    pub text: PBytes,
    pub idx: PIndex<CNode>,
}

/// Three pages: a block of its own.
#[derive(Persistent)]
#[repr(C)]
pub struct CBig {
    pub id: u64,
    pub data: [u8; 10000],
}

fn node(id: u64) -> CNode {
    CNode {
        id,
        next: None,
        smart: None,
        big: None,
        kids: PVec::new(),
        text: PBytes::new(),
        idx: PIndex::new(),
    }
}

fn text(id: u64) -> Vec<u8> {
    format!("node {id}: some text to keep").into_bytes()
}

const INDEXED: u64 = 600;
const GARBAGE: u64 = 300;

/// Builds the identity graph: `a → b → c → a` (a cycle), `a.kids = [d, d,
/// e]` and `b.kids = [d]` (shared), 600 nodes reached only through `a.idx`
/// (inner nodes and leaves), `f` reached only through `b.smart`, a large
/// object reached from `c`, and garbage: 300 unreachable nodes with texts,
/// a freed node, a large object made unreachable, a text replaced by a
/// longer one, and `e.next` left pointing at a freed node (a dangling
/// reference: kept as a tombstone).
fn build_identity(db: &mut Db) {
    let mut tx = db.begin().expect("begin");
    let [a, b, c, d, e, f, x] = [1, 2, 3, 4, 5, 6, 7].map(|i| tx.alloc(node(i)).expect("alloc"));
    tx.get_mut(a).next = Some(b);
    tx.get_mut(b).next = Some(c);
    tx.get_mut(c).next = Some(a);
    for k in [d, d, e] {
        tx.push(a, |n| &mut n.kids, k).expect("push");
    }
    tx.push(b, |n| &mut n.kids, d).expect("push");
    let fs = tx.to_smart(f).expect("smart");
    tx.get_mut(b).smart = Some(fs);
    for (i, p) in [a, b, c, d, e, f].into_iter().enumerate() {
        tx.set_bytes(p, |n| &mut n.text, &text(i as u64 + 1))
            .expect("text");
    }
    for k in 0..INDEXED {
        let p = tx.alloc(node(1000 + k)).expect("alloc");
        tx.set_bytes(p, |n| &mut n.text, &text(1000 + k))
            .expect("text");
        tx.index_insert(a, |n| &mut n.idx, &(k * 7), p)
            .expect("insert");
    }
    let big = tx
        .alloc(CBig {
            id: 77,
            data: [7; 10000],
        })
        .expect("big");
    tx.get_mut(c).big = Some(big);
    tx.alloc(CBig {
        id: 78,
        data: [8; 10000],
    })
    .expect("lost big");
    for g in 0..GARBAGE {
        let p = tx.alloc(node(5000 + g)).expect("garbage");
        tx.set_bytes(p, |n| &mut n.text, &text(5000 + g))
            .expect("text");
    }
    tx.get_mut(e).next = Some(x);
    tx.set_root("a", a).expect("root");
    tx.commit().expect("commit");
    let mut tx = db.begin().expect("begin");
    let h = tx.alloc(node(8)).expect("alloc");
    tx.commit().expect("commit");
    let mut tx = db.begin().expect("begin");
    tx.free(h).expect("free");
    tx.free(x).expect("free");
    tx.set_bytes(f, |n| &mut n.text, &[b'f'; 300])
        .expect("longer text");
    tx.commit().expect("commit");
}

/// Checks the identity graph through the database's current handle.
fn check_identity(db: &mut Db) {
    let a: PRef<CNode> = db.root("a").expect("root").expect("a");
    let b = db.get(a).next.expect("b");
    let c = db.get(b).next.expect("c");
    assert_eq!(db.get(c).next, Some(a), "the cycle a → b → c → a");
    assert_eq!([db.get(a).id, db.get(b).id, db.get(c).id], [1, 2, 3]);
    let kids = db.slice(&db.get(a).kids).to_vec();
    assert_eq!(kids.len(), 3);
    assert_eq!(kids[0], kids[1], "a shares d with itself");
    assert_eq!(db.slice(&db.get(b).kids), &[kids[0]], "and with b");
    let (d, e) = (kids[0], kids[2]);
    assert_eq!((db.get(d).id, db.get(e).id), (4, 5));
    let f = db.smart(db.get(b).smart.expect("smart")).expect("f");
    assert_eq!(f.id, 6);
    assert_eq!(db.bytes(&f.text), &[b'f'; 300][..]);
    for (p, id) in [(a, 1), (b, 2), (c, 3), (d, 4), (e, 5)] {
        assert_eq!(db.bytes(&db.get(p).text), text(id).as_slice());
    }
    let big = db.get(c).big.expect("big");
    assert_eq!(db.get(big).id, 77);
    assert!(db.get(big).data.iter().all(|&x| x == 7));
    for k in 0..INDEXED {
        let p = db
            .index_get(&db.get(a).idx, &(k * 7))
            .expect("lookup")
            .expect("indexed");
        assert_eq!(db.get(p).id, 1000 + k);
        assert_eq!(db.bytes(&db.get(p).text), text(1000 + k).as_slice());
    }
    assert_eq!(db.index_get(&db.get(a).idx, &1).expect("lookup"), None);
    let x = db.get(e).next.expect("the dangling reference is kept");
    assert!(matches!(db.try_get(x), Err(Error::Dangling { .. })));
    // Shared means one object: a write through one path is seen through
    // the other.
    let mut tx = db.begin().expect("begin");
    tx.get_mut(d).id = 44;
    tx.commit().expect("commit");
    let b_kid = db.slice(&db.get(b).kids)[0];
    assert_eq!(db.get(b_kid).id, 44);
    let mut tx = db.begin().expect("begin");
    tx.get_mut(d).id = 4;
    tx.commit().expect("commit");
}

/// Identity is kept, garbage is reclaimed and counted, the file shrinks;
/// a second collection finds nothing more to reclaim and leaves the size.
pub fn identity(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts(b)).expect("create");
    check_backend(&db, b);
    build_identity(&mut db);
    check_identity(&mut db);
    let before = db.verify_deep().expect("deep");
    assert_eq!(
        (before.damage, before.dangling),
        (0, 1),
        "{:?}",
        before.findings
    );
    let (mut db, s) = db.collect().expect("collect");
    check_backend(&db, b);
    check_identity(&mut db);
    let after = db.verify_deep().expect("deep");
    assert_eq!(
        (after.damage, after.dangling),
        (0, 1),
        "{:?}",
        after.findings
    );
    assert_eq!(
        s.objects_live + s.tombstones + s.objects_reclaimed,
        before.objects
    );
    assert_eq!(after.objects, s.objects_live + s.tombstones);
    assert_eq!(s.tombstones, 1, "{s:?}");
    // The garbage nodes with their texts, the freed node, the lost large
    // object, the replaced text.
    assert!(s.objects_reclaimed >= 2 * GARBAGE + 3, "{s:?}");
    assert!(s.file_bytes_after < s.file_bytes_before, "{s:?}");
    assert!(s.pages_after < s.pages_before, "{s:?}");
    let len = std::fs::metadata(&path).expect("metadata").len();
    assert_eq!(len, s.file_bytes_after);
    assert!(!dir.path().join("db-gc").exists());
    let (mut db, again) = db.collect().expect("collect again");
    check_identity(&mut db);
    assert_eq!(again.objects_reclaimed, 0, "{again:?}");
    assert_eq!(again.objects_live, s.objects_live);
    assert_eq!(again.file_bytes_after, s.file_bytes_after);
    db.close().expect("close");
    // Offline, and after a reopen.
    let s3 = Db::collect_file(&path).expect("collect a closed database");
    assert_eq!((s3.objects_reclaimed, s3.objects_live), (0, s.objects_live));
    let mut db = open(&path, opts(b));
    check_identity(&mut db);
}

/// Builds the random graph of `graph.rs` with `commits` transactions.
fn build_graph(db: &mut Db, rng: &mut SplitMix, commits: u64) -> Model {
    let root = create_root(db);
    let mut model = Model::default();
    for _ in 0..commits {
        let ops = {
            let k = 1 + rng.below(12) as usize;
            model.plan(rng, k, 60)
        };
        let mut tx = db.begin().expect("begin");
        let mut r = refs(&tx, root);
        for op in &ops {
            apply_db(&mut tx, root, &mut r, op).expect("apply");
        }
        tx.commit().expect("commit");
    }
    model
}

/// The random graph is unchanged by a collection, which reclaims what its
/// frees and replacements left, and shrinks the file.
pub fn random_graph(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts(b)).expect("create");
    let mut rng = SplitMix::new(0x6c_0001);
    let model = build_graph(&mut db, &mut rng, if long() { 400 } else { 120 });
    let (db, s) = db.collect().expect("collect");
    let root = root_of(&db).expect("root");
    diff(&db, root, &model).expect("the graph after collect");
    let deep = db.verify_deep().expect("deep");
    assert!(deep.is_clean(), "{:?}", deep.findings);
    assert!(
        s.objects_reclaimed > 0 && s.file_bytes_after < s.file_bytes_before,
        "{s:?}"
    );
    db.close().expect("close");
    let db = open(&path, opts(b));
    diff(&db, root_of(&db).expect("root"), &model).expect("the graph after reopening");
}

/// A crash at every crash point of a collection (crash model: every write
/// since the last sync kept, dropped or torn): afterwards the database
/// opens, holds the graph unchanged, and deep verification is clean;
/// collecting again works.
pub fn crash_points(b: Cfg) {
    let vfs = CrashVfs::new();
    let v: Arc<CrashVfs> = Arc::new(vfs.clone());
    let path = Path::new("/gc/db");
    let mut db = Db::create_with(v.clone(), path, opts(b)).expect("create");
    let mut rng = SplitMix::new(0x6c_0002);
    let model = build_graph(&mut db, &mut rng, 40);
    db.close().expect("close");
    // The length of a collection in crash points.
    let probe = vfs.durable_copy();
    let before = probe.mutations();
    Db::collect_file_with(Arc::new(probe.clone()), path).expect("collect");
    let points = probe.mutations() - before;
    assert!(points > 5, "a collection makes {points} mutating calls");
    let seeds = env_num("AMBER_GC_CRASH_SEEDS", if long() { 3 } else { 1 });
    for point in 1..=points + 1 {
        for seed in 0..seeds {
            let fs = vfs.durable_copy();
            fs.crash_after(point);
            let r = Db::collect_file_with(Arc::new(fs.clone()), path);
            // A crash on the reader table's last write (unregistering the
            // writer as the store is dropped) fails nothing.
            let harmless = fs.died_on() == Some(readers_path(path));
            assert!(
                r.is_err() == (point <= points) || (harmless && r.is_ok()),
                "crash point {point}: {r:?}"
            );
            fs.crash(seed ^ point.wrapping_mul(0x9E37));
            let fsa: Arc<CrashVfs> = Arc::new(fs.clone());
            let db = Db::open_with(fsa.clone(), path, opts(b))
                .unwrap_or_else(|e| panic!("crash point {point}, seed {seed}: open: {e}"));
            let root = root_of(&db).expect("root");
            diff(&db, root, &model)
                .unwrap_or_else(|d| panic!("crash point {point}, seed {seed}: {d}"));
            let deep = db.verify_deep().expect("deep");
            assert!(deep.is_clean(), "crash point {point}: {:?}", deep.findings);
            db.close().expect("close");
            if point % 7 == 0 {
                Db::collect_file_with(fsa.clone(), path).expect("collect after the crash");
                let db = Db::open_with(fsa, path, opts(b)).expect("open");
                diff(&db, root_of(&db).expect("root"), &model).expect("collected again");
            }
        }
    }
}

/// SIGKILL at random instants of a child that commits and collects: the
/// database always holds the last reported commit (or the one in flight),
/// unchanged, and deep verification is clean.
pub fn killed(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("gc-kill") {
        // The kill test's child, collecting after every commit.
        commit_forever(b, opts(b), |db| db.collect().expect("collect").0);
        return;
    }
    let rounds = env_num("AMBER_GC_KILLS", if long() { 100 } else { 20 });
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("db");
    let err_path = dir.path().join("child.err");
    let mut rng = SplitMix::new(0x6c_0003);
    let mut model = Model::default();
    let mut mid_collect = 0;
    for round in 0..rounds {
        let want = 1 + rng.below(6);
        let delay = Duration::from_micros(rng.below(20_000));
        let mut cmd = child_command(test, "gc-kill", dir.path());
        let last = kill_after_commits(&mut cmd, want, delay, &err_path, round);
        // A collection the kill interrupted leaves its file behind.
        mid_collect += u64::from(dir.path().join("db-gc").exists());
        let db = open(&path, opts(b));
        let root = root_of(&db).expect("root");
        let got = db.get(root).commits;
        assert!(
            got == last || got == last + 1,
            "round {round}: the child reported commit {last}, the database holds {got}"
        );
        advance(&mut model, got);
        diff(&db, root, &model).unwrap_or_else(|d| panic!("round {round}, commit {got}: {d}"));
        let deep = db.verify_deep().expect("deep");
        assert!(deep.is_clean(), "round {round}: {:?}", deep.findings);
        db.close().expect("close");
    }
    eprintln!(
        "gc_killed: {mid_collect} of {rounds} kills landed in a collection before its rename"
    );
}
