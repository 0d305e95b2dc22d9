//! `amber bench oo1` end to end: the harness builds every engine's database,
//! runs every job in child processes (`amber bench oo1 __oo1-child`), and
//! writes the JSON contract (with every engine's schema and durability, and
//! the amortized bytes and time per commit) and the SVG. Without the
//! `compare` feature only Amber's engines run, and the output says how to
//! get the others.

mod measured;

use std::process::Command;

const AMBER: [&str; 4] = [
    "amber",
    "amber-sigsegv",
    "amber-mapped-unverified",
    "amber-mapped",
];
const COMPARE: [&str; 8] = [
    "memory",
    "snapshot",
    "sqlite",
    "lmdb",
    "lmdb-inline",
    "redb",
    "redb-inline",
    "postgres",
];

/// The engines the run should have measured (see [`measured::engines`]).
fn engines(json: &serde_json::Value) -> Vec<&'static str> {
    let mut all = AMBER.to_vec();
    if cfg!(feature = "compare") {
        all.extend(COMPARE);
    }
    measured::engines(json, all)
}

#[test]
fn small_run_writes_the_json_contract_and_the_plot() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json_path = dir.path().join("oo1.json");
    let svg_path = dir.path().join("oo1.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args([
            "bench", "oo1", "--parts", "1000", "--seed", "3", "--rounds", "2",
        ])
        .arg("--dir")
        .arg(dir.path().join("dbs"))
        .arg("--json")
        .arg(&json_path)
        .arg("--plot")
        .arg(&svg_path)
        .output()
        .expect("run amber bench oo1");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "amber bench oo1 failed\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("traversal warm"), "{stdout}");
    assert!(stdout.contains("log bytes per commit"), "{stdout}");
    assert!(stdout.contains("amortized per commit"), "{stdout}");
    assert!(stdout.contains("inline objects"), "{stdout}");
    assert_eq!(
        stdout.contains("--features compare"),
        !cfg!(feature = "compare"),
        "{stdout}"
    );

    let text = std::fs::read_to_string(&json_path).expect("JSON written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["benchmark"], "oo1");
    assert_eq!(json["parts"], 1000);
    assert_eq!(json["seed"], 3);
    assert_eq!(json["rounds"], 2);
    assert_eq!(json["cold_cache"], "os-cached");
    assert_eq!(json["answers_match"], true, "{}", json["problems"]);
    assert!(
        json["locality"]["rule"]
            .as_str()
            .is_some_and(|r| r.contains("clamp"))
    );
    assert!(json["kernel"].as_str().is_some_and(|k| !k.is_empty()));
    assert!(json["machine"]["cores"].as_u64().is_some_and(|c| c >= 1));
    let engines = engines(&json);
    let results = json["results"].as_array().expect("results");
    // 4 operations and 7 update probabilities × 3 phases, plus 3 open rows.
    assert_eq!(results.len(), engines.len() * ((4 + 7) * 3 + 3));
    for row in results {
        let engine = row["engine"].as_str().expect("engine");
        assert!(engines.contains(&engine), "{engine}");
        let op = row["op"].as_str().expect("op");
        assert!(["lookup", "traversal", "reverse", "insert", "update", "open"].contains(&op));
        assert!(["cold", "warm", "hot"].contains(&row["phase"].as_str().expect("phase")));
        assert!(row["ms"].as_f64().is_some_and(|ms| ms >= 0.0));
        // Each cell is the median of its rounds (of two: their mean).
        let rounds: Vec<f64> = row["ms_rounds"]
            .as_array()
            .expect("ms_rounds")
            .iter()
            .map(|v| v.as_f64().expect("a time"))
            .collect();
        assert_eq!(rounds.len(), 2, "{row}");
        let ms = row["ms"].as_f64().expect("ms");
        assert!(
            (ms - (rounds[0] + rounds[1]) / 2.0).abs() <= 1e-9 * ms.max(1.0),
            "{row}"
        );
        assert!(row["count"].as_u64().is_some());
        assert_eq!(row.get("p").is_some(), op == "update", "{row}");
        if op == "insert" || op == "update" {
            assert!(row["bytes_written"].as_u64().is_some(), "{row}");
            // Amber's log and PostgreSQL's WAL count themselves.
            assert_eq!(
                row["log_bytes"].as_u64().is_some(),
                AMBER.contains(&engine) || engine == "postgres",
                "{row}"
            );
        }
    }
    let engine_rows = json["engines"].as_array().expect("engines");
    assert_eq!(engine_rows.len(), engines.len());
    for e in engine_rows {
        assert!(e["peak_rss_kib"].as_u64().is_some_and(|k| k > 0), "{e}");
        // Every engine names its schema, its durability and its installation.
        for key in ["schema", "durability", "install"] {
            assert!(e[key].as_str().is_some_and(|v| !v.is_empty()), "{key}: {e}");
        }
        let name = e["name"].as_str().expect("name");
        let schema = e["schema"].as_str().expect("schema");
        let kind = match name {
            "sqlite" | "lmdb" | "redb" | "postgres" => "normalised",
            _ => "inline",
        };
        assert!(schema.starts_with(kind), "{name}: {schema}");
        let durability = e["durability"].as_str().expect("durability");
        assert_eq!(
            name == "memory",
            durability.starts_with("none"),
            "{name}: {durability}"
        );
    }

    // Amortized figures: one row per engine and committing job (insert and
    // the 7 update probabilities), each over the job's 20 commits.
    let amortized = json["amortized"].as_array().expect("amortized");
    assert_eq!(amortized.len(), engines.len() * (1 + 7));
    for row in amortized {
        let engine = row["engine"].as_str().expect("engine");
        let op = row["op"].as_str().expect("op");
        assert!(op == "insert" || op == "update", "{row}");
        assert_eq!(row["commits"], 20, "{row}");
        assert!(
            row["amortized_ms_per_commit"]
                .as_f64()
                .is_some_and(|ms| ms > 0.0),
            "{row}"
        );
        assert!(row["install_ms"].as_f64().is_some(), "{row}");
        assert_eq!(
            row["amortized_ms_per_commit_rounds"]
                .as_array()
                .map(Vec::len),
            Some(2),
            "{row}"
        );
        let bytes = row["amortized_bytes_per_commit"]
            .as_u64()
            .unwrap_or_else(|| panic!("amortized_bytes_per_commit: {row}"));
        // Memory never writes; every other engine writes when something
        // changed (inserts, updates with p > 0).
        if engine == "memory" {
            assert_eq!(bytes, 0, "{row}");
        } else if op == "insert" || row["p"].as_f64().is_some_and(|p| p > 0.0) {
            assert!(bytes > 0, "{row}");
        }
    }

    let svg = std::fs::read_to_string(&svg_path).expect("SVG written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("update p=0.5"));
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(["bench", "oo1", "--engines", "oracle"])
        .output()
        .expect("run amber bench oo1");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("unknown engine \"oracle\""), "{stderr}");
    assert!(stderr.contains("amber, amber-sigsegv"), "{stderr}");
    if cfg!(feature = "compare") {
        assert!(stderr.contains("lmdb-inline") && stderr.contains("redb-inline"));
    }
    assert_eq!(
        stderr.contains("--features compare"),
        !cfg!(feature = "compare"),
        "{stderr}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(["bench", "oo1", "--parts", "lots"])
        .output()
        .expect("run amber bench oo1");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--parts"));
}

#[test]
fn help_names_the_options() {
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(["bench", "oo1", "--help"])
        .output()
        .expect("run amber bench oo1 --help");
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("--cache-mib"), "{stdout}");
}

/// The comparison engines are available only with the feature.
#[cfg(feature = "compare")]
#[test]
fn compare_engines_run_when_built_in() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args([
            "bench",
            "oo1",
            "--parts",
            "500",
            "--engines",
            "lmdb,amber",
            "--ops",
            "lookup",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run amber bench oo1");
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("lmdb") && stdout.contains("amber"),
        "{stdout}"
    );
}
