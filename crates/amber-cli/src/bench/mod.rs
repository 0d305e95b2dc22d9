//! `amber bench <NAME> [ARGS]...`: the one place benchmarks are dispatched.
//!
//! To add a benchmark: a clap `Args` struct for its options, an entry in
//! [`BENCHES`], and an arm in [`run`] that parses, runs, prints the table and
//! writes `--json`.

mod epvm;
mod index;
mod olsim;
mod oo1;
mod oo7;
mod readers;
mod serve_blocking;
mod server;
mod texas;

use crate::error::CliError;
use amber_bench::backend::Backends;
use amber_bench::churn::{self, ChurnConfig};
use amber_bench::faults::{self, FaultsConfig};
use amber_bench::hot::{self, HotConfig};
use amber_bench::storage::{self, CommitConfig, RecoveryConfig, StallConfig};
use amber_bench::update::{self, UpdateConfig};
use clap::Parser;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Known benchmarks and what they measure.
pub const BENCHES: &[(&str, &str)] = &[
    (
        "commit",
        "latency of committing a 100-byte change, through the object layer (Db/Tx) and the store layer, against a bare pwrite + fdatasync",
    ),
    (
        "recovery",
        "recovery time against a sequential read of a file of the log's size; with --server, an `amber serve`'s restart after a kill with a log of range records (PD-REDO, ESM) and of whole pages (WPL) against a read of the same log",
    ),
    (
        "oo1",
        "the OO1 benchmark (Cattell & Skeen) on Amber's engines and, built with --features compare, SQLite, LMDB and redb (normalised, and LMDB and redb inline), a serde snapshot and plain memory",
    ),
    (
        "epvm",
        "White & DeWitt's object faulting and swizzling architectures on OO1: CESM, EPVM 1.0 with and without swizzling, and Amber's page-fault mapping; cold / warm / hot, one transaction or one per iteration, updates with probability p, hot sweeps to 1,000 iterations, beside the paper's Tables 1-6",
    ),
    (
        "texas",
        "Kakkad & Wilson's traversal sets: 45 OO1 traversals (1 cold, 34 warm, 10 hot) with PRef everywhere, Smart in the B+tree index only, and Smart everywhere; CPU time, faults, pages reserved and pointers swizzled per traversal",
    ),
    (
        "hot",
        "a hot traversal of resident persistent objects against the same traversal of plain Rust structs",
    ),
    (
        "faults",
        "the cost of a cold fault per page (fetch, checksum, swizzle, install), per backend, with and without a fetch cluster",
    ),
    (
        "update",
        "the write path: commit of a hot OO1 update traversal split into detect / diff / write, log bytes against the minimum, first write to a clean page, per backend",
    ),
    (
        "detect",
        "update-detection schemes (object marking, remembered sets, cards of 16..4096 bytes, page protection on both backends) on OO1's hot update traversal at p = 0 .. 1: phases running / old / new / write / other and log bytes against the minimum (Hosking et al.)",
    ),
    (
        "index",
        "a PIndex of 1,000,000 string keys: random hot lookups, loading them in one transaction, and single-insert transactions, against redb on the same keys (built with --features compare)",
    ),
    (
        "readers",
        "a read-only handle's hot traversal and refresh beside a writer process committing at a steady rate",
    ),
    (
        "server",
        "OO1 traversals through `amber serve` against the same database opened locally: hot and cold ratios, a round trip, server CPU per block and memory",
    ),
    (
        "serve-blocking",
        "a fetch cluster read through the storage server on loopback (blocking pool and block_in_place) against the store read directly",
    ),
    (
        "olsim",
        "O'Toole & Shrira's opportunistic-log simulation: page, basic, absorbing and opportunistic servers on the HP 97560 (and a 7,200 rpm disk and an SSD), beside the paper's tables",
    ),
    (
        "checkpoint",
        "how long page faults of another thread stall while a checkpoint installs a large log (explicit and automatic)",
    ),
    (
        "churn",
        "file size under allocate/free churn (10,000 items with 200-byte texts, 5 rounds), after a collection, and after freeing everything and collecting, against the first round and a new database",
    ),
    (
        "oo7",
        "the OO7 benchmark (Carey, DeWitt, Naughton): traversals, queries and structural modifications on Amber's engines and, built with --features compare, memory, a serde snapshot, SQLite, LMDB and redb",
    ),
];

/// How to get the comparison engines when they are not built in.
pub const COMPARE_HINT: &str = "the comparison engines (plain memory, a serde snapshot, SQLite, LMDB and redb, in each benchmark's layouts) are not built into this amber; \
build it with `cargo build --release -p amber-cli --features compare` to run them";

fn known() -> String {
    BENCHES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Options of `amber bench commit`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench commit",
    about = "Median latency of committing a 100-byte change to one object (Db/Tx) and at the store layer, against a bare pwrite of 100 bytes + fdatasync in the same directory"
)]
struct CommitArgs {
    /// Measured iterations.
    #[arg(long, default_value_t = 2000)]
    iters: usize,
    /// Unmeasured iterations first.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Directory on the file system to measure (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench recovery`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench recovery",
    about = "Time to open (recover) a database with a large log, against a sequential read of a file of the log's size"
)]
struct RecoveryArgs {
    /// MiB of committed transactions in the log.
    #[arg(long, default_value_t = 64)]
    wal_mib: u64,
    /// Pages of the database the transactions write to.
    #[arg(long, default_value_t = 4096)]
    pages: u64,
    /// Timed runs of each measurement (medians are reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Skip the cold-cache runs (which drop the OS page cache when allowed);
    /// the headline ratio is then the warm one.
    #[arg(long)]
    no_cold: bool,
    /// The server's restart instead (issue 19): `amber serve` restarted
    /// after a kill with a log of range records (PD-REDO and the ESM
    /// schemes) and one of whole pages (WPL), each against a sequential
    /// read of the same log file, the OS page cache dropped before each
    /// (dropped per file with posix_fadvise when not root).
    #[arg(long)]
    server: bool,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory on the file system to measure (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench checkpoint`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench checkpoint",
    about = "Fault latency of a reader thread while a checkpoint installs a large log (called explicitly, and triggered by a commit), against its latency outside the checkpoint; medians over runs"
)]
struct CheckpointArgs {
    /// MiB of committed changes in the log when the checkpoint runs.
    #[arg(long, default_value_t = 64)]
    log_mib: u64,
    /// MiB of hot objects the updates rewrite (what the checkpoint installs).
    #[arg(long, default_value_t = 16)]
    hot_mib: u64,
    /// MiB of cold pages the reader faults in, one page per fault.
    #[arg(long, default_value_t = 64)]
    cold_mib: u64,
    /// Hot objects rewritten per transaction.
    #[arg(long, default_value_t = 256)]
    per_tx: u32,
    /// The reader's pause between faults, µs.
    #[arg(long, default_value_t = 200)]
    pause_us: u64,
    /// The reader's time before the checkpoint, ms.
    #[arg(long, default_value_t = 300)]
    before_ms: u64,
    /// The reader's time after it, ms.
    #[arg(long, default_value_t = 300)]
    after_ms: u64,
    /// Runs of each case (medians are reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Fault backends to measure: uffd, sigsegv or both.
    #[arg(long, default_value_t = Backends::Both)]
    backend: Backends,
    /// Seed of the updates and the reader's order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench churn`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench churn",
    about = "Page file size after rounds of allocating and freeing items with texts, then after Db::collect, and after freeing everything and collecting, against the first round's size and a new database's"
)]
struct ChurnArgs {
    /// Items allocated per round.
    #[arg(long, default_value_t = 10_000)]
    objects: u64,
    /// Bytes of each item's text.
    #[arg(long, default_value_t = 200)]
    text_bytes: usize,
    /// Rounds of allocation (each after the first frees the previous one's).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench hot`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench hot",
    about = "Hot traversal of a persistent linked list (every page resident) against the same list of Boxes, interleaved, medians"
)]
struct HotArgs {
    /// Nodes per list.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Fault backends to measure: uffd, sigsegv or both.
    #[arg(long, default_value_t = Backends::Both)]
    backend: Backends,
    /// Timed traversals of each side.
    #[arg(long, default_value_t = 15)]
    runs: usize,
    /// Seed of the shuffled list's order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Update-detection scheme armed during the traversals: pages, objects, remsets or cards-N.
    #[arg(long, default_value_t = amber::Detect::Pages)]
    detect: amber::Detect,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench faults`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench faults",
    about = "Cost per page of a cold fault (fetch from the OS page cache, checksum, swizzle, install), with one page and with 8 pages per fault"
)]
struct FaultsArgs {
    /// Pages of small objects with pointers.
    #[arg(long, default_value_t = 8_192)]
    pages: u64,
    /// Fault backends to measure: uffd, sigsegv, mapped, mapped-unverified,
    /// both (uffd and sigsegv) or all.
    #[arg(long, default_value_t = Backends::Both)]
    backend: Backends,
    /// Runs of each case (medians are reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the pointers and the random order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench detect`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench detect",
    about = "Update-detection schemes on OO1's hot update traversal (Hosking et al.): every scheme at p = 0, 0.05, 0.10, 0.15, 0.20, 0.50, 1.00, one commit each; phases and log bytes against the minimal log"
)]
struct DetectArgs {
    /// OO1 parts.
    #[arg(long, default_value_t = 20_000)]
    parts: u32,
    /// Schemes (comma-separated): pages, objects, remsets, cards-N (N = 8..4096), auto, or any strategy name; default all of Hosking's and auto.
    #[arg(long, value_delimiter = ',')]
    schemes: Vec<amber::Strategy>,
    /// Timed commits per scheme and p (medians are reported).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// Untimed update traversals per scheme and p first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Traversals per transaction of the long-transaction experiment (comma-separated; 0 alone: skip it).
    #[arg(long, value_delimiter = ',', default_values_t = amber_bench::detect::LONG_KS)]
    long_ks: Vec<usize>,
    /// Update probabilities of the long-transaction experiment.
    #[arg(long, value_delimiter = ',', default_values_t = amber_bench::detect::LONG_PS)]
    long_ps: Vec<f64>,
    /// Timed transactions per scheme, p and k of the long-transaction experiment.
    #[arg(long, default_value_t = 3)]
    long_iters: usize,
    /// Write the figures as SVG: FILE (the hot update) and FILE's stem with -long-pP.svg (the long transactions).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Seed of the database and the inputs (as `amber bench oo1 --seed`).
    #[arg(long, default_value_t = amber_bench::oo1::args::DEFAULT_SEED)]
    seed: u64,
    /// Directory for the databases (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench update`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench update",
    about = "The write path on OO1 data: hot update traversals at p = 0, 0.05, 0.2, 1, one commit each; commit time split into detect / diff / write, log bytes against the minimal log, blocks per commit, and the first write to a clean page"
)]
struct UpdateArgs {
    /// OO1 parts.
    #[arg(long, default_value_t = 20_000)]
    parts: u32,
    /// Fault backends to measure: uffd, sigsegv or both.
    #[arg(long, default_value_t = Backends::Both)]
    backend: Backends,
    /// Timed commits per backend and p (medians are reported).
    #[arg(long, default_value_t = 15)]
    iters: usize,
    /// Untimed update traversals per backend and p first (they make the pages resident).
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Distinct pages of the first-write measurement.
    #[arg(long, default_value_t = 512)]
    pages: usize,
    /// Seed of the database and the inputs (as `amber bench oo1 --seed`).
    #[arg(long, default_value_t = amber_bench::oo1::args::DEFAULT_SEED)]
    seed: u64,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse<T: Parser>(name: &str, args: &[String]) -> Result<T, CliError> {
    let cmd = format!("amber bench {name}");
    let argv = std::iter::once(cmd.clone()).chain(args.iter().cloned());
    T::try_parse_from(argv).map_err(|e| CliError::from_clap(&e, &cmd))
}

/// Fails early, before a long run, if the JSON file cannot be written.
fn check_json_target(json: Option<&Path>) -> Result<(), CliError> {
    if let Some(p) = json {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(CliError::msg(format!(
                "{}: no such directory for --json",
                dir.display()
            )));
        }
    }
    Ok(())
}

fn write_json(
    json: Option<&Path>,
    write: impl FnOnce(&Path) -> std::io::Result<()>,
    out: &mut String,
) -> Result<(), CliError> {
    if let Some(p) = json {
        write(p).map_err(|e| CliError::msg(format!("{}: {e}", p.display())))?;
        let _ = writeln!(out, "wrote {}", p.display());
    }
    Ok(())
}

/// The end of a benchmark that reports before it judges: success, or the
/// problems it found (wrong answers, failed children) as one error.
fn verdict(bench: &str, problems: &[String]) -> Result<ExitCode, CliError> {
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::msg(format!(
            "bench {bench}: {} problem(s): {}",
            problems.len(),
            problems.join("; ")
        )))
    }
}

/// Runs benchmark `name` with its arguments.
pub fn run(name: Option<&str>, args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    match name {
        Some("commit") => {
            let a: CommitArgs = parse("commit", args)?;
            check_json_target(a.json.as_deref())?;
            let r = storage::commit(&CommitConfig {
                iters: a.iters,
                warmup: a.warmup,
                dir: a.dir,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
        }
        Some("recovery") => {
            let a: RecoveryArgs = parse("recovery", args)?;
            check_json_target(a.json.as_deref())?;
            let cfg = RecoveryConfig {
                wal_mib: a.wal_mib,
                pages: a.pages,
                runs: a.runs,
                cold: !a.no_cold,
                seed: a.seed,
                dir: a.dir,
            };
            if a.server {
                let r = storage::restart(&cfg)?;
                out.push_str(&r.table());
                write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
            } else {
                let r = storage::recovery(&cfg)?;
                out.push_str(&r.table());
                write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
            }
        }
        Some("checkpoint") => {
            let a: CheckpointArgs = parse("checkpoint", args)?;
            check_json_target(a.json.as_deref())?;
            let r = storage::stall(&StallConfig {
                log_mib: a.log_mib,
                hot_mib: a.hot_mib,
                cold_mib: a.cold_mib,
                per_tx: a.per_tx,
                pause_us: a.pause_us,
                before_ms: a.before_ms,
                after_ms: a.after_ms,
                runs: a.runs,
                backends: a.backend,
                seed: a.seed,
                dir: a.dir,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
        }
        Some("index") => index::run(args, out)?,
        Some("oo1") => return oo1::run(args, out),
        Some("oo7") => return oo7::run(args, out),
        Some("texas") => return texas::run(args, out),
        Some("epvm") => return epvm::run(args, out),
        Some("readers") => return readers::run(args, out),
        Some("server") => return server::run(args, out),
        Some("serve-blocking") => return serve_blocking::run(args, out),
        Some("olsim") => olsim::run(args, out)?,
        Some("hot") => {
            let a: HotArgs = parse("hot", args)?;
            check_json_target(a.json.as_deref())?;
            let r = hot::hot(&HotConfig {
                objects: a.objects,
                backends: a.backend,
                runs: a.runs,
                dir: a.dir,
                seed: a.seed,
                detect: a.detect,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
        }
        Some("faults") if args.first().map(String::as_str) == Some(faults::CHILD_SUBCOMMAND) => {
            // A mapped run, in a process of its own (`faults/mapped.rs`).
            out.push_str(&faults::child(&args[1..])?);
            out.push('\n');
        }
        Some("faults") => {
            let a: FaultsArgs = parse("faults", args)?;
            check_json_target(a.json.as_deref())?;
            let r = faults::faults(&FaultsConfig {
                pages: a.pages,
                backends: a.backend,
                runs: a.runs,
                dir: a.dir,
                seed: a.seed,
                child_args: vec![
                    "bench".into(),
                    "faults".into(),
                    faults::CHILD_SUBCOMMAND.into(),
                ],
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
        }
        Some("update") => {
            let a: UpdateArgs = parse("update", args)?;
            check_json_target(a.json.as_deref())?;
            let r = update::update(&UpdateConfig {
                parts: a.parts,
                backends: a.backend,
                iters: a.iters,
                warmup: a.warmup,
                pages: a.pages,
                seed: a.seed,
                dir: a.dir,
                ..UpdateConfig::default()
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
        }
        Some("detect") => {
            let a: DetectArgs = parse("detect", args)?;
            check_json_target(a.json.as_deref())?;
            check_json_target(a.plot.as_deref())?;
            let r = amber_bench::detect::detect(&amber_bench::detect::DetectConfig {
                parts: a.parts,
                schemes: if a.schemes.is_empty() {
                    amber_bench::detect::all_schemes()
                } else {
                    a.schemes
                },
                iters: a.iters,
                warmup: a.warmup,
                seed: a.seed,
                dir: a.dir,
                long_ks: a.long_ks.into_iter().filter(|&k| k > 0).collect(),
                long_ps: a.long_ps,
                long_iters: a.long_iters,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
            if let Some(path) = &a.plot {
                for (name, svg) in r.plots() {
                    let file = if name == "hot" {
                        path.clone()
                    } else {
                        path.with_file_name(format!(
                            "{}-{name}.svg",
                            path.file_stem()
                                .and_then(|s| s.to_str())
                                .unwrap_or("detect")
                        ))
                    };
                    std::fs::write(&file, svg).map_err(|e| {
                        CliError::msg(format!("bench detect: writing {}: {e}", file.display()))
                    })?;
                    let _ = writeln!(out, "wrote {}", file.display());
                }
            }
        }
        Some("churn") => {
            let a: ChurnArgs = parse("churn", args)?;
            check_json_target(a.json.as_deref())?;
            let r = churn::churn(&ChurnConfig {
                objects: a.objects,
                text_bytes: a.text_bytes,
                rounds: a.rounds,
                dir: a.dir,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
        }
        Some("list" | "--list" | "--help" | "-h" | "help") => {
            let _ = writeln!(
                out,
                "amber bench <NAME> [ARGS]...; `amber bench <NAME> --help` gives its options"
            );
            for (n, what) in BENCHES {
                let _ = writeln!(out, "{n:<10} {what}");
            }
        }
        Some(other) => {
            return Err(CliError::msg(format!(
                "unknown benchmark '{other}'; known: {}",
                known()
            )));
        }
        None => {
            return Err(CliError::msg(format!(
                "name a benchmark: amber bench <NAME> [ARGS]...; known: {}",
                known()
            )));
        }
    }
    Ok(ExitCode::SUCCESS)
}
