//! `amber bench <NAME> [ARGS]...`: the one place benchmarks are dispatched.
//!
//! To add a benchmark: a clap `Args` struct for its options, an entry in
//! [`BENCHES`], and an arm in [`run`] that parses, runs, prints the table and
//! writes `--json`.

use crate::error::CliError;
use amber_bench::backend::Backends;
use amber_bench::churn::{self, ChurnConfig};
use amber_bench::faults::{self, FaultsConfig};
use amber_bench::hot::{self, HotConfig};
use amber_bench::index::{self, IndexConfig, IndexPeer};
use amber_bench::olsim::{self, OlsimConfig};
use amber_bench::oo1::{self, BenchError, CHILD_SUBCOMMAND, EngineFactory, Oo1Args};
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
        "recovery time against a sequential read of a file of the log's size",
    ),
    (
        "oo1",
        "the OO1 benchmark (Cattell & Skeen) on Amber's engines and, built with --features compare, SQLite, LMDB and redb (normalised, and LMDB and redb inline), a serde snapshot and plain memory",
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
        "index",
        "a PIndex of 1,000,000 string keys: random hot lookups, loading them in one transaction, and single-insert transactions, against redb on the same keys (built with --features compare)",
    ),
    (
        "readers",
        "a read-only handle's hot traversal and refresh beside a writer process committing at a steady rate",
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
];

/// How to get the comparison engines when they are not built in.
pub const COMPARE_HINT: &str = "the comparison engines (memory, snapshot, sqlite, lmdb, lmdb-inline, redb, redb-inline) are not built into this amber; \
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
    /// Fault backends to measure: uffd, sigsegv or both.
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

/// Options of `amber bench index`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench index",
    about = "A PIndex<Record, String> of random string keys against redb on the same keys: random hot lookups, all keys inserted in one transaction, single-insert transactions (each synced); medians, ratios Amber / redb"
)]
struct IndexArgs {
    /// Keys loaded.
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Single-insert transactions, each synced.
    #[arg(long, default_value_t = 1_000)]
    tx_inserts: usize,
    /// Random lookups per timed batch.
    #[arg(long, default_value_t = 100_000)]
    lookups: usize,
    /// Timed lookup batches per engine (medians are reported).
    #[arg(long, default_value_t = 11)]
    runs: usize,
    /// Seed of the keys and the lookup sample.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the databases (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// The peer of `amber bench index`: redb when the CLI is built with the
/// `compare` feature.
fn index_peer() -> Option<Box<dyn IndexPeer>> {
    #[cfg(feature = "compare")]
    return Some(Box::new(amber_compare::index_peer::RedbIndex::default()));
    #[cfg(not(feature = "compare"))]
    None
}

/// Options of `amber bench readers`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench readers",
    about = "A read-only handle beside a writer process: its hot traversal against the same traversal with no writer, and the time of a refresh"
)]
struct ReadersArgs {
    /// Nodes in the traversed list.
    #[arg(long, default_value_t = 200_000)]
    nodes: u64,
    /// Timed hot traversals alone and beside the writer (medians are reported).
    #[arg(long, default_value_t = 200)]
    traversals: usize,
    /// The writer's commits per second (each syncs).
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// How long the writer runs, in seconds.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// How often the reader refreshes while the writer runs, in ms.
    #[arg(long, default_value_t = 10)]
    refresh_every_ms: u64,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `amber bench olsim`: every parameter the paper leaves open
/// (defaults and why in docs/design.md, "The opportunistic-log simulator").
#[derive(Debug, Parser)]
#[command(
    name = "amber bench olsim",
    about = "O'Toole & Shrira's opportunistic-log simulation (OSDI 1994): throughput against clients, the 50-client and log-size tables, page against object servers and the fetch-ratio break-even, over seeds with 95% confidence intervals, beside the paper's numbers; then the same on a 7,200 rpm disk and an SSD"
)]
struct OlsimArgs {
    /// Seeds per configuration (the confidence intervals are over seeds).
    #[arg(long, default_value_t = 5)]
    seeds: u32,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated seconds before measuring (the run starts in steady state).
    #[arg(long, default_value_t = 60.0)]
    warmup_s: f64,
    /// Simulated seconds measured per run.
    #[arg(long, default_value_t = 300.0)]
    measure_s: f64,
    /// Threads running simulations (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Skip the present-day devices (7,200 rpm disk, SSD).
    #[arg(long)]
    no_modern: bool,
    /// Base fetch ratio of the experiments, percent.
    #[arg(long, default_value_t = 20)]
    fetch_pct: u32,
    /// Fraction of transactions that modify their object.
    #[arg(long, default_value_t = 0.20)]
    write_ratio: f64,
    /// Client think time, ms.
    #[arg(long, default_value_t = 200.0)]
    think_ms: f64,
    /// Network latency per message, ms.
    #[arg(long, default_value_t = 1.0)]
    latency_ms: f64,
    /// CPU per message at sender and receiver, ms.
    #[arg(long, default_value_t = 0.1)]
    message_cpu_ms: f64,
    /// Server CPU to validate a transaction, ms.
    #[arg(long, default_value_t = 0.1)]
    validation_ms: f64,
    /// Server CPU to install one object, ms.
    #[arg(long, default_value_t = 0.1)]
    installation_ms: f64,
    /// Page size, bytes (a multiple of 512 dividing a track).
    #[arg(long, default_value_t = 4096)]
    page_bytes: u32,
    /// Pages in the database (default: the whole HP 97560 at --page-bytes).
    #[arg(long)]
    database_pages: Option<u32>,
    /// Pages of server memory (page cache + log).
    #[arg(long, default_value_t = 35_000)]
    memory_pages: u32,
    /// Log entries per page of log memory.
    #[arg(long, default_value_t = 2)]
    objects_per_log_page: u32,
    /// Write a dirty page when fewer clean pages than this remain.
    #[arg(long, default_value_t = 100)]
    write_trigger: u32,
    /// Age weight w of T_eff = T_pos - w·T_wait (opportunistic server).
    #[arg(long, default_value_t = 0.0)]
    age_weight: f64,
    /// HP 97560 controller overhead per request, ms.
    #[arg(long, default_value_t = 2.2)]
    controller_overhead_ms: f64,
    /// Requests per line of the disk validation table.
    #[arg(long, default_value_t = 20_000)]
    validation_requests: usize,
    /// Directory to write the SVG charts to.
    #[arg(long, value_name = "DIR")]
    plot_dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `amber bench readers`, and the writer process it starts
/// (`amber bench readers __readers-writer PATH RATE SECONDS`).
fn readers(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(amber_bench::readers::WRITER_ARG) {
        let [_, path, rate, seconds] = args else {
            return Err(CliError::msg(
                "bench readers: the writer takes PATH RATE SECONDS",
            ));
        };
        let num = |s: &String| {
            s.parse::<f64>()
                .map_err(|_| CliError::msg(format!("bench readers: `{s}` is not a number")))
        };
        let line =
            amber_bench::readers::run_writer(Path::new(path), num(rate)? as u64, num(seconds)?)?;
        let _ = writeln!(out, "{line}");
        return Ok(ExitCode::SUCCESS);
    }
    let a: ReadersArgs = parse("readers", args)?;
    check_json_target(a.json.as_deref())?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::msg(format!("bench readers: this program's path: {e}")))?;
    let r = amber_bench::readers::run(&amber_bench::readers::ReadersConfig {
        nodes: a.nodes,
        traversals: a.traversals,
        rate: a.rate,
        seconds: a.seconds,
        refresh_every_ms: a.refresh_every_ms,
        dir: a.dir,
        writer_cmd: vec![exe.display().to_string(), "bench".into(), "readers".into()],
    })?;
    out.push_str(&amber_bench::readers::render(&r));
    write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
    Ok(ExitCode::SUCCESS)
}

fn olsim_bench(a: OlsimArgs, out: &mut String) -> Result<(), CliError> {
    check_json_target(a.json.as_deref())?;
    if let Some(d) = &a.plot_dir
        && !d.is_dir()
    {
        return Err(CliError::msg(format!(
            "{}: no such directory for --plot-dir",
            d.display()
        )));
    }
    let mut disk = olsim::Geometry::hp97560();
    disk.controller_overhead_ms = a.controller_overhead_ms;
    if a.page_bytes == 0
        || !a.page_bytes.is_multiple_of(512)
        || !disk.sectors_per_track.is_multiple_of(a.page_bytes / 512)
    {
        return Err(CliError::msg(format!(
            "bench olsim: --page-bytes {} must be a multiple of 512 whose sectors divide a track of {}",
            a.page_bytes, disk.sectors_per_track
        )));
    }
    let whole_disk = (disk.capacity_sectors() / u64::from(a.page_bytes / 512)) as u32;
    let database_pages = a.database_pages.unwrap_or(whole_disk);
    if database_pages == 0 || database_pages > whole_disk {
        return Err(CliError::msg(format!(
            "bench olsim: --database-pages must be 1..={whole_disk} (the disk's pages)"
        )));
    }
    if a.seeds == 0 || !(0.0..=1.0).contains(&a.write_ratio) || a.fetch_pct > 100 {
        return Err(CliError::msg(
            "bench olsim: --seeds must be at least 1, --write-ratio in 0..1, --fetch-pct in 0..100",
        ));
    }
    let cfg = OlsimConfig {
        params: olsim::Params {
            fetch_ratio: f64::from(a.fetch_pct) / 100.0,
            write_ratio: a.write_ratio,
            think_ms: a.think_ms,
            latency_ms: a.latency_ms,
            message_cpu_ms: a.message_cpu_ms,
            validation_ms: a.validation_ms,
            installation_ms: a.installation_ms,
            page_bytes: a.page_bytes,
            database_pages,
            memory_pages: a.memory_pages,
            objects_per_log_page: a.objects_per_log_page,
            write_trigger: a.write_trigger,
            age_weight: a.age_weight,
            warmup_s: a.warmup_s,
            measure_s: a.measure_s,
            ..olsim::Params::default()
        },
        disk,
        precision: olsim::experiments::Precision {
            seeds: a.seeds,
            seed: a.seed,
            warmup_s: a.warmup_s,
            measure_s: a.measure_s,
        },
        threads: a
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        modern: !a.no_modern,
        validation_requests: a.validation_requests,
    };
    let r = olsim::run_bench(&cfg);
    out.push_str(&r.text);
    if let Some(dir) = &a.plot_dir {
        for (name, svg) in &r.charts {
            let p = dir.join(name);
            std::fs::write(&p, svg).map_err(|e| CliError::msg(format!("{}: {e}", p.display())))?;
            let _ = writeln!(out, "wrote {}", p.display());
        }
    }
    write_json(
        a.json.as_deref(),
        |p| amber_bench::json::write(p, &r.report),
        out,
    )
}

/// The engines of `amber bench oo1`: Amber's, then the comparison engines
/// when the CLI is built with the `compare` feature.
fn oo1_engines() -> Vec<Box<dyn EngineFactory>> {
    #[allow(unused_mut)]
    let mut all = oo1::builtin_engines();
    #[cfg(feature = "compare")]
    all.extend(amber_compare::engines());
    all
}

/// `amber bench oo1 [ARGS]...`, and the hidden child subcommand the harness
/// re-executes this binary with (`amber bench oo1 __oo1-child`).
fn oo1(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        // The reply (success or error) is on stdout; the status says which.
        return oo1::run_oo1_child(oo1_engines())
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| CliError::msg(format!("bench oo1: {e}")));
    }
    let compare = cfg!(feature = "compare");
    let mut a = match Oo1Args::parse(args) {
        Ok(a) => a,
        Err(BenchError::Help(usage)) if compare => return Err(CliError::Help(usage)),
        Err(BenchError::Help(usage)) => {
            return Err(CliError::Help(format!("{usage}\nnote: {COMPARE_HINT}")));
        }
        Err(e) => return Err(CliError::msg(format!("bench oo1: {e}"))),
    };
    a.child_args = vec!["bench".into(), "oo1".into(), CHILD_SUBCOMMAND.into()];
    check_json_target(a.json.as_deref())?;
    check_json_target(a.plot.as_deref())?;
    let engines = oo1_engines();
    let available: Vec<&str> = engines.iter().map(|f| f.info().name).collect();
    if let Some(unknown) = a
        .engines
        .iter()
        .flatten()
        .find(|n| !available.contains(&n.as_str()))
    {
        let hint = if compare {
            String::new()
        } else {
            format!(" ({COMPARE_HINT})")
        };
        return Err(CliError::msg(format!(
            "bench oo1: unknown engine {unknown:?}; available: {}{hint}",
            available.join(", ")
        )));
    }
    if !compare {
        eprintln!("amber bench oo1: note: {COMPARE_HINT}");
    }
    let json = a.json.clone();
    oo1::run_oo1(a, engines).map_err(|e| CliError::msg(format!("bench oo1: {e}")))?;
    if let Some(p) = json {
        let _ = writeln!(out, "wrote {}", p.display());
    }
    if !compare {
        let _ = writeln!(out, "note: {COMPARE_HINT}");
    }
    Ok(ExitCode::SUCCESS)
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
            let r = storage::recovery(&RecoveryConfig {
                wal_mib: a.wal_mib,
                pages: a.pages,
                runs: a.runs,
                cold: !a.no_cold,
                seed: a.seed,
                dir: a.dir,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
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
        Some("index") => {
            let a: IndexArgs = parse("index", args)?;
            check_json_target(a.json.as_deref())?;
            let peer = index_peer();
            let alone = peer.is_none();
            let r = index::index(
                &IndexConfig {
                    keys: a.keys,
                    tx_inserts: a.tx_inserts,
                    lookups: a.lookups,
                    runs: a.runs,
                    seed: a.seed,
                    dir: a.dir,
                },
                peer,
            )?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
            if alone {
                let _ = writeln!(out, "note: {COMPARE_HINT}");
            }
        }
        Some("oo1") => return oo1(args, out),
        Some("readers") => return readers(args, out),
        Some("olsim") => olsim_bench(parse("olsim", args)?, out)?,
        Some("hot") => {
            let a: HotArgs = parse("hot", args)?;
            check_json_target(a.json.as_deref())?;
            let r = hot::hot(&HotConfig {
                objects: a.objects,
                backends: a.backend,
                runs: a.runs,
                dir: a.dir,
                seed: a.seed,
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
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
            })?;
            out.push_str(&r.table());
            write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
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
