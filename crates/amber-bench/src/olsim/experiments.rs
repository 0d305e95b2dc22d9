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
}

impl Config {
    fn new(server: ServerKind, clients: u32, fetch_pct: u32, log_pages: u32) -> Self {
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
        }
    }

    /// The parameters of this configuration on top of `base`.
    pub fn params(&self, base: &Params, precision: &Precision) -> Params {
        Params {
            clients: self.clients,
            fetch_ratio: f64::from(self.fetch_pct) / 100.0,
            log_pages: self.log_pages,
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

/// The break-even decrease at every swept fetch ratio, for the basic and
/// the opportunistic servers.
pub fn breakeven(results: &Results) -> Vec<Breakeven> {
    let curve = |server: ServerKind, log: u32| -> Vec<(f64, f64)> {
        FETCH_SWEEP
            .iter()
            .filter_map(|&pct| {
                let c = Config::new(server, 50, pct, log);
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
    fn the_plan_holds_each_configuration_once() {
        let p = plan(20);
        let mut q = p.clone();
        q.dedup();
        assert_eq!(p, q);
        assert!(p.contains(&Config::new(ServerKind::Page, 50, 20, 1500)));
        assert!(p.contains(&Config::new(ServerKind::Opportunistic, 50, 16, 6000)));
    }
}
