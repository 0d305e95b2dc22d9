//! The disk model's validation table: the mean positioning time of random
//! single-sector requests served in arrival order, against its expectation
//! computed from the formulas (the seek curve averaged over the distance
//! distribution of two uniform cylinders, plus head switches, plus half a
//! revolution), and the mean positioning time when SPTF chooses from a pool
//! of 1, 10, 100 or 1,000 pending requests kept full.

use std::fmt::Write as _;

use serde::Serialize;

use super::disk::{Geometry, HeadPos};
use crate::rng::Rng;

/// One line of the validation table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValidationRow {
    /// Requests the scheduler chooses from (1: arrival order).
    pub pool: usize,
    /// Requests served.
    pub requests: usize,
    /// Mean positioning time (seek or head switch plus rotational wait), ms.
    pub positioning_ms: f64,
    /// Mean seek (or head switch) part, ms.
    pub seek_ms: f64,
    /// The expectation from the formulas, for the arrival-order line, ms.
    pub expected_ms: Option<f64>,
}

/// Expected positioning time of a random request from a random arm
/// position: `Σ P(d)·seek(d)` over the distance distribution of two uniform
/// cylinders, a head switch when the cylinder is the same and the head is
/// not, and half a revolution of rotational wait.
pub fn expected_random_positioning(g: &Geometry) -> f64 {
    let n = f64::from(g.cylinders);
    let mut seek = 0.0;
    for d in 1..g.cylinders {
        seek += 2.0 * (n - f64::from(d)) / (n * n) * g.seek.ms(d);
    }
    let same_cyl = 1.0 / n;
    let other_head = 1.0 - 1.0 / f64::from(g.heads);
    seek + same_cyl * other_head * g.head_switch_ms + g.revolution_ms() / 2.0
}

/// Serves `requests` random single-sector requests, choosing each time the
/// one with the shortest positioning time among `pool` pending ones (a new
/// random request replaces it), one after another from time 0.
pub fn sptf_pool(g: &Geometry, pool: usize, requests: usize, seed: u64) -> ValidationRow {
    let mut rng = Rng::stream(seed, &[pool as u64]);
    let cap = g.capacity_sectors();
    let mut pending: Vec<u64> = (0..pool.max(1)).map(|_| rng.below(cap)).collect();
    let mut head = HeadPos::default();
    let mut t = 0.0;
    let (mut pos_sum, mut seek_sum) = (0.0, 0.0);
    for _ in 0..requests {
        let arm_t = t + g.controller_overhead_ms;
        let (best, _) = pending
            .iter()
            .enumerate()
            .map(|(i, &lbn)| (i, g.positioning_ms(head, arm_t, lbn)))
            .fold((0, f64::INFINITY), |b, c| if c.1 < b.1 { c } else { b });
        let lbn = pending[best];
        let a = g.access(head, t, lbn, 1);
        pos_sum += a.positioning;
        seek_sum += g.movement_ms(head, g.locate(lbn));
        head = a.end;
        t += a.total();
        pending[best] = rng.below(cap);
    }
    let n = requests.max(1) as f64;
    ValidationRow {
        pool: pool.max(1),
        requests,
        positioning_ms: pos_sum / n,
        seek_ms: seek_sum / n,
        expected_ms: (pool <= 1).then(|| expected_random_positioning(g)),
    }
}

/// The table: pools of 1, 10, 100 and 1,000.
pub fn table(g: &Geometry, requests: usize, seed: u64) -> Vec<ValidationRow> {
    [1, 10, 100, 1000]
        .into_iter()
        .map(|pool| sptf_pool(g, pool, requests, seed))
        .collect()
}

/// The validation table as text.
pub fn table_text(rows: &[ValidationRow]) -> String {
    let mut s = String::from(
        "HP 97560 validation: random single-sector requests, mean positioning time (seek or head switch + rotational wait)\n  pool  requests  positioning ms  of which seek ms  expected ms\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>6} {:>9} {:>15.2} {:>17.2} {:>12}",
            r.pool,
            r.requests,
            r.positioning_ms,
            r.seek_ms,
            r.expected_ms.map_or("-".into(), |e| format!("{e:.2}"))
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_requests_match_the_formulas_and_sptf_shortens_them() {
        let g = Geometry::hp97560();
        let rows = table(&g, 4000, 1);
        let fifo = &rows[0];
        let expected = fifo.expected_ms.expect("arrival-order line");
        // Mean seek 12.8 ms, half a revolution 7.5 ms: about 20.3 ms.
        assert!((20.0..20.7).contains(&expected), "{expected}");
        assert!(
            (fifo.positioning_ms - expected).abs() < 0.05 * expected,
            "{} against {expected}",
            fifo.positioning_ms
        );
        for w in rows.windows(2) {
            assert!(w[1].positioning_ms < w[0].positioning_ms, "{rows:?}");
        }
        assert!(
            rows[3].positioning_ms < 0.3 * fifo.positioning_ms,
            "{rows:?}"
        );
    }
}
