//! The whole harness, end to end: the `oo1` binary builds every engine's
//! database, runs every job in child processes, and writes the JSON contract
//! and the SVG.

use std::process::Command;

#[test]
fn small_run_writes_the_json_contract_and_the_plot() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json_path = dir.path().join("oo1.json");
    let svg_path = dir.path().join("oo1.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_oo1"))
        .args(["--parts", "1000", "--seed", "3", "--dir"])
        .arg(dir.path().join("dbs"))
        .arg("--json")
        .arg(&json_path)
        .arg("--plot")
        .arg(&svg_path)
        .output()
        .expect("run oo1");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "oo1 failed\n{stdout}\n{stderr}");
    assert!(stdout.contains("traversal warm"), "{stdout}");

    let text = std::fs::read_to_string(&json_path).expect("JSON written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["benchmark"], "oo1");
    assert_eq!(json["parts"], 1000);
    assert_eq!(json["seed"], 3);
    assert_eq!(json["cold_cache"], "os-cached");
    assert_eq!(json["answers_match"], true);
    assert!(
        json["locality"]["rule"]
            .as_str()
            .is_some_and(|r| r.contains("clamp"))
    );
    assert!(json["kernel"].as_str().is_some_and(|k| !k.is_empty()));
    assert!(json["machine"]["cores"].as_u64().is_some_and(|c| c >= 1));
    let results = json["results"].as_array().expect("results");
    let engines = ["memory", "snapshot", "sqlite", "lmdb", "redb"];
    // 4 operations and 7 update probabilities × 3 phases, plus 3 open rows.
    assert_eq!(results.len(), engines.len() * ((4 + 7) * 3 + 3));
    for row in results {
        assert!(engines.contains(&row["engine"].as_str().expect("engine")));
        let op = row["op"].as_str().expect("op");
        assert!(["lookup", "traversal", "reverse", "insert", "update", "open"].contains(&op));
        assert!(["cold", "warm", "hot"].contains(&row["phase"].as_str().expect("phase")));
        assert!(row["ms"].as_f64().is_some_and(|ms| ms >= 0.0));
        assert!(row["count"].as_u64().is_some());
        assert_eq!(row.get("p").is_some(), op == "update", "{row}");
        if op == "insert" || op == "update" {
            assert!(row["bytes_written"].as_u64().is_some(), "{row}");
        }
    }
    let engine_rows = json["engines"].as_array().expect("engines");
    assert!(
        engine_rows
            .iter()
            .all(|e| e["peak_rss_kib"].as_u64().is_some_and(|k| k > 0))
    );

    let svg = std::fs::read_to_string(&svg_path).expect("SVG written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("update p=0.5"));
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let output = Command::new(env!("CARGO_BIN_EXE_oo1"))
        .args(["--engines", "oracle"])
        .output()
        .expect("run oo1");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown engine \"oracle\""), "{stderr}");
}
