//! `amber bench oo7` end to end on the tiny configuration: every operation
//! on every engine built into this binary, in child processes
//! (`amber bench oo7 __oo7-child`), two rounds, the JSON contract (one row
//! per engine, operation and phase with count and checksum; bytes for the
//! committing operations; peak RSS per engine), every engine's answers
//! equal, the plot; and clear errors for bad arguments.

mod measured;

use std::collections::HashMap;
use std::process::Command;

const AMBER: [&str; 2] = ["amber", "amber-sigsegv"];
const COMPARE: [&str; 10] = [
    "memory",
    "snapshot",
    "sqlite",
    "sqlite-recursive",
    "lmdb",
    "lmdb-inline",
    "redb",
    "redb-inline",
    "postgres",
    "postgres-recursive",
];
const OPS: [&str; 23] = [
    "t1", "t2a", "t2b", "t2c", "t3a", "t3b", "t3c", "t4", "t5", "t6", "t7", "t8", "t9", "q1", "q2",
    "q3", "q4", "q5", "q6", "q7", "q8", "insert", "delete",
];
const COMMITTING: [&str; 9] = [
    "t2a", "t2b", "t2c", "t3a", "t3b", "t3c", "t5", "insert", "delete",
];

/// The engines the run should have measured (see [`measured::engines`]).
fn engines(json: &serde_json::Value) -> Vec<&'static str> {
    let mut all = AMBER.to_vec();
    if cfg!(feature = "compare") {
        all.extend(COMPARE);
    }
    measured::engines(json, all)
}

/// Runs `amber bench oo7 ARGS LAST --dir DIR/dbs --json DIR/oo7.json`
/// (`LAST`: the last argument's value, a path or a list), asserting that it
/// succeeds: its standard output and its JSON.
fn run_ok(
    args: &[&str],
    last: &std::path::Path,
    dir: &std::path::Path,
) -> (String, serde_json::Value) {
    let json_path = dir.join("oo7.json");
    let output = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(["bench", "oo7"])
        .args(args)
        .arg(last)
        .arg("--dir")
        .arg(dir.join("dbs"))
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("run amber bench oo7");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "amber bench oo7 {args:?} failed\n{stdout}\n{stderr}"
    );
    let text = std::fs::read_to_string(&json_path).expect("JSON written");
    (stdout, serde_json::from_str(&text).expect("valid JSON"))
}

#[test]
fn every_operation_on_every_engine_writes_the_json_contract() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let svg_path = dir.path().join("oo7.svg");
    let (stdout, json) = run_ok(
        &[
            "--size",
            "tiny",
            "--modules",
            "2",
            "--seed",
            "11",
            "--rounds",
            "2",
            "--warm",
            "2",
            "--hot",
            "2",
            "--plot",
        ],
        &svg_path,
        dir.path(),
    );
    assert!(stdout.contains("t1 hot"), "{stdout}");
    assert!(stdout.contains("bytes per commit"), "{stdout}");
    assert!(stdout.contains("peak RSS"), "{stdout}");
    assert_eq!(json["benchmark"], "oo7");
    assert_eq!(json["size"], "tiny");
    assert_eq!(json["modules"], 2);
    assert_eq!(json["seed"], 11);
    assert_eq!(json["problems"].as_array().map(Vec::len), Some(0));
    let engines = engines(&json);
    let names: Vec<&str> = json["engines"]
        .as_array()
        .expect("engines")
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, engines);
    for e in &engines {
        assert!(
            json["peak_rss_kib"][e].as_u64().is_some_and(|k| k > 0),
            "{e}"
        );
    }
    let results = json["results"].as_array().expect("results");
    // Every op × 3 phases, plus one open row, per engine.
    assert_eq!(results.len(), engines.len() * (OPS.len() * 3 + 1));
    let mut answers: HashMap<(String, String), (u64, u64)> = HashMap::new();
    for r in results {
        let engine = r["engine"].as_str().expect("engine");
        let op = r["op"].as_str().expect("op");
        let phase = r["phase"].as_str().expect("phase");
        assert!(r["ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{r}");
        if op == "open" {
            continue;
        }
        assert!(OPS.contains(&op), "{op}");
        let answer = (
            r["count"].as_u64().expect("count"),
            r["checksum"].as_u64().expect("checksum"),
        );
        let first = answers
            .entry((op.to_string(), phase.to_string()))
            .or_insert(answer);
        assert_eq!(*first, answer, "{engine} {op} {phase} differs");
        assert!(r["tx_per_s"].as_f64().is_some(), "{r}");
        if COMMITTING.contains(&op) && engine != "memory" {
            assert!(r["bytes_written"].as_u64().is_some_and(|b| b > 0), "{r}");
            assert!(
                r["amortized_bytes_per_commit"]
                    .as_u64()
                    .is_some_and(|b| b > 0),
                "{r}"
            );
        }
    }
    assert!(answers[&("t1".to_string(), "hot".to_string())].0 == 9 * 3 * 5);
    let svg = std::fs::read_to_string(&svg_path).expect("SVG written");
    assert!(svg.starts_with("<svg") && svg.contains("t1"));
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_amber"))
            .args(["bench", "oo7"])
            .args(args)
            .output()
            .expect("run amber bench oo7")
    };
    let out = run(&["--size", "huge"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown size"));
    let out = run(&["--size", "tiny", "--engines", "oracle"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown engine"));
    let out = run(&["--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--modules"));
}

/// `--schemes`: Amber under each update strategy on one build, the rows
/// named `amber/SCHEME` with their `scheme`, the same answers (the harness
/// checks them against the model), and logs that differ as the log
/// generators promise: whole pages largest, whole cards next, the diff
/// least; SD equal to PD (both diff).
#[test]
fn schemes_run_on_one_build_and_log_as_promised() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let args = [
        "--size",
        "tiny",
        "--rounds",
        "1",
        "--warm",
        "1",
        "--hot",
        "2",
        "--schemes",
    ];
    let (_, json) = run_ok(&args, "pd,sd-8,sl-64,wpl,auto".as_ref(), dir.path());
    assert_eq!(json["engines"].as_array().expect("engines").len(), 5);
    let log = |scheme: &str, op: &str| -> u64 {
        json["results"]
            .as_array()
            .expect("results")
            .iter()
            .find(|r| r["scheme"] == scheme && r["op"] == op && r["phase"] == "hot")
            .unwrap_or_else(|| panic!("no {scheme} {op} hot row"))["log_bytes"]
            .as_u64()
            .expect("log_bytes")
    };
    for op in ["t2a", "t2b", "t2c"] {
        let (pd, sd, sl, wpl, auto) = (
            log("pd", op),
            log("sd-8", op),
            log("sl-64", op),
            log("wpl", op),
            log("auto", op),
        );
        assert_eq!(sd, pd, "{op}: sub-page differencing logs the diff");
        assert_eq!(auto, pd, "{op}: auto diffs");
        assert!(pd < sl && sl < wpl, "{op}: pd {pd}, sl-64 {sl}, wpl {wpl}");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(["bench", "oo7", "--size", "tiny", "--schemes", "sd-128"])
        .output()
        .expect("run amber bench oo7");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("sd-128"));
}

/// Runs `amber bench oo7 --server` on the tiny database, clients 1 and 2,
/// briefly, with `args`: its standard output and its JSON.
fn run_clients(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json_path = dir.path().join("clients.json");
    let out = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(["bench", "oo7", "--server", "--size", "tiny"])
        .args(["--clients", "1,2", "--seconds", "0.3", "--warmup", "1"])
        .args(args)
        .arg("--dir")
        .arg(dir.path().join("db"))
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("run amber bench oo7 --server");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json_path).expect("the JSON");
    (stdout, serde_json::from_str(&text).expect("JSON"))
}

/// `--server --clients`: QuickStore's client-server experiment, smoke
/// size (tiny, 1 and 2 clients, under a second a cell): one row per
/// cell with exactly the fields, every client's answers checked
/// against the model (the run fails otherwise), and the pages shipped as
/// each scheme promises: ESM ships the dirty pages and log pages, REDO
/// log pages only, WPL mostly whole pages, with PD-REDO's log far smaller
/// than WPL's; T2C ships the pages T2B does (the paper's Figure 9: its
/// three more updates of each part change no other byte). `--plot`
/// writes the paper's figures, each naming every scheme.
#[test]
fn clients_through_the_server_ship_what_each_scheme_promises() {
    let plots = tempfile::tempdir().expect("temporary directory");
    let plot_dir = plots.path().join("charts");
    let (stdout, json) = run_clients(&[
        "--plot",
        plot_dir.to_str().expect("a UTF-8 path"),
        "--ops",
        "t2a,t2b,t2c",
        "--schemes",
        "pd-esm,sd-esm,pd-redo,wpl",
        "--cache",
        "constrained",
    ]);
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4 * 3 * 2, "schemes × ops × clients");
    let fields = [
        "scheme",
        "size",
        "cache",
        "clients",
        "op",
        "response_ms",
        "tx_per_s",
        "pages_shipped",
        "log_pages_shipped",
        "log_bytes",
        "minimal_log_bytes",
        "backend",
    ];
    for r in rows {
        let keys: Vec<&str> = r
            .as_object()
            .expect("a row")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), fields.len(), "{r}");
        assert!(fields.iter().all(|f| keys.contains(f)), "{r}");
        assert_eq!(
            (r["size"].as_str(), r["cache"].as_str()),
            (Some("tiny"), Some("constrained"))
        );
        assert!(r["tx_per_s"].as_f64().expect("tx_per_s") > 0.0, "{r}");
        assert_eq!(r["backend"], "sigsegv", "{r}");
    }
    let get = |scheme: &str, op: &str, field: &str| -> f64 {
        rows.iter()
            .find(|r| r["scheme"] == scheme && r["op"] == op && r["clients"] == 1)
            .unwrap_or_else(|| panic!("no {scheme} {op} row"))[field]
            .as_f64()
            .expect("a number")
    };
    for scheme in ["pd-esm", "sd-esm", "pd-redo", "wpl"] {
        for field in ["pages_shipped", "log_pages_shipped"] {
            let (b, c) = (get(scheme, "t2b", field), get(scheme, "t2c", field));
            assert!((b - c).abs() < 0.5, "{scheme} {field}: t2b {b}, t2c {c}");
        }
    }
    for op in ["t2a", "t2b", "t2c"] {
        for esm in ["pd-esm", "sd-esm"] {
            assert!(
                get(esm, op, "pages_shipped") > get(esm, op, "log_pages_shipped"),
                "{esm} {op}"
            );
            assert!(get(esm, op, "log_pages_shipped") >= 1.0, "{esm} {op}");
        }
        assert_eq!(
            get("pd-redo", op, "pages_shipped"),
            get("pd-redo", op, "log_pages_shipped")
        );
        // Whole pages; under the constrained recovery buffer the SIGSEGV
        // backend still copies WPL's pages and logs a page's ranges early
        // when the buffer overflows (design.md §11.8).
        assert!(
            get("wpl", op, "log_pages_shipped") * 2.0 <= get("wpl", op, "pages_shipped"),
            "{op}"
        );
        assert!(
            get("wpl", op, "log_bytes") > 4.0 * get("pd-redo", op, "log_bytes"),
            "{op}"
        );
        // Whole-page logging counts the minimal log of its changes too.
        let minimal = get("wpl", op, "minimal_log_bytes");
        assert!(
            minimal > 0.0 && minimal < get("wpl", op, "log_bytes"),
            "{op}: {minimal}"
        );
    }
    assert_eq!(
        json["resources"].as_array().expect("resources").len(),
        rows.len()
    );
    assert!(stdout.contains("saturates"));
    for op in ["t2a", "t2b", "t2c"] {
        for what in ["response", "throughput", "pages", "log-pages"] {
            let p = plot_dir.join(format!("oo7-clients-constrained-{op}-{what}.svg"));
            let svg = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert!(
                svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
                "{p:?}"
            );
            for scheme in ["pd-esm", "sd-esm", "pd-redo", "wpl"] {
                assert!(svg.contains(&format!(">{scheme}<")), "{p:?} lacks {scheme}");
            }
        }
    }
    let figure = plot_dir.join("oo7-clients-constrained-t2a-response.svg");
    let figure = std::fs::read_to_string(figure).expect("T2A's chart");
    assert!(figure.contains("Figure 10"), "{figure}");
}

/// `--backend uffd`: the clients run on userfaultfd and every row says
/// so; PD-REDO still ships log records only and WPL whole pages. Skipped
/// where userfaultfd cannot serve a database (an older kernel, or
/// `vm.unprivileged_userfaultfd` off), unless `AMBER_REQUIRE_UFFD=1`.
#[test]
fn clients_run_on_userfaultfd_and_say_so() {
    let uffd = amber::Options {
        backend: amber::BackendChoice::Uffd,
        ..amber::Options::default()
    };
    if let Err(e) = amber::Db::probe_backend(&uffd) {
        assert_ne!(
            std::env::var("AMBER_REQUIRE_UFFD").as_deref(),
            Ok("1"),
            "{e}"
        );
        eprintln!("skipped: userfaultfd unavailable: {e}");
        return;
    }
    let (_, json) = run_clients(&[
        "--backend",
        "uffd",
        "--ops",
        "t2a",
        "--schemes",
        "pd-redo,wpl",
        "--cache",
        "unconstrained",
    ]);
    assert_eq!(json["backend"], "uffd");
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2 * 2, "schemes × clients");
    assert!(rows.iter().all(|r| r["backend"] == "uffd"), "{rows:?}");
    let get = |scheme: &str, field: &str| -> f64 {
        let r = rows
            .iter()
            .find(|r| r["scheme"] == scheme && r["clients"] == 1);
        r.expect("a row")[field].as_f64().expect("a number")
    };
    assert_eq!(
        get("pd-redo", "pages_shipped"),
        get("pd-redo", "log_pages_shipped")
    );
    assert!(get("wpl", "pages_shipped") > get("wpl", "log_pages_shipped"));
    assert!(get("wpl", "log_bytes") > 4.0 * get("pd-redo", "log_bytes"));
}

/// The PostgreSQL peer in the client-server experiment: its rows (no pages
/// shipped, its WAL as log bytes), T1 under both its forms, and the
/// issue's throughput targets computed from the same run. Skipped when
/// PostgreSQL is not installed, unless `AMBER_REQUIRE_POSTGRES=1`.
#[cfg(feature = "compare")]
#[test]
fn postgres_serves_the_same_clients_beside_amber() {
    let (stdout, json) = run_clients(&[
        "--ops",
        "t1,t2a",
        "--cache",
        "unconstrained",
        "--schemes",
        "pd-redo,wpl,postgres,postgres-recursive",
    ]);
    let unavailable = json["unavailable"].as_array().expect("unavailable");
    if !unavailable.is_empty() {
        assert_ne!(
            std::env::var("AMBER_REQUIRE_POSTGRES").as_deref(),
            Ok("1"),
            "{unavailable:?}"
        );
        assert_eq!(unavailable.len(), 2, "{unavailable:?}");
        return;
    }
    let rows = json["rows"].as_array().expect("rows");
    // Amber's two schemes and postgres: 2 ops × 2 counts; postgres-recursive: T1 only.
    assert_eq!(rows.len(), 3 * 2 * 2 + 2, "{rows:?}");
    for r in rows
        .iter()
        .filter(|r| r["scheme"] != "pd-redo" && r["scheme"] != "wpl")
    {
        assert!(
            r["pages_shipped"].is_null() && r["minimal_log_bytes"].is_null(),
            "{r}"
        );
        assert!(r["tx_per_s"].as_f64().expect("tx_per_s") > 0.0, "{r}");
        if r["op"] == "t2a" {
            // The WAL of a committed update, at least a record per part.
            assert!(r["log_bytes"].as_f64().expect("log_bytes") > 100.0, "{r}");
        }
    }
    assert!(
        rows.iter()
            .all(|r| r["scheme"] != "postgres-recursive" || r["op"] == "t1")
    );
    let targets = json["targets"].as_array().expect("targets");
    let peers: Vec<(&str, &str)> = targets
        .iter()
        .map(|t| (t["op"].as_str().unwrap(), t["peer"].as_str().unwrap()))
        .collect();
    assert_eq!(
        peers,
        [
            ("t2a", "postgres"),
            ("t1", "postgres"),
            ("t1", "postgres-recursive")
        ]
    );
    for t in targets {
        assert_eq!(t["clients"], 2, "{t}");
        let ratio = t["best_tx_per_s"].as_f64().unwrap() / t["peer_tx_per_s"].as_f64().unwrap();
        assert!(
            (t["ratio"].as_f64().unwrap() - ratio).abs() < 1e-6 * ratio,
            "{t}"
        );
        assert_eq!(t["met"].is_null(), t["target"].is_null(), "{t}");
    }
    assert!(stdout.contains("target t1"));
}
