//! `amber bench texas`: Kakkad & Wilson's traversal sets, and the child
//! process each set runs in (`amber bench texas __texas-child`).

use super::{check_json_target, parse, verdict, write_json};
use crate::error::CliError;
use amber_bench::texas::{self, CHILD_SUBCOMMAND, Fetch, Granularity, TexasConfig};
use clap::Parser;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `amber bench texas`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench texas",
    about = "Kakkad & Wilson's traversal sets (Texas, COOTS 1999): 45 OO1 traversals (1 cold, 34 warm, 10 hot) per fresh process, with PRef everywhere (all-raw), Smart in the B+tree index only (smart-index), Smart everywhere (all-smart) and Lazy everywhere (all-lazy, swizzled upon discovery); CPU time, faults, pages reserved and pointers swizzled per traversal, one page per fault and Amber's adaptive window"
)]
struct TexasArgs {
    /// Database sizes in parts (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [20_000u32, 200_000])]
    parts: Vec<u32>,
    /// Granularities (comma-separated): all-raw, smart-index, all-smart, all-lazy.
    #[arg(long, value_delimiter = ',', default_values_t = Granularity::ALL)]
    granularities: Vec<Granularity>,
    /// Pages per fault (comma-separated): 1 (as Texas fetched) and adaptive (Amber's default).
    #[arg(long, value_delimiter = ',', default_values_t = Fetch::ALL)]
    fetch: Vec<Fetch>,
    /// Traversal sets per cell (medians are reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Warm traversals per set.
    #[arg(long, default_value_t = TexasConfig::WARM)]
    warm: usize,
    /// Hot traversals per set.
    #[arg(long, default_value_t = TexasConfig::HOT)]
    hot: usize,
    /// Seed of the databases and the start parts (as `amber bench oo1 --seed`).
    #[arg(long, default_value_t = amber_bench::oo1::args::DEFAULT_SEED)]
    seed: u64,
    /// Directory for the databases (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the figures (cumulative CPU per traversal, per granularity) as SVG to this file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// `amber bench texas [ARGS]...`.
pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        return texas::run_texas_child()
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| CliError::msg(format!("bench texas: {e}")));
    }
    let a: TexasArgs = parse("texas", args)?;
    check_json_target(a.json.as_deref())?;
    check_json_target(a.plot.as_deref())?;
    let config = TexasConfig {
        parts: a.parts,
        granularities: a.granularities,
        fetches: a.fetch,
        rounds: a.rounds,
        warm: a.warm,
        hot: a.hot,
        seed: a.seed,
        dir: a.dir,
        child_args: vec!["bench".into(), "texas".into(), CHILD_SUBCOMMAND.into()],
    };
    let (report, problems) =
        texas::run(&config).map_err(|e| CliError::msg(format!("bench texas: {e}")))?;
    out.push_str(&report.table());
    write_json(
        a.json.as_deref(),
        |p| amber_bench::json::write(p, &report),
        out,
    )?;
    if let Some(p) = &a.plot {
        std::fs::write(p, texas::plot::write_svg(&report))
            .map_err(|e| CliError::msg(format!("{}: {e}", p.display())))?;
        let _ = writeln!(out, "wrote {}", p.display());
    }
    verdict("texas", &problems)
}
