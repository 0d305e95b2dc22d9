//! The server under the crash model (`amber::internals::io::crash`): its
//! database lies on a `CrashVfs`, a client commits through it, and the
//! simulated machine dies at the `n`-th write, sync or other mutating call
//! the server makes from the client's first commit on — for every `n` up
//! to the number the whole run makes, so that every crash point is met
//! once: in a commit's log append or sync, in the connection's snapshot
//! moves and its end, in the shutdown's checkpoint (its page writes, its
//! superblock switch, its log recycling). Each write not synced is then
//! kept, lost or torn at random, and the durable files are opened as after
//! a reboot. Every commit the client was told of is there, and nothing
//! else but possibly the one in flight: no commit is half there.
//!
//! The client commits under the server-side recovery schemes
//! (docs/design.md §11.7) in turn: crash point `n` under `pd-esm`,
//! `pd-redo` or `wpl` by `n` modulo 3 (ESM's cached pages, REDO's
//! records, WPL's page records and their installation from the log at
//! the shutdown's checkpoint), and the sweep ends only where no scheme's
//! run dies.
//!
//! `AMBER_SERVER_CRASH_SEEDS` (default 1) runs every point with that many
//! seeds for the torn writes.

mod common;

use amber::internals::io::crash::CrashVfs;
use amber::{Db, Options, PRef, PVec, Persistent, RemoteOptions, Scheme};
use common::{TOKEN, start, writing};
use std::path::Path;
use std::sync::Arc;

#[derive(Persistent)]
#[repr(C)]
struct Ledger {
    total: u64,
    history: PVec<u64>,
    latest: Option<PRef<Entry>>,
}

#[derive(Persistent)]
#[repr(C)]
struct Entry {
    n: u64,
    previous: Option<PRef<Entry>>,
    /// Makes each commit's new block worth logging.
    pad: [u64; 60],
}

/// Commits per run: each bumps the total, appends it to the history and
/// links a new entry (a block reserved through the server).
const COMMITS: u64 = 4;

/// The most crash points a run may have: a sweep that has not reached the
/// end of the run by then fails, rather than loop.
const MAX_POINTS: u64 = 2_000;

const PATH: &str = "/crash/ledger.amber";

/// A small reservation: a closed database's stays reserved for the life of
/// the process, and a run of many seeds opens thousands.
fn local() -> Options {
    Options {
        reserve_bytes: 64 << 20,
        ..Options::default()
    }
}

fn create(vfs: &CrashVfs) {
    let mut db = Db::create_with(Arc::new(vfs.clone()), Path::new(PATH), local()).expect("create");
    let mut tx = db.begin().expect("begin");
    let l = tx
        .alloc(Ledger {
            total: 0,
            history: PVec::new(),
            latest: None,
        })
        .expect("alloc");
    tx.set_root("ledger", l).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
}

fn commit(db: &mut Db) -> amber::Result<()> {
    let l: PRef<Ledger> = db.root("ledger")?.expect("the ledger");
    let mut tx = db.begin()?;
    let led = tx.get_mut(l);
    led.total += 1;
    let n = led.total;
    let previous = led.latest;
    tx.push(l, |x| &mut x.history, n)?;
    let e = tx.alloc(Entry {
        n,
        previous,
        pad: [n; 60],
    })?;
    tx.get_mut(l).latest = Some(e);
    tx.commit().map(|_| ())
}

/// The committed total of the durable files, after checking that the
/// history and the entry chain agree with it.
fn recovered(vfs: &CrashVfs, ctx: &str) -> u64 {
    let db = Db::open_with(Arc::new(vfs.clone()), Path::new(PATH), local())
        .unwrap_or_else(|e| panic!("{ctx}: reopening after the crash: {e}"));
    let l: PRef<Ledger> = db.root("ledger").expect("roots").expect("the ledger");
    let led = db
        .try_get(l)
        .unwrap_or_else(|e| panic!("{ctx}: the ledger: {e}"));
    let total = led.total;
    let history = db.slice(&led.history);
    assert!(
        history.iter().copied().eq(1..=total),
        "{ctx}: history {history:?} against total {total}"
    );
    let (mut at, mut expect) = (led.latest, total);
    while let Some(e) = at {
        let e = db
            .try_get(e)
            .unwrap_or_else(|err| panic!("{ctx}: entry {expect}: {err}"));
        assert_eq!((e.n, e.pad[59]), (expect, expect), "{ctx}: entry chain");
        expect -= 1;
        at = e.previous;
    }
    assert_eq!(expect, 0, "{ctx}: entry chain too short");
    db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
    total
}

/// The schemes the runs take in turn: one of each kind of server work.
const SCHEMES: [Scheme; 3] = [Scheme::PdEsm, Scheme::PdRedo, Scheme::Wpl];

/// One run under `scheme` with the crash at the `n`-th mutating call from
/// the first commit on (`None`: no crash); whether the simulated machine
/// died.
fn run(scheme: Scheme, n: Option<u64>, seed: u64) -> bool {
    let ctx = format!("{scheme}, crash point {n:?}, seed {seed}");
    let vfs = CrashVfs::new();
    create(&vfs);
    let server = start(amber_server::ServeOptions {
        vfs: Arc::new(vfs.clone()),
        ..writing(&[("ledger", Path::new(PATH))])
    });
    let opts = Options {
        remote: RemoteOptions {
            token: Some(TOKEN.to_vec()),
            scheme: Some(scheme),
            ..RemoteOptions::default()
        },
        ..local()
    };
    let mut db = Db::connect(&format!("amber://{}/ledger", server.addr), opts)
        .unwrap_or_else(|e| panic!("{ctx}: connect: {e}"));
    if let Some(n) = n {
        vfs.crash_after(n);
    }
    let mut acked = 0;
    for _ in 0..COMMITS {
        match commit(&mut db) {
            Ok(()) => acked += 1,
            Err(e) => {
                assert!(n.is_some(), "{ctx}: a commit failed with no crash: {e}");
                break;
            }
        }
    }
    drop(db);
    server.shutdown();
    let died = vfs.is_dead();
    vfs.crash(seed);
    let total = recovered(&vfs, &ctx);
    assert!(
        total == acked || total == acked + 1,
        "{ctx}: {acked} commits acknowledged, {total} recovered"
    );
    if !died {
        assert_eq!(
            total, COMMITS,
            "{ctx}: nothing failed, yet not every commit is there"
        );
    }
    died
}

#[test]
fn every_crash_point_of_a_served_run_keeps_exactly_the_acknowledged_commits() {
    let seeds: u64 = std::env::var("AMBER_SERVER_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for scheme in SCHEMES {
        assert!(
            !run(scheme, None, 0),
            "{scheme}: a run without a crash point died"
        );
    }
    let mut points = 0;
    for n in 1..=MAX_POINTS {
        let mut died = false;
        let scheme = SCHEMES[(n % 3) as usize];
        for seed in 0..seeds {
            died |= run(scheme, Some(n), n * 1_000 + seed);
        }
        // The end of the sweep: no scheme's run reaches this point.
        if !died && !(SCHEMES.iter()).any(|&s| s != scheme && run(s, Some(n), n * 1_000)) {
            break;
        }
        points = n;
    }
    assert!(
        points < MAX_POINTS,
        "the run still died at {MAX_POINTS} points"
    );
    assert!(
        points >= COMMITS * 2,
        "only {points} crash points: the crash model did not reach the server"
    );
    eprintln!(
        "server crash points: {points} (x{seeds} seeds), each kept exactly the acknowledged commits"
    );
}
