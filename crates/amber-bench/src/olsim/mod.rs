//! `amber bench olsim`: O'Toole & Shrira's opportunistic-log simulation
//! (OSDI 1994) reproduced: a deterministic discrete-event simulator of
//! clients, network, server CPU, non-volatile server memory (page cache and
//! object log) and a disk, and the paper's experiments on it.
//!
//! - [`disk`]: the HP 97560 (and other devices) — geometry, seek curve,
//!   skew, rotation, controller overhead;
//! - [`pool`]: pending operations by cylinder, SPTF by branch and bound;
//! - [`cache`], [`log`]: the page cache and the object log;
//! - [`params`]: a run's parameters and the four server designs;
//! - [`sim`]: the event loop: clients, network, CPU, device, servers;
//! - [`validate`]: the disk model's validation table;
//! - [`experiments`]: the paper's experiments over seeds, with confidence
//!   intervals, and the break-even search;
//! - [`report`], [`plot`]: tables beside the paper's numbers, JSON, SVG.

pub mod cache;
pub mod devices;
pub mod disk;
pub mod experiments;
pub mod log;
pub mod params;
pub mod plot;
pub mod pool;
pub mod report;
pub mod sim;
pub mod validate;

use serde::Serialize;

pub use disk::{Device, Flash, Geometry};
pub use params::{Params, ServerKind};

/// The paper's metrics for one run (one seed).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RunMetrics {
    /// Committed transactions per second.
    pub tx_per_s: f64,
    /// Installations that needed no installation read (object servers).
    pub i_abs: Option<f64>,
    /// Mean arm time of an installation read, ms.
    pub icost_ms: Option<f64>,
    /// Fraction of time the arm spent on installation reads.
    pub idsk: Option<f64>,
    /// Mean arm time of a dirty-page write, ms.
    pub wcost_ms: Option<f64>,
    /// Fraction of time the arm spent on writes.
    pub wdsk: f64,
    /// Mean arm time of a fetch read, ms.
    pub fcost_ms: Option<f64>,
    /// Fraction of time the device was busy (with controller overhead).
    pub device_util: f64,
    /// Fraction of time the server CPU was busy.
    pub cpu_util: f64,
    /// Modifications that found their page in the server cache.
    pub modification_hit: Option<f64>,
}

fn ratio(num: f64, den: u64) -> Option<f64> {
    (den > 0).then(|| num / den as f64)
}

/// Runs `server` on `device` for one seed and returns its metrics.
pub fn run_once(server: ServerKind, p: &Params, device: &Device, seed: u64) -> RunMetrics {
    let mut s = sim::Sim::new(server, p, device, seed);
    s.run();
    metrics(server, p, device, &s.counters)
}

/// The paper's metrics from the counters of a run.
pub fn metrics(server: ServerKind, p: &Params, device: &Device, c: &sim::Counters) -> RunMetrics {
    let ms = p.measure_s * 1000.0;
    let object = server.is_object_server();
    RunMetrics {
        tx_per_s: c.transactions as f64 / p.measure_s,
        i_abs: (object && c.modifications > 0)
            .then(|| 1.0 - c.install_reads as f64 / c.modifications as f64),
        icost_ms: ratio(c.install_arm_ms, c.install_reads).filter(|_| object),
        idsk: object.then(|| c.install_arm_ms / ms),
        wcost_ms: ratio(c.write_arm_ms, c.writes),
        wdsk: c.write_arm_ms / ms,
        fcost_ms: ratio(c.fetch_arm_ms, c.fetch_reads),
        device_util: c.device_busy_ms / ms / f64::from(device.channels()),
        cpu_util: c.cpu_busy_ms / ms,
        modification_hit: ratio(c.modification_hits as f64, c.modifications),
    }
}

/// What `amber bench olsim` runs.
#[derive(Clone, Debug)]
pub struct OlsimConfig {
    /// Parameters (clients, fetch ratio and log size are varied by the
    /// experiments; `fetch_ratio` is the base of the experiments at 20%).
    pub params: Params,
    /// The HP 97560 (with any overridden parameter).
    pub disk: Geometry,
    /// Seeds and simulated durations.
    pub precision: experiments::Precision,
    /// Threads running simulations.
    pub threads: usize,
    /// Also run the present-day devices.
    pub modern: bool,
    /// Requests per line of the disk validation table.
    pub validation_requests: usize,
}

/// The report, its text and its charts (file suffix, SVG).
pub struct OlsimOutput {
    /// The JSON document.
    pub report: report::OlsimReport,
    /// The text tables.
    pub text: String,
    /// SVG charts: (name, document).
    pub charts: Vec<(String, String)>,
}

/// Runs every experiment.
pub fn run_bench(cfg: &OlsimConfig) -> OlsimOutput {
    let base_pct = (cfg.params.fetch_ratio * 100.0).round() as u32;
    let plan = experiments::plan(base_pct);
    let mut devices = vec![Device::Disk(cfg.disk.clone())];
    if cfg.modern {
        devices.push(Device::Disk(devices::travelstar_7k320()));
        devices.push(Device::Flash(devices::evo_970_plus()));
    }
    let validation = validate::table(&cfg.disk, cfg.validation_requests, cfg.precision.seed);
    let mut text = validate::table_text(&validation);
    let mut charts = Vec::new();
    let mut runs = Vec::new();
    for (i, device) in devices.iter().enumerate() {
        let started = std::time::Instant::now();
        let results = experiments::run_all(&plan, &cfg.params, device, &cfg.precision, cfg.threads);
        let breakeven = experiments::breakeven(&results);
        let paper = if i == 0 {
            report::paper_rows()
        } else {
            Vec::new()
        };
        text.push('\n');
        text.push_str(&report::device_text(
            device.name(),
            &results,
            &breakeven,
            &paper,
        ));
        text.push_str(&format!(
            "({} configurations × {} seeds in {:.1} s)\n",
            plan.len(),
            cfg.precision.seeds,
            started.elapsed().as_secs_f64()
        ));
        let rows = report::rows(&results);
        let tag = match i {
            0 => "hp97560",
            1 => "7k320",
            _ => "ssd",
        };
        for (suffix, svg) in plot::charts(device.name(), &rows, &breakeven) {
            charts.push((format!("olsim-{tag}-{suffix}.svg"), svg));
        }
        runs.push(report::DeviceRun {
            device: device.clone(),
            servers: rows,
            breakeven,
        });
    }
    let first = runs.remove(0);
    let report = report::OlsimReport {
        benchmark: "olsim",
        params: report::RunParams {
            params: cfg.params.clone(),
            precision: cfg.precision,
            device: first.device,
        },
        servers: first.servers,
        paper: report::paper_rows(),
        breakeven: first.breakeven,
        validation,
        devices: runs,
    };
    OlsimOutput {
        report,
        text,
        charts,
    }
}
