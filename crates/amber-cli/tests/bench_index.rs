//! `amber bench index` end to end, small: it runs, prints its table, and
//! writes the JSON keys of issue 12 (`lookup_vs_redb`, `insert_vs_redb`,
//! `insert_tx_vs_redb`): numbers when redb is built in (`--features
//! compare`), null otherwise, with the output saying how to get it.

mod common;

use common::{amber, assert_error, s, serial};

#[test]
fn index_bench_runs_and_writes_json() {
    let _serial = serial();
    assert_error(&amber(&["bench", "index", "--keys", "x"]), "--keys");
    assert_error(
        &amber(&["bench", "index", "--runs", "0"]),
        "must be positive",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("index.json");
    let r = amber(&[
        "bench",
        "index",
        "--keys",
        "3000",
        "--tx-inserts",
        "10",
        "--lookups",
        "500",
        "--runs",
        "2",
        "--dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("lookup_vs_redb"), "{}", r.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    assert_eq!(v["keys"], 3000);
    assert!(v["amber"]["lookup_ms"]["median"].as_f64().is_some(), "{v}");
    assert!(v["amber"]["insert_ms"].as_f64().is_some(), "{v}");
    // One fsync per single-insert commit.
    assert_eq!(v["amber_commit"]["log_syncs"], 1.0, "{v}");
    for k in ["lookup_vs_redb", "insert_vs_redb", "insert_tx_vs_redb"] {
        if cfg!(feature = "compare") {
            assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {v}");
        } else {
            assert!(v[k].is_null(), "{k}: {v}");
        }
    }
    if !cfg!(feature = "compare") {
        assert!(r.stdout.contains("--features compare"), "{}", r.stdout);
    }
}
