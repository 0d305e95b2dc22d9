//! `--plot FILE`: an SVG written by hand: for every operation a group of
//! bars, one per engine, of its hot time on a log scale of milliseconds.

use std::fmt::Write as _;

use super::report::Oo7Report;
use crate::oo1::table::fmt_ms;

const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
    "#ff9da7", "#bab0ac",
];
const BAR: f64 = 9.0;
const GAP: f64 = 14.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 50.0;
const HEIGHT: f64 = 320.0;
const BOTTOM: f64 = 40.0;

/// The SVG document for `report`.
pub fn write_svg(report: &Oo7Report) -> String {
    let engines = report.engine_names();
    let mut ops: Vec<&str> = Vec::new();
    for r in report.results.iter().filter(|r| r.phase == "hot") {
        if !ops.contains(&r.op.as_str()) {
            ops.push(&r.op);
        }
    }
    let values: Vec<f64> = report
        .results
        .iter()
        .filter(|r| r.phase == "hot" && r.ms > 0.0)
        .map(|r| r.ms)
        .collect();
    let lo = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = values.iter().copied().fold(0.0, f64::max).log10().ceil();
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (-3.0, 3.0)
    };
    let y = |ms: f64| TOP + HEIGHT - (ms.log10() - lo) / (hi - lo) * HEIGHT;
    let group = engines.len() as f64 * BAR + GAP;
    let width = LEFT + ops.len() as f64 * group + 20.0;
    let total_h = TOP + HEIGHT + BOTTOM + 20.0 * (engines.len() as f64 / 4.0).ceil();
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{total_h:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="14">OO7 {} ({} module(s)): hot ms per operation, log scale, median of {} round(s)</text>"#,
        report.size, report.modules, report.rounds
    );
    let mut e = lo;
    while e <= hi {
        let yy = y(10f64.powf(e));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{width:.0}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 4.0,
            yy + 4.0,
            fmt_ms(10f64.powf(e))
        );
        e += 1.0;
    }
    for (i, op) in ops.iter().enumerate() {
        let x0 = LEFT + i as f64 * group + GAP / 2.0;
        for (j, name) in engines.iter().enumerate() {
            let Some(r) = report.row(name, op, "hot") else {
                continue;
            };
            if r.ms <= 0.0 {
                continue;
            }
            let top = y(r.ms);
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{top:.1}" width="{BAR}" height="{:.1}" fill="{}"><title>{name} {op} hot: {} ms</title></rect>"#,
                x0 + j as f64 * BAR,
                TOP + HEIGHT - top,
                PALETTE[j % PALETTE.len()],
                fmt_ms(r.ms)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.0}" text-anchor="middle">{op}</text>"#,
            x0 + engines.len() as f64 * BAR / 2.0,
            TOP + HEIGHT + 14.0
        );
    }
    for (j, name) in engines.iter().enumerate() {
        let x = LEFT + (j % 4) as f64 * 150.0;
        let yy = TOP + HEIGHT + 32.0 + (j / 4) as f64 * 16.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{:.0}" width="10" height="10" fill="{}"/><text x="{:.0}" y="{yy:.0}">{name}</text>"#,
            yy - 9.0,
            PALETTE[j % PALETTE.len()],
            x + 14.0
        );
    }
    s.push_str("</svg>\n");
    s
}
