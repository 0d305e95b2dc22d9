//! The read side over the wire: what a client reads is what a read-only
//! store on the same database reads at the same snapshot, block by block;
//! the snapshot moves only on `Refresh`; a request the store refuses, or
//! one too large to answer, is refused and the connection goes on.

mod common;

use amber::internals::wire::{Change, ErrorCode, Request, Response};
use amber::{Db, Options};
use amber_server::{Blocking, ServeOptions};
use common::{Client, append, error_of, fixture, local, options, start};

#[test]
fn a_client_reads_what_the_store_holds() {
    reads_what_the_store_holds(Blocking::InPlace);
    reads_what_the_store_holds(Blocking::Pool);
}

fn reads_what_the_store_holds(blocking: Blocking) {
    let (_dir, path) = fixture(2000);
    let server = start(ServeOptions {
        blocking,
        ..options(&[("items", &path)])
    });
    let store = local(&path);
    let (mut c, welcome) = Client::welcomed(server.addr, "items");
    let Response::Welcome {
        page_size,
        first_data_page,
        page_count,
        snapshot_lsn,
        ..
    } = welcome
    else {
        unreachable!()
    };
    assert_eq!(page_size as usize, store.page_size());
    assert_eq!(first_data_page, store.first_data_page());
    assert_eq!(page_count, store.page_count());
    assert_eq!(snapshot_lsn, store.snapshot_lsn());

    let blocks = match c.ask(&Request::Blocks {
        from: 0,
        pages: u64::MAX,
    }) {
        Response::Blocks(b) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(blocks, store.blocks_starting_in(0, page_count));
    assert!(blocks.len() > 5, "{blocks:?}");
    for &(head, _) in &blocks {
        let got = c.ask(&Request::ReadBlock { head });
        assert_eq!(got, Response::Block(store.read_block(head).expect("read")));
    }
    // Clusters of 8 pages over the whole file: every block once, each
    // image the block's committed image.
    let mut seen = Vec::new();
    for from in (0..page_count).step_by(8) {
        let Response::Cluster { blocks, data } = c.ask(&Request::ReadCluster { from, pages: 8 })
        else {
            panic!("not a cluster");
        };
        for b in blocks {
            assert_eq!(b.error, None, "block {}", b.head);
            let len = b.pages as usize * store.page_size();
            let at = b.at as usize;
            assert_eq!(
                data[at..at + len],
                store.read_block(b.head).expect("read")[..]
            );
            seen.push((b.head, b.pages));
        }
    }
    assert_eq!(seen, blocks);

    let Response::Catalog { types, roots } = c.ask(&Request::Catalog) else {
        panic!("not a catalog");
    };
    assert_eq!(types, store.types());
    let root = store.root("items").expect("the root");
    assert_eq!(roots, vec![("items".to_string(), root.addr, root.type_id)]);

    let Response::Stats {
        snapshot_lsn: s,
        page_count: p,
        blocks: b,
        ..
    } = c.ask(&Request::Stats)
    else {
        panic!("not stats");
    };
    assert_eq!((s, p, b), (snapshot_lsn, page_count, store.stats().blocks));
    c.send_raw(&Request::Bye.encode());
    c.expect_closed();
}

#[test]
fn the_snapshot_moves_only_on_refresh() {
    let (_dir, path) = fixture(200);
    let server = start(options(&[("items", &path)]));
    let before = local(&path);
    let (mut c, welcome) = Client::welcomed(server.addr, "items");
    let Response::Welcome { snapshot_lsn, .. } = welcome else {
        unreachable!()
    };
    let root_before = before.root("items").expect("root").addr;

    // A writer beside the server commits more.
    let mut db = Db::open(&path, Options::default()).expect("opened for writing");
    append(&mut db, 200..400);

    // Until the client refreshes it reads its snapshot: the old root and
    // the old images.
    let Response::Catalog { roots, .. } = c.ask(&Request::Catalog) else {
        panic!("not a catalog");
    };
    assert_eq!(roots[0].1, root_before);
    let head = before.blocks().last().expect("a block").0;
    assert_eq!(
        c.ask(&Request::ReadBlock { head }),
        Response::Block(before.read_block(head).expect("read"))
    );

    let Response::Refreshed { page_count, change } = c.ask(&Request::Refresh) else {
        panic!("not refreshed");
    };
    // The writer's open installed nothing (the database was closed
    // cleanly) and no checkpoint ran since: the pages changed are listed.
    let Change::Pages {
        lsn,
        pages,
        catalog,
    } = change
    else {
        panic!("{change:?}");
    };
    assert!(!pages.is_empty());
    assert!(
        catalog,
        "the root moved: the catalog is to be fetched again"
    );
    assert!(lsn > snapshot_lsn);
    let after = local(&path);
    assert_eq!(page_count, after.page_count());
    let Response::Catalog { roots, .. } = c.ask(&Request::Catalog) else {
        panic!("not a catalog");
    };
    let root_after = after.root("items").expect("root").addr;
    assert_ne!(root_after, root_before);
    assert_eq!(roots[0].1, root_after);
    for (head, _) in after.blocks() {
        assert_eq!(
            c.ask(&Request::ReadBlock { head }),
            Response::Block(after.read_block(head).expect("read")),
            "block {head} after the refresh"
        );
    }
    // Nothing more committed: unchanged.
    assert!(matches!(
        c.ask(&Request::Refresh),
        Response::Refreshed {
            change: Change::Unchanged,
            ..
        }
    ));
    db.close().expect("closed");
}

#[test]
fn refused_requests_leave_the_connection_open() {
    let (_dir, path) = fixture(2000);
    let mut opts = options(&[("items", &path)]);
    // Room for answers of 4 pages of 4 KiB.
    opts.max_buffered = 2 * 4 * 4096;
    let server = start(opts);
    let store = local(&path);
    let (mut c, _) = Client::welcomed(server.addr, "items");

    let not_a_head = store
        .blocks()
        .into_iter()
        .find(|&(_, n)| n > 1)
        .map(|(h, _)| h + 1)
        .unwrap_or(u64::MAX);
    let (code, m) = error_of(c.ask(&Request::ReadBlock { head: not_a_head }));
    assert_eq!(code, ErrorCode::Invalid, "{m}");
    assert!(
        m.contains(&format!("page {not_a_head} does not start")),
        "{m}"
    );

    let (code, m) = error_of(c.ask(&Request::ReadCluster {
        from: 0,
        pages: u64::MAX,
    }));
    assert_eq!(code, ErrorCode::TooLarge, "{m}");
    assert!(m.contains("ask for fewer pages"), "{m}");

    // A range past the end of the file is empty, and answered at once.
    assert_eq!(
        c.ask(&Request::ReadCluster {
            from: u64::MAX - 3,
            pages: u64::MAX,
        }),
        Response::Cluster {
            blocks: vec![],
            data: vec![]
        }
    );
    assert_eq!(
        c.ask(&Request::Blocks {
            from: store.page_count(),
            pages: u64::MAX
        }),
        Response::Blocks(vec![])
    );

    // And the connection still reads.
    let (head, _) = store.blocks()[0];
    assert_eq!(
        c.ask(&Request::ReadBlock { head }),
        Response::Block(store.read_block(head).expect("read"))
    );
}

#[test]
fn one_server_serves_several_databases() {
    let (_d1, a) = fixture(10);
    let (_d2, b) = fixture(500);
    let server = start(options(&[("a", &a), ("b", &b)]));
    let (_, wa) = Client::welcomed(server.addr, "a");
    let (_, wb) = Client::welcomed(server.addr, "b");
    let pages = |w: &Response| match w {
        Response::Welcome { page_count, .. } => *page_count,
        other => panic!("{other:?}"),
    };
    assert_eq!(pages(&wa), local(&a).page_count());
    assert_eq!(pages(&wb), local(&b).page_count());
    assert_ne!(pages(&wa), pages(&wb));
}

/// A refresh whose list of changed pages would be over the answer limit
/// says that anything may have changed instead: the snapshot has moved,
/// and a refusal would leave the client holding pages that changed.
#[test]
fn a_long_list_of_changed_pages_becomes_everything() {
    let (_dir, path) = fixture(10);
    let mut opts = options(&[("items", &path)]);
    opts.max_buffered = 64; // answers of at most 32 bytes of images
    let server = start(opts);
    let (mut c, _) = Client::welcomed(server.addr, "items");
    let mut db = Db::open(&path, Options::default()).expect("opened for writing");
    append(&mut db, 10..400);
    match c.ask(&Request::Refresh) {
        Response::Refreshed {
            change: Change::Everything { lsn },
            ..
        } => assert!(lsn > 0),
        other => panic!("{other:?}"),
    }
    db.close().expect("closed");
}
