//! Writes through the server, frame by frame (docs/design.md §11): a
//! commit is seen by another connection after its `Begin` and not before;
//! of two connections that read a page and both write it the second to
//! commit gets `Conflict` and nothing of it is committed; disjoint writers
//! both commit; an aborted transaction's reservations stay its
//! connection's until it closes; a write of a page the connection was never sent is refused; and
//! connections committing at once share the log's syncs.

mod common;

use amber::StoreOptions;
use amber::internals::format::page::BlockKind;
use amber::internals::io::real::RealVfs;
use amber::internals::schema::desc::StoredType;
use amber::internals::store::Store;
use amber::internals::wire::{Change, ErrorCode, Request, Response, WireRecord};
use amber_server::{Blocking, ServeOptions};
use common::{Client, error_of, start, writing};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Where a test writes inside a block: past its header.
const AT: u64 = 64;

/// A database of `n` one-page raw blocks, each holding "block i"; their
/// heads.
fn raw_db(n: u64) -> (tempfile::TempDir, PathBuf, Vec<u64>, u64) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("raw.amber");
    let store = Store::create(Arc::new(RealVfs), &path, StoreOptions::default()).expect("created");
    let ps = store.page_size() as u64;
    let mut tx = store.begin().expect("begun");
    let heads: Vec<u64> = (0..n)
        .map(|i| {
            let h = tx.alloc(1, BlockKind::Raw).expect("allocated");
            tx.write(h * ps + AT, format!("block {i}").as_bytes())
                .expect("written");
            h
        })
        .collect();
    tx.commit().expect("committed");
    store.close().expect("closed");
    (dir, path, heads, ps)
}

fn begin(c: &mut Client) -> Change {
    match c.ask(&Request::Begin) {
        Response::Begun { change, .. } => change,
        other => panic!("Begin: {other:?}"),
    }
}

fn read(c: &mut Client, head: u64) -> Vec<u8> {
    match c.ask(&Request::ReadBlock { head }) {
        Response::Block(b) => b,
        other => panic!("ReadBlock {head}: {other:?}"),
    }
}

fn alloc(c: &mut Client) -> u64 {
    match c.ask(&Request::Alloc {
        pages: 1,
        kind: BlockKind::Raw as u8,
    }) {
        Response::Allocated { head } => head,
        other => panic!("Alloc: {other:?}"),
    }
}

fn range(addr: u64, data: &[u8]) -> WireRecord {
    WireRecord::Range {
        addr,
        data: data.to_vec(),
    }
}

fn commit(c: &mut Client, records: Vec<WireRecord>) -> Response {
    commit_reading(c, records, vec![])
}

/// A commit that says it read `reads` (beside the pages it writes).
fn commit_reading(c: &mut Client, records: Vec<WireRecord>, reads: Vec<u64>) -> Response {
    c.ask(&Request::Commit {
        records,
        frees: vec![],
        roots: vec![],
        reads,
    })
}

fn committed(r: Response) -> u64 {
    match r {
        Response::Committed { lsn, .. } => lsn,
        other => panic!("not committed: {other:?}"),
    }
}

/// The bytes at `AT` of a block image, as long as `like`.
fn at<'b>(image: &'b [u8], like: &[u8]) -> &'b [u8] {
    &image[AT as usize..AT as usize + like.len()]
}

fn server(path: &Path) -> common::Running {
    start(writing(&[("raw", path)]))
}

#[test]
fn a_commit_is_seen_after_begin_and_not_before() {
    let (_dir, path, heads, ps) = raw_db(4);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (mut b, _) = Client::welcomed(server.addr, "raw");

    begin(&mut a);
    let new = alloc(&mut a);
    read(&mut a, heads[0]);
    let lsn = committed(commit(
        &mut a,
        vec![
            range(new * ps + AT, b"fresh"),
            range(heads[0] * ps + AT, b"changed"),
        ],
    ));
    assert!(lsn > 0);
    // A commit's frame may be far larger than any read request.
    begin(&mut a);
    let big = match a.ask(&Request::Alloc {
        pages: 40,
        kind: BlockKind::Raw as u8,
    }) {
        Response::Allocated { head } => head,
        other => panic!("Alloc: {other:?}"),
    };
    let bytes: Vec<u8> = (0..39 * ps).map(|i| (i % 251) as u8).collect();
    committed(commit(&mut a, vec![range(big * ps + AT, &bytes)]));

    // b's snapshot is from before: the new block is not there, the old
    // one holds what it held.
    let (code, _) = error_of(b.ask(&Request::ReadBlock { head: new }));
    assert_eq!(code, ErrorCode::Invalid);
    assert_eq!(at(&read(&mut b, heads[0]), b"block 0"), b"block 0");
    // After its Begin it sees the commit, and is told to drop the page.
    match begin(&mut b) {
        Change::Pages { pages, .. } => assert!(pages.contains(&heads[0]), "{pages:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(at(&read(&mut b, new), b"fresh"), b"fresh");
    assert_eq!(at(&read(&mut b, heads[0]), b"changed"), b"changed");
    assert_eq!(at(&read(&mut b, big), &bytes), &bytes[..]);
    // And the commit survives the server, which closed its writer with a
    // checkpoint: the database holds it with nothing left in the log.
    drop((a, b));
    server.shutdown();
    let store = Store::open(Arc::new(RealVfs), &path, StoreOptions::default()).expect("opened");
    assert_eq!(
        at(&store.read_block(new).expect("read"), b"fresh"),
        b"fresh"
    );
    let s = store.stats();
    assert_eq!(s.checkpoint_lsn, s.end_lsn, "{s:?}");
    store.close().expect("closed");
}

#[test]
fn a_type_is_defined_once_by_whoever_asks_first() {
    let (_dir, path) = common::fixture(3);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (mut b, _) = Client::welcomed(server.addr, "raw");
    let catalog = |c: &mut Client| match c.ask(&Request::Catalog) {
        Response::Catalog { types, .. } => types,
        other => panic!("{other:?}"),
    };
    let define = |c: &mut Client, desc: &[u8]| {
        c.ask(&Request::DefineType {
            desc: desc.to_vec(),
        })
    };
    let id = |r: Response| match r {
        Response::TypeDefined { id } => id,
        other => panic!("DefineType: {other:?}"),
    };
    let stored = catalog(&mut a);
    let (item, desc) = stored[0].clone();
    // A stored descriptor: its id. No transaction needed.
    assert_eq!(id(define(&mut a, &desc)), item);
    // A new one: defined once, whoever asks.
    let mut other = StoredType::decode(&desc).expect("a descriptor");
    other.name.push_str("Renamed");
    let other = other.encode();
    let new = id(define(&mut a, &other));
    assert_ne!(new, item);
    assert_eq!(id(define(&mut b, &other)), new);
    // Bytes that are no descriptor would break every client's catalog.
    let (code, message) = error_of(define(&mut b, b"no descriptor"));
    assert_eq!(code, ErrorCode::Invalid);
    assert!(message.contains("not a type descriptor"), "{message}");
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    let types = catalog(&mut c);
    assert!(types.contains(&(new, other)), "{types:?}");
    assert_eq!(types.len(), stored.len() + 1);
}

#[test]
fn of_two_writers_of_a_page_the_second_conflicts_and_commits_nothing() {
    let (_dir, path, heads, ps) = raw_db(3);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (mut b, _) = Client::welcomed(server.addr, "raw");
    begin(&mut a);
    begin(&mut b);
    for c in [&mut a, &mut b] {
        read(c, heads[0]);
        read(c, heads[1]);
    }
    committed(commit(&mut a, vec![range(heads[0] * ps + AT, b"by a")]));
    match commit(
        &mut b,
        vec![
            range(heads[0] * ps + AT, b"by b"),
            range(heads[1] * ps + AT, b"by b"),
        ],
    ) {
        Response::Conflict {
            change, message, ..
        } => {
            assert!(message.contains(&format!("page {}", heads[0])), "{message}");
            // b's snapshot moved past a's commit: it drops that page.
            assert!(
                matches!(&change, Change::Pages { pages, .. } if pages.contains(&heads[0])),
                "{change:?}"
            );
        }
        other => panic!("not a conflict: {other:?}"),
    }
    // Nothing of b is committed, and its transaction is gone.
    let (code, _) = error_of(commit(&mut b, vec![]));
    assert_eq!(code, ErrorCode::NoTransaction);
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    assert_eq!(at(&read(&mut c, heads[0]), b"by a"), b"by a");
    assert_eq!(at(&read(&mut c, heads[1]), b"block 1"), b"block 1");
    // b retries at its new snapshot, and wins.
    begin(&mut b);
    read(&mut b, heads[0]);
    committed(commit(&mut b, vec![range(heads[0] * ps + AT, b"by b")]));
    begin(&mut c);
    assert_eq!(at(&read(&mut c, heads[0]), b"by b"), b"by b");
}

#[test]
fn disjoint_writers_both_commit() {
    let (_dir, path, heads, ps) = raw_db(2);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (mut b, _) = Client::welcomed(server.addr, "raw");
    begin(&mut a);
    begin(&mut b);
    read(&mut a, heads[0]);
    read(&mut b, heads[1]);
    committed(commit(&mut a, vec![range(heads[0] * ps + AT, b"by a")]));
    committed(commit(&mut b, vec![range(heads[1] * ps + AT, b"by b")]));
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    assert_eq!(at(&read(&mut c, heads[0]), b"by a"), b"by a");
    assert_eq!(at(&read(&mut c, heads[1]), b"by b"), b"by b");
}

#[test]
fn an_aborted_reservation_stays_the_connections_until_it_closes() {
    let (_dir, path, _, ps) = raw_db(1);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (code, _) = error_of(a.ask(&Request::Alloc {
        pages: 1,
        kind: BlockKind::Raw as u8,
    }));
    assert_eq!(code, ErrorCode::NoTransaction);
    begin(&mut a);
    let first = alloc(&mut a);
    // Reserved: nobody else gets it meanwhile.
    let (mut b, _) = Client::welcomed(server.addr, "raw");
    begin(&mut b);
    let other = alloc(&mut b);
    assert_ne!(first, other);
    assert!(matches!(b.ask(&Request::Abort), Response::Aborted));
    assert!(matches!(a.ask(&Request::Abort), Response::Aborted));
    let (code, _) = error_of(a.ask(&Request::Abort));
    assert_eq!(code, ErrorCode::NoTransaction);
    // Aborted, the blocks stay their connections' (their clients keep
    // them as dead space): neither is given out again.
    begin(&mut a);
    let again = alloc(&mut a);
    assert!(![first, other].contains(&again), "{again} given out again");
    // So does a transaction a Begin aborts.
    begin(&mut b);
    let next = alloc(&mut b);
    assert!(
        ![first, other, again].contains(&next),
        "{next} given out again"
    );
    // The connection closes with its transaction open: everything it
    // reserved is free again.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        begin(&mut b);
        let got = alloc(&mut b);
        if got == first {
            break;
        }
        assert!(Instant::now() < deadline, "still reserved: got {got}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another transaction's reservation is not a block to free, nor is a
    // block an aborted transaction of another connection reserved.
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    for reserved in [first, other] {
        begin(&mut c);
        let (code, message) = error_of(c.ask(&Request::Commit {
            records: vec![],
            frees: vec![reserved],
            roots: vec![],
            reads: vec![],
        }));
        assert_eq!(code, ErrorCode::Invalid);
        assert!(message.contains("no commit has allocated"), "{message}");
    }
    // b commits `first`: an empty block of b's.
    committed(commit(&mut b, vec![]));
    begin(&mut c);
    assert_eq!(read(&mut c, first).len() as u64, ps);
}

#[test]
fn a_commit_is_validated_against_what_it_read_not_all_it_was_sent() {
    let (_dir, path, heads, ps) = raw_db(3);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (mut b, _) = Client::welcomed(server.addr, "raw");
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    for x in [&mut a, &mut b, &mut c] {
        begin(x);
        for &h in &heads {
            read(x, h);
        }
    }
    committed(commit(&mut a, vec![range(heads[0] * ps + AT, b"by a")]));
    // b was sent page 0 but says it read page 2 only: no conflict.
    committed(commit_reading(
        &mut b,
        vec![range(heads[1] * ps + AT, b"by b")],
        vec![heads[2]],
    ));
    // c read page 0, which a changed after c's snapshot: a conflict,
    // though c writes only page 2.
    match commit_reading(
        &mut c,
        vec![range(heads[2] * ps + AT, b"by c")],
        vec![heads[0], heads[2]],
    ) {
        Response::Conflict { message, .. } => {
            assert!(message.contains(&format!("page {}", heads[0])), "{message}");
        }
        other => panic!("not a conflict: {other:?}"),
    }
    // The root directory counts as a page read.
    begin(&mut a);
    begin(&mut b);
    committed(a.ask(&Request::Commit {
        records: vec![],
        frees: vec![],
        roots: vec![("top".into(), heads[0] * ps + AT, 0)],
        reads: vec![],
    }));
    match commit_reading(&mut b, vec![], vec![u64::MAX]) {
        Response::Conflict { message, .. } => {
            assert!(message.contains("root directory"), "{message}");
        }
        other => panic!("not a conflict: {other:?}"),
    }
}

#[test]
fn a_write_of_a_page_never_sent_is_refused() {
    let (_dir, path, heads, ps) = raw_db(2);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    begin(&mut a);
    read(&mut a, heads[0]);
    let (code, message) = error_of(commit(
        &mut a,
        vec![
            range(heads[0] * ps + AT, b"read"),
            range(heads[1] * ps + AT, b"unread"),
        ],
    ));
    assert_eq!(code, ErrorCode::Invalid);
    assert!(message.contains(&format!("page {}", heads[1])), "{message}");
    // Nothing of it is committed.
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    assert_eq!(at(&read(&mut c, heads[0]), b"block 0"), b"block 0");
    // A page dropped by a Change is no longer the connection's to write.
    begin(&mut a);
    read(&mut a, heads[1]);
    begin(&mut c);
    read(&mut c, heads[1]);
    committed(commit(&mut c, vec![range(heads[1] * ps + AT, b"by c")]));
    match begin(&mut a) {
        Change::Pages { pages, .. } => assert!(pages.contains(&heads[1])),
        other => panic!("{other:?}"),
    }
    let (code, _) = error_of(commit(&mut a, vec![range(heads[1] * ps + AT, b"stale")]));
    assert_eq!(code, ErrorCode::Invalid);
    // The store's own metadata is no client's to write or free, read or
    // not.
    let roots = {
        let s = Store::open(
            Arc::new(RealVfs),
            &path,
            amber_server::serve_read::read_only(),
        )
        .expect("opened");
        s.superblock().roots_page
    };
    begin(&mut a);
    if let Response::Block(_) = a.ask(&Request::ReadBlock { head: roots }) {
        let (code, message) = error_of(commit(&mut a, vec![range(roots * ps + AT, b"x")]));
        assert_eq!(code, ErrorCode::Invalid);
        assert!(message.contains("metadata"), "{message}");
        begin(&mut a);
    }
    let (code, _) = error_of(a.ask(&Request::Commit {
        records: vec![],
        frees: vec![roots],
        roots: vec![],
        reads: vec![],
    }));
    assert_eq!(code, ErrorCode::Invalid);
    // A transaction's snapshot does not move under it.
    begin(&mut a);
    let (code, message) = error_of(a.ask(&Request::Refresh));
    assert_eq!(code, ErrorCode::Invalid);
    assert!(message.contains("transaction open"), "{message}");
}

#[test]
fn connections_committing_at_once_share_log_syncs() {
    share_log_syncs(Blocking::InPlace);
    share_log_syncs(Blocking::Pool);
}

fn share_log_syncs(blocking: Blocking) {
    const N: usize = 8;
    const ROUNDS: usize = 3;
    let (_dir, path, heads, ps) = raw_db(N as u64);
    let server = start(ServeOptions {
        blocking,
        ..writing(&[("raw", &path)])
    });
    let writer = server.writers[0].1.clone();
    let mut clients: Vec<Client> = (0..N)
        .map(|_| Client::welcomed(server.addr, "raw").0)
        .collect();
    let before = writer.store.stats().log_syncs;
    for round in 0..ROUNDS {
        for (i, c) in clients.iter_mut().enumerate() {
            begin(c);
            read(c, heads[i]);
        }
        let go = Arc::new(Barrier::new(N));
        let threads: Vec<_> = (clients.drain(..).enumerate())
            .map(|(i, mut c)| {
                let go = go.clone();
                let rec = range(heads[i] * ps + AT, format!("round {round}").as_bytes());
                std::thread::spawn(move || {
                    go.wait();
                    committed(commit(&mut c, vec![rec]));
                    c
                })
            })
            .collect();
        clients = threads
            .into_iter()
            .map(|t| t.join().expect("a committer"))
            .collect();
    }
    let syncs = writer.store.stats().log_syncs - before;
    let commits = (N * ROUNDS) as u64;
    assert!(
        syncs < commits,
        "{blocking:?}: {commits} commits took {syncs} log syncs: no group commit"
    );
    eprintln!("{blocking:?}: {commits} commits, {syncs} log syncs");
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    for &h in &heads {
        let want = format!("round {}", ROUNDS - 1);
        assert_eq!(at(&read(&mut c, h), want.as_bytes()), want.as_bytes());
    }
    drop(writer);
}

/// A `Change` says whether the catalog moved too: a commit of pages only
/// leaves it, so a client does not fetch it again after every commit; a
/// root set by another connection moves it.
#[test]
fn a_change_says_whether_the_catalog_moved() {
    let (_dir, path, heads, ps) = raw_db(1);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let (mut b, _) = Client::welcomed(server.addr, "raw");
    begin(&mut b);
    begin(&mut a);
    read(&mut a, heads[0]);
    committed(commit(&mut a, vec![range(heads[0] * ps + AT, b"pages")]));
    match begin(&mut b) {
        Change::Pages { pages, catalog, .. } => {
            assert!(pages.contains(&heads[0]), "{pages:?}");
            assert!(!catalog, "a commit of pages only moved the catalog");
        }
        other => panic!("{other:?}"),
    }
    begin(&mut a);
    committed(a.ask(&Request::Commit {
        records: vec![],
        frees: vec![],
        roots: vec![("top".into(), heads[0] * ps + AT, 0)],
        reads: vec![],
    }));
    match begin(&mut b) {
        Change::Pages { catalog, .. } => assert!(catalog, "a root was set"),
        other => panic!("{other:?}"),
    }
    match b.ask(&Request::Catalog) {
        Response::Catalog { roots, .. } => assert_eq!(roots.len(), 1, "{roots:?}"),
        other => panic!("Catalog: {other:?}"),
    }
}

/// An ESM commit's cached pages (docs/design.md §11.7) stand in for the
/// range records on them: one that no range record of the commit changes,
/// one that is not a page long or is shipped twice, and one in a block the
/// commit frees are refused before anything is logged; a right one
/// commits, and the page reads as its records made it.
#[test]
fn a_cached_page_must_be_a_whole_page_its_records_change() {
    let (_dir, path, heads, ps) = raw_db(2);
    let server = server(&path);
    let (mut a, _) = Client::welcomed(server.addr, "raw");
    let image = |page: u64, with: &[u8]| {
        let mut img = read_page(&path, page, ps);
        img[AT as usize..AT as usize + with.len()].copy_from_slice(with);
        WireRecord::Cached { page, image: img }
    };
    let short = WireRecord::Cached {
        page: heads[0],
        image: vec![0; 7],
    };
    let cases = [
        (vec![image(heads[0], b"esm")], vec![], "no range record"),
        (
            vec![range(heads[0] * ps + AT, b"esm"), short],
            vec![],
            "not one page",
        ),
        (
            vec![
                range(heads[0] * ps + AT, b"esm"),
                image(heads[0], b"esm"),
                image(heads[0], b"esm"),
            ],
            vec![],
            "shipped twice",
        ),
        (
            vec![range(heads[1] * ps + AT, b"esm"), image(heads[1], b"esm")],
            vec![heads[1]],
            "frees its block",
        ),
    ];
    for (records, frees, says) in cases {
        begin(&mut a);
        read(&mut a, heads[0]);
        read(&mut a, heads[1]);
        let (code, message) = error_of(a.ask(&Request::Commit {
            records,
            frees,
            roots: vec![],
            reads: vec![],
        }));
        assert_eq!(code, ErrorCode::Invalid, "{message}");
        assert!(message.contains(says), "{says}: {message}");
    }
    begin(&mut a);
    read(&mut a, heads[0]);
    committed(commit(
        &mut a,
        vec![range(heads[0] * ps + AT, b"esm"), image(heads[0], b"esm")],
    ));
    let (mut c, _) = Client::welcomed(server.addr, "raw");
    assert_eq!(at(&read(&mut c, heads[0]), b"esmck 0"), b"esmck 0");
    drop((a, c));
    server.shutdown();
    let img = read_page(&path, heads[0], ps);
    assert_eq!(at(&img, b"esmck 0"), b"esmck 0", "installed");
}

/// Page `page` as the database at `path` has it committed.
fn read_page(path: &Path, page: u64, ps: u64) -> Vec<u8> {
    let img = common::local(path).read_block(page).expect("read");
    img[..ps as usize].to_vec()
}
