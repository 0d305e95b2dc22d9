//! The copy architecture (`Db::copy_cache`, docs/design.md §4.14) over a
//! server's database: a client's object cache copies objects out of the
//! pages the server ships, follows pointers through the cache, and its
//! commit writes the modified ranges back through a transaction at the
//! server; another client sees the updates, and what that client commits
//! is what the first client's cache reads in its next transaction (a
//! `begin` at a moved snapshot empties the cache).

mod common;

use amber::{Caching, CopyOptions, Db, Options, PRef, Swizzle, View};
use common::{Item, start, write_db, writing};

const N: u64 = 200;

fn connect(addr: std::net::SocketAddr) -> Db {
    common::connect_db(addr, "items")
}

/// The ids of the list from the root, through `db`.
fn ids(db: &Db) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at: Option<PRef<Item>> = db.root("items").expect("root");
    while let Some(p) = at {
        let item = db.get(p);
        out.push(item.id);
        at = item.next;
    }
    out
}

#[test]
fn a_copy_cache_over_a_server() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("items.amber");
    write_db(&path, N);
    let server = start(writing(&[("items", &path)]));
    let mut a = connect(server.addr);
    let mut b = connect(server.addr);
    let head: PRef<Item> = a.root("items").expect("root").expect("a list");
    let before = ids(&a);
    assert_eq!(before.len() as u64, N);
    for caching in [Caching::Object, Caching::Page] {
        let opts = CopyOptions {
            caching,
            capacity_bytes: 40 * 64,
            swizzle: Swizzle::Lazy,
        };
        let mut cache = a.copy_cache(opts);
        // Through the cache: every item read by following `next`, its id
        // raised by 1,000 (a cache of about 40 items: modified copies are
        // written back as they are evicted).
        let mut tx = cache.begin().expect("begun");
        let mut at = Some(tx.fetch_ref(head).expect("fetched"));
        let mut seen = Vec::new();
        while let Some(o) = at {
            seen.push(tx.get(o).expect("read").id);
            *tx.field_mut(o, |i| &i.id).expect("field") += 1000;
            at = tx.follow(o, |i: &Item| &i.next).expect("followed");
        }
        assert_eq!(
            seen,
            before
                .iter()
                .map(|i| i + 2000 * (caching == Caching::Page) as u64)
                .collect::<Vec<_>>()
        );
        tx.commit().expect("committed through the server");
        assert!(cache.stats().evicted_dirty > 0, "{:?}", cache.stats());
        // Another client sees the updates, and adds its own.
        b.refresh().expect("refreshed");
        let shift = 1000 + 2000 * (caching == Caching::Page) as u64;
        let seen_b = ids(&b);
        assert_eq!(seen_b, before.iter().map(|i| i + shift).collect::<Vec<_>>());
        let mut tx = b.begin().expect("begun");
        let mut at: Option<PRef<Item>> = tx.root("items").expect("root");
        while let Some(p) = at {
            *tx.field_mut(p, |i| &i.id) += 1000;
            at = tx.get(p).next;
        }
        tx.commit().expect("committed");
        // The first client's cache reads them in its next transaction.
        let mut tx = cache.begin().expect("begun");
        let mut at = Some(tx.fetch_ref(head).expect("fetched"));
        let mut again = Vec::new();
        while let Some(o) = at {
            again.push(tx.get(o).expect("read").id);
            at = tx.follow(o, |i: &Item| &i.next).expect("followed");
        }
        assert_eq!(
            again,
            before.iter().map(|i| i + shift + 1000).collect::<Vec<_>>()
        );
        tx.commit().expect("committed");
    }
    drop((a, b));
    server.shutdown();
    let db = Db::open(&path, Options::default()).expect("opened locally");
    assert_eq!(
        ids(&db),
        before.iter().map(|i| i + 4000).collect::<Vec<_>>()
    );
}
