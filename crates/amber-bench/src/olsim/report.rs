//! The result of `amber bench olsim`: every configuration beside the
//! paper's published number with the difference in percent, as text and
//! as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::beyond::{AgeRow, SaturationReport};
use super::disk::Device;
use super::experiments::{
    Breakeven, CLIENTS, Config, FETCH_SWEEP, FIRST_LOG_PAGES, GOOD_LOG_PAGES, LOG_PAGES, Precision,
    Results, Row,
};
use super::params::{Params, ServerKind};
use super::validate::ValidationRow;

/// The paper's published rows (50 clients, fetch ratio 20%): the 50-client
/// table and the log-size table (the opportunistic 1,500-page row is in
/// both; it is given once, with the write metrics of the log-size table).
pub fn paper_rows() -> Vec<Row> {
    let row = |server: ServerKind, log, tx, i_abs, icost, idsk, w: Option<(f64, f64)>| Row {
        server: server.name(),
        clients: 50,
        fetch_ratio: 0.20,
        log_pages: log,
        tx_per_s: tx,
        tx_ci: None,
        i_abs: Some(i_abs),
        icost_ms: Some(icost),
        idsk: Some(idsk),
        wcost_ms: w.map(|w| w.0),
        wdsk: w.map(|w| w.1),
    };
    use ServerKind::*;
    vec![
        row(Basic, 1500, 150.0, 0.28, 19.0, 0.41, None),
        row(Absorbing, 1500, 150.0, 0.29, 19.0, 0.40, None),
        row(
            Opportunistic,
            26,
            159.0,
            0.28,
            16.2,
            0.37,
            Some((3.0, 0.09)),
        ),
        row(Opportunistic, 60, 195.0, 0.28, 8.2, 0.23, Some((3.0, 0.11))),
        row(
            Opportunistic,
            325,
            207.0,
            0.28,
            6.0,
            0.18,
            Some((3.0, 0.11)),
        ),
        row(
            Opportunistic,
            1500,
            214.0,
            0.29,
            4.8,
            0.15,
            Some((3.0, 0.12)),
        ),
        row(
            Opportunistic,
            6000,
            217.0,
            0.33,
            3.8,
            0.11,
            Some((3.2, 0.12)),
        ),
        row(
            Opportunistic,
            12000,
            217.0,
            0.36,
            3.3,
            0.09,
            Some((3.4, 0.13)),
        ),
    ]
}

/// The paper's break-even: a 4-point lower fetch ratio at 20%.
pub fn paper_breakeven() -> Vec<Breakeven> {
    vec![Breakeven {
        fetch_ratio: 0.20,
        server: ServerKind::Opportunistic.name(),
        decrease_points: Some(4.0),
    }]
}

/// The experiments on one device.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceRun {
    /// The device.
    pub device: Device,
    /// One row per configuration.
    pub servers: Vec<Row>,
    /// The break-even decreases.
    pub breakeven: Vec<Breakeven>,
    /// The client sweep until the device saturates (present-day devices).
    pub saturation: Option<SaturationReport>,
}

/// Parameters recorded in the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct RunParams {
    /// Every parameter (clients, fetch ratio and log pages are the defaults;
    /// the rows say what each configuration used).
    #[serde(flatten)]
    pub params: Params,
    /// Seeds and simulated durations.
    pub precision: Precision,
    /// The device of `servers`.
    pub device: Device,
}

/// `amber bench olsim`'s JSON document.
#[derive(Clone, Debug, Serialize)]
pub struct OlsimReport {
    /// `"olsim"`.
    pub benchmark: &'static str,
    /// The parameters.
    pub params: RunParams,
    /// The HP 97560 configurations.
    pub servers: Vec<Row>,
    /// The paper's published rows.
    pub paper: Vec<Row>,
    /// The break-even decreases on the HP 97560.
    pub breakeven: Vec<Breakeven>,
    /// The disk model's validation table.
    pub validation: Vec<ValidationRow>,
    /// The age-weight experiment on the HP 97560.
    pub age_weight: Vec<AgeRow>,
    /// The same experiments on present-day devices.
    pub devices: Vec<DeviceRun>,
}

fn diff(ours: Option<f64>, paper: Option<f64>) -> String {
    match (ours, paper) {
        (Some(o), Some(p)) if p != 0.0 => format!("{:+.0}%", (o - p) / p * 100.0),
        _ => "-".into(),
    }
}

pub(crate) fn num(v: Option<f64>, scale: f64, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{:.digits$}", v * scale))
}

fn find(rows: &[Row], server: ServerKind, clients: u32, pct: u32, log: u32) -> Option<&Row> {
    let log = if server.is_object_server() { log } else { 0 };
    rows.iter().find(|r| {
        r.server == server.name()
            && r.clients == clients
            && (r.fetch_ratio * 100.0).round() as u32 == pct
            && r.log_pages == log
    })
}

/// The rows of `results`, in the configurations' order.
pub fn rows(results: &Results) -> Vec<Row> {
    results.values().map(|(r, _)| r.clone()).collect()
}

pub(crate) fn metric_line(
    s: &mut String,
    label: &str,
    ours: Option<&Row>,
    paper: Option<&Row>,
    writes: bool,
) {
    let o = |f: fn(&Row) -> Option<f64>| ours.and_then(f);
    let p = |f: fn(&Row) -> Option<f64>| paper.and_then(f);
    let tx = |r: &Row| Some(r.tx_per_s);
    let _ = write!(
        s,
        "{label:<15} {:>6} ±{:<5} {:>5} {:>5} | {:>4} {:>4} | {:>5} {:>5} {:>5} | {:>3} {:>3}",
        num(o(tx), 1.0, 1),
        num(o(|r| r.tx_ci), 1.0, 1),
        num(p(tx), 1.0, 0),
        diff(o(tx), p(tx)),
        num(o(|r| r.i_abs), 100.0, 0),
        num(p(|r| r.i_abs), 100.0, 0),
        num(o(|r| r.icost_ms), 1.0, 1),
        num(p(|r| r.icost_ms), 1.0, 1),
        diff(o(|r| r.icost_ms), p(|r| r.icost_ms)),
        num(o(|r| r.idsk), 100.0, 0),
        num(p(|r| r.idsk), 100.0, 0),
    );
    if writes {
        let _ = write!(
            s,
            " | {:>4} {:>4} {:>5} | {:>3} {:>3}",
            num(o(|r| r.wcost_ms), 1.0, 1),
            num(p(|r| r.wcost_ms), 1.0, 1),
            diff(o(|r| r.wcost_ms), p(|r| r.wcost_ms)),
            num(o(|r| r.wdsk), 100.0, 0),
            num(p(|r| r.wdsk), 100.0, 0),
        );
    }
    s.push('\n');
}

/// The text tables of one device's results (`paper` empty for devices the
/// paper did not simulate).
pub fn device_text(
    device: &Device,
    results: &Results,
    breakeven: &[Breakeven],
    paper: &[Row],
) -> String {
    use ServerKind::*;
    let rows = rows(results);
    let name = device.name();
    let mut s = String::new();
    let _ = writeln!(s, "== {name} ==\n");
    let _ = writeln!(
        s,
        "Throughput (tx/s) against clients, fetch ratio 20%, log {FIRST_LOG_PAGES} pages (opportunistic also at log {GOOD_LOG_PAGES}, fetch 20% and 16%)"
    );
    let _ = write!(s, "{:<24}", "server");
    for c in CLIENTS {
        let _ = write!(s, "{c:>14}");
    }
    s.push('\n');
    let series = [
        ("page", Page, 20, 0),
        ("basic", Basic, 20, FIRST_LOG_PAGES),
        ("absorbing", Absorbing, 20, FIRST_LOG_PAGES),
        ("opportunistic", Opportunistic, 20, FIRST_LOG_PAGES),
        ("opp. log 6000", Opportunistic, 20, GOOD_LOG_PAGES),
        ("opp. log 6000 f=16%", Opportunistic, 16, GOOD_LOG_PAGES),
    ];
    for (label, server, pct, log) in series {
        let _ = write!(s, "{label:<24}");
        for c in CLIENTS {
            let cell = find(&rows, server, c, pct, log).map_or("-".into(), |r| {
                format!("{:.1}±{:.1}", r.tx_per_s, r.tx_ci.unwrap_or(0.0))
            });
            let _ = write!(s, "{cell:>14}");
        }
        s.push('\n');
    }
    let header =
        "                tx/s   ±ci   paper  diff | IAbs%ppr | ICost  ppr  diff | IDsk%ppr";
    let _ = writeln!(
        s,
        "\n50 clients, fetch ratio 20%, log {FIRST_LOG_PAGES} pages\n{header}"
    );
    for server in [Basic, Absorbing, Opportunistic] {
        metric_line(
            &mut s,
            server.name(),
            find(&rows, server, 50, 20, FIRST_LOG_PAGES),
            find(paper, server, 50, 20, FIRST_LOG_PAGES),
            false,
        );
    }
    let ours = |srv| find(&rows, srv, 50, 20, FIRST_LOG_PAGES).map(|r| r.tx_per_s);
    if let (Some(o), Some(b)) = (ours(Opportunistic), ours(Basic)) {
        let _ = writeln!(
            s,
            "opportunistic over basic: {:+.0}% (paper: +43%)",
            (o / b - 1.0) * 100.0
        );
    }
    let _ = writeln!(
        s,
        "\nOpportunistic server against log size, 50 clients, fetch ratio 20%\n{header} | WCost ppr diff | WDsk%ppr"
    );
    for log in LOG_PAGES {
        metric_line(
            &mut s,
            &format!("log {log}"),
            find(&rows, Opportunistic, 50, 20, log),
            find(paper, Opportunistic, 50, 20, log),
            true,
        );
    }
    let _ = writeln!(
        s,
        "\nPage server against object servers, 50 clients: tx/s against fetch ratio (opportunistic at log {GOOD_LOG_PAGES}, basic at {FIRST_LOG_PAGES}), and the decrease in fetch ratio (points) an object server needs to equal the page server"
    );
    let _ = writeln!(
        s,
        "{:>6} {:>8} {:>8} {:>8} | {:>9} {:>9}",
        "fetch%", "page", "basic", "opport.", "need bas.", "need opp."
    );
    for pct in FETCH_SWEEP {
        let tx = |server, log| find(&rows, server, 50, pct, log).map(|r| r.tx_per_s);
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
            "{pct:>6} {:>8} {:>8} {:>8} | {:>9} {:>9}",
            num(tx(Page, 0), 1.0, 1),
            num(tx(Basic, FIRST_LOG_PAGES), 1.0, 1),
            num(tx(Opportunistic, GOOD_LOG_PAGES), 1.0, 1),
            need(Basic),
            need(Opportunistic),
        );
    }
    let opp20 = breakeven
        .iter()
        .find(|b| b.server == "opportunistic" && (b.fetch_ratio * 100.0).round() as u32 == 20);
    if let Some(b) = opp20 {
        let _ = writeln!(
            s,
            "break-even at 20%: opportunistic needs {} points lower (paper: 4)",
            num(b.decrease_points, 1.0, 1)
        );
    }
    let _ = writeln!(
        s,
        "\nOther measures at 50 clients, fetch 20%: fetch-read arm cost, device and CPU utilisation, modifications hitting the cache"
    );
    for server in [Page, Basic, Absorbing, Opportunistic] {
        let log = if server == Page { 0 } else { FIRST_LOG_PAGES };
        let c = Config::new(server, 50, 20, log);
        if let Some((_, e)) = results.get(&c) {
            let _ = writeln!(
                s,
                "{:<14} FCost {} ms, device {:.0}%, CPU {:.0}%, hit {}%",
                server.name(),
                num(e.fcost_ms, 1.0, 1),
                e.device_util * 100.0,
                e.cpu_util * 100.0,
                num(e.modification_hit, 100.0, 0)
            );
        }
    }
    if let Device::Disk(g) = device {
        budget_text(&mut s, results, paper, g.controller_overhead_ms);
    }
    s
}

/// The disk-time budget of a fetch read: at saturation the disk time not
/// spent on installation reads and writes (1 − IDsk − WDsk) is spent on
/// fetch reads, so the paper's published rows say how long its fetch reads
/// took, device time included, which can be set beside ours (arm time plus
/// controller overhead). Our fetch hit ratio stands in for the paper's
/// (both are the cache's share of a uniformly accessed database).
fn budget_text(s: &mut String, results: &Results, paper: &[Row], overhead_ms: f64) {
    let lines: Vec<String> = LOG_PAGES
        .iter()
        .filter_map(|&log| {
            let p = find(paper, ServerKind::Opportunistic, 50, 20, log)?;
            let (_, e) = results.get(&Config::new(ServerKind::Opportunistic, 50, 20, log))?;
            let free = 1.0 - p.idsk? - p.wdsk?;
            let reads_per_s = p.tx_per_s * 0.20 * (1.0 - e.fetch_hit?);
            Some(format!(
                "log {log:>5}: paper {:>5.1} ms | ours {:>5.1} ms ({:.1} arm + {overhead_ms:.1} overhead)",
                free * 1000.0 / reads_per_s,
                e.fcost_ms? + overhead_ms,
                e.fcost_ms?,
            ))
        })
        .collect();
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nDevice time per fetch read, opportunistic server, 50 clients, fetch 20% (paper: (1 - IDsk - WDsk) / fetch reads per second, at a saturated disk; a FIFO installation read costs it {:.1} ms of arm time)",
        find(paper, ServerKind::Basic, 50, 20, FIRST_LOG_PAGES)
            .and_then(|r| r.icost_ms)
            .unwrap_or(f64::NAN)
    );
    for l in lines {
        let _ = writeln!(s, "{l}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olsim::experiments::Extra;

    /// The paper's 1,500-page row (214 tx/s, IDsk 15%, WDsk 12%) with a
    /// tenth of the fetches hitting the cache leaves 730 ms a second for
    /// 38.5 fetch reads: 19.0 ms each.
    #[test]
    fn the_budget_derives_the_paper_s_fetch_read_time() {
        let c = Config::new(ServerKind::Opportunistic, 50, 20, 1500);
        let row = find(&paper_rows(), ServerKind::Opportunistic, 50, 20, 1500)
            .cloned()
            .expect("the paper's row");
        let extra = Extra {
            fcost_ms: Some(22.0),
            fetch_hit: Some(0.1),
            ..Extra::default()
        };
        let results = Results::from([(c, (row, extra))]);
        let mut s = String::new();
        budget_text(&mut s, &results, &paper_rows(), 2.2);
        assert!(
            s.contains("log  1500: paper  19.0 ms | ours  24.2 ms (22.0 arm + 2.2 overhead)"),
            "{s}"
        );
    }
}
