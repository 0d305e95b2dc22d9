//! SVG line charts of the results, written by hand (no dependency): tx/s
//! against clients, tx/s against log size, and the break-even decrease
//! against fetch ratio.

use std::fmt::Write as _;

use super::experiments::{
    Breakeven, CLIENTS, FETCH_SWEEP, FIRST_LOG_PAGES, GOOD_LOG_PAGES, LOG_PAGES, Row,
};
use super::params::ServerKind;

const COLORS: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#9c755f",
];
/// The size of a [`line_chart`].
pub(crate) const W: f64 = 520.0;
pub(crate) const H: f64 = 340.0;
const L: f64 = 56.0;
const R: f64 = 150.0;
const T: f64 = 36.0;
const B: f64 = 40.0;

/// A named series of (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

/// A line chart; `log_x` puts x on a log scale.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> String {
    let pts = series.iter().flat_map(|(_, p)| p.iter().copied());
    let fx = |x: f64| if log_x { x.max(1e-9).log10() } else { x };
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    let mut y0 = 0.0f64;
    for (x, y) in pts {
        x0 = x0.min(fx(x));
        x1 = x1.max(fx(x));
        y1 = y1.max(y);
        y0 = y0.min(y);
    }
    if !x0.is_finite() || x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= y0 { y0 + 1.0 } else { y1 * 1.05 };
    let px = |x: f64| L + (fx(x) - x0) / (x1 - x0) * (W - L - R);
    let py = |y: f64| H - B - (y - y0) / (y1 - y0) * (H - T - B);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{L}" y="20" font-size="13" font-weight="bold">{title}</text>"#
    );
    // Enough decimals that the six labels of the y axis differ.
    let digits = (-((y1 - y0) / 5.0).log10().floor()).clamp(0.0, 4.0) as usize;
    for i in 0..=5 {
        let y = y0 + (y1 - y0) * f64::from(i) / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{L}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{:.digits$}</text>"##,
            py(y),
            W - R,
            py(y),
            L - 4.0,
            py(y) + 4.0,
            y
        );
    }
    let ticks: Vec<f64> = series
        .first()
        .map(|(_, p)| p.iter().map(|q| q.0).collect())
        .unwrap_or_default();
    // At most about a dozen labels on the x axis.
    let every = ticks.len().div_ceil(12).max(1);
    for x in ticks.into_iter().step_by(every) {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{x}</text>"#,
            px(x),
            H - B + 14.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{x_label}</text><text x="12" y="{:.1}" transform="rotate(-90 12 {:.1})" text-anchor="middle">{y_label}</text>"#,
        (L + W - R) / 2.0,
        H - 6.0,
        H / 2.0,
        H / 2.0
    );
    for (i, (name, p)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = p
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in p {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}"><title>{name}: {x}, {y:.1}</title></circle>"#,
                px(x),
                py(y)
            );
        }
        let ly = T + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{color}"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            W - R + 10.0,
            ly,
            W - R + 26.0,
            ly + 5.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn series(
    rows: &[Row],
    name: &str,
    server: ServerKind,
    pct: u32,
    log: u32,
    xs: &[u32],
    x_is_log: bool,
) -> Series {
    let pts = xs
        .iter()
        .filter_map(|&x| {
            rows.iter()
                .find(|r| {
                    r.server == server.name()
                        && (r.fetch_ratio * 100.0).round() as u32 == pct
                        && if x_is_log {
                            r.clients == 50 && r.log_pages == x
                        } else {
                            r.clients == x && r.log_pages == log
                        }
                })
                .map(|r| (f64::from(x), r.tx_per_s))
        })
        .collect();
    (name.to_string(), pts)
}

/// The three charts of one device: (file suffix, SVG).
pub fn charts(device: &str, rows: &[Row], breakeven: &[Breakeven]) -> Vec<(&'static str, String)> {
    use ServerKind::*;
    let clients = [
        series(rows, "page", Page, 20, 0, &CLIENTS, false),
        series(rows, "basic", Basic, 20, FIRST_LOG_PAGES, &CLIENTS, false),
        series(
            rows,
            "absorbing",
            Absorbing,
            20,
            FIRST_LOG_PAGES,
            &CLIENTS,
            false,
        ),
        series(
            rows,
            "opportunistic",
            Opportunistic,
            20,
            FIRST_LOG_PAGES,
            &CLIENTS,
            false,
        ),
        series(
            rows,
            "opp. log 6000",
            Opportunistic,
            20,
            GOOD_LOG_PAGES,
            &CLIENTS,
            false,
        ),
        series(
            rows,
            "opp. 6000, f=16%",
            Opportunistic,
            16,
            GOOD_LOG_PAGES,
            &CLIENTS,
            false,
        ),
    ];
    let logs = [series(
        rows,
        "opportunistic",
        Opportunistic,
        20,
        0,
        &LOG_PAGES,
        true,
    )];
    let need = |server: ServerKind| -> Series {
        let pts = FETCH_SWEEP
            .iter()
            .filter_map(|&pct| {
                breakeven
                    .iter()
                    .find(|b| {
                        b.server == server.name() && (b.fetch_ratio * 100.0).round() as u32 == pct
                    })
                    .and_then(|b| b.decrease_points.map(|d| (f64::from(pct), d)))
            })
            .collect();
        (server.name().to_string(), pts)
    };
    vec![
        (
            "clients",
            line_chart(
                &format!("{device}: throughput, fetch ratio 20%"),
                "clients",
                "tx/s",
                &clients,
                false,
            ),
        ),
        (
            "logsize",
            line_chart(
                &format!("{device}: opportunistic, 50 clients"),
                "log pages",
                "tx/s",
                &logs,
                true,
            ),
        ),
        (
            "breakeven",
            line_chart(
                &format!("{device}: fetch-ratio decrease to equal the page server"),
                "page server fetch ratio (%)",
                "points",
                &[need(Basic), need(Opportunistic)],
                false,
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_a_line_and_a_point_per_value() {
        let svg = line_chart(
            "t",
            "x",
            "y",
            &[("a".into(), vec![(1.0, 2.0), (10.0, 4.0)])],
            true,
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 2);
    }
}
