//! How far `auto` is from the best fixed scheme: on every row of the hot
//! update (per p) and of the long transactions (per p and k), `auto`'s
//! time over the fastest fixed scheme's, both measured in the same run
//! (target ≤ 1.10).

use serde::Serialize;

use super::DetectRow;
use super::long::LongRow;

/// The bound on `auto`'s time over the best fixed scheme's.
pub const AUTO_BOUND: f64 = 1.10;

/// `auto` against the best fixed scheme on one row.
#[derive(Clone, Debug, Serialize)]
pub struct AutoRow {
    pub op: &'static str,
    pub phase: &'static str,
    pub p: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    pub auto_ms: f64,
    pub best_scheme: String,
    pub best_ms: f64,
    /// `auto_ms / best_ms`.
    pub ratio: f64,
    /// What `auto`'s timed transactions ran under, counted.
    pub ran_under: String,
}

/// One row per (op, p[, k]) where `auto` and a fixed scheme both ran.
pub fn compare(hot: &[DetectRow], long: &[LongRow]) -> Vec<AutoRow> {
    let mut out = Vec::new();
    let hot_rows = hot
        .iter()
        .map(|r| (r.phase, r.p, None, r.scheme.as_str(), r.ms, &r.ran_under));
    let long_rows = long.iter().map(|r| {
        (
            r.phase,
            r.p,
            Some(r.k),
            r.scheme.as_str(),
            r.ms,
            &r.ran_under,
        )
    });
    let rows: Vec<_> = hot_rows.chain(long_rows).collect();
    for &(phase, p, k, scheme, auto_ms, ran_under) in &rows {
        if scheme != "auto" {
            continue;
        }
        let best = rows
            .iter()
            .filter(|r| r.0 == phase && r.1 == p && r.2 == k && r.3 != "auto")
            .min_by(|a, b| a.4.total_cmp(&b.4));
        if let Some(&(_, _, _, best_scheme, best_ms, _)) = best {
            out.push(AutoRow {
                op: "update",
                phase,
                p,
                k,
                auto_ms,
                best_scheme: best_scheme.to_string(),
                best_ms,
                ratio: auto_ms / best_ms,
                ran_under: ran_under.clone(),
            });
        }
    }
    out
}
