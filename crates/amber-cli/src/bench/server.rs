//! `amber bench server`: OO1 through `amber serve` against the same
//! database opened locally.

use super::{check_json_target, parse, write_json};
use crate::error::CliError;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `amber bench server`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench server",
    about = "OO1 traversals through `amber serve` (started as a child on loopback) against the same database opened locally: hot and cold ratios, a round trip, the server's CPU per block served and both sides' memory"
)]
struct ServerArgs {
    /// OO1 parts.
    #[arg(long, default_value_t = 20_000)]
    parts: u32,
    /// Rounds: each opens both sides afresh for a cold traversal, then
    /// times the hot ones.
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Hot traversals per round.
    #[arg(long, default_value_t = 30)]
    hot: usize,
    /// Round trips timed on one connection.
    #[arg(long, default_value_t = 1000)]
    round_trips: usize,
    /// Transactions timed on each side for the commit figure.
    #[arg(long, default_value_t = 300)]
    commits: usize,
    /// How long each group of client processes commits, in seconds.
    #[arg(long, default_value_t = 3.0)]
    group_seconds: f64,
    /// Seed of the database and the traversal roots.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the database (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// An option for the server it starts (`amber serve`), repeated for
    /// each word: `--serve-arg=--memory-mib --serve-arg=32`.
    #[arg(long = "serve-arg", value_name = "ARG", allow_hyphen_values = true)]
    serve_args: Vec<String>,
}

/// `amber bench server`, and the client processes it starts
/// (`amber bench server __server-client URL TOKEN CERTS_DIR ME PARTS START_MS
/// SECONDS`).
pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(amber_bench::server_writes::CLIENT_ARG) {
        let [_, url, token, certs, me, per, start, seconds] = args else {
            return Err(CliError::msg(
                "bench server: a client takes URL TOKEN CERTS_DIR ME PARTS START_MS SECONDS",
            ));
        };
        let num = |s: &String| {
            s.parse::<f64>()
                .map_err(|_| CliError::msg(format!("bench server: `{s}` is not a number")))
        };
        let line = amber_bench::server_writes::run_client(
            url,
            (token, std::path::Path::new(certs)),
            (num(me)? as u32, num(per)? as u32),
            num(start)? as u64,
            num(seconds)?,
        )?;
        out.push_str(&line);
        out.push('\n');
        return Ok(ExitCode::SUCCESS);
    }
    let a: ServerArgs = parse("server", args)?;
    check_json_target(a.json.as_deref())?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::msg(format!("bench server: this program's path: {e}")))?;
    let r = amber_bench::server::run(&amber_bench::server::ServerConfig {
        parts: a.parts,
        rounds: a.rounds,
        hot: a.hot,
        round_trips: a.round_trips,
        seed: a.seed,
        dir: a.dir,
        serve_cmd: [exe.display().to_string(), "serve".into()]
            .into_iter()
            .chain(a.serve_args)
            .collect(),
        client_cmd: vec![exe.display().to_string(), "bench".into(), "server".into()],
        commits: a.commits,
        group_seconds: a.group_seconds,
    })?;
    out.push_str(&amber_bench::server::render(&r));
    write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
    Ok(ExitCode::SUCCESS)
}
