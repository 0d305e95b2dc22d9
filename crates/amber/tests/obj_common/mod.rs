//! The object-layer suite, run once per fault backend by `obj_uffd.rs` and
//! `obj_sigsegv.rs` (separate binaries: the SIGSEGV backend installs a
//! process-wide signal handler, so its tests run in a process of their own).
//!
//! Every case is a function taking the [`BackendChoice`]; the binaries call
//! them from `#[test]`s. Cases that must watch a process die (a fatal fault,
//! SIGKILL) or measure the process's own memory re-run the test binary as a
//! child with `AMBER_OBJ_CHILD` set ([`run_child`], [`child_scenario`]).
//!
//! The suites:
//! - `roundtrip`: swizzle/unswizzle of every pointer kind and layout, across
//!   sessions, crashes, a tiny cache and a fetch cluster;
//! - `big`: a database five times the cache budget, traversed twice, resident
//!   memory measured against a stated bound;
//! - `corrupt`: a damaged page met by `try_get` (an error naming it) and by
//!   `get` (the process dies naming it);
//! - `schema`: layout mismatches at open, named by type and field;
//! - `nonnull`: null in a non-null pointer field of a crafted page (refused
//!   at fetch), nullability mismatches, and version-1 catalogs;
//! - `high`: persistent addresses beyond 2^32 pages;
//! - `collections`: `PVec`, `PString` and `PBytes` operations as a property
//!   test against `Vec`/`String` models (commit, abort, reopen), a string
//!   damaged on disk, and roots and counts through the read trait;
//! - `prop` (with `graph`): the write path as a property test against a model,
//!   also with a one-page recovery buffer;
//!
//! The suites the page size matters to (property, kill, eviction, stale)
//! run at 4, 8 and 16 KiB pages ([`Cfg`]).
//! - `abort`: abort restores exactly; its space is dead for the session and
//!   reused by the next one;
//! - `stale`: pointers to freed objects and to objects of aborted
//!   transactions are refused, never followed, and their space is not
//!   handed out again in the session;
//! - `failing`: a commit failing at each I/O call, on a foreign pointer, on
//!   a damaged clean page, and a forgotten transaction: memory and disk
//!   stay at the committed state;
//! - `kill`: SIGKILL during commits, through the public API;
//! - `gc`: collection — identity kept, garbage reclaimed and counted, the
//!   file shrinking, under the crash model and SIGKILL;
//! - `eviction`, `rbuf`: regressions of bugs the suites found;
//! - `lazy`: `Lazy<T>` (swizzled upon discovery) beside `PRef` and `Smart`:
//!   its rewrites never logged nor on disk, mixed structs through the
//!   catalog, the lazy and eager variants, concurrent readers.
//!
//! Environment:
//! - `AMBER_OBJ_LONG=1`: longer variants (more property-test seeds and
//!   steps, more kills, a bigger database for the cache-budget test).
//! - `AMBER_OBJ_SEED=N`: run the property tests with this one seed only.
//! - `AMBER_OBJ_BIG_MB=N`: size of the database of the cache-budget test.
//! - `AMBER_OBJ_KILLS=N`: kill rounds of the kill test.
#![allow(dead_code)]

pub mod abort;
pub mod big;
pub mod cases;
pub mod collections;
pub mod copy;
pub mod corrupt;
pub mod eviction;
pub mod failing;
pub mod free;
pub mod gc;
pub mod graph;
pub mod high;
pub mod index_prop;
pub mod kill;
#[path = "../killer/mod.rs"]
pub mod killer;
pub mod lazy;
pub mod nonnull;
pub mod prop;
pub mod rbuf;
pub mod roundtrip;
pub mod schema;
pub mod stale;
pub mod types;

use amber::BackendChoice;
use amber::{Db, Detect, Log, Options, Strategy};
use std::path::Path;
use std::process::{Command, Output};

/// What a case runs on: a fault backend and a page size. The suites that
/// the page size matters to (property, kill, eviction, stale pointers)
/// run at 4, 8 and 16 KiB; the others at 4 KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cfg {
    /// The fault backend.
    pub backend: BackendChoice,
    /// The page size of databases the case creates.
    pub page_size: usize,
    /// How transactions detect updates and generate the log.
    pub strategy: Strategy,
}

impl Cfg {
    /// `backend` with pages of `page_size` bytes, under page protection.
    pub const fn new(backend: BackendChoice, page_size: usize) -> Cfg {
        Cfg {
            backend,
            page_size,
            strategy: Strategy::DEFAULT,
        }
    }

    /// The same under detection scheme `detect`, diffing.
    pub const fn with(self, detect: Detect) -> Cfg {
        Cfg {
            strategy: Strategy::detect(detect),
            ..self
        }
    }

    /// The same under `strategy`.
    pub const fn under(self, strategy: Strategy) -> Cfg {
        Cfg { strategy, ..self }
    }

    /// The same generating the log with `log`.
    pub const fn log(self, log: Log) -> Cfg {
        Cfg {
            strategy: self.strategy.with_log(log),
            ..self
        }
    }
}

/// Options for a test database on `b`: a modest reservation (each dropped
/// frame space keeps its address space reserved for the life of the
/// process, and the property test reopens often).
pub fn opts(b: Cfg) -> Options {
    let mut o = Options {
        backend: b.backend,
        page_size: b.page_size,
        reserve_bytes: 1 << 30,
        strategy: b.strategy,
        ..Options::default()
    };
    if matches!(
        b.backend,
        BackendChoice::MappedUnverified | BackendChoice::Mapped
    ) {
        // Every database this process creates gets a home of its own, so
        // that its first session is at home (and mapped) whatever the
        // others do; a reopen in the same process is not (its closed
        // session's range stays taken) and is served as `Auto` serves it.
        o.store.home = Some(next_home());
    }
    o
}

/// A home no other database of this process has: 1 GiB apart (the
/// reservation of `opts`) from 48 TiB.
fn next_home() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    (48 << 40) + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) * (1 << 30)
}

/// The same with a cache budget of `bytes`.
pub fn cached(b: Cfg, bytes: u64) -> Options {
    Options {
        cache_bytes: Some(bytes),
        ..opts(b)
    }
}

/// Whether the longer variants were asked for.
pub fn long() -> bool {
    std::env::var("AMBER_OBJ_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A number from the environment, or `default`.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Opens the database at `path`. A `Locked` error is retried for a while:
/// when another test of this process spawns a child, the child holds a copy
/// of every descriptor of this process (the database's locked file among
/// them) until it execs, so a reopen just after a drop can find the lock
/// still held.
pub fn open(path: &Path, o: Options) -> Db {
    let t0 = std::time::Instant::now();
    loop {
        match Db::open(path, o.clone()) {
            Ok(db) => return db,
            Err(amber::Error::Locked { .. }) if t0.elapsed().as_secs() < 10 => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("open {}: {e}", path.display()),
        }
    }
}

/// Checks that `db` runs on the backend asked for. The mapped backend
/// serves a database at its home without a cache budget; any other is
/// served as `Auto` serves it, and the reason must say why.
pub fn check_backend(db: &Db, b: Cfg) {
    assert_eq!(db.page_size(), b.page_size, "page size");
    let want = match b.backend {
        BackendChoice::Uffd => amber::Backend::Uffd,
        BackendChoice::Sigsegv => amber::Backend::Sigsegv,
        BackendChoice::MappedUnverified | BackendChoice::Mapped => {
            let (want, name) = mapped_backend(b.backend);
            let why = db.backend_reason();
            if db.backend() != want {
                assert!(why.contains(&format!("{name} cannot serve it")), "{why}");
            }
            return;
        }
        BackendChoice::Auto => return,
    };
    assert_eq!(db.backend(), want, "{}", db.backend_reason());
}

/// The backend a mapped choice serves a database at home with, and its name.
pub fn mapped_backend(b: BackendChoice) -> (amber::Backend, &'static str) {
    if b == BackendChoice::Mapped {
        (amber::Backend::Mapped, "mapped")
    } else {
        (amber::Backend::MappedUnverified, "mapped-unverified")
    }
}

/// The scenario this process was started for, if it is a child.
pub fn child_scenario() -> Option<String> {
    std::env::var("AMBER_OBJ_CHILD").ok()
}

/// The directory a child works in.
pub fn child_dir() -> std::path::PathBuf {
    std::env::var("AMBER_OBJ_DIR")
        .expect("AMBER_OBJ_DIR is set for children")
        .into()
}

/// Runs test `test` of this binary as a child for `scenario`, in `dir`, and
/// waits for it.
pub fn run_child(test: &str, scenario: &str, dir: &Path) -> Output {
    child_command(test, scenario, dir)
        .output()
        .expect("run the test binary as a child")
}

/// The command that runs test `test` of this binary as a child.
pub fn child_command(test: &str, scenario: &str, dir: &Path) -> Command {
    let exe = std::env::current_exe().expect("current exe");
    let mut c = Command::new(exe);
    c.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env("AMBER_OBJ_CHILD", scenario)
        .env("AMBER_OBJ_DIR", dir);
    c
}

/// Resident memory of this process, from `/proc/self/status`, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rss {
    /// `VmRSS`: everything resident.
    pub total: u64,
    /// `RssAnon`: anonymous memory (heap, and the userfaultfd backend's frames).
    pub anon: u64,
    /// `RssShmem`: shared memory (the SIGSEGV backend's memfd frames, counted
    /// once per view that maps them).
    pub shmem: u64,
    /// `RssFile`: file-backed mappings (the binary, libraries).
    pub file: u64,
}

impl Rss {
    /// Reads the numbers now.
    pub fn now() -> Rss {
        let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let kb = |key: &str| -> u64 {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{key} missing from /proc/self/status"))
                * 1024
        };
        Rss {
            total: kb("VmRSS:"),
            anon: kb("RssAnon:"),
            shmem: kb("RssShmem:"),
            file: kb("RssFile:"),
        }
    }

    /// Anonymous plus shared: the memory the database can be charged with.
    pub fn data(&self) -> u64 {
        self.anon + self.shmem
    }
}

impl std::fmt::Display for Rss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const M: f64 = 1024.0 * 1024.0;
        write!(
            f,
            "VmRSS {:.1} MiB (anon {:.1}, shmem {:.1}, file {:.1})",
            self.total as f64 / M,
            self.anon as f64 / M,
            self.shmem as f64 / M,
            self.file as f64 / M
        )
    }
}

/// The persistent page number of `p` (opens and drops a transaction).
pub fn page_of<T: amber::Persistent>(db: &mut Db, p: amber::PRef<T>) -> u64 {
    paddr_of(db, p) >> db.page_size().trailing_zeros()
}

/// The persistent address of `p`.
pub fn paddr_of<T: amber::Persistent>(db: &mut Db, p: amber::PRef<T>) -> u64 {
    let tx = db.begin().expect("begin");
    let a = tx.to_smart(p).expect("to_smart").paddr();
    tx.abort().expect("abort");
    a
}
