//! Failure atomicity of the object layer: a commit that fails — an I/O call
//! failing (each of the commit's calls in turn), a pointer from another
//! database, a damaged page met while building a clean version — and a
//! transaction forgotten with `mem::forget` leave memory at the committed
//! state; no later commit carries their bytes; reopening gives the
//! committed state (or, when the failing call came after the log was
//! written, possibly the failed transaction: whether it reached the disk is
//! unknown, as for any failed sync).

use super::stale::{Anchor, Big, Node};
use super::{Cfg, check_backend, open, opts};
use amber::internals::io::Vfs;
use amber::internals::io::countdown::CountdownVfs;
use amber::internals::io::real::RealVfs;
use amber::internals::store::readers::readers_path;
use amber::{Db, Error, Options, PRef, PVec, Tx};
use std::path::Path;
use std::sync::Arc;

/// What the test knows of the database: every node's id and vector, the
/// big object's first word, whether the spare node is live.
#[derive(Debug, Clone, PartialEq)]
struct State {
    vals: Vec<(u64, Vec<u64>)>,
    big: u64,
    spare: bool,
}

const NODES: u64 = 300;

/// Options that keep the automatic checkpoint out of the commits tested.
fn quiet(b: Cfg) -> Options {
    let mut o = opts(b);
    o.store.checkpoint_log_bytes = 1 << 30;
    o.store.checkpoint_pending_bytes = 1 << 30;
    o
}

/// A committed database: `NODES` nodes on several pages, each with a
/// vector, and a big object (a block of several pages); then closed, so
/// that every page is read from the page file.
fn create(path: &Path, b: Cfg) {
    let mut db = Db::create(path, quiet(b)).expect("create");
    let mut tx = db.begin().expect("begin");
    let a = tx
        .alloc(Anchor {
            id: 1,
            nodes: PVec::new(),
        })
        .expect("alloc");
    for i in 0..NODES {
        let p = tx
            .alloc(Node {
                id: i,
                anchor: a,
                next: None,
                items: PVec::new(),
            })
            .expect("alloc");
        tx.push(p, |x| &mut x.items, i).expect("push");
        tx.push(a, |x| &mut x.nodes, p).expect("push");
    }
    let big = tx
        .alloc(Big {
            id: 7,
            anchor: a,
            data: [7; 2600],
        })
        .expect("alloc");
    let spare = tx
        .alloc(Node {
            id: 9999,
            anchor: a,
            next: None,
            items: PVec::new(),
        })
        .expect("alloc");
    tx.set_root("anchor", a).expect("root");
    tx.set_root("big", big).expect("root");
    tx.set_root("spare", spare).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
}

fn spare(db: &Db) -> PRef<Node> {
    db.root("spare").expect("root").expect("spare")
}

fn roots(db: &Db) -> (PRef<Anchor>, Vec<PRef<Node>>, PRef<Big>) {
    let a: PRef<Anchor> = db.root("anchor").expect("root").expect("anchor");
    let big: PRef<Big> = db.root("big").expect("root").expect("big");
    (a, db.slice(&db.get(a).nodes).to_vec(), big)
}

fn state(db: &Db) -> State {
    let (_, nodes, big) = roots(db);
    State {
        vals: nodes
            .iter()
            .map(|&p| {
                let n = db.get(p);
                (n.id, db.slice(&n.items).to_vec())
            })
            .collect(),
        big: db.get(big).data[0],
        spare: db.try_get(spare(db)).is_ok(),
    }
}

/// The transaction every failure is injected into, up to its commit: it
/// allocates (a small object and a big one), writes many pages (every
/// fourth node's vector, the big object), frees a node, and sets a root.
/// Returns it and the state it would commit.
fn work(db: &mut Db) -> (Tx<'_>, State) {
    let (a, nodes, big) = roots(db);
    let spare_node = spare(db);
    let mut want = state(db);
    let mut tx = db.begin().expect("begin");
    for (i, &p) in nodes.iter().enumerate() {
        if i % 4 == 0 {
            tx.push(p, |x| &mut x.items, 1000 + i as u64).expect("push");
            want.vals[i].1.push(1000 + i as u64);
        }
    }
    tx.get_mut(big).data.fill(8);
    want.big = 8;
    let fresh = tx
        .alloc(Node {
            id: 5000,
            anchor: a,
            next: Some(nodes[0]),
            items: PVec::new(),
        })
        .expect("alloc");
    tx.alloc(Big {
        id: 9,
        anchor: a,
        data: [9; 2600],
    })
    .expect("alloc");
    tx.get_mut(nodes[1]).next = Some(fresh);
    tx.free(spare_node).expect("free");
    tx.set_root("fresh", fresh).expect("root");
    want.spare = false;
    (tx, want)
}

/// `work` and a commit, with the `n`-th I/O call of the commit failing.
/// Returns whether the commit failed.
fn commit_failing(b: Cfg, src: &Path, n: u64) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    for (from, to) in [(src.to_path_buf(), path.clone()), (wal(src), wal(&path))] {
        std::fs::copy(from, to).expect("copy");
    }
    let cd = CountdownVfs::new(Arc::new(RealVfs), 0, false);
    let v: Arc<dyn Vfs> = Arc::new(cd.clone());
    let mut db = Db::open_with(v, &path, quiet(b)).expect("open");
    check_backend(&db, b);
    let committed = state(&db);
    let (_, nodes, _) = roots(&db);
    // The transaction, then its commit with call n failing.
    let (tx, in_flight) = work(&mut db);
    cd.arm(n);
    let before = cd.calls();
    let result = tx.commit();
    let reached = cd.calls() >= before + n;
    let failed_on = cd.failed_file();
    cd.arm(0);
    // Publishing the log's end to readers (`-readers`) after the commit is
    // durable: its failure costs readers a moment, never the commit.
    let harmless = reached && failed_on == Some(readers_path(&path));
    assert_eq!(
        result.is_err(),
        reached && !harmless,
        "call {n}: commit gave {result:?}, but the failing call was reached = {reached}"
    );
    let Err(e) = result else {
        if harmless {
            drop(db);
            let db = open(&path, opts(b));
            assert!(state(&db) == in_flight, "call {n}: the commit is durable");
        }
        return harmless;
    };
    assert!(
        matches!(e, Error::Io { .. } | Error::Poisoned { .. }),
        "call {n}: {e}"
    );
    // Memory is at the committed state, whatever failed.
    assert_eq!(
        state(&db),
        committed,
        "call {n}: memory after the failed commit"
    );
    assert!(db.root::<Node>("fresh").expect("root").is_none());
    // A following transaction commits only its own change (unless the
    // store is poisoned: then it refuses to begin).
    let poisoned = match db.begin() {
        Ok(mut tx) => {
            tx.get_mut(nodes[2]).id = 77;
            let st = tx.commit().expect("commit after a failed one");
            assert_eq!(st.blocks, 1, "call {n}: {st:?}");
            false
        }
        Err(Error::Poisoned { .. }) => true,
        Err(e) => panic!("call {n}: begin after the failure: {e}"),
    };
    if poisoned {
        // The store knows nothing of the disk after a failed write or sync;
        // memory is still the committed state.
        assert_eq!(state(&db), committed, "call {n}: memory when poisoned");
    }
    drop(db);
    let db = open(&path, opts(b));
    let after = state(&db);
    let mut with_77 = committed.clone();
    with_77.vals[2].0 = 77;
    // The failed commit may have reached the disk after all (its sync
    // failed, so nothing was known): then all of it did.
    assert!(
        after == committed || after == with_77 || after == in_flight,
        "call {n}: reopened state is neither committed nor in flight"
    );
    true
}

fn wal(p: &Path) -> std::path::PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push("-wal");
    s.into()
}

/// Every I/O call of a commit failing in turn.
pub fn io_countdown(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    create(&src, b);
    let mut n = 1;
    while commit_failing(b, &src, n) {
        n += 1;
        assert!(n < 10_000, "the commit never stops making I/O calls");
    }
    assert!(n > 3, "the commit made only {} I/O calls", n - 1);
}

/// A pointer from another database stored in a field: the commit fails as
/// misuse, and memory is back at the committed state.
pub fn foreign_pointer(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    create(&path, b);
    let other_path = dir.path().join("other");
    create(&other_path, b);
    let mut db = open(&path, quiet(b));
    let other = open(&other_path, quiet(b));
    let (_, theirs, _) = roots(&other);
    let committed = state(&db);
    let (_, nodes, big) = roots(&db);
    let mut tx = db.begin().expect("begin");
    tx.get_mut(big).data.fill(3);
    for &p in nodes.iter().step_by(7) {
        tx.push(p, |x| &mut x.items, 3).expect("push");
    }
    tx.get_mut(nodes[5]).next = Some(theirs[0]);
    match tx.commit() {
        Err(Error::Invalid(w)) => assert!(w.contains("does not point into this database"), "{w}"),
        other => panic!("commit of a foreign pointer: {other:?}"),
    }
    assert_eq!(state(&db), committed);
    let mut tx = db.begin().expect("begin");
    tx.get_mut(nodes[3]).id = 33;
    assert_eq!(tx.commit().expect("commit").blocks, 1);
    drop(db);
    let db = open(&path, quiet(b));
    let mut want = committed;
    want.vals[3].0 = 33;
    assert_eq!(state(&db), want);
}

/// The big object's page damaged on disk while it is resident and written:
/// building its clean version at commit meets the damage (with a one-page
/// recovery buffer, whose copies of a block written in one go overflow,
/// on the SIGSEGV backend too). The commit fails as corruption; the other
/// pages are back at their committed state; the damaged one is dropped,
/// and reading it reports the damage rather than the uncommitted bytes.
pub fn damaged_clean_page(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    create(&path, b);
    let o = Options {
        recovery_buffer_pages: 1,
        ..quiet(b)
    };
    let mut db = open(&path, o);
    let committed = state(&db);
    let (_, nodes, big) = roots(&db);
    let page = super::page_of(&mut db, big);
    let mut tx = db.begin().expect("begin");
    for &p in nodes.iter().step_by(5) {
        tx.push(p, |x| &mut x.items, 5).expect("push");
    }
    tx.get_mut(big).data.fill(5);
    // Damage the big object's first page on disk (past its header).
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.write_all_at(&[0xa5; 64], page * b.page_size as u64 + 100)
            .expect("damage");
    }
    match tx.commit() {
        Err(e) if e.is_corruption() => {}
        other => panic!("commit over a damaged clean page: {other:?}"),
    }
    // Every other object reads its committed value.
    let (_, nodes2, _) = roots(&db);
    assert_eq!(nodes2, nodes);
    for (i, &p) in nodes.iter().enumerate() {
        let n = db.get(p);
        assert_eq!(
            (n.id, db.slice(&n.items)),
            (committed.vals[i].0, &committed.vals[i].1[..])
        );
    }
    match db.try_get(big) {
        Err(e) if e.is_corruption() => {}
        Err(e) => panic!("reading the damaged page: {e}"),
        Ok(v) => panic!("the damaged page read as {}", v.data[0]),
    }
    let mut tx = db.begin().expect("begin");
    tx.get_mut(nodes[3]).id = 33;
    assert_eq!(tx.commit().expect("commit").blocks, 1);
}

/// A transaction forgotten with `mem::forget`: the next `begin` rolls it
/// back, the next commit logs only its own change, and reopening shows
/// none of the forgotten writes. With a one-page recovery buffer (SIGSEGV:
/// pages logged early) the forgotten transaction's records in the log do
/// not block the close's checkpoint either.
pub fn forgotten(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    create(&path, b);
    let o = Options {
        recovery_buffer_pages: 1,
        ..quiet(b)
    };
    let mut db = open(&path, o.clone());
    let committed = state(&db);
    let (_, nodes, _) = roots(&db);
    std::mem::forget(work(&mut db).0);
    let mut tx = db.begin().expect("begin after a forgotten transaction");
    assert_eq!(tx.get(nodes[4]).id, 4);
    tx.get_mut(nodes[3]).id = 33;
    let st = tx.commit().expect("commit");
    assert_eq!(st.blocks, 1, "only its own change: {st:?}");
    let mut want = committed.clone();
    want.vals[3].0 = 33;
    assert_eq!(state(&db), want);
    assert!(db.root::<Node>("fresh").expect("root").is_none());
    // Forgotten, then closed.
    std::mem::forget(work(&mut db).0);
    db.close().expect("close after a forgotten transaction");
    let db = open(&path, o);
    assert_eq!(state(&db), want);
    assert!(db.root::<Node>("fresh").expect("root").is_none());
}
