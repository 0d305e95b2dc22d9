//! `--plot FILE`: an SVG written by hand. One panel per operation (and p), with
//! a group per phase (cold, warm, hot) and a bar per engine, on a log scale of
//! milliseconds; `open` gets one panel with a group per measurement.

use std::fmt::Write as _;

use super::ops::Op;
use super::report::Oo1Report;
use super::table::{RowKey, fmt_ms};

/// Tableau 10: one color per engine up to ten engines.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
    "#ff9da7", "#bab0ac",
];
const PANEL_W: f64 = 340.0;
const PANEL_H: f64 = 230.0;
const COLUMNS: usize = 4;
const HEADER: f64 = 60.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 28.0;

struct Panel {
    title: String,
    groups: Vec<(String, RowKey)>,
}

fn panels(report: &Oo1Report) -> Vec<Panel> {
    let mut out: Vec<Panel> = Vec::new();
    let mut open = Panel {
        title: "open".to_string(),
        groups: Vec::new(),
    };
    for key in report.row_keys() {
        if key.op == Op::Open {
            open.groups.push((key.op_label(), key));
            continue;
        }
        let title = key.op_label();
        let group = (key.phase.name().to_string(), key);
        match out.last_mut() {
            Some(p) if p.title == title => p.groups.push(group),
            _ => out.push(Panel {
                title,
                groups: vec![group],
            }),
        }
    }
    if !open.groups.is_empty() {
        out.push(open);
    }
    out
}

/// `10^e` written plainly: 0.01, 0.1, 1, 10, 100.
fn decade_label(e: f64) -> String {
    let digits = (-e).max(0.0) as usize;
    format!("{:.digits$}", 10f64.powf(e))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG document for `report`.
pub fn write_svg(report: &Oo1Report) -> String {
    let engines = report.engine_names();
    let panels = panels(report);
    let rows = panels.len().div_ceil(COLUMNS).max(1);
    let width = PANEL_W * COLUMNS as f64;
    let height = HEADER + PANEL_H * rows as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">OO1, {} parts: milliseconds per operation (log scale); cold cache {}</text>"#,
        report.parts,
        report.cold_cache.name()
    );
    for (i, e) in engines.iter().enumerate() {
        let x = 10.0 + 120.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="34" width="12" height="12" fill="{}"/><text x="{}" y="44">{}</text>"#,
            PALETTE[i % PALETTE.len()],
            x + 16.0,
            escape(e)
        );
    }
    for (n, panel) in panels.iter().enumerate() {
        let ox = PANEL_W * (n % COLUMNS) as f64;
        let oy = HEADER + PANEL_H * (n / COLUMNS) as f64;
        draw_panel(&mut s, report, &engines, panel, ox, oy);
    }
    s.push_str("</svg>\n");
    s
}

fn draw_panel(
    s: &mut String,
    report: &Oo1Report,
    engines: &[&str],
    panel: &Panel,
    ox: f64,
    oy: f64,
) {
    let values: Vec<f64> = panel
        .groups
        .iter()
        .flat_map(|(_, key)| {
            engines
                .iter()
                .filter_map(|e| report.row(e, key))
                .map(|r| r.ms_reported)
        })
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-weight="bold">{}</text>"#,
        ox + LEFT,
        oy + 16.0,
        escape(&panel.title)
    );
    let (Some(min), Some(max)) = (
        values.iter().copied().reduce(f64::min),
        values.iter().copied().reduce(f64::max),
    ) else {
        return;
    };
    let lo = min.log10().floor();
    let hi = (max.log10().ceil()).max(lo + 1.0);
    let x0 = ox + LEFT;
    let x1 = ox + PANEL_W - RIGHT;
    let y0 = oy + PANEL_H - BOTTOM;
    let y1 = oy + TOP;
    let y_of = |v: f64| y0 - (v.log10() - lo) / (hi - lo) * (y0 - y1);
    let mut decade = lo;
    while decade <= hi {
        let y = y_of(10f64.powf(decade));
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 4.0,
            y + 4.0,
            decade_label(decade)
        );
        decade += 1.0;
    }
    let _ = writeln!(
        s,
        r#"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/>"#
    );
    let group_w = (x1 - x0) / panel.groups.len() as f64;
    let bar_w = (group_w * 0.8) / engines.len().max(1) as f64;
    for (g, (label, key)) in panel.groups.iter().enumerate() {
        let gx = x0 + group_w * g as f64 + group_w * 0.1;
        for (i, e) in engines.iter().enumerate() {
            let Some(row) = report.row(e, key) else {
                continue;
            };
            let v = row.ms_reported;
            if !(v.is_finite() && v > 0.0) {
                continue;
            }
            let y = y_of(v);
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {}: {} ms</title></rect>"#,
                gx + bar_w * i as f64,
                bar_w.max(1.0) - 0.5,
                (y0 - y).max(0.5),
                PALETTE[i % PALETTE.len()],
                escape(e),
                escape(&key.label()),
                fmt_ms(v)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x0 + group_w * (g as f64 + 0.5),
            y0 + 16.0,
            escape(label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_and_escapes() {
        assert_eq!(decade_label(-2.0), "0.01");
        assert_eq!(decade_label(0.0), "1");
        assert_eq!(decade_label(2.0), "100");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
