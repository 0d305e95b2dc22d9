//! `auto`: the strategy chosen per transaction from the database's recent
//! history, between page protection and remembered sets (both diffing, so
//! the log is the minimal one either way).
//!
//! Detection must be armed before the transaction runs, so the choice can
//! only come from what earlier transactions cost. What decides between the
//! two is the transaction's shape: page protection pays per page written
//! (a write fault while running, a whole-page diff at commit), a barrier
//! per store and per changed object; a short transaction that writes a few
//! objects on many pages favours the barrier, a long one that writes the same
//! pages over and over favours pages. Rather than model those rates (the
//! barrier's cost hides in the application's running time, which Amber
//! cannot separate from the application's own work), `auto` measures the
//! whole transaction — from its armed detection to the end of `commit`,
//! less the log's write and sync, which are the same under both (the same
//! records) and the noisiest part — under each scheme and keeps the
//! cheaper, counting the switch apart:
//!
//! - A *regime* is a run of transactions of one shape. It ends when a
//!   transaction writes a markedly different number of pages (the one
//!   shape measure both schemes see), or costs markedly more or less than
//!   its scheme's estimate.
//! - When the pages written change, the transaction that revealed it is
//!   not counted (it may have paid for pages faulted in cold); then each
//!   scheme runs once, the one in use first, and the cheaper is kept.
//!   When only the cost changed (the same pages written more or less often:
//!   a longer or shorter transaction), that transaction's cost is the
//!   scheme's new estimate, and the other scheme runs once.
//! - Every [`PROBE_EVERY`] transactions the other scheme runs once more,
//!   so that a drift the regime test misses is still found. Only the
//!   scheme in use judges whether a regime ended: the other's estimate may
//!   date from several shapes ago, and a probe simply replaces it.
//! - A switch (re-protecting or unprotecting every resident page, timed in
//!   `begin`) is paid once, not per transaction: past exploration the
//!   other scheme is taken only when what it saves per transaction, over
//!   the [`PROBE_EVERY`] transactions a regime is assumed to last at
//!   least, exceeds the switch's estimated cost.
//!
//! Aborted transactions teach nothing. The costs are per database, in
//! memory: a reopened database learns again.

use super::{Detect, Strategy};
use std::time::Duration;

/// The schemes `auto` chooses between.
pub(crate) const ARMS: [Strategy; 2] = [Strategy::DEFAULT, Strategy::detect(Detect::Remsets)];

/// Transactions between two runs of the scheme not in use.
pub(crate) const PROBE_EVERY: u32 = 64;

/// A change in pages written by more than this factor starts a regime.
const PAGES_FACTOR: f64 = 1.3;

/// A cost off its scheme's estimate by more than this factor, and by more
/// than [`COST_SLACK_MS`], starts a regime (transactions of a few tens of
/// microseconds vary by more than the factor from one to the next).
const COST_FACTOR: f64 = 2.0;
const COST_SLACK_MS: f64 = 0.1;

/// What `auto` has learnt of the database's recent transactions.
#[derive(Debug, Default)]
pub(crate) struct Auto {
    /// Per arm, the estimated cost of a transaction of the current regime
    /// (ms, from the armed detection to the end of the commit); `None`:
    /// not measured in it.
    cost: [Option<f64>; 2],
    /// Pages written per transaction in the current regime.
    pages: Option<f64>,
    /// The arm of the last transaction.
    current: usize,
    /// Transactions since the other arm last ran.
    since_probe: u32,
    /// The estimated cost of a switch between the arms (ms): re-protecting
    /// or unprotecting every resident page.
    switch_ms: f64,
    /// Regimes begun (for the tests).
    pub(crate) regimes: u64,
}

impl Auto {
    /// The arm the next transaction runs under. Past exploration, the
    /// other arm is taken when what it saves per transaction, over the
    /// transactions to the next probe, pays for the switch.
    pub(crate) fn choose(&mut self) -> usize {
        let (cur, other) = (self.current, 1 - self.current);
        let arm = match self.cost {
            _ if self.pages.is_none() => cur,
            c if c[cur].is_none() => cur,
            c if c[other].is_none() => other,
            _ if self.since_probe >= PROBE_EVERY => other,
            [Some(a), Some(b)] => {
                let (mine, theirs) = if cur == 0 { (a, b) } else { (b, a) };
                if (mine - theirs) * f64::from(PROBE_EVERY) > self.switch_ms {
                    other
                } else {
                    cur
                }
            }
            _ => cur,
        };
        if arm != cur {
            self.since_probe = 0;
        }
        arm
    }

    /// Learns that a transaction under `arm` took `took` from its armed
    /// detection to the end of its commit, writing `pages` blocks, after a
    /// switch of detection that took `switch` (if there was one).
    pub(crate) fn observe(&mut self, arm: usize, took: Duration, switch: Option<Duration>, pages: u64) {
        if let Some(s) = switch {
            let s = s.as_secs_f64() * 1e3;
            self.switch_ms = if self.switch_ms == 0.0 { s } else { (self.switch_ms + s) / 2.0 };
        }
        let ms = took.as_secs_f64() * 1e3;
        let pages = pages as f64;
        // Only the arm in use has a fresh estimate to judge by: the
        // other's (a probe, or the return from one) may be older.
        let in_use = arm == self.current;
        self.current = arm;
        let off = |a: f64, b: f64, f: f64| a > b * f || b > a * f;
        let other_pages = match self.pages {
            None => true,
            Some(p) => off(pages, p, PAGES_FACTOR) && (pages - p).abs() > 2.0,
        };
        if other_pages {
            // Not counted: it may have paid for pages faulted in cold.
            self.cost = [None, None];
            self.pages = Some(pages);
            self.regimes += 1;
            return;
        }
        if let Some(c) = self.cost[arm].filter(|_| in_use)
            && off(ms, c, COST_FACTOR)
            && (ms - c).abs() > COST_SLACK_MS
        {
            // The same pages at another cost: more (or less) work per
            // page. This arm's cost is known now; the other runs once.
            self.cost = [None, None];
            self.cost[arm] = Some(ms);
            self.regimes += 1;
            return;
        }
        self.cost[arm] = Some(match self.cost[arm] {
            Some(c) if in_use => (c + ms) / 2.0,
            _ => ms,
        });
        self.since_probe += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(auto: &mut Auto, cost: [f64; 2], pages: u64, n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| {
                let arm = auto.choose();
                let switch = (arm != auto.current).then(|| Duration::from_micros(100));
                auto.observe(arm, Duration::from_secs_f64(cost[arm] / 1e3), switch, pages);
                arm
            })
            .collect()
    }

    #[test]
    fn keeps_the_cheaper_scheme_and_follows_a_change_of_shape() {
        let mut a = Auto::default();
        // Cards cheaper: after the regime's first transaction, each arm
        // once, then cards.
        let arms = run(&mut a, [10.0, 4.0], 100, 40);
        assert_eq!(&arms[..3], &[0, 0, 1]);
        assert!(arms[3..].iter().all(|&x| x == 1), "{arms:?}");
        // Longer transactions writing the same pages: pages cheaper now;
        // the jump in cost starts a regime.
        let arms = run(&mut a, [20.0, 60.0], 100, 40);
        assert!(arms[4..].iter().all(|&x| x == 0), "{arms:?}");
        // Fewer pages written: a regime again.
        let before = a.regimes;
        run(&mut a, [2.0, 1.0], 10, 5);
        assert_eq!(a.regimes, before + 1);
    }

    #[test]
    fn a_probe_against_a_stale_estimate_is_no_new_regime() {
        let mut a = Auto::default();
        run(&mut a, [1.0, 10.0], 50, 10);
        let regimes = a.regimes;
        // The barrier got much dearer meanwhile; the probe says so, once.
        let arms = run(&mut a, [1.2, 100.0], 50, 2 * PROBE_EVERY as usize);
        assert_eq!(a.regimes, regimes, "{arms:?}");
        let probes: Vec<usize> = (0..arms.len()).filter(|&i| arms[i] == 1).collect();
        assert_eq!(probes.len(), 2, "{arms:?}");
        assert_eq!(arms[probes[0] + 1], 0, "straight back after the probe");
    }

    #[test]
    fn a_switch_must_pay_for_itself() {
        // Exploring ends on the barrier. Page protection would save 1 µs a
        // transaction; a switch costs 100 µs, more than 64 transactions
        // save: the barrier stays.
        let mut a = Auto::default();
        let arms = run(&mut a, [0.999, 1.0], 50, 40);
        assert_eq!(&arms[..3], &[0, 0, 1], "both measured");
        assert!(arms[3..].iter().all(|&x| x == 1), "{arms:?}");
        // Saving 10 µs a transaction pays: back to page protection.
        let mut a = Auto::default();
        let arms = run(&mut a, [0.99, 1.0], 50, 40);
        assert!(arms[3..].iter().all(|&x| x == 0), "{arms:?}");
    }

    #[test]
    fn probes_the_other_scheme_now_and_then() {
        let mut a = Auto::default();
        let arms = run(&mut a, [1.0, 1.5], 50, 3 + 3 * PROBE_EVERY as usize);
        let probes = arms[3..].iter().filter(|&&x| x == 1).count();
        assert!((2..=4).contains(&probes), "{probes} probes: {arms:?}");
    }
}
