//! `amber gc PATH` and `amber bench churn`: a database with garbage is
//! collected (what its roots reach kept, the rest reclaimed, the file
//! smaller, deep verification clean), a locked one refused on one line, and
//! the churn benchmark writes the JSON keys.

use amber::{Db, Options, PBytes, PRef, PVec, Persistent};

mod common;
use common::{amber, assert_error, s, serial};

#[derive(Persistent)]
#[repr(C)]
struct Doc {
    id: u64,
    text: PBytes,
}

#[derive(Persistent)]
#[repr(C)]
struct Shelf {
    docs: PVec<PRef<Doc>>,
}

#[test]
fn gc_collects_a_database_with_garbage() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let mut db = Db::create(&path, Options::default()).expect("create");
        let mut tx = db.begin().expect("begin");
        let shelf = tx.alloc(Shelf { docs: PVec::new() }).expect("alloc");
        for id in 0..2000 {
            let d = tx
                .alloc(Doc {
                    id,
                    text: PBytes::new(),
                })
                .expect("alloc");
            tx.set_bytes(d, |d| &mut d.text, &[id as u8; 100])
                .expect("text");
            // One in ten is kept; the others are unreachable.
            if id % 10 == 0 {
                tx.push(shelf, |s| &mut s.docs, d).expect("push");
            }
        }
        tx.set_root("shelf", shelf).expect("root");
        tx.commit().expect("commit");
        db.close().expect("close");
    }
    let before = std::fs::metadata(&path).expect("meta").len();
    let r = amber(&["gc", s(&path)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("gc: kept 402 live object(s)"),
        "{}",
        r.stdout
    );
    // 1,800 documents and their texts, and the shelf's outgrown buffers.
    let reclaimed: u64 = r
        .stdout
        .split("reclaimed ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!((3600..3620).contains(&reclaimed), "{}", r.stdout);
    let after = std::fs::metadata(&path).expect("meta").len();
    assert!(after * 3 < before, "{before} -> {after}");
    let v = amber(&["verify", "--deep", s(&path)]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
    let db = Db::open(&path, Options::default()).expect("open");
    let shelf: PRef<Shelf> = db.root("shelf").expect("root").expect("shelf");
    let docs = db.slice(&db.get(shelf).docs);
    assert_eq!(docs.len(), 200);
    for (i, &d) in docs.iter().enumerate() {
        let id = i as u64 * 10;
        assert_eq!(db.get(d).id, id);
        assert_eq!(db.bytes(&db.get(d).text), &[id as u8; 100][..]);
    }
    // Open elsewhere: refused on one line, the file untouched.
    let r = amber(&["gc", s(&path)]);
    assert_error(&r, "in use");
    drop(db);
}

#[test]
fn churn_bench_writes_its_keys() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("churn.json");
    let r = amber(&[
        "bench",
        "churn",
        "--objects",
        "600",
        "--rounds",
        "3",
        "--dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    for k in [
        "size_after_collect_vs_first_round",
        "empty_after_collect_vs_new",
    ] {
        let x = v[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {v}"));
        assert!(x > 0.0 && x.is_finite(), "{k} = {x}");
    }
    assert!(
        v["empty_after_collect_vs_new"].as_f64().unwrap_or(9.0) <= 2.0,
        "{v}"
    );
}
