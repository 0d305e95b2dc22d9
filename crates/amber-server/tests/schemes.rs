//! QuickStore's client-server recovery schemes (docs/design.md §11.7):
//! every scheme commits through the server what a local commit would,
//! ships what its name says (records, dirty pages, whole pages), and its
//! commits are in the database after the server stops; a scheme set for
//! the database reaches a client that names none; REDO applies records to
//! a page the server does not hold in memory; and the ESM server lays the
//! shipped page rather than redoing the records on it, while recovery
//! rebuilds the page from the records.

mod common;

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::Vfs;
use amber::internals::io::crash::CrashVfs;
use amber::internals::store::Store;
use amber::{Db, Options, PRef, PVec, Persistent, RemoteOptions, Scheme, StoreOptions, View};
use common::{TOKEN, start, writing};
use std::path::Path;
use std::sync::Arc;

#[derive(Persistent)]
#[repr(C)]
struct Part {
    n: u64,
    /// About eight parts to a page.
    pad: [u64; 60],
}

#[derive(Persistent)]
#[repr(C)]
struct Parts {
    all: PVec<PRef<Part>>,
}

const PARTS: usize = 64;

fn create(path: &Path) {
    let mut db = Db::create(path, Options::default()).expect("created");
    let mut tx = db.begin().expect("begun");
    let parts = tx.alloc(Parts { all: PVec::new() }).expect("allocated");
    for _ in 0..PARTS {
        let p = tx.alloc(Part { n: 0, pad: [0; 60] }).expect("allocated");
        tx.push(parts, |ps| &mut ps.all, p).expect("pushed");
    }
    tx.set_root("parts", parts).expect("root");
    tx.commit().expect("committed");
    db.close().expect("closed");
}

fn connect(addr: std::net::SocketAddr, scheme: Option<Scheme>) -> Db {
    let opts = Options {
        remote: RemoteOptions {
            token: Some(TOKEN.to_vec()),
            scheme,
            ..RemoteOptions::default()
        },
        ..Options::default()
    };
    Db::connect(&format!("amber://{addr}/parts"), opts).expect("connected")
}

/// Adds `by` to every `every`-th part; the commit's statistics.
fn bump(db: &mut Db, every: usize, by: u64) -> amber::CommitStats {
    let mut tx = db.begin().expect("begun");
    let parts: PRef<Parts> = tx.root("parts").expect("roots").expect("the root");
    let all: Vec<PRef<Part>> = tx.slice(&tx.get(parts).all).to_vec();
    for p in all.iter().step_by(every) {
        tx.get_mut(*p).n += by;
    }
    tx.commit().expect("committed")
}

/// Each part's count.
fn counts(db: &Db) -> Vec<u64> {
    let parts: PRef<Parts> = db.root("parts").expect("roots").expect("the root");
    let all: Vec<PRef<Part>> = db.slice(&db.get(parts).all).to_vec();
    all.iter().map(|p| db.get(*p).n).collect()
}

fn want(rounds: &[(usize, u64)]) -> Vec<u64> {
    let mut w = vec![0; PARTS];
    for &(every, by) in rounds {
        w.iter_mut().step_by(every).for_each(|n| *n += by);
    }
    w
}

#[test]
fn every_scheme_ships_what_it_names_and_its_commits_are_kept() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("parts.amber");
    create(&path);
    let server = start(writing(&[("parts", &path)]));
    let mut rounds = Vec::new();
    let mut reader = connect(server.addr, None);
    for (i, scheme) in Scheme::ALL.into_iter().enumerate() {
        let mut db = connect(server.addr, Some(scheme));
        for r in 0..3 {
            let (every, by) = (2 + (i + r) % 3, 1 + i as u64);
            let s = bump(&mut db, every, by);
            rounds.push((every, by));
            let what = format!("{scheme}, round {r}: {s:?}");
            if scheme != Scheme::Auto {
                assert_eq!(s.strategy, scheme.strategy(), "{what}");
            }
            assert!(s.log_bytes > 0, "{what}");
            match scheme {
                // The dirty pages (the parts' pages), and the records.
                Scheme::PdEsm | Scheme::SdEsm | Scheme::SlEsm => {
                    assert!(s.data_pages_shipped >= 2, "{what}");
                    assert!(s.log_pages_shipped >= 1, "{what}");
                    assert!(s.log_bytes < s.data_pages_shipped * 4096, "{what}");
                }
                Scheme::PdRedo | Scheme::Auto => {
                    assert_eq!(s.data_pages_shipped, 0, "{what}");
                    assert!(s.log_pages_shipped >= 1, "{what}");
                }
                // Whole pages, which are the log.
                Scheme::Wpl => {
                    assert!(s.data_pages_shipped >= 2, "{what}");
                    assert_eq!(s.log_pages_shipped, 0, "{what}");
                    assert!(s.log_bytes >= s.data_pages_shipped * 4096, "{what}");
                }
            }
            assert_eq!(counts(&db), want(&rounds), "{what}: the committer's view");
        }
        // Another client, of no scheme, sees them.
        reader.refresh().expect("refreshed");
        assert_eq!(counts(&reader), want(&rounds), "{scheme}: another client");
    }
    drop(reader);
    server.shutdown();
    let db = Db::open(&path, Options::default()).expect("opened");
    assert_eq!(counts(&db), want(&rounds), "after the server stopped");
}

#[test]
fn the_databases_scheme_reaches_a_client_that_names_none() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("parts.amber");
    create(&path);
    let server = start(amber_server::ServeOptions {
        scheme: Some(Scheme::SdEsm),
        ..writing(&[("parts", &path)])
    });
    let mut db = connect(server.addr, None);
    let s = bump(&mut db, 3, 5);
    assert_eq!(s.strategy, Scheme::SdEsm.strategy(), "{s:?}");
    assert!(s.data_pages_shipped >= 2, "{s:?}");
    // The session's own scheme wins.
    let mut own = connect(server.addr, Some(Scheme::PdRedo));
    let s = bump(&mut own, 4, 1);
    assert_eq!(
        (s.strategy, s.data_pages_shipped),
        (Scheme::PdRedo.strategy(), 0),
        "{s:?}"
    );
    drop((db, own));
    server.shutdown();
    let db = Db::open(&path, Options::default()).expect("opened");
    assert_eq!(counts(&db), want(&[(3, 5), (4, 1)]));
}

/// REDO applies the records to a page that is not in the server's memory
/// (a checkpoint has just installed every change): the committed state,
/// which the server builds from the page file and the records, is right
/// live, after the next checkpoint (whose installation read takes the page
/// from disk) and after the server stops.
#[test]
fn redo_applies_records_to_a_page_the_server_does_not_hold() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("parts.amber");
    create(&path);
    let server = start(writing(&[("parts", &path)]));
    let w = server.writers[0].1.clone();
    let writer = &w.store;
    let mut db = connect(server.addr, Some(Scheme::PdRedo));
    bump(&mut db, 2, 1);
    writer.checkpoint().expect("checkpointed");
    assert_eq!(writer.stats().pending_blocks, 0, "nothing held in memory");
    let s = bump(&mut db, 3, 10);
    assert_eq!(s.data_pages_shipped, 0, "{s:?}");
    assert!(writer.stats().pending_blocks > 0, "the records are applied");
    let mut other = connect(server.addr, None);
    assert_eq!(counts(&other), want(&[(2, 1), (3, 10)]), "live");
    writer.checkpoint().expect("checkpointed");
    other.refresh().expect("refreshed");
    assert_eq!(counts(&other), want(&[(2, 1), (3, 10)]), "installed");
    drop((db, other, w));
    server.shutdown();
    let db = Db::open(&path, Options::default()).expect("opened");
    assert_eq!(counts(&db), want(&[(2, 1), (3, 10)]));
}

/// The store under an ESM server: a cached page is laid in place of the
/// range records on it (which are logged, not redone), and recovery,
/// which has only the log, replays the records. The test ships an image
/// that disagrees with its record on purpose, to tell which was applied.
#[test]
fn a_cached_page_stands_in_for_its_records_which_recovery_replays() {
    const PS: usize = 4096;
    let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
    let p = Path::new("/db");
    let opts = StoreOptions {
        page_size: PS,
        checkpoint_on_close: false,
        ..StoreOptions::default()
    };
    let s = Store::create(vfs.clone(), p, opts.clone()).expect("created");
    let mut tx = s.begin().expect("begun");
    let head = tx.alloc(2, BlockKind::Raw).expect("allocated");
    tx.commit().expect("committed");
    s.checkpoint().expect("checkpointed");
    let at = |off: usize| head * PS as u64 + off as u64;
    let mut tx = s.begin().expect("begun");
    // Page 1 cached (its image says 9s where the record says 1s); a range
    // on page 0, not cached, is redone.
    tx.write(at(PS + 100), &[1; 50]).expect("written");
    tx.write(at(HEADER_SIZE + 8), &[3; 8]).expect("written");
    let mut image = vec![0u8; PS];
    image[100..150].fill(9);
    tx.cache_page(head + 1, &image).expect("cached");
    let info = tx.commit().expect("committed");
    assert!(
        info.log_bytes > 58 && info.log_bytes < 1024,
        "the records, not the page: {info:?}"
    );
    let got = s.read_block(head).expect("read");
    assert_eq!(
        got[PS + 100..PS + 150],
        [9; 50],
        "the cached image, not the record"
    );
    assert_eq!(
        got[HEADER_SIZE + 8..HEADER_SIZE + 16],
        [3; 8],
        "the range on page 0"
    );
    // The restart, no checkpoint since: the records.
    drop(s);
    let s = Store::open(vfs, p, opts).expect("reopened");
    let got = s.read_block(head).expect("read");
    assert_eq!(
        got[PS + 100..PS + 150],
        [1; 50],
        "recovery replays the record"
    );
    assert_eq!(got[HEADER_SIZE + 8..HEADER_SIZE + 16], [3; 8]);
}
