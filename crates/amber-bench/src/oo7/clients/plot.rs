//! `--plot DIR`: the paper's figures as measured here (`papers/002_*`
//! §5), one SVG each, drawn by olsim's [`line_chart`]: for every cache
//! setting and traversal the response time and the throughput against
//! the number of clients, a line per scheme (Figures 4–8 unconstrained,
//! 10–13 constrained), and the pages shipped per transaction, all, and
//! log-record pages in a chart of their own (Figures 9 and 14). The paper draws those two as bars
//! per system at a fixed load; here they are lines against the clients,
//! which also shows whether they move with the load.

use super::args::Cache;
use super::report::{ClientsReport, Row};
use crate::olsim::plot::{Series, line_chart};

/// The paper's figure for `cache`, `op` and the measure `what`
/// (`response`, `throughput`, `pages`, `log-pages`), if it drew one.
fn paper_figure(cache: Cache, op: &str, what: &str) -> Option<u32> {
    let n = match (cache, op, what) {
        (_, "t1", _) | (Cache::Constrained, "t2c", _) => return None,
        (Cache::Unconstrained, _, "pages" | "log-pages") => 9,
        (Cache::Constrained, _, "pages" | "log-pages") => 14,
        (Cache::Unconstrained, "t2a", "response") => 4,
        (Cache::Unconstrained, "t2a", _) => 5,
        (Cache::Unconstrained, "t2b", "response") => 6,
        (Cache::Unconstrained, "t2b", _) => 7,
        (Cache::Unconstrained, "t2c", "response") => 8,
        (Cache::Constrained, "t2a", "response") => 10,
        (Cache::Constrained, "t2a", _) => 11,
        (Cache::Constrained, "t2b", "response") => 12,
        (Cache::Constrained, "t2b", _) => 13,
        _ => return None,
    };
    Some(n)
}

/// A line per scheme of `pick` against the clients, over the rows of
/// `cache` and `op` (schemes in the run's order; a scheme without the
/// measure, a peer's pages, has no line).
fn series(rows: &[Row], cache: Cache, op: &str, pick: fn(&Row) -> Option<f64>) -> Vec<Series> {
    let cell = |r: &&Row| r.cache == cache && r.op == op;
    let mut schemes: Vec<&str> = Vec::new();
    for r in rows.iter().filter(cell) {
        if !schemes.contains(&r.scheme.as_str()) {
            schemes.push(&r.scheme);
        }
    }
    schemes
        .into_iter()
        .map(|s| {
            let pts = (rows.iter().filter(cell).filter(|r| r.scheme == s))
                .filter_map(|r| pick(r).map(|y| (f64::from(r.clients), y)))
                .collect();
            (s.to_string(), pts)
        })
        .filter(|(_, pts): &Series| !pts.is_empty())
        .collect()
}

/// The charts of `report`: (file name, SVG).
pub fn charts(report: &ClientsReport) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cells: Vec<(Cache, &str)> = Vec::new();
    for r in &report.rows {
        if !cells.contains(&(r.cache, r.op.as_str())) {
            cells.push((r.cache, &r.op));
        }
    }
    for (cache, op) in cells {
        let title = |what: &str, label: &str| {
            let figure = match paper_figure(cache, op, what) {
                Some(n) => format!("the paper's Figure {n}"),
                None => "no figure in the paper".into(),
            };
            format!("{} {label}, {} ({figure})", op.to_uppercase(), cache.name())
        };
        let mut chart = |what: &str, label: &str, y: &str, s: Vec<Series>| {
            if !s.is_empty() {
                let svg = line_chart(&title(what, label), "clients", y, &s, false);
                out.push((format!("oo7-clients-{}-{op}-{what}.svg", cache.name()), svg));
            }
        };
        let rows = &report.rows;
        chart(
            "response",
            "response time",
            "ms per transaction (median)",
            series(rows, cache, op, |r| Some(r.response_ms)),
        );
        chart(
            "throughput",
            "throughput",
            "transactions per second",
            series(rows, cache, op, |r| Some(r.tx_per_s)),
        );
        // Pages only where a transaction ships some (not T1).
        let ships = (rows.iter())
            .any(|r| r.cache == cache && r.op == op && r.pages_shipped.is_some_and(|p| p > 0.0));
        if ships {
            chart(
                "pages",
                "pages shipped",
                "pages per transaction (data and log)",
                series(rows, cache, op, |r| r.pages_shipped),
            );
            chart(
                "log-pages",
                "log-record pages shipped",
                "log pages per transaction",
                series(rows, cache, op, |r| r.log_pages_shipped),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_the_papers() {
        let un = Cache::Unconstrained;
        let con = Cache::Constrained;
        assert_eq!(paper_figure(un, "t2a", "response"), Some(4));
        assert_eq!(paper_figure(un, "t2b", "throughput"), Some(7));
        assert_eq!(paper_figure(un, "t2c", "response"), Some(8));
        assert_eq!(paper_figure(un, "t2c", "throughput"), None);
        assert_eq!(paper_figure(un, "t2b", "log-pages"), Some(9));
        assert_eq!(paper_figure(con, "t2a", "throughput"), Some(11));
        assert_eq!(paper_figure(con, "t2b", "pages"), Some(14));
        assert_eq!(paper_figure(con, "t2c", "response"), None);
        assert_eq!(paper_figure(un, "t1", "response"), None);
    }
}
