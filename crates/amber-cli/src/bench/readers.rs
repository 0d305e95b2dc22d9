//! `amber bench readers`: a read-only handle beside a writer process.

use super::{check_json_target, parse, write_json};
use crate::error::CliError;
use clap::Parser;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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

/// `amber bench readers`, and the writer process it starts
/// (`amber bench readers __readers-writer PATH RATE SECONDS`).
pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
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
