//! Long transactions (Hosking et al.'s Figs. 13–14): k hot update
//! traversals per commit, from k random roots, each with the decisions of
//! OO1's update at probability p; the time per transaction against k,
//! fitted by least squares as y = a + b·k per scheme and p. Page
//! protection pays its write faults once per page however many traversals
//! write it; a software barrier pays at every store, so the slope b is
//! where the schemes differ.
//!
//! Each traversal's answer is checked against the reference. The log of a
//! long transaction is not counted independently here (the hot update
//! experiment does that); every scheme's log is compared with the others'
//! at the same (p, k).

use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

use amber::{BackendChoice, Strategy};

use crate::oo1::amber_engine::UpdateCost;
use crate::oo1::reference::Reference;
use crate::oo1::{Engine, GeneratedDb, PartId};
use crate::rng::Rng;
use crate::storage::{BenchError, summarize};
use crate::update::{hot_input, open_engine};

/// One (scheme, p, k): medians over the timed transactions.
#[derive(Clone, Debug, Serialize)]
pub struct LongRow {
    pub scheme: String,
    pub op: &'static str,
    pub phase: &'static str,
    pub p: f64,
    pub k: usize,
    pub ms: f64,
    pub running_ms: f64,
    pub old_ms: f64,
    pub new_ms: f64,
    pub write_ms: f64,
    pub other_ms: f64,
    pub log_bytes: u64,
    /// Amber's own count of the least log for what its diff found (the
    /// independent count is the hot update rows').
    pub minimal_log_bytes: u64,
    /// The strategies the timed transactions ran under, counted.
    pub ran_under: String,
    /// The log generator (`diff`, `sl`, `wpl`).
    pub log: &'static str,
}

/// y = a + b·k for one (scheme, p).
#[derive(Clone, Debug, Serialize)]
pub struct FitRow {
    pub scheme: String,
    pub p: f64,
    pub a_ms: f64,
    pub b_ms: f64,
    pub r2: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One scheme of the long-transaction experiment.
pub(super) struct LongScheme {
    /// Its name in the rows.
    pub(super) scheme: String,
    pub(super) choice: BackendChoice,
    pub(super) strategy: Strategy,
    /// Its own copy of the database.
    pub(super) dir: PathBuf,
}

/// The long-transaction rows of every scheme. Each (p, k) is run by every
/// scheme in turn, so that the rows a comparison takes (`auto` against
/// the best fixed scheme) are measured seconds apart rather than minutes:
/// this machine's speed drifts by more than the 10 % being judged over
/// the minutes a scheme's whole sweep takes.
pub(super) fn run(
    generated: &GeneratedDb,
    schemes: &[LongScheme],
    ps: &[f64],
    ks: &[usize],
    iters: usize,
    seed: u64,
) -> Result<Vec<LongRow>, BenchError> {
    let mut open = Vec::new();
    for s in schemes {
        open.push((
            open_engine(&s.dir, s.choice, s.strategy)?,
            Reference::new(generated),
        ));
    }
    let parts = generated.params.parts;
    let mut rows = Vec::new();
    for (pi, &p) in ps.iter().enumerate() {
        let (_, plan) = hot_input(generated.params, p)?;
        for &k in ks {
            for (s, (eng, reference)) in schemes.iter().zip(&mut open) {
                let scheme = &s.scheme;
                let mut samples = Vec::new();
                // One untimed transaction first: the roots' pages resident.
                for i in 0..=iters {
                    let mut rng = Rng::stream(seed, &[pi as u64, k as u64, i as u64]);
                    let roots: Vec<PartId> = (0..k)
                        .map(|_| 1 + rng.below(u64::from(parts)) as PartId)
                        .collect();
                    let (answers, cost) = eng.update_many_timed(&roots, &plan).map_err(|e| {
                        BenchError::new(format!("{scheme}: long update p={p} k={k}: {e}"))
                    })?;
                    for (r, a) in roots.iter().zip(&answers) {
                        let want = reference
                            .update(*r, &plan)
                            .map_err(|e| BenchError::new(format!("reference update: {e}")))?;
                        if *a != want {
                            return Err(BenchError::new(format!(
                                "{scheme}: long update p={p} k={k}: traversal from {r} answered {a:?}, the reference {want:?}"
                            )));
                        }
                    }
                    if i > 0 {
                        samples.push(cost);
                    }
                }
                rows.push(row(scheme, s.strategy, p, k, &samples));
            }
        }
    }
    for (s, (eng, _)) in schemes.iter().zip(open) {
        Box::new(eng)
            .close()
            .map_err(|e| BenchError::new(format!("{}: closing: {e}", s.scheme)))?;
    }
    Ok(rows)
}

/// The row of one (scheme, p, k): medians over the timed transactions.
fn row(scheme: &str, strategy: Strategy, p: f64, k: usize, samples: &[UpdateCost]) -> LongRow {
    let med = |f: &dyn Fn(&UpdateCost) -> f64| {
        summarize(&samples.iter().map(f).collect::<Vec<_>>()).median
    };
    let s = |c: &UpdateCost| c.stats;
    LongRow {
        scheme: scheme.to_string(),
        op: "update",
        phase: "long",
        p,
        k,
        ms: med(&|c| ms(c.traverse + c.commit)),
        running_ms: med(&|c| ms(c.traverse)),
        old_ms: med(&|c| ms(s(c).detect + s(c).diff)),
        new_ms: 0.0,
        write_ms: med(&|c| ms(s(c).write)),
        other_ms: med(&|c| {
            ms(c.commit
                .saturating_sub(s(c).detect + s(c).diff + s(c).write))
        }),
        log_bytes: med(&|c| s(c).log_bytes as f64) as u64,
        minimal_log_bytes: med(&|c| s(c).minimal_log_bytes as f64) as u64,
        ran_under: crate::update::ran_under(samples.iter().map(|c| c.stats.strategy)),
        log: crate::update::log_name(strategy),
    }
}

/// Least-squares fit of `ms` against `k` for every (scheme, p) in `rows`.
pub(super) fn fits(rows: &[LongRow]) -> Vec<FitRow> {
    let mut out: Vec<FitRow> = Vec::new();
    for r in rows {
        if out.iter().any(|f| f.scheme == r.scheme && f.p == r.p) {
            continue;
        }
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|x| x.scheme == r.scheme && x.p == r.p)
            .map(|x| (x.k as f64, x.ms))
            .collect();
        let (a, b, r2) = least_squares(&pts);
        out.push(FitRow {
            scheme: r.scheme.clone(),
            p: r.p,
            a_ms: a,
            b_ms: b,
            r2,
        });
    }
    out
}

/// `(a, b, r²)` of y = a + b·x; NaN with fewer than two distinct x.
pub(super) fn least_squares(pts: &[(f64, f64)]) -> (f64, f64, f64) {
    let n = pts.len() as f64;
    let (sx, sy) = pts
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = pts.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
    let syy: f64 = pts.iter().map(|&(_, y)| (y - my) * (y - my)).sum();
    if pts.len() < 2 || sxx == 0.0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let r2 = if syy == 0.0 {
        1.0
    } else {
        sxy * sxy / (sxx * syy)
    };
    (a, b, r2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_a_line() {
        let (a, b, r2) = least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]);
        assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12 && (r2 - 1.0).abs() < 1e-12);
        let (_, _, r2) = least_squares(&[(0.0, 1.0), (1.0, 0.0), (2.0, 1.0)]);
        assert!(r2 < 0.1);
        assert!(least_squares(&[(1.0, 1.0)]).0.is_nan());
    }
}
