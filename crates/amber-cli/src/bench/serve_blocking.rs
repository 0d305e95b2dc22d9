//! `amber bench serve-blocking`: a fetch cluster through the storage server.

use super::{check_json_target, parse, write_json};
use crate::error::CliError;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `amber bench serve-blocking`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench serve-blocking",
    about = "A fetch cluster read through the storage server on loopback (blocking pool and block_in_place) against the store read directly"
)]
struct ServeArgs {
    /// One-page blocks in the database.
    #[arg(long, default_value_t = 4096)]
    blocks: u64,
    /// Pages per cluster (a fault fetches up to `Options::fetch_cluster`, 64 by default, fewer for scattered faults).
    #[arg(long, default_value_t = 8)]
    cluster_pages: u64,
    /// Clusters read per round and arm.
    #[arg(long, default_value_t = 2000)]
    requests: u64,
    /// Rounds (medians are reported).
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    let a: ServeArgs = parse("serve", args)?;
    check_json_target(a.json.as_deref())?;
    let r = amber_bench::serve_blocking::run(&amber_bench::serve_blocking::ServeConfig {
        blocks: a.blocks,
        cluster_pages: a.cluster_pages,
        requests: a.requests,
        rounds: a.rounds,
        dir: a.dir,
    })?;
    out.push_str(&amber_bench::serve_blocking::render(&r));
    write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
    Ok(ExitCode::SUCCESS)
}
