//! The paper's experiments: which configurations are run, over how many
//! seeds, and what is derived from them (means, confidence intervals, the
//! fetch-ratio break-even).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

use super::disk::Device;
use super::params::{Params, ServerKind};
use super::{RunMetrics, run_once};

/// Clients of the throughput-versus-clients experiments.
pub const CLIENTS: [u32; 6] = [20, 30, 40, 50, 60, 70];
/// Log sizes (pages) of the log-size table.
pub const LOG_PAGES: [u32; 6] = [26, 60, 325, 1500, 6000, 12000];
/// Log size of the first experiments ("arbitrarily", the paper says).
pub const FIRST_LOG_PAGES: u32 = 1500;
/// Log size of the page-server comparison: the paper's "good log size".
pub const GOOD_LOG_PAGES: u32 = 6000;
/// Fetch ratios (percent) of the break-even sweep.
pub const FETCH_SWEEP: [u32; 20] = [
    1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 25, 30, 35, 40, 45, 50, 55, 60,
];
/// Age weights `w` of the age-weight experiment (opportunistic server, 50
/// clients, fetch 20%, log 1,500 pages). `T_wait` is in ms and a
/// modification waits about 100 s in that log, so `w = 10⁻⁴` credits an
/// average entry about 10 ms — the scale of the positioning times SPTF
/// chooses between; the sweep spans two decades either side of pure SPTF
/// reaching, at 10⁻³, a credit that dominates any positioning time.
pub const AGE_WEIGHTS: [f64; 6] = [0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3];
/// First client count of the saturation sweep on present-day devices.
pub const SATURATION_FROM: u32 = 50;
/// Last client count the saturation sweep may reach.
pub const SATURATION_MAX: u32 = 3200;
/// Doubling the clients is saturated when no server gains this much.
pub const SATURATION_GAIN: f64 = 0.05;
/// Fetch ratios (percent) of the break-even at the saturation point.
pub const SATURATION_FETCH: [u32; 8] = [4, 8, 12, 16, 20, 25, 30, 40];

/// How many runs, how long.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Precision {
    /// Seeds per configuration.
    pub seeds: u32,
    /// First seed.
    pub seed: u64,
    /// Simulated seconds before measuring.
    pub warmup_s: f64,
    /// Simulated seconds measured.
    pub measure_s: f64,
}

impl Precision {
    /// The precision for runs with `clients` clients: the simulated
    /// durations shortened in proportion to the clients beyond
    /// [`SATURATION_FROM`], so that a run covers about as many transactions
    /// as one at 50 clients (at least 15 s of warm-up and 30 s measured).
    pub fn scaled(&self, clients: u32) -> Precision {
        let f = f64::from(SATURATION_FROM) / f64::from(clients.max(SATURATION_FROM));
        Precision {
            warmup_s: self.warmup_s.min((self.warmup_s * f).max(15.0)),
            measure_s: self.measure_s.min((self.measure_s * f).max(30.0)),
            ..*self
        }
    }
}

/// One configuration: a server and the parameters the experiments vary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Config {
    /// The server design.
    pub server: ServerKind,
    /// Clients.
    pub clients: u32,
    /// Fetch ratio in percent.
    pub fetch_pct: u32,
    /// Log pages (0 for the page server, which has no log).
    pub log_pages: u32,
    /// The age weight's bits (`f64::to_bits`, which orders non-negative
    /// weights as numbers), or `None` for the run's base weight.
    pub age_weight_bits: Option<u64>,
}

impl Config {
    /// `server` at `clients`, `fetch_pct` and `log_pages` (0 for the page
    /// server), with the run's base age weight.
    pub fn new(server: ServerKind, clients: u32, fetch_pct: u32, log_pages: u32) -> Self {
        let log_pages = if server.is_object_server() {
            log_pages
        } else {
            0
        };
        Self {
            server,
            clients,
            fetch_pct,
            log_pages,
            age_weight_bits: None,
        }
    }

    /// This configuration with age weight `w`.
    pub fn with_age_weight(self, w: f64) -> Self {
        Self {
            age_weight_bits: Some(w.to_bits()),
            ..self
        }
    }

    /// The age weight, if this configuration sets one.
    pub fn age_weight(&self) -> Option<f64> {
        self.age_weight_bits.map(f64::from_bits)
    }

    /// The parameters of this configuration on top of `base`.
    pub fn params(&self, base: &Params, precision: &Precision) -> Params {
        Params {
            clients: self.clients,
            fetch_ratio: f64::from(self.fetch_pct) / 100.0,
            log_pages: self.log_pages,
            age_weight: self.age_weight().unwrap_or(base.age_weight),
            warmup_s: precision.warmup_s,
            measure_s: precision.measure_s,
            ..base.clone()
        }
    }
}

/// Every configuration the experiments need, each once.
pub fn plan(base_fetch_pct: u32) -> Vec<Config> {
    use ServerKind::*;
    let f = base_fetch_pct;
    let mut all = Vec::new();
    for c in CLIENTS {
        for s in ServerKind::ALL {
            all.push(Config::new(s, c, f, FIRST_LOG_PAGES));
        }
        all.push(Config::new(Opportunistic, c, f, GOOD_LOG_PAGES));
        all.push(Config::new(
            Opportunistic,
            c,
            f.saturating_sub(4),
            GOOD_LOG_PAGES,
        ));
    }
    for log in LOG_PAGES {
        all.push(Config::new(Opportunistic, 50, f, log));
    }
    for pct in FETCH_SWEEP {
        all.push(Config::new(Page, 50, pct, 0));
        all.push(Config::new(Basic, 50, pct, FIRST_LOG_PAGES));
        all.push(Config::new(Opportunistic, 50, pct, GOOD_LOG_PAGES));
    }
    all.sort();
    all.dedup();
    all
}

/// The age-weight experiment: the opportunistic server at 50 clients and
/// the base fetch ratio with each weight of `weights`, and the absorbing
/// server (FIFO installation reads, the limit of a large weight).
pub fn age_weight_plan(base_fetch_pct: u32, weights: &[f64]) -> Vec<Config> {
    let mut all: Vec<Config> = weights
        .iter()
        .map(|&w| {
            Config::new(
                ServerKind::Opportunistic,
                50,
                base_fetch_pct,
                FIRST_LOG_PAGES,
            )
            .with_age_weight(w)
        })
        .collect();
    all.push(Config::new(
        ServerKind::Absorbing,
        50,
        base_fetch_pct,
        FIRST_LOG_PAGES,
    ));
    all.sort();
    all.dedup();
    all
}

/// The four servers at `clients` (log 1,500 pages, the base fetch ratio):
/// one step of the saturation sweep.
pub fn servers_at(clients: u32, base_fetch_pct: u32) -> Vec<Config> {
    ServerKind::ALL
        .iter()
        .map(|&s| Config::new(s, clients, base_fetch_pct, FIRST_LOG_PAGES))
        .collect()
}

/// What is run at the saturation point: the log-size table and the
/// break-even sweep (page, basic at 1,500 pages, opportunistic at 6,000).
pub fn saturated_plan(clients: u32, base_fetch_pct: u32) -> Vec<Config> {
    use ServerKind::*;
    let mut all = Vec::new();
    for log in LOG_PAGES {
        all.push(Config::new(Opportunistic, clients, base_fetch_pct, log));
    }
    for pct in SATURATION_FETCH {
        all.push(Config::new(Page, clients, pct, 0));
        all.push(Config::new(Basic, clients, pct, FIRST_LOG_PAGES));
        all.push(Config::new(Opportunistic, clients, pct, GOOD_LOG_PAGES));
    }
    all.sort();
    all.dedup();
    all
}

/// The client sweep on one device until it saturates: the client counts
/// run, the first count from which doubling gains no server
/// [`SATURATION_GAIN`] (`None`: not reached by [`SATURATION_MAX`]), and
/// every result, including the log-size table and break-even at that count
/// (or at the last count swept).
pub struct Saturation {
    /// Client counts run, doubling from [`SATURATION_FROM`].
    pub clients: Vec<u32>,
    /// Where the device (or the server CPU) saturates.
    pub saturated_at: Option<u32>,
    /// The count the log-size table and the break-even were run at.
    pub table_clients: u32,
    /// Every result.
    pub results: Results,
}

/// `base` with its write trigger scaled to `clients`: the same clean frames
/// per client as the default trigger has at 50 clients. The trigger is
/// chosen above the reads that can be under way, one per client; a fixed
/// 100 frames at 200 clients lets a fetched page be replaced before its
/// client's commit arrives (installation absorption fell from 28% to 10%).
pub fn scaled_trigger(base: &Params, clients: u32) -> Params {
    let scaled = u64::from(base.write_trigger) * u64::from(clients) / u64::from(SATURATION_FROM);
    Params {
        write_trigger: base
            .write_trigger
            .max(u32::try_from(scaled).unwrap_or(u32::MAX)),
        ..base.clone()
    }
}

/// Runs the saturation sweep on `device`.
pub fn saturation(
    base: &Params,
    base_fetch_pct: u32,
    device: &Device,
    precision: &Precision,
    threads: usize,
) -> Saturation {
    let mut results = Results::new();
    let mut clients = Vec::new();
    let mut n = SATURATION_FROM;
    let mut saturated_at = None;
    while n <= SATURATION_MAX {
        results.extend(run_all(
            &servers_at(n, base_fetch_pct),
            &scaled_trigger(base, n),
            device,
            &precision.scaled(n),
            threads,
        ));
        clients.push(n);
        if let [.., prev, _] = clients[..] {
            let gain = |s: ServerKind| {
                let tx = |c| {
                    results
                        .get(&Config::new(s, c, base_fetch_pct, FIRST_LOG_PAGES))
                        .map_or(0.0, |(r, _)| r.tx_per_s)
                };
                tx(n) / tx(prev) - 1.0
            };
            if ServerKind::ALL.iter().all(|&s| gain(s) < SATURATION_GAIN) {
                saturated_at = Some(prev);
                break;
            }
        }
        n *= 2;
    }
    let table_clients = saturated_at.unwrap_or(*clients.last().unwrap_or(&SATURATION_FROM));
    results.extend(run_all(
        &saturated_plan(table_clients, base_fetch_pct),
        &scaled_trigger(base, table_clients),
        device,
        &precision.scaled(table_clients),
        threads,
    ));
    Saturation {
        clients,
        saturated_at,
        table_clients,
        results,
    }
}

/// The mean over seeds of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `page`, `basic`, `absorbing` or `opportunistic`.
    pub server: &'static str,
    /// Clients.
    pub clients: u32,
    /// Fetch ratio (fraction).
    pub fetch_ratio: f64,
    /// Log pages (0: no log).
    pub log_pages: u32,
    /// Transactions per second.
    pub tx_per_s: f64,
    /// Half-width of the 95% confidence interval of `tx_per_s` over seeds.
    pub tx_ci: Option<f64>,
    /// Installations needing no installation read (fraction).
    pub i_abs: Option<f64>,
    /// Mean arm time of an installation read, ms.
    pub icost_ms: Option<f64>,
    /// Fraction of time the arm spent on installation reads.
    pub idsk: Option<f64>,
    /// Mean arm time of a dirty-page write, ms.
    pub wcost_ms: Option<f64>,
    /// Fraction of time the arm spent on writes.
    pub wdsk: Option<f64>,
}

/// Metrics of a configuration that the JSON rows leave out but the text
/// report shows.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Extra {
    /// Mean arm time of a fetch read, ms.
    pub fcost_ms: Option<f64>,
    /// Device utilisation.
    pub device_util: f64,
    /// Server CPU utilisation.
    pub cpu_util: f64,
    /// Modifications that found their page cached.
    pub modification_hit: Option<f64>,
    /// Fetches answered without a read of their own.
    pub fetch_hit: Option<f64>,
    /// Median wait of a modification in the log, ms.
    pub wait_p50_ms: Option<f64>,
    /// 99th percentile of that wait, ms.
    pub wait_p99_ms: Option<f64>,
    /// Longest wait (mean over seeds of each seed's longest), ms.
    pub wait_max_ms: Option<f64>,
}

/// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom.
pub fn t975(df: u32) -> f64 {
    const T: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match df {
        0 => f64::NAN,
        1..=10 => T[df as usize - 1],
        11..=20 => 2.086 + (2.228 - 2.086) * f64::from(20 - df) / 10.0,
        21..=30 => 2.042 + (2.086 - 2.042) * f64::from(30 - df) / 10.0,
        _ => 1.96,
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut s, mut n) = (0.0, 0usize);
    for x in xs {
        s += x;
        n += 1;
    }
    (n > 0).then(|| s / n as f64)
}

/// The mean and 95% confidence half-width of runs of `c`.
pub fn aggregate(c: &Config, runs: &[RunMetrics]) -> (Row, Extra) {
    let tx: Vec<f64> = runs.iter().map(|r| r.tx_per_s).collect();
    let m = mean(tx.iter().copied()).unwrap_or(0.0);
    let ci = (tx.len() > 1).then(|| {
        let var = tx.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (tx.len() - 1) as f64;
        t975(tx.len() as u32 - 1) * (var / tx.len() as f64).sqrt()
    });
    let opt = |f: fn(&RunMetrics) -> Option<f64>| mean(runs.iter().filter_map(f));
    let row = Row {
        server: c.server.name(),
        clients: c.clients,
        fetch_ratio: f64::from(c.fetch_pct) / 100.0,
        log_pages: c.log_pages,
        tx_per_s: m,
        tx_ci: ci,
        i_abs: opt(|r| r.i_abs),
        icost_ms: opt(|r| r.icost_ms),
        idsk: opt(|r| r.idsk),
        wcost_ms: opt(|r| r.wcost_ms),
        wdsk: opt(|r| Some(r.wdsk)),
    };
    let extra = Extra {
        fcost_ms: opt(|r| r.fcost_ms),
        device_util: opt(|r| Some(r.device_util)).unwrap_or(0.0),
        cpu_util: opt(|r| Some(r.cpu_util)).unwrap_or(0.0),
        modification_hit: opt(|r| r.modification_hit),
        fetch_hit: opt(|r| r.fetch_hit),
        wait_p50_ms: opt(|r| r.wait_p50_ms),
        wait_p99_ms: opt(|r| r.wait_p99_ms),
        wait_max_ms: opt(|r| r.wait_max_ms),
    };
    (row, extra)
}

/// Results of every configuration on one device.
pub type Results = BTreeMap<Config, (Row, Extra)>;

/// Runs every configuration of `plan` on `device` over the seeds, on
/// `threads` threads (the results do not depend on their number).
pub fn run_all(
    configs: &[Config],
    base: &Params,
    device: &Device,
    precision: &Precision,
    threads: usize,
) -> Results {
    let jobs: Vec<(usize, u64)> = (0..configs.len())
        .flat_map(|i| (0..u64::from(precision.seeds)).map(move |s| (i, precision.seed + s)))
        .collect();
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<RunMetrics>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(i, seed)) = jobs.get(j) else {
                        break;
                    };
                    let c = &configs[i];
                    let m = run_once(c.server, &c.params(base, precision), device, seed);
                    if let Ok(mut o) = out.lock() {
                        o[j] = Some(m);
                    }
                }
            });
        }
    });
    let done = out.into_inner().unwrap_or_default();
    let mut results = Results::new();
    for (i, c) in configs.iter().enumerate() {
        let runs: Vec<RunMetrics> = jobs
            .iter()
            .zip(&done)
            .filter(|((ci, _), _)| *ci == i)
            .filter_map(|(_, m)| *m)
            .collect();
        results.insert(*c, aggregate(c, &runs));
    }
    results
}

/// The fetch-ratio decrease an object server needs to equal the page server.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Breakeven {
    /// The page server's fetch ratio (fraction).
    pub fetch_ratio: f64,
    /// `basic` or `opportunistic`.
    pub server: &'static str,
    /// Percentage points the object server's fetch ratio must be lower;
    /// `None` when even the lowest fetch ratio swept does not suffice.
    pub decrease_points: Option<f64>,
}

/// The object server's fetch ratio (percent) at which its throughput equals
/// `target`, by linear interpolation on `curve` (fetch %, tx/s), which
/// decreases with the fetch ratio; `None` below the curve's highest point.
pub fn fetch_for_throughput(curve: &[(f64, f64)], target: f64) -> Option<f64> {
    let first = curve.first()?;
    if target > first.1 {
        return None;
    }
    for w in curve.windows(2) {
        let ((f0, t0), (f1, t1)) = (w[0], w[1]);
        if target <= t0 && target >= t1 {
            return Some(if t0 == t1 {
                f0
            } else {
                f0 + (t0 - target) / (t0 - t1) * (f1 - f0)
            });
        }
    }
    curve.last().map(|l| l.0)
}

/// The break-even decrease at every swept fetch ratio at 50 clients, for
/// the basic and the opportunistic servers.
pub fn breakeven(results: &Results) -> Vec<Breakeven> {
    breakeven_at(results, 50, &FETCH_SWEEP)
}

/// The break-even decrease at each fetch ratio of `sweep` at `clients`.
pub fn breakeven_at(results: &Results, clients: u32, sweep: &[u32]) -> Vec<Breakeven> {
    let curve = |server: ServerKind, log: u32| -> Vec<(f64, f64)> {
        sweep
            .iter()
            .filter_map(|&pct| {
                let c = Config::new(server, clients, pct, log);
                results.get(&c).map(|(r, _)| (f64::from(pct), r.tx_per_s))
            })
            .collect()
    };
    let page = curve(ServerKind::Page, 0);
    let mut out = Vec::new();
    for (server, log) in [
        (ServerKind::Basic, FIRST_LOG_PAGES),
        (ServerKind::Opportunistic, GOOD_LOG_PAGES),
    ] {
        let obj = curve(server, log);
        for &(pct, t) in &page {
            out.push(Breakeven {
                fetch_ratio: pct / 100.0,
                server: server.name(),
                decrease_points: fetch_for_throughput(&obj, t).map(|f| pct - f),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_finds_the_matching_fetch_ratio() {
        let curve = [(1.0, 240.0), (10.0, 230.0), (20.0, 200.0), (30.0, 150.0)];
        assert_eq!(fetch_for_throughput(&curve, 250.0), None);
        assert_eq!(fetch_for_throughput(&curve, 240.0), Some(1.0));
        assert_eq!(fetch_for_throughput(&curve, 215.0), Some(15.0));
        assert_eq!(fetch_for_throughput(&curve, 100.0), Some(30.0));
    }

    #[test]
    fn confidence_interval_quantiles() {
        assert_eq!(t975(4), 2.776);
        assert!(t975(0).is_nan());
        assert_eq!(t975(100), 1.96);
    }

    #[test]
    fn a_configuration_s_age_weight_overrides_the_base_weight() {
        let base = Params {
            age_weight: 0.5,
            ..Params::default()
        };
        let pr = Precision {
            seeds: 1,
            seed: 1,
            warmup_s: 1.0,
            measure_s: 2.0,
        };
        let plan = age_weight_plan(20, &[0.0, 1e-4]);
        assert_eq!(plan.len(), 3);
        let weights: Vec<f64> = plan
            .iter()
            .map(|c| c.params(&base, &pr).age_weight)
            .collect();
        // The absorbing server keeps the base weight (it does not use it).
        assert_eq!(weights, vec![0.5, 0.0, 1e-4]);
    }

    #[test]
    fn runs_with_more_clients_are_shorter_and_keep_clean_frames_per_client() {
        let pr = Precision {
            seeds: 1,
            seed: 1,
            warmup_s: 60.0,
            measure_s: 300.0,
        };
        assert_eq!(pr.scaled(50), pr);
        assert_eq!(
            (pr.scaled(200).warmup_s, pr.scaled(200).measure_s),
            (15.0, 75.0)
        );
        assert_eq!(
            (pr.scaled(3200).warmup_s, pr.scaled(3200).measure_s),
            (15.0, 30.0)
        );
        let base = Params::default();
        assert_eq!(scaled_trigger(&base, 50).write_trigger, 100);
        assert_eq!(scaled_trigger(&base, 20).write_trigger, 100);
        assert_eq!(scaled_trigger(&base, 800).write_trigger, 1600);
    }

    #[test]
    fn the_plan_holds_each_configuration_once() {
        let p = plan(20);
        let mut q = p.clone();
        q.dedup();
        assert_eq!(p, q);
        assert!(p.contains(&Config::new(ServerKind::Page, 50, 20, 1500)));
        assert!(p.contains(&Config::new(ServerKind::Opportunistic, 50, 16, 6000)));
    }
}
