//! `amber bench epvm`: White & DeWitt's architectures on OO1, and the child
//! process each experiment runs in (`amber bench epvm __epvm-child`).

use super::{check_json_target, parse, verdict, write_json};
use crate::error::CliError;
use amber_bench::epvm::{self, CHILD_SUBCOMMAND, EXPERIMENTS, EpvmConfig, Version};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `amber bench epvm`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench epvm",
    about = "White & DeWitt's object faulting and pointer swizzling study (VLDB 1992) on OO1: CESM (a call per access over a buffer pool of the store's pages), EPVM 1.0 with and without swizzling of local pointers (an OID hash table into pinned objects), EPVM 2.0's copy architecture through Amber's object cache (object and page caching, swizzling upon discovery lazily, eagerly or not at all, a smaller buffer pool), and Amber's page-fault mapping (ObjectStore's analogue); cold, warm and hot iterations in one transaction or one per iteration, updates with probability p, hot sweeps to 1,000 iterations, Figure 11's larger part with a share of its array updated, every answer checked"
)]
struct EpvmArgs {
    /// Database sizes in parts (comma-separated); up to 20,000 the small database's experiments, above the large one's.
    #[arg(long, value_delimiter = ',', default_values_t = [20_000u32, 125_000, 200_000])]
    parts: Vec<u32>,
    /// Versions (comma-separated): cesm, epvm1, epvm1-no, oc, oc-no, oc-eager, oc-small-pool, pc, pc-no, mapped.
    #[arg(long, value_delimiter = ',', default_values_t = Version::ALL)]
    versions: Vec<Version>,
    /// Experiments (comma-separated): single, per-iteration, update, sweep, fig11 (Figure 11: the part with a 19-integer array, a growing share of it updated; the versions over Amber's objects).
    #[arg(long, value_delimiter = ',', default_values_t = EXPERIMENTS.map(String::from))]
    experiments: Vec<String>,
    /// Update probabilities of the update figures (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = amber_bench::oo1::ops::UPDATE_PROBABILITIES)]
    ps: Vec<f64>,
    /// Hot iterations of the sweeps (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1, 10, 50, 100, 200, 400, 600, 1000])]
    sweep: Vec<usize>,
    /// Update probabilities of the sweeps (comma-separated; the paper: 0 and 0.01).
    #[arg(long, value_delimiter = ',', default_values_t = [0.0f64, 0.01])]
    sweep_ps: Vec<f64>,
    /// Buffer pool of the baselines and cache budget of mapped and oc/oc-no/oc-eager, in 4 KiB pages (default: the paper's 5 MB scaled to these databases); oc-small-pool, pc and pc-no get a fifth.
    #[arg(long)]
    pool_pages: Option<usize>,
    /// Runs of every cell (medians are reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seed of the databases and the inputs (as `amber bench oo1 --seed`).
    #[arg(long, default_value_t = amber_bench::oo1::args::DEFAULT_SEED)]
    seed: u64,
    /// Directory for the databases (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `amber bench epvm [ARGS]...`.
pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        return epvm::run_epvm_child()
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| CliError::msg(format!("bench epvm: {e}")));
    }
    let a: EpvmArgs = parse("epvm", args)?;
    check_json_target(a.json.as_deref())?;
    let config = EpvmConfig {
        parts: a.parts,
        versions: a.versions,
        experiments: a.experiments,
        ps: a.ps,
        sweep: a.sweep,
        sweep_ps: a.sweep_ps,
        pool_pages: a.pool_pages.unwrap_or_else(epvm::scaled_pool_pages),
        rounds: a.rounds,
        seed: a.seed,
        dir: a.dir,
        child_args: vec!["bench".into(), "epvm".into(), CHILD_SUBCOMMAND.into()],
    };
    let (report, problems) =
        epvm::run(&config).map_err(|e| CliError::msg(format!("bench epvm: {e}")))?;
    out.push_str(&report.table());
    write_json(
        a.json.as_deref(),
        |p| amber_bench::json::write(p, &report),
        out,
    )?;
    verdict("epvm", &problems)
}
