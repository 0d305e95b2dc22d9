//! `amber bench olsim`: the opportunistic-log simulation.

use super::{check_json_target, parse, write_json};
use crate::error::CliError;
use amber_bench::olsim::{self, OlsimConfig};
use clap::Parser;
use std::fmt::Write as _;
use std::path::PathBuf;

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
    /// Age weight w of T_eff = T_pos - w·T_wait (opportunistic server), for
    /// every experiment but the age-weight sweep.
    #[arg(long, default_value_t = 0.0)]
    age_weight: f64,
    /// The age-weight sweep: the weights w to run (T_wait in ms), comma
    /// separated; `--age-weights` with no value skips it.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_values_t = olsim::experiments::AGE_WEIGHTS)]
    age_weights: Vec<f64>,
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

/// `amber bench olsim [ARGS]...`.
pub(super) fn run(args: &[String], out: &mut String) -> Result<(), CliError> {
    let a: OlsimArgs = parse("olsim", args)?;
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
    if a.seeds == 0
        || a.write_trigger == 0
        || !a
            .age_weights
            .iter()
            .chain([&a.age_weight])
            .all(|w| w.is_finite() && *w >= 0.0)
        || !(0.0..=1.0).contains(&a.write_ratio)
        || a.fetch_pct > 100
    {
        return Err(CliError::msg(
            "bench olsim: --seeds and --write-trigger must be at least 1, --write-ratio in 0..1, --fetch-pct in 0..100, age weights finite and not negative",
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
        age_weights: a.age_weights.clone(),
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
