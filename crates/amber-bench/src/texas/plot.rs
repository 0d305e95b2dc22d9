//! `--plot FILE`: the paper's Figures 3–4 as measured here, one row of
//! charts per database size: cumulative CPU over the set's traversals (one
//! page per fault, then the adaptive window), CPU per traversal, and the
//! hot traversals alone (where the lines would otherwise sit on zero).

use std::fmt::Write as _;

use super::report::TexasReport;
use super::{Fetch, Granularity};
use crate::olsim::plot::{H as CHART_H, Series, W as CHART_W, line_chart};
use crate::oo1::ops::Phase;

/// The SVG document.
pub fn write_svg(report: &TexasReport) -> String {
    let mut charts = Vec::new();
    for &parts in &report.parts {
        let series = |fetch: Fetch, pick: &dyn Fn(&super::Row) -> Option<f64>| -> Vec<Series> {
            Granularity::ALL
                .iter()
                .map(|&g| {
                    let pts = report
                        .set(g, parts, fetch)
                        .into_iter()
                        .filter_map(|r| pick(r).map(|y| (r.traversal as f64, y)))
                        .collect();
                    (g.name().to_string(), pts)
                })
                .filter(|(_, pts): &Series| !pts.is_empty())
                .collect()
        };
        for (title, fetch, pick) in [
            (
                "cumulative CPU ms, one page per fault",
                Fetch::OnePage,
                &(|r: &super::Row| Some(r.cumulative_cpu_ms))
                    as &dyn Fn(&super::Row) -> Option<f64>,
            ),
            (
                "CPU ms per traversal, one page per fault",
                Fetch::OnePage,
                &|r| Some(r.cpu_ms),
            ),
            (
                "hot traversals: CPU ms, one page per fault",
                Fetch::OnePage,
                &|r| (r.phase == Phase::Hot).then_some(r.cpu_ms),
            ),
            (
                "cumulative CPU ms, adaptive window",
                Fetch::Adaptive,
                &|r| Some(r.cumulative_cpu_ms),
            ),
        ] {
            let s = series(fetch, pick);
            if !s.is_empty() {
                charts.push(line_chart(
                    &format!("{parts} parts: {title}"),
                    "traversal",
                    "CPU ms",
                    &s,
                    false,
                ));
            }
        }
    }
    grid(&charts, 2)
}

/// Lays whole SVG documents out in a grid of `columns`, each as a nested
/// `<svg>` element.
fn grid(charts: &[String], columns: usize) -> String {
    let rows = charts.len().div_ceil(columns).max(1);
    let (w, h) = (CHART_W * columns as f64, CHART_H * rows as f64);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#
    );
    for (i, chart) in charts.iter().enumerate() {
        let x = CHART_W * (i % columns) as f64;
        let y = CHART_H * (i / columns) as f64;
        let placed = chart.replacen("<svg ", &format!(r#"<svg x="{x}" y="{y}" "#), 1);
        s.push_str(&placed);
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_places_each_chart() {
        let chart = r#"<svg xmlns="http://www.w3.org/2000/svg" width="1"></svg>"#.to_string();
        let s = grid(&[chart.clone(), chart.clone(), chart], 2);
        assert!(s.contains(r#"<svg x="520" y="0" xmlns"#));
        assert!(s.contains(r#"<svg x="0" y="340" xmlns"#));
        assert!(s.ends_with("</svg>\n"));
    }
}
