//! The experiments beyond the paper's tables, as text, JSON and charts: the
//! age weight of the opportunistic scheduler (`T_eff = T_pos − w·T_wait`)
//! against throughput and the time modifications wait in the log, and the
//! present-day devices swept over clients until they saturate.

use std::fmt::Write as _;

use serde::Serialize;

use super::experiments::{
    Breakeven, Config, Extra, FIRST_LOG_PAGES, LOG_PAGES, Results, Row, SATURATION_FETCH,
    Saturation,
};
use super::params::ServerKind;
use super::plot::{Series, line_chart};
use super::report::{metric_line, num};

/// One line of the age-weight experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgeRow {
    /// `opportunistic`, or `absorbing` (FIFO installation reads, the limit
    /// of a large weight).
    pub server: &'static str,
    /// Clients.
    pub clients: u32,
    /// Fetch ratio (fraction).
    pub fetch_ratio: f64,
    /// Log pages.
    pub log_pages: u32,
    /// The age weight `w` (`None` for the absorbing server).
    pub age_weight: Option<f64>,
    /// Transactions per second.
    pub tx_per_s: f64,
    /// Half-width of its 95% confidence interval over seeds.
    pub tx_ci: Option<f64>,
    /// Mean arm time of an installation read, ms.
    pub icost_ms: Option<f64>,
    /// Fraction of time the arm spent on installation reads.
    pub idsk: Option<f64>,
    /// Median wait of a modification in the log, ms (mean over seeds).
    pub wait_p50_ms: Option<f64>,
    /// Its 99th percentile, ms (mean over seeds).
    pub wait_p99_ms: Option<f64>,
    /// Its maximum, including the entry still waiting longest at the end of
    /// the run, ms (mean over seeds of each seed's maximum).
    pub wait_max_ms: Option<f64>,
}

/// The age-weight experiment's rows: the opportunistic server by weight,
/// then the absorbing server.
pub fn age_rows(results: &Results) -> Vec<AgeRow> {
    let mut out: Vec<AgeRow> = results
        .iter()
        .map(|(c, (r, e))| AgeRow {
            server: r.server,
            clients: r.clients,
            fetch_ratio: r.fetch_ratio,
            log_pages: r.log_pages,
            age_weight: c.age_weight(),
            tx_per_s: r.tx_per_s,
            tx_ci: r.tx_ci,
            icost_ms: r.icost_ms,
            idsk: r.idsk,
            wait_p50_ms: e.wait_p50_ms,
            wait_p99_ms: e.wait_p99_ms,
            wait_max_ms: e.wait_max_ms,
        })
        .collect();
    out.sort_by(|a, b| {
        (a.server == "absorbing")
            .cmp(&(b.server == "absorbing"))
            .then(
                a.age_weight
                    .unwrap_or(0.0)
                    .total_cmp(&b.age_weight.unwrap_or(0.0)),
            )
    });
    out
}

/// The age-weight table.
pub fn age_text(device: &str, rows: &[AgeRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nAge weight on the {device}: opportunistic server, T_eff = T_pos - w·T_wait (ms), 50 clients, fetch ratio 20%, log {FIRST_LOG_PAGES} pages; absorbing (FIFO) below\n{:<22} {:>7} {:>6} {:>6} {:>5} | {:>8} {:>8} {:>8}",
        "w", "tx/s", "±ci", "ICost", "IDsk%", "wait p50", "p99 s", "max s"
    );
    for r in rows {
        let label = match r.age_weight {
            Some(w) => format!("opportunistic {w:e}"),
            None => r.server.to_string(),
        };
        let _ = writeln!(
            s,
            "{label:<22} {:>7.1} {:>6} {:>6} {:>5} | {:>8} {:>8} {:>8}",
            r.tx_per_s,
            num(r.tx_ci, 1.0, 1),
            num(r.icost_ms, 1.0, 1),
            num(r.idsk, 100.0, 0),
            num(r.wait_p50_ms, 0.001, 1),
            num(r.wait_p99_ms, 0.001, 1),
            num(r.wait_max_ms, 0.001, 1),
        );
    }
    s
}

/// One configuration of the saturation sweep, with the utilisations that
/// show what saturates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SaturationRow {
    /// The configuration's metrics (the keys of `servers`).
    #[serde(flatten)]
    pub row: Row,
    /// Fraction of time the device was busy (per channel).
    pub device_util: f64,
    /// Fraction of time the server CPU was busy.
    pub cpu_util: f64,
}

/// The saturation sweep of one device, as recorded in the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct SaturationReport {
    /// Client counts swept (doubling).
    pub clients: Vec<u32>,
    /// The first count from which doubling gains no server 5% (`None`:
    /// not reached).
    pub saturated_at: Option<u32>,
    /// The count of the log-size table and the break-even.
    pub table_clients: u32,
    /// Every configuration run.
    pub servers: Vec<SaturationRow>,
    /// The break-even decreases at `table_clients`.
    pub breakeven: Vec<Breakeven>,
}

/// The JSON record of a sweep.
pub fn saturation_report(sat: &Saturation, breakeven: Vec<Breakeven>) -> SaturationReport {
    SaturationReport {
        clients: sat.clients.clone(),
        saturated_at: sat.saturated_at,
        table_clients: sat.table_clients,
        servers: sat
            .results
            .values()
            .map(|(r, e)| SaturationRow {
                row: r.clone(),
                device_util: e.device_util,
                cpu_util: e.cpu_util,
            })
            .collect(),
        breakeven,
    }
}

fn get(
    results: &Results,
    server: ServerKind,
    clients: u32,
    pct: u32,
    log: u32,
) -> Option<&(Row, Extra)> {
    results.get(&Config::new(server, clients, pct, log))
}

/// The sweep's tables: throughput and utilisations against clients, the
/// installation metrics, the log-size table and the break-even at the
/// saturation point.
pub fn saturation_text(device: &str, sat: &Saturation, breakeven: &[Breakeven]) -> String {
    use ServerKind::*;
    let r = &sat.results;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nSaturation sweep on the {device}: clients doubled until no server gains 5%, fetch ratio 20%, log {FIRST_LOG_PAGES} pages, write trigger in proportion to clients (as many frames per client as at 50); tx/s (device busy %, CPU busy %)"
    );
    let _ = write!(s, "{:<14}", "clients");
    for c in &sat.clients {
        let _ = write!(s, "{c:>19}");
    }
    s.push('\n');
    for server in ServerKind::ALL {
        let _ = write!(s, "{:<14}", server.name());
        for &c in &sat.clients {
            let cell = get(r, server, c, 20, FIRST_LOG_PAGES).map_or("-".into(), |(row, e)| {
                format!(
                    "{:.0} ({:.0}, {:.0})",
                    row.tx_per_s,
                    e.device_util * 100.0,
                    e.cpu_util * 100.0
                )
            });
            let _ = write!(s, "{cell:>19}");
        }
        s.push('\n');
    }
    let _ = write!(s, "{:<14}", "opp./basic");
    for &c in &sat.clients {
        let tx = |srv| get(r, srv, c, 20, FIRST_LOG_PAGES).map(|(row, _)| row.tx_per_s);
        let cell = match (tx(Opportunistic), tx(Basic)) {
            (Some(o), Some(b)) => format!("{:+.0}%", (o / b - 1.0) * 100.0),
            _ => "-".into(),
        };
        let _ = write!(s, "{cell:>19}");
    }
    s.push('\n');
    let n = sat.table_clients;
    let _ = match sat.saturated_at {
        Some(at) => writeln!(s, "saturated from {at} clients"),
        None => writeln!(s, "not saturated by {n} clients"),
    };
    let header =
        "                tx/s   ±ci   paper  diff | IAbs%ppr | ICost  ppr  diff | IDsk%ppr";
    let _ = writeln!(
        s,
        "\n{n} clients, fetch ratio 20%, log {FIRST_LOG_PAGES} pages\n{header}"
    );
    for server in [Basic, Absorbing, Opportunistic] {
        let row = get(r, server, n, 20, FIRST_LOG_PAGES).map(|(row, _)| row);
        metric_line(&mut s, server.name(), row, None, false);
    }
    let _ = writeln!(
        s,
        "\nOpportunistic server against log size, {n} clients, fetch ratio 20%\n{header} | WCost ppr diff | WDsk%ppr"
    );
    for log in LOG_PAGES {
        let row = get(r, Opportunistic, n, 20, log).map(|(row, _)| row);
        metric_line(&mut s, &format!("log {log}"), row, None, true);
    }
    let _ = writeln!(
        s,
        "\nBreak-even at {n} clients: decrease in fetch ratio (points) an object server needs to equal the page server"
    );
    for pct in SATURATION_FETCH {
        let need = |server: ServerKind| {
            breakeven
                .iter()
                .find(|b| {
                    b.server == server.name() && (b.fetch_ratio * 100.0).round() as u32 == pct
                })
                .map_or("-".into(), |b| num(b.decrease_points, 1.0, 1))
        };
        let _ = writeln!(
            s,
            "fetch {pct:>2}%: basic {:>5}, opportunistic {:>5}",
            need(Basic),
            need(Opportunistic)
        );
    }
    s
}

/// Throughput against clients over the sweep (log scale), one line per
/// server.
pub fn saturation_chart(device: &str, sat: &Saturation) -> String {
    let series: Vec<Series> = ServerKind::ALL
        .iter()
        .map(|&server| {
            let pts = sat
                .clients
                .iter()
                .filter_map(|&c| {
                    get(&sat.results, server, c, 20, FIRST_LOG_PAGES)
                        .map(|(row, _)| (f64::from(c), row.tx_per_s))
                })
                .collect();
            (server.name().to_string(), pts)
        })
        .collect();
    line_chart(
        &format!("{device}: throughput until saturation, fetch ratio 20%"),
        "clients",
        "tx/s",
        &series,
        true,
    )
}
