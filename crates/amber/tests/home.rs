//! Homes (docs/design.md §1.1, `format/home.rs`): a database is read the
//! same wherever its reservation lands. At its home, a relocated session
//! (the range taken by another open database with the same home), a session
//! in a fresh process after a relocated one wrote, and a database without a
//! home (superblock version 1, created as databases before homes were).
//! Each on every fault backend the machine has: with the mapped ones
//! (`mapped-unverified`, `mapped`), the sessions at home are mapped (the
//! first in this process, the child's) and the others are served as `Auto`
//! serves them.
//!
//! Its own test binary: it runs children of itself (a fresh process, where
//! the home is free), and the SIGSEGV backend installs a signal handler.

use amber::inspect::{Inspector, Value, verify_deep};
use amber::{BackendChoice, Db, Options, PRef, PVec, Persistent, Smart, StoreOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Persistent)]
#[repr(C)]
struct Node {
    value: u64,
    next: Option<PRef<Node>>,
    back: Option<Smart<Node>>,
    kids: PVec<u64>,
    refs: PVec<Option<PRef<Node>>>,
}

/// Where a child of this binary finds its database, and what it does.
const CHILD_DIR: &str = "AMBER_HOME_CHILD_DIR";
const CHILD_BACKEND: &str = "AMBER_HOME_CHILD_BACKEND";

fn opts(b: BackendChoice) -> Options {
    Options {
        backend: b,
        reserve_bytes: 1 << 30,
        ..Options::default()
    }
}

/// Options creating a database at `home` (a test's own, so that tests
/// running beside it in this process do not take it).
fn create_opts(b: BackendChoice, home: u64) -> Options {
    Options {
        store: StoreOptions {
            home: Some(home),
            ..StoreOptions::default()
        },
        ..opts(b)
    }
}

fn backends() -> Vec<BackendChoice> {
    let uffd = Db::probe_backend(&opts(BackendChoice::Uffd)).is_ok();
    if !uffd && std::env::var("AMBER_REQUIRE_UFFD").is_ok_and(|v| v == "1") {
        panic!("AMBER_REQUIRE_UFFD=1 but the userfaultfd backend cannot run here");
    }
    let mut b = vec![BackendChoice::Sigsegv];
    if uffd {
        b.extend([
            BackendChoice::Uffd,
            BackendChoice::MappedUnverified,
            BackendChoice::Mapped,
        ]);
    }
    b
}

/// Whether `db`, at its home in its first session of this process, is
/// served by the mapped backend `b` asked for (any other backend: true).
fn mapped_at_home(db: &Db, b: BackendChoice) -> bool {
    match b {
        BackendChoice::MappedUnverified => db.backend() == amber::Backend::MappedUnverified,
        BackendChoice::Mapped => db.backend() == amber::Backend::Mapped,
        _ => true,
    }
}

/// Adds `n` nodes with values from `first`, each pointing at the list so
/// far (`next`), at a node added earlier (`back`, a smart pointer), with a
/// vector of numbers and a vector of pointers to earlier nodes; the list
/// head is the root "head".
fn add(db: &mut Db, first: u64, n: u64) {
    let mut head: Option<PRef<Node>> = db.root("head").expect("root");
    let mut tx = db.begin().expect("begin");
    for v in first..first + n {
        let back = head.map(|h| tx.to_smart(h).expect("smart"));
        let node = tx
            .alloc(Node {
                value: v,
                next: head,
                back,
                kids: PVec::new(),
                refs: PVec::new(),
            })
            .expect("alloc");
        for k in 0..(v % 5) {
            tx.push(node, |x| &mut x.kids, v * 10 + k).expect("push");
            tx.push(node, |x| &mut x.refs, head).expect("push");
        }
        head = Some(node);
    }
    tx.set_root("head", head.expect("nodes")).expect("set root");
    tx.commit().expect("commit");
}

/// Everything reachable from the root, as numbers: each node's value, its
/// successor's, its smart pointer's target's, its numbers and the values of
/// the nodes its vector points at.
fn contents(db: &Db) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at: Option<PRef<Node>> = db.root("head").expect("root");
    while let Some(p) = at {
        let n = db.get(p);
        out.push(n.value);
        out.push(n.next.map_or(u64::MAX, |q| db.get(q).value));
        out.push(
            n.back
                .map_or(u64::MAX, |s| db.smart(s).expect("smart").value),
        );
        out.extend(db.slice(&n.kids));
        out.extend(
            db.slice(&n.refs)
                .iter()
                .map(|r| r.map_or(u64::MAX, |q| db.get(q).value)),
        );
        at = n.next;
    }
    out
}

fn copy_db(from: &Path, to: &Path) {
    std::fs::copy(from, to).expect("copy page file");
    let wal = |p: &Path| PathBuf::from(format!("{}-wal", p.display()));
    std::fs::copy(wal(from), wal(to)).expect("copy log");
}

/// Runs `test` of this binary in a child with `dir` and `b`, and checks
/// that it passed.
fn child(test: &str, dir: &Path, b: BackendChoice) {
    let out = Command::new(std::env::current_exe().expect("exe"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_BACKEND, format!("{b:?}"))
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "child {test}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("home child ran"),
        "the child ran nothing: {said}"
    );
}

fn child_backend() -> Option<(PathBuf, BackendChoice)> {
    let dir = std::env::var(CHILD_DIR).ok()?;
    let b = match std::env::var(CHILD_BACKEND).ok()?.as_str() {
        "Uffd" => BackendChoice::Uffd,
        "MappedUnverified" => BackendChoice::MappedUnverified,
        "Mapped" => BackendChoice::Mapped,
        _ => BackendChoice::Sigsegv,
    };
    Some((dir.into(), b))
}

/// The home of test `i` on backend `b`: distinct for every test of this
/// binary, 64 GiB apart from 40 TiB up.
fn home_of(i: u64, b: BackendChoice) -> u64 {
    let k = match b {
        BackendChoice::Uffd => 1,
        BackendChoice::MappedUnverified => 2,
        BackendChoice::Mapped => 3,
        _ => 0,
    };
    (40 << 40) + (4 * i + k) * (64 << 30)
}

#[test]
fn relocated_sessions_read_and_write_the_same() {
    for b in backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (p, q) = (dir.path().join("a.amber"), dir.path().join("b.amber"));
        let home = home_of(0, b);
        {
            let mut db = Db::create(&p, create_opts(b, home)).expect("create");
            assert!(db.at_home(), "{b:?}: a new database at its home {home:#x}");
            assert!(mapped_at_home(&db, b), "{b:?}: {}", db.backend_reason());
            add(&mut db, 0, 300);
            db.close().expect("close");
        }
        copy_db(&p, &q);
        // The closed session's range stays taken in this process (its
        // tombstone: pointers of a closed session are refused, never
        // followed), so both are translated here.
        let a = Db::open(&p, opts(b)).expect("open a");
        let mut c = Db::open(&q, opts(b)).expect("open the copy");
        assert!(!a.at_home() && !c.at_home(), "{b:?}: the home is taken");
        let first = contents(&a);
        assert_eq!(first, contents(&c), "{b:?}: relocated reads the same");
        // The relocated session writes: new nodes pointing at old ones.
        add(&mut c, 300, 200);
        let want = contents(&c);
        c.close().expect("close");
        a.close().expect("close");
        // A fresh process, where the home is free, reads at home what the
        // relocated session wrote, adds more, and opens the original beside
        // it, whose home is then taken.
        std::fs::write(dir.path().join("want"), format!("{want:?}")).expect("write want");
        std::fs::write(dir.path().join("first"), format!("{first:?}")).expect("write first");
        child("child_reads_at_home", dir.path(), b);
        // Back here, translated again, the child's writes read the same.
        let c = Db::open(&q, opts(b)).expect("reopen the copy");
        assert!(!c.at_home(), "{b:?}");
        assert_eq!(contents(&c), expected_after_child(&want), "{b:?}");
        c.close().expect("close");
        let report = verify_deep(&q).expect("verify");
        assert!(report.is_clean(), "{b:?}: {report:?}");
    }
}

/// What `contents` gives after the child added its 100 nodes to a database
/// whose contents were `before`.
fn expected_after_child(before: &[u64]) -> Vec<u64> {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("model.amber");
    // The same history in one database: 300, 200, then 100 nodes. Without
    // a home: a home picked at random could be one of the homes the tests
    // of this binary ask for (they are among the slots picked from), and
    // its range stays taken after the close.
    let mut db = Db::create(&p, create_opts(BackendChoice::Sigsegv, 0)).expect("create");
    add(&mut db, 0, 300);
    add(&mut db, 300, 200);
    assert_eq!(contents(&db), before, "the model's first 500 nodes");
    add(&mut db, 500, 100);
    contents(&db)
}

/// The child of `relocated_sessions_read_and_write_the_same` (does nothing
/// when run as a test of its own).
#[test]
fn child_reads_at_home() {
    let Some((dir, b)) = child_backend() else {
        return;
    };
    let want = std::fs::read_to_string(dir.join("want")).expect("want");
    let first = std::fs::read_to_string(dir.join("first")).expect("first");
    let mut db = Db::open(dir.join("b.amber"), opts(b)).expect("open");
    assert!(db.at_home(), "{b:?}: a fresh process has the home free");
    assert!(mapped_at_home(&db, b), "{b:?}: {}", db.backend_reason());
    assert_eq!(
        format!("{:?}", contents(&db)),
        want,
        "{b:?}: at home, the same"
    );
    let a = Db::open(dir.join("a.amber"), opts(b)).expect("open the original");
    assert!(!a.at_home(), "{b:?}: its home is the copy's");
    assert_eq!(
        format!("{:?}", contents(&a)),
        first,
        "{b:?}: translated, the same"
    );
    add(&mut db, 500, 100);
    db.close().expect("close");
    println!("home child ran");
}

#[test]
fn stored_pointers_are_home_plus_address() {
    for b in backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s.amber");
        let home = home_of(1, b);
        let (a, next) = {
            let mut db = Db::create(&p, create_opts(b, home)).expect("create");
            add(&mut db, 0, 2);
            let h: PRef<Node> = db.root("head").expect("root").expect("head");
            let tx = db.begin().expect("begin");
            let n = tx.get(h).next.expect("two nodes");
            let out = (
                tx.to_smart(h).expect("smart").paddr(),
                tx.to_smart(n).expect("smart").paddr(),
            );
            // At home, a pointer's value is the stored word.
            assert!(db_at_home_pointer(h, home, out.0), "{b:?}");
            tx.abort().expect("abort");
            db.close().expect("close");
            out
        };
        let ins = Inspector::open(&p).expect("inspect");
        assert_eq!(ins.superblock().home.addr(), home, "{b:?}");
        // The inspector shows persistent addresses; the block holds home +
        // address.
        let o = ins.object(a).expect("object");
        let amber::inspect::ObjectValue::Struct { fields, .. } = &o.value else {
            panic!("{b:?}: a struct: {o:?}");
        };
        assert_eq!(fields[1].value, Value::Ref(next), "{b:?}");
        // The file (checkpointed at close) holds the node's body at `a`:
        // `next` at 8, stored as home + address; `back` at 16, a smart
        // pointer, the persistent address.
        let file = std::fs::read(&p).expect("read page file");
        let word = |at: u64| {
            let at = at as usize;
            u64::from_le_bytes(file[at..at + 8].try_into().expect("8 bytes"))
        };
        assert_eq!(word(a + 8), home + next, "{b:?}: stored as home + address");
        assert_eq!(word(a + 16), next, "{b:?}: a smart pointer is not encoded");
    }
}

/// Whether `p`, at home `home`, is the stored form of `paddr`.
fn db_at_home_pointer(p: PRef<Node>, home: u64, paddr: u64) -> bool {
    p.addr() == home + paddr
}

#[test]
fn a_database_without_a_home_reads_as_before() {
    for b in backends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("v1.amber");
        let want = {
            let mut db = Db::create(&p, create_opts(b, 0)).expect("create");
            assert!(!db.at_home(), "{b:?}: no home to be at");
            add(&mut db, 0, 300);
            let c = contents(&db);
            db.close().expect("close");
            c
        };
        let ins = Inspector::open(&p).expect("inspect");
        assert!(!ins.superblock().home.is_some(), "{b:?}");
        drop(ins);
        let mut db = Db::open(&p, opts(b)).expect("open");
        assert_eq!(contents(&db), want, "{b:?}");
        add(&mut db, 300, 50);
        db.close().expect("close");
        let report = verify_deep(&p).expect("verify");
        assert!(report.is_clean(), "{b:?}: {report:?}");
        let db = Db::open(&p, opts(b)).expect("open");
        let before = contents(&db);
        let (db, _) = db.collect().expect("collect");
        assert_eq!(contents(&db), before, "{b:?}: collected, the same");
    }
}
