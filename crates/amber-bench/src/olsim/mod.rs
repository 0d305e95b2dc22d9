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

pub mod beyond;
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
    /// Fetches answered without a read of their own (page cached, or a
    /// read of it under way).
    pub fetch_hit: Option<f64>,
    /// Median time a modification waited in the log for its installation
    /// (object servers), ms.
    pub wait_p50_ms: Option<f64>,
    /// 99th percentile of that wait, ms.
    pub wait_p99_ms: Option<f64>,
    /// Its maximum, counting the modification still waiting longest at
    /// the end of the run, ms.
    pub wait_max_ms: Option<f64>,
}

fn ratio(num: f64, den: u64) -> Option<f64> {
    (den > 0).then(|| num / den as f64)
}

/// Runs `server` on `device` for one seed and returns its metrics.
pub fn run_once(server: ServerKind, p: &Params, device: &Device, seed: u64) -> RunMetrics {
    let mut s = sim::Sim::new(server, p, device, seed);
    s.run();
    let mut m = metrics(server, p, device, &s.counters);
    if server.is_object_server() {
        s.waits.sort_by(f64::total_cmp);
        m.wait_p50_ms = percentile(&s.waits, 0.50);
        m.wait_p99_ms = percentile(&s.waits, 0.99);
        let longest = s.waits.last().copied().unwrap_or(0.0);
        m.wait_max_ms = Some(longest.max(s.oldest_wait()));
    }
    m
}

/// The `q` quantile of sorted `xs` (nearest rank: the smallest value with
/// at least a fraction `q` of the values at or below it); `None` when empty.
pub fn percentile(xs: &[f64], q: f64) -> Option<f64> {
    let last = xs.len().checked_sub(1)?;
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    xs.get(rank.min(last)).copied()
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
        fetch_hit: ratio(c.fetch_hits as f64, c.fetches),
        wait_p50_ms: None,
        wait_p99_ms: None,
        wait_max_ms: None,
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
    /// Also run the present-day devices (with their saturation sweeps).
    pub modern: bool,
    /// Age weights of the age-weight experiment (empty: not run).
    pub age_weights: Vec<f64>,
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
    let mut age_weight = Vec::new();
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
        text.push_str(&report::device_text(device, &results, &breakeven, &paper));
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
        if i == 0 && !cfg.age_weights.is_empty() {
            let started = std::time::Instant::now();
            let plan = experiments::age_weight_plan(base_pct, &cfg.age_weights);
            let r = experiments::run_all(&plan, &cfg.params, device, &cfg.precision, cfg.threads);
            age_weight = beyond::age_rows(&r);
            text.push_str(&beyond::age_text(device.name(), &age_weight));
            text.push_str(&format!(
                "({} configurations × {} seeds in {:.1} s)\n",
                plan.len(),
                cfg.precision.seeds,
                started.elapsed().as_secs_f64()
            ));
        }
        let saturation = (i > 0).then(|| {
            let started = std::time::Instant::now();
            let sat =
                experiments::saturation(&cfg.params, base_pct, device, &cfg.precision, cfg.threads);
            let be = experiments::breakeven_at(
                &sat.results,
                sat.table_clients,
                &experiments::SATURATION_FETCH,
            );
            text.push_str(&beyond::saturation_text(device.name(), &sat, &be));
            text.push_str(&format!(
                "({} configurations × {} seeds in {:.1} s)\n",
                sat.results.len(),
                cfg.precision.seeds,
                started.elapsed().as_secs_f64()
            ));
            charts.push((
                format!("olsim-{tag}-saturation.svg"),
                beyond::saturation_chart(device.name(), &sat),
            ));
            beyond::saturation_report(&sat, be)
        });
        runs.push(report::DeviceRun {
            device: device.clone(),
            servers: rows,
            breakeven,
            saturation,
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
        age_weight,
        devices: runs,
    };
    OlsimOutput {
        report,
        text,
        charts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.5), Some(50.0));
        assert_eq!(percentile(&xs, 0.99), Some(99.0));
        assert_eq!(percentile(&xs, 1.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    /// The age weight trades positioning for fairness: on a saturated disk
    /// a large weight shortens the longest wait in the log and makes
    /// installation reads dearer.
    #[test]
    fn the_age_weight_bounds_the_wait_at_a_positioning_cost() {
        let device = Device::Disk(Geometry::hp97560());
        let p = Params {
            clients: 40,
            database_pages: 40_000,
            memory_pages: 4000,
            log_pages: 300,
            write_trigger: 60,
            warmup_s: 10.0,
            measure_s: 60.0,
            ..Params::default()
        };
        let run = |w| {
            run_once(
                ServerKind::Opportunistic,
                &Params {
                    age_weight: w,
                    ..p.clone()
                },
                &device,
                3,
            )
        };
        let (sptf, aged) = (run(0.0), run(1e-2));
        let max = |m: &RunMetrics| m.wait_max_ms.unwrap_or(0.0);
        let cost = |m: &RunMetrics| m.icost_ms.unwrap_or(0.0);
        assert!(max(&aged) < 0.8 * max(&sptf), "{aged:?} against {sptf:?}");
        assert!(cost(&aged) > cost(&sptf), "{aged:?} against {sptf:?}");
        assert!(aged.wait_p50_ms <= aged.wait_p99_ms && aged.wait_p99_ms <= aged.wait_max_ms);
    }
}
