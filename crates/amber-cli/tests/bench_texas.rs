//! `amber bench texas` end to end on a tiny configuration: every granularity
//! and both fetch windows in child processes (`amber bench texas
//! __texas-child`), the JSON rows' keys, every granularity's answers and
//! page counts agreeing, the pointer counts' shape, the plot; and clear
//! errors for bad arguments.

use std::process::Command;

/// The paper's three granularities, all-lazy and the diagnostic
/// all-raw-try-get.
const GRANULARITIES: [&str; 5] = [
    "all-raw",
    "smart-index",
    "all-smart",
    "all-lazy",
    "all-raw-try-get",
];

#[test]
fn every_granularity_writes_rows_that_agree() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json_path = dir.path().join("texas.json");
    let svg_path = dir.path().join("texas.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args([
            "bench", "texas", "--parts", "2000", "--rounds", "2", "--warm", "3", "--hot", "2",
        ])
        .arg("--dir")
        .arg(dir.path().join("dbs"))
        .arg("--json")
        .arg(&json_path)
        .arg("--plot")
        .arg(&svg_path)
        .output()
        .expect("run amber bench texas");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("The paper's crossing"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("JSON written"))
            .expect("valid JSON");
    let rows = json["rows"].as_array().expect("rows");
    // 5 granularities × 2 fetch windows × (1 + 3 + 2) traversals.
    assert_eq!(rows.len(), 5 * 2 * 6);
    for row in rows {
        for key in [
            "granularity",
            "parts",
            "traversal",
            "cpu_ms",
            "faults",
            "pages_reserved",
            "pointers_swizzled",
            "fetch",
            "phase",
            "count",
        ] {
            assert!(row.get(key).is_some(), "row without {key}: {row}");
        }
        assert!(GRANULARITIES.contains(&row["granularity"].as_str().expect("name")));
        assert_eq!(row["parts"], 2000);
        assert_eq!(row["count"], 3280, "{row}");
        assert!(row["cpu_ms"].as_f64().expect("cpu_ms") >= 0.0);
    }
    let of = |g: &str, fetch: &str| -> Vec<&serde_json::Value> {
        rows.iter()
            .filter(|r| r["granularity"] == g && r["fetch"] == fetch)
            .collect()
    };
    let raw = of("all-raw", "1");
    for g in GRANULARITIES {
        for fetch in ["1", "adaptive"] {
            let set = of(g, fetch);
            assert_eq!(set.len(), 6, "{g} {fetch}");
            for (i, (r, w)) in set.iter().zip(&raw).enumerate() {
                assert_eq!(r["traversal"], i + 1);
                // Same answers, and (same layout, one page per fault) the
                // same pages faulted in.
                assert_eq!(
                    r["checksum"],
                    w["checksum"],
                    "{g} {fetch} traversal {}",
                    i + 1
                );
                if fetch == "1" {
                    assert_eq!(r["faults"], w["faults"], "{g} traversal {}", i + 1);
                }
            }
        }
    }
    // One page per fault: the cold traversal swizzles pointers in all-raw,
    // fewer in smart-index (its index nodes hold smart pointers), none in
    // all-smart; hot traversals fault nothing.
    let swizzled = |g: &str, i: usize| of(g, "1")[i]["pointers_swizzled"].as_u64();
    let cold_raw = swizzled("all-raw", 0).expect("all-raw's count");
    let cold_mixed = swizzled("smart-index", 0).expect("smart-index's count");
    assert!(
        cold_raw > cold_mixed && cold_mixed > 0,
        "{cold_raw} {cold_mixed}"
    );
    assert_eq!(swizzled("all-smart", 0), Some(0));
    // The same database as all-raw, its missing pages fetched by the
    // dereferences: the same pages, the same pointers swizzled.
    assert_eq!(swizzled("all-raw-try-get", 0), Some(cold_raw));
    for g in GRANULARITIES {
        let set = of(g, "1");
        assert_eq!(set[5]["faults"], 0, "{g}: a hot traversal faulted");
        assert_eq!(set[0]["phase"], "cold");
        assert_eq!(set[5]["phase"], "hot");
        // The adaptive window fetches neighbours: no count is attributed
        // (but to all-lazy's rewrites, which are counted directly).
        let adaptive = of(g, "adaptive")[0]["pointers_swizzled"].is_null();
        assert_eq!(adaptive, g != "all-lazy", "{g}");
    }
    // All-lazy rewrites fields only as it follows them: some in the cold
    // traversal (targets already fetched by it), at most one per pointer
    // followed (3,280 parts visited, the lookup's few), none in the second
    // hot traversal (the first rewrote whatever the last warm one left, its
    // targets all resident by then).
    for fetch in ["1", "adaptive"] {
        let lazy = of("all-lazy", fetch);
        let n = |i: usize| {
            lazy[i]["pointers_swizzled"]
                .as_u64()
                .expect("all-lazy's count")
        };
        assert!(n(0) > 0 && n(0) < 3_290, "{fetch}: {}", n(0));
        assert_eq!(n(5), 0, "{fetch}: the second hot traversal rewrote fields");
    }
    let crossings = json["crossings"].as_array().expect("crossings");
    assert_eq!(crossings.len(), 2);
    let svg = std::fs::read_to_string(&svg_path).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.contains("all-smart") && svg.contains("all-lazy"));
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_amber"))
            .args(["bench", "texas"])
            .args(args)
            .output()
            .expect("run amber bench texas");
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--granularities", "all-lazier"]);
    assert!(
        e.contains("unknown granularity") && e.contains("all-lazy"),
        "{e}"
    );
    let e = run(&["--fetch", "8"]);
    assert!(e.contains("unknown fetch window"), "{e}");
    let e = run(&["--parts", "20", "--rounds", "1"]);
    assert!(e.contains("at least 200 parts"), "{e}");
}
