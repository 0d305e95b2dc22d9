//! The virtual-memory layer under a real database, run once per fault
//! backend by `vm_db_uffd.rs` and `vm_db_sigsegv.rs` (their own processes:
//! the SIGSEGV handler is process-wide, and some cases must watch a process
//! die).
//!
//! - `threads`: plain threads, never prepared, reading a graph cold; threads
//!   of one transaction writing disjoint halves of a vector under a 1 MiB
//!   cache budget.
//! - `locks`: a fault taken while holding an Amber lock is refused, naming
//!   the lock (a fatal message for a plain load, an error for `try_get`);
//!   `mprotect` running out of `vm.max_map_count` is an error with the
//!   remedy for `try_get`, and the same message for a plain load.
//! - `pages`: 8 and 16 KiB pages round-trip every pointer (the reservation
//!   is aligned to the page size by construction).
#![allow(dead_code)]

pub mod locks;
pub mod pages;
pub mod threads;

use amber::{BackendChoice, Db, Options, PRef, PVec, Persistent};
use std::path::Path;
use std::process::{Command, Output};

/// A node of the test graph: its id, a value derived from it, the next
/// node and one far away.
#[derive(Persistent)]
#[repr(C)]
pub struct Node {
    pub id: u64,
    pub value: u64,
    pub next: Option<PRef<Node>>,
    pub far: Option<PRef<Node>>,
}

/// The graph's root: every node, by id.
#[derive(Persistent)]
#[repr(C)]
pub struct Graph {
    pub nodes: PVec<PRef<Node>>,
}

/// What node `id` of `n` holds and points to.
pub fn value_of(id: u64) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5
}
pub fn next_of(id: u64, n: u64) -> u64 {
    (id + 1) % n
}
pub fn far_of(id: u64, n: u64) -> u64 {
    id.wrapping_mul(7919).wrapping_add(13) % n
}

/// Options for `b` with a modest reservation.
pub fn opts(b: BackendChoice) -> Options {
    Options {
        backend: b,
        reserve_bytes: 1 << 30,
        ..Options::default()
    }
}

/// Checks that `db` runs on the backend asked for.
pub fn check_backend(db: &Db, b: BackendChoice) {
    let want = match b {
        BackendChoice::Uffd => amber::Backend::Uffd,
        BackendChoice::Sigsegv => amber::Backend::Sigsegv,
        BackendChoice::MappedUnverified => amber::Backend::MappedUnverified,
        BackendChoice::Mapped => amber::Backend::Mapped,
        BackendChoice::Auto => return,
    };
    assert_eq!(db.backend(), want, "{}", db.backend_reason());
}

/// Adds a graph of `n` nodes under root `graph` to the database at `path`
/// (created with `o`).
pub fn create_graph(path: &Path, o: Options, n: u64) {
    let mut db = Db::create(path, o).expect("create");
    let mut tx = db.begin().expect("begin");
    let root = tx.alloc(Graph { nodes: PVec::new() }).expect("alloc");
    let mut all = Vec::with_capacity(n as usize);
    for id in 0..n {
        let p = tx
            .alloc(Node {
                id,
                value: value_of(id),
                next: None,
                far: None,
            })
            .expect("alloc node");
        all.push(p);
        tx.push(root, |g| &mut g.nodes, p).expect("push");
    }
    for id in 0..n {
        let node = tx.get_mut(all[id as usize]);
        node.next = Some(all[next_of(id, n) as usize]);
        node.far = Some(all[far_of(id, n) as usize]);
    }
    tx.set_root("graph", root).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
}

/// Checks node `p`, which must be node `id` of a graph of `n`, and its two
/// neighbours' ids.
pub fn check_node(db: &Db, p: PRef<Node>, id: u64, n: u64) {
    let node = db.get(p);
    assert_eq!(node.id, id);
    assert_eq!(node.value, value_of(id), "node {id}");
    let next = node.next.expect("next");
    let far = node.far.expect("far");
    assert_eq!(db.get(next).id, next_of(id, n), "node {id}'s next");
    assert_eq!(db.get(far).id, far_of(id, n), "node {id}'s far");
}

/// The scenario this process was started for, if it is a child.
pub fn child_scenario() -> Option<String> {
    std::env::var("AMBER_VMDB_CHILD").ok()
}

/// The directory a child works in.
pub fn child_dir() -> std::path::PathBuf {
    std::env::var("AMBER_VMDB_DIR")
        .expect("AMBER_VMDB_DIR is set for children")
        .into()
}

/// Runs test `test` of this binary as a child for `scenario`, in `dir`.
pub fn run_child(test: &str, scenario: &str, dir: &Path) -> Output {
    let exe = std::env::current_exe().expect("current exe");
    Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env("AMBER_VMDB_CHILD", scenario)
        .env("AMBER_VMDB_DIR", dir)
        .output()
        .expect("run the test binary as a child")
}

/// Checks that a child died of SIGABRT, with `expect` in its stderr.
pub fn check_aborted(out: &Output, expect: &[&str]) {
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "status {:?}, stderr:\n{stderr}",
        out.status
    );
    for e in expect {
        assert!(stderr.contains(e), "stderr lacks {e:?}:\n{stderr}");
    }
}
