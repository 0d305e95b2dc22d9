//! `amber bench <NAME> [ARGS]...`: the one place benchmarks are dispatched.
//!
//! To add a benchmark: a clap `Args` struct for its options, an entry in
//! [`BENCHES`], and an arm in [`run`] that parses, runs, prints the table and
//! writes `--json`.

use crate::error::CliError;
use amber_bench::storage::{self, CommitConfig, RecoveryConfig};
use clap::Parser;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Known benchmarks and what they measure.
pub const BENCHES: &[(&str, &str)] = &[
    (
        "commit",
        "latency of committing a 100-byte change against a bare pwrite + fdatasync",
    ),
    (
        "recovery",
        "recovery time against a sequential read of a file of the log's size",
    ),
];

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
    about = "Median latency of committing a 100-byte change, against a bare pwrite of 100 bytes + fdatasync in the same directory"
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
    /// Skip the cold-cache runs (which drop the OS page cache when allowed).
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
