//! `amber bench epvm` end to end on a tiny configuration: every version and
//! every experiment in child processes (`amber bench epvm __epvm-child`),
//! the JSON rows' keys, every version agreeing on what it counted in every
//! cell (the run itself fails on a wrong answer; the copy architecture's
//! versions on a pool of 4 pages, so that their pages are read again), the
//! tables; and clear
//! errors for bad arguments.

use std::collections::HashMap;
use std::process::Command;

/// The versions over the baselines' raw records (no Figure 11 rows).
const RAW: [&str; 3] = ["cesm", "epvm1", "epvm1-no"];

const VERSIONS: [&str; 10] = [
    "cesm",
    "epvm1",
    "epvm1-no",
    "oc",
    "oc-no",
    "oc-eager",
    "oc-small-pool",
    "pc",
    "pc-no",
    "mapped",
];

#[test]
fn every_version_answers_every_experiment_alike() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json_path = dir.path().join("epvm.json");
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args([
            "bench",
            "epvm",
            "--parts",
            "2000",
            "--rounds",
            "1",
            "--ps",
            "0,1",
            "--sweep",
            "0,3",
            "--sweep-ps",
            "0,0.01",
            "--pool-pages",
            "16",
        ])
        .arg("--dir")
        .arg(dir.path().join("dbs"))
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("run amber bench epvm");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for table in [
        "Table 1",
        "Table 2",
        "Table 3",
        "Table 4",
        "Figure 7",
        "Figure 8",
        "Figure 9",
        "Figure 10",
        "Figure 11",
    ] {
        assert!(stdout.contains(table), "no {table}:\n{stdout}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("JSON written"))
            .expect("valid JSON");
    assert_eq!(json["pool_pages"], 16);
    let rows = json["rows"].as_array().expect("rows");
    // Per version: single (cold, warm, hot, hot with random), per-iteration
    // (cold, warm, hot), update (2 p × 2 transaction kinds), sweep (2 p × 2
    // N); Figure 11's five points for the versions over Amber's objects.
    let amber_versions = VERSIONS.len() - RAW.len();
    assert_eq!(
        rows.len(),
        VERSIONS.len() * (4 + 3 + 4 + 4) + amber_versions * 5
    );
    let mut cells: HashMap<String, Vec<(String, u64, u64)>> = HashMap::new();
    for row in rows {
        for key in [
            "version", "parts", "op", "phase", "ms", "count", "tx", "changed",
        ] {
            assert!(row.get(key).is_some(), "row without {key}: {row}");
        }
        let version = row["version"].as_str().expect("version").to_string();
        assert!(VERSIONS.contains(&version.as_str()), "{row}");
        assert!(row["ms"].as_f64().expect("ms") > 0.0, "{row}");
        let phase = row["phase"].as_str().expect("phase");
        if matches!(phase, "total" | "sweep") {
            assert!(
                row.get("p").is_some() && row.get("iterations").is_some(),
                "{row}"
            );
        }
        let key = format!(
            "{} {} {} {} {} {} {}",
            row["op"],
            row["tx"],
            row["phase"],
            row["parts"],
            row["p"],
            row["iterations"],
            row["ints"]
        );
        cells.entry(key).or_default().push((
            version,
            row["count"].as_u64().expect("count"),
            row["changed"].as_u64().expect("changed"),
        ));
    }
    for (cell, versions) in &cells {
        let all = if cell.starts_with("\"fig11\"") {
            amber_versions
        } else {
            VERSIONS.len()
        };
        assert_eq!(versions.len(), all, "{cell}: {versions:?}");
        assert!(
            versions
                .iter()
                .all(|v| (v.1, v.2) == (versions[0].1, versions[0].2)),
            "{cell}: the versions counted differently: {versions:?}"
        );
    }
    // The update runs at p = 1 change every visit; a cold traversal visits
    // 3,280 parts.
    let update = rows
        .iter()
        .find(|r| r["op"] == "update" && r["phase"] == "total" && r["p"] == 1.0)
        .expect("an update row at p = 1");
    assert_eq!(update["changed"], update["count"]);
    let cold = rows
        .iter()
        .find(|r| r["phase"] == "cold")
        .expect("a cold row");
    assert_eq!(cold["count"], 3280);
    // The copy versions count the objects they copy in; eager swizzling
    // copies the targets of every connection of every part used, lazy
    // only the parts visited (the paper's Figure 4b against 4c).
    let copied = |v: &str| {
        rows.iter()
            .find(|r| r["version"] == v && r["tx"] == "single" && r["phase"] == "cold")
            .and_then(|r| r["copied"].as_u64())
    };
    for v in ["oc", "oc-no", "oc-eager", "oc-small-pool", "pc", "pc-no"] {
        assert!(copied(v).is_some_and(|c| c > 0), "{v}: no copies counted");
    }
    for v in ["cesm", "epvm1", "mapped"] {
        assert_eq!(copied(v), None, "{v} has no object cache");
    }
    let (eager, lazy) = (copied("oc-eager").unwrap_or(0), copied("oc").unwrap_or(0));
    assert!(eager > lazy, "oc-eager copied {eager}, oc {lazy}");
    assert!(stdout.contains("oc-eager copied"), "{stdout}");
    // Figure 11: every update changes more of the array at each point, so
    // every version logs more at 100% than at 11%, and reports it.
    let logged = |v: &str, ints: u64| {
        rows.iter()
            .find(|r| r["version"] == v && r["op"] == "fig11" && r["ints"] == ints)
            .and_then(|r| r["log_bytes"].as_u64())
    };
    for v in VERSIONS.iter().filter(|v| !RAW.contains(v)) {
        let (a, b) = (logged(v, 2).unwrap_or(0), logged(v, 19).unwrap_or(0));
        assert!(a > 0 && b > a, "{v}: Figure 11 logged {a} then {b} bytes");
    }
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_amber"))
            .args(["bench", "epvm"])
            .args(args)
            .output()
            .expect("run amber bench epvm");
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--versions", "os"]);
    assert!(e.contains("unknown version"), "{e}");
    let e = run(&["--parts", "2000", "--experiments", "lookups"]);
    assert!(e.contains("unknown experiment"), "{e}");
    let e = run(&["--parts", "2000", "--rounds", "0"]);
    assert!(e.contains("--rounds"), "{e}");
}
