//! Faults Amber refuses to serve: taken while holding an Amber lock, or
//! when the kernel is out of map entries.

use super::{
    Graph, Node, check_aborted, check_backend, child_dir, child_scenario, create_graph, opts,
    run_child,
};
use amber::internals::vm::{
    AmberLock, FaultError, FaultKind, FaultService, FrameNo, FrameSpace, InstallAs, Installer,
    VmConfig, VmError, held,
};
use amber::{BackendChoice, Db, Options, PRef};
use std::sync::Arc;

/// Opens the child's database cold, one page per fault, and returns it
/// with a pointer to a node whose page is not resident.
fn cold(b: BackendChoice) -> (Db, PRef<Node>) {
    let db = Db::open(
        child_dir().join("db"),
        Options {
            fetch_cluster: 1,
            ..opts(b)
        },
    )
    .expect("open");
    check_backend(&db, b);
    let root: PRef<Graph> = db.root("graph").expect("root").expect("graph");
    let nodes = db.slice(&db.get(root).nodes);
    let p = nodes[nodes.len() - 1];
    (db, p)
}

/// A thread holding the store's state lock (counted as Amber code counts
/// it, through `vm::held`) touches a page that is not resident. The fault
/// service would need that lock: the process must die with a message
/// naming it, not hang (with userfaultfd the check is made by the handler
/// thread, from the faulting thread's published record). `try_get` returns
/// the same refusal as an error, and works once the lock is released.
pub fn fault_holding_a_lock(b: BackendChoice, test: &str) {
    if child_scenario().as_deref() == Some("held") {
        let (db, p) = cold(b);
        let _store = held(AmberLock::StoreState, ());
        let v = db.get(p).value;
        eprintln!("the load returned {v}: it should have been refused");
        std::process::exit(3);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    create_graph(&dir.path().join("db"), opts(b), 2_000);
    let out = run_child(test, "held", dir.path());
    check_aborted(
        &out,
        &["amber: fatal: frame", "holds the store's state lock"],
    );
    // In this process: try_get says why, and the lock released, it works.
    let db = Db::open(dir.path().join("db"), opts(b)).expect("open");
    let root: PRef<Graph> = db.root("graph").expect("root").expect("graph");
    {
        let _registry = held(AmberLock::Registry, ());
        match db.try_get(root) {
            Err(amber::Error::Internal(m)) => {
                assert!(m.contains("the schema registry's lock"), "{m}")
            }
            other => panic!("try_get holding a lock: {:?}", other.map(|_| ())),
        }
    }
    assert_eq!(db.try_get(root).expect("try_get").nodes.len(), 2_000);
}

/// Installs anything: the frame space that uses up the process's map
/// entries.
struct Filler;

impl FaultService for Filler {
    fn missing(&self, frame: FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError> {
        let data = vec![0u8; inst.space().frame_size()];
        inst.install(frame, &data, InstallAs::Clean)
            .map(drop)
            .map_err(|e| FaultError::new(u64::MAX, FaultKind::Vm, e.to_string()))
    }

    fn first_write(&self, _: FrameNo, _: &[u8]) {}
}

/// Uses up `vm.max_map_count` with a frame space of its own (every other
/// frame made readable); returns it (the entries stay used while it lives),
/// or `None` if the limit was never reached.
fn use_up_map_entries() -> Option<Arc<FrameSpace>> {
    let cfg = VmConfig {
        backend: BackendChoice::Sigsegv,
        reserve_bytes: 1 << 30,
        ..VmConfig::default()
    };
    let s = FrameSpace::new(cfg, Arc::new(Filler)).expect("frame space");
    let n = 140_000u32;
    let first = s.assign(0, n).expect("assign");
    let data = vec![1u8; s.frame_size()];
    for k in (0..n).step_by(2) {
        match s.install(first + k, &data, InstallAs::Clean) {
            Ok(_) => {}
            Err(VmError::MapCount { .. }) => return Some(s),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    None
}

/// SIGSEGV backend: with no map entry left, fetching a page cannot make it
/// readable. `try_get` returns `Error::Vm` saying so, with the remedy
/// (raise `vm.max_map_count`, or use userfaultfd); a plain load cannot
/// return an error and dies with the same message.
pub fn out_of_map_entries(b: BackendChoice, test: &str) {
    let remedy = ["ENOMEM", "vm.max_map_count", "userfaultfd backend"];
    match child_scenario().as_deref() {
        Some("map_count_try") | Some("map_count_load") => {
            let (db, p) = cold(b);
            let Some(_filler) = use_up_map_entries() else {
                panic!("vm.max_map_count was never reached")
            };
            match db.try_get(p) {
                Err(amber::Error::Vm { what, .. }) => {
                    for r in remedy {
                        assert!(what.contains(r), "{what}");
                    }
                }
                other => panic!("try_get at the limit: {:?}", other.map(|_| ())),
            }
            if child_scenario().as_deref() == Some("map_count_try") {
                std::process::exit(0);
            }
            let v = db.get(p).value;
            eprintln!("the load returned {v}: it should have been refused");
            std::process::exit(3);
        }
        _ => {}
    }
    let dir = tempfile::tempdir().expect("tempdir");
    create_graph(&dir.path().join("db"), opts(b), 2_000);
    let out = run_child(test, "map_count_try", dir.path());
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_child(test, "map_count_load", dir.path());
    let mut expect = vec!["amber: fatal: page"];
    expect.extend(remedy);
    check_aborted(&out, &expect);
}
