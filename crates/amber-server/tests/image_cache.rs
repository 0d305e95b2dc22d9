//! The server's buffer pool of fetch clusters: a connection is answered
//! from it only at a snapshot its entry is right at. Two connections at
//! different snapshots read the same clusters, each its own snapshot's
//! images (compared with a read-only store's, block by block), while a
//! writer beside the server changes some objects, frees others and adds
//! more; clusters the commit left alone are still answered from the pool
//! at the new snapshot.

mod common;

use amber::internals::store::Store;
use amber::internals::wire::{Request, Response};
use amber::{Db, Options, PRef, View};
use common::{Client, Item, fixture, local, options, start};
use std::path::Path;

/// Every cluster of 8 pages over `store`'s pages, read by `c`: each
/// answer's blocks are where `store` has them, each image the block's
/// image in `store`.
fn clusters(c: &mut Client, store: &Store) -> Vec<Response> {
    let ps = store.page_size();
    let mut out = Vec::new();
    for from in (0..store.page_count()).step_by(8) {
        let answer = c.ask(&Request::ReadCluster { from, pages: 8 });
        let Response::Cluster { blocks, data } = &answer else {
            panic!("cluster {from}: {answer:?}");
        };
        let heads: Vec<(u64, u32)> = blocks.iter().map(|b| (b.head, b.pages)).collect();
        let pages = 8.min(store.page_count() - from);
        assert_eq!(
            heads,
            store.blocks_starting_in(from, pages),
            "cluster {from}"
        );
        for b in blocks {
            assert_eq!(b.error, None, "block {}", b.head);
            let at = b.at as usize;
            let image = store.read_block(b.head).expect("read");
            assert!(
                data[at..at + b.pages as usize * ps] == image[..],
                "block {} of cluster {from}: not the snapshot's image",
                b.head
            );
        }
        out.push(answer);
    }
    out
}

/// The pool's hits and misses, from the status report.
fn pool(c: &mut Client) -> (u64, u64) {
    let Response::Report(json) = c.ask(&Request::Status) else {
        panic!("no report");
    };
    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let p = &doc["databases"][0]["image_cache"];
    (p["hits"].as_u64().unwrap(), p["misses"].as_u64().unwrap())
}

/// Commits, beside the server, among items 1000..1200 (a few clusters'
/// worth): every 7th item's id changed in place, every 50th unlinked
/// from the list and freed (its block goes, and no page of it need
/// change); then 100 items more. The writer is returned open: closing it
/// would checkpoint, and a move past a checkpoint carries no entry.
fn change(path: &Path) -> Db {
    let mut db = Db::open(path, Options::default()).expect("opened for writing");
    let mut tx = db.begin().expect("begun");
    let mut prev: Option<PRef<Item>> = None;
    let mut at: Option<PRef<Item>> = tx.root("items").expect("root");
    while let Some(p) = at {
        let (id, next) = (tx.get(p).id, tx.get(p).next);
        match prev {
            _ if !(1000..1200).contains(&id) => {}
            Some(q) if id % 50 == 0 => {
                tx.get_mut(q).next = next;
                tx.free(p).expect("freed");
                at = next;
                continue;
            }
            _ if id % 7 == 0 => tx.get_mut(p).id += 1_000_000,
            _ => {}
        }
        prev = Some(p);
        at = next;
    }
    tx.commit().expect("committed");
    common::append(&mut db, 5000..5100);
    db
}

#[test]
fn each_connection_is_answered_its_own_snapshots_images() {
    let (_dir, path) = fixture(3000);
    let server = start(options(&[("items", &path)]));
    let before = local(&path);
    let (mut a, _) = Client::welcomed(server.addr, "items");
    let (mut b, _) = Client::welcomed(server.addr, "items");

    // A reads every cluster from the file; B is answered the same from
    // the pool.
    let first = clusters(&mut a, &before);
    let n = first.len() as u64;
    assert!(n > 20, "{n} clusters");
    assert_eq!(pool(&mut a), (0, n));
    assert_eq!(clusters(&mut b, &before), first);
    assert_eq!(pool(&mut a), (n, n));

    let writer = change(&path);
    let after = local(&path);
    assert!(after.snapshot_lsn() > before.snapshot_lsn());

    // B has not moved: its snapshot's images still, from the pool.
    assert_eq!(clusters(&mut b, &before), first);
    assert_eq!(pool(&mut b), (2 * n, n));

    // A moves: the clusters the commits changed are read again, the
    // others are still the pool's.
    assert!(matches!(
        a.ask(&Request::Refresh),
        Response::Refreshed { .. }
    ));
    let second = clusters(&mut a, &after);
    assert_ne!(second, first);
    let (hits, misses) = pool(&mut a);
    let m = second.len() as u64;
    assert!(
        hits > 2 * n && misses > n && hits + misses == 2 * n + n + m,
        "hits {hits}, misses {misses} of {m} clusters"
    );

    // A new connection at the new snapshot: all from the pool.
    let (mut c, _) = Client::welcomed(server.addr, "items");
    assert_eq!(clusters(&mut c, &after), second);
    assert_eq!(pool(&mut c), (hits + m, misses));
    // And B, once moved, the same.
    assert!(matches!(
        b.ask(&Request::Refresh),
        Response::Refreshed { .. }
    ));
    assert_eq!(clusters(&mut b, &after), second);
    writer.close().expect("closed");
}

/// A server told to keep no pool reads every cluster.
#[test]
fn a_pool_of_nothing_reads_every_time() {
    let (_dir, path) = fixture(300);
    let server = start(amber_server::ServeOptions {
        image_cache: 0,
        ..options(&[("items", &path)])
    });
    let store = local(&path);
    let (mut a, _) = Client::welcomed(server.addr, "items");
    let first = clusters(&mut a, &store);
    assert_eq!(clusters(&mut a, &store), first);
    assert_eq!(pool(&mut a), (0, 2 * first.len() as u64));
}
