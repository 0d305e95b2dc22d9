//! `amber bench olsim` end to end, in a very short form: it refuses bad
//! parameters, runs every experiment (the paper's, the age weight, the
//! present-day devices' saturation sweeps) and writes the JSON keys of
//! issue 14.

mod common;

use common::{amber, assert_error, s, serial};

#[test]
fn olsim_bench_runs_and_writes_json() {
    let _serial = serial();
    assert_error(
        &amber(&["bench", "olsim", "--write-trigger", "0"]),
        "--write-trigger",
    );
    assert_error(
        &amber(&["bench", "olsim", "--age-weights", "0,-1"]),
        "age weights",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("olsim.json");
    let r = amber(&[
        "bench",
        "olsim",
        "--seeds",
        "1",
        "--warmup-s",
        "1",
        "--measure-s",
        "2",
        "--validation-requests",
        "200",
        "--age-weights",
        "0,1e-4",
        "--plot-dir",
        s(dir.path()),
        "--json",
        s(&json),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for section in [
        "Age weight",
        "Saturation sweep",
        "Device time per fetch read",
    ] {
        assert!(r.stdout.contains(section), "{section}: {}", r.stdout);
    }
    assert!(dir.path().join("olsim-7k320-saturation.svg").is_file());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    assert_eq!(v["benchmark"], "olsim");
    let row = &v["servers"][0];
    for key in [
        "server",
        "clients",
        "fetch_ratio",
        "log_pages",
        "tx_per_s",
        "tx_ci",
        "i_abs",
        "icost_ms",
        "idsk",
        "wcost_ms",
        "wdsk",
    ] {
        assert!(row.get(key).is_some(), "servers[0] lacks {key}: {row}");
    }
    let ages = v["age_weight"].as_array().expect("age_weight rows");
    assert_eq!(ages.len(), 3, "two weights and the absorbing server");
    for key in [
        "age_weight",
        "tx_per_s",
        "wait_p50_ms",
        "wait_p99_ms",
        "wait_max_ms",
    ] {
        assert!(ages[0].get(key).is_some(), "age_weight[0] lacks {key}");
    }
    let sat = &v["devices"][0]["saturation"];
    assert!(
        sat["clients"].as_array().is_some_and(|c| c.len() >= 2),
        "{sat}"
    );
    for key in ["saturated_at", "table_clients", "breakeven"] {
        assert!(sat.get(key).is_some(), "saturation lacks {key}");
    }
    assert!(sat["servers"][0].get("device_util").is_some());
    assert!(v["paper"].as_array().is_some_and(|p| p.len() == 8));
}
