//! The minimal-log coalescing rule of QuickStore (White & DeWitt, SIGMOD '95,
//! §3.2.2), re-derived for the ranges records of log format 3
//! (`ranges.rs`), which carry one or two images.
//!
//! A diff yields the modified regions of a page, in order. Each region
//! could be its own range, or neighbouring regions could share one range
//! that also carries the unchanged gap between them; ranges go into
//! records, many to a record. A record costs `R` ([`RECORD`]) and each of
//! its ranges `E` ([`ENTRY`]) plus its bytes once per image (k images: 1
//! for after-images only, 2 with before-images). For a partition of the
//! regions into `m` runs of neighbours, carried by `r` records:
//!
//! ```text
//!   R · r  +  Σ over runs ( E + k · (end of run − start of run) )
//! ```
//!
//! The records a batch of ranges needs do not depend on the partition: one
//! record holds any number of ranges that ascend within a u16 gap of each
//! other (`ranges::Body`), so `r` is the number of places where two
//! neighbours lie more than 65,535 bytes apart, plus one — and merging
//! across such a gap never pays (its bytes cost more than a record). (A
//! record's body holds at most 64 KiB; a batch beyond that takes one
//! record more per 64 KiB, at most 22 bytes in 65,535.) Rewriting the
//! rest of the sum, it is `k · (changed bytes) + E · (regions)` plus, for
//! each adjacent pair that shares a range, `k · gap − E`. The choice for
//! each pair is independent of every other pair, so the partition is
//! minimal exactly when every pair with `k · gap < E` is merged and every
//! pair with `k · gap > E` is not (ties cost the same; like the paper we
//! merge them). With E = 4 that merges regions at most 4 bytes apart (2
//! with before-images). In the paper, and in log format 2, every range was
//! its own record and E was the whole record header H (24 bytes here),
//! hence its rule `2 · gap ≤ H`.
//!
//! Why version 3 writes even a lone range as a ranges record (26 bytes
//! beyond its image) rather than as the 24-byte kind-1 record: with both,
//! a batch of exactly two ranges 5 bytes apart would be a byte cheaper
//! merged into one kind-1 record, a choice that depends on the whole batch
//! rather than on each pair; with ranges records only, the rule above is
//! exact, and the minimum is a sum any reader can compute.

use super::ranges::{ENTRY, RECORD};

/// A half-open byte range `[start, end)` of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Region {
    /// Bytes covered.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The maximal runs of bytes where `old` and `new` differ (equal lengths).
pub fn diff(old: &[u8], new: &[u8]) -> Vec<Region> {
    let mut out = Vec::new();
    diff_into(old, new, 0, &mut out);
    out
}

/// Appends to `out` the differing runs of `old` and `new`, offset by `base`.
/// Compares eight bytes at a time where the slices agree.
pub fn diff_into(old: &[u8], new: &[u8], base: usize, out: &mut Vec<Region>) {
    let n = old.len().min(new.len());
    let mut i = 0;
    while i < n {
        // Skip equal words quickly.
        while i + 8 <= n && old[i..i + 8] == new[i..i + 8] {
            i += 8;
        }
        while i < n && old[i] == new[i] {
            i += 1;
        }
        if i >= n {
            break;
        }
        let start = i;
        while i < n && old[i] != new[i] {
            i += 1;
        }
        out.push(Region {
            start: base + start,
            end: base + i,
        });
    }
}

/// Merges sorted, disjoint regions by the minimal-log rule: two neighbours
/// share a range when `images · gap ≤ entry` (`entry` is [`ENTRY`] for
/// the log; the paper's rule is `entry` = its record header).
pub fn coalesce(regions: &[Region], entry: usize, images: usize) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::with_capacity(regions.len());
    for &r in regions {
        match out.last_mut() {
            Some(last) if images * (r.start - last.end) <= entry => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// Log bytes that the ranges `regions` cost in their records, the records'
/// own [`RECORD`] bytes left out: [`ENTRY`] each plus their bytes once per
/// image.
pub fn ranges_cost(regions: &[Region], images: usize) -> usize {
    regions.iter().map(|r| ENTRY + images * r.len()).sum()
}

/// The records a batch of ranges needs, given the address of each (its
/// start and end, in the order they are logged): one, and one more
/// wherever a range does not follow the one before within a u16 gap
/// (`ranges::Body`). None for no ranges.
pub fn records_needed(ranges: impl IntoIterator<Item = (u64, u64)>) -> usize {
    let mut end: Option<u64> = None;
    let mut records = 0;
    for (s, e) in ranges {
        if end.is_none_or(|end| s < end || s - end > u64::from(u16::MAX)) {
            records += 1;
        }
        end = Some(e);
    }
    records
}

/// The least log bytes for the ranges of a batch (each `(start, end)`, in
/// the order they are logged): [`RECORD`] per record it needs, and what
/// the ranges cost in them.
pub fn batch_cost(ranges: &[(u64, u64)], images: usize) -> usize {
    RECORD * records_needed(ranges.iter().copied())
        + ranges.iter().map(|&(s, e)| ENTRY + images * (e - s) as usize).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::ranges::{self, Body};
    use crate::wal::record::{RANGE_AFTER, TRAILER};
    use proptest::prelude::*;

    /// The least bytes of records that log `regions` (sorted, disjoint)
    /// with `k` images, over every encoding log format 3 writes: each
    /// neighbouring pair either shares a range (the gap's bytes logged),
    /// or is two ranges of one record (they must ascend within a u16 gap),
    /// or lies in two records. All 3^(n−1) choices are tried.
    fn exhaustive_min(regions: &[Region], k: usize) -> usize {
        let n = regions.len();
        let mut best = usize::MAX;
        for mut code in 0..3usize.pow(n as u32 - 1) {
            let (mut cost, mut run_start) = (RECORD, regions[0].start);
            let mut ok = true;
            for i in 1..=n {
                let choice = if i == n { 2 } else { code % 3 };
                code /= 3;
                if choice == 0 {
                    continue; // region i joins the run
                }
                let run_len = regions[i - 1].end - run_start;
                ok &= run_len <= ranges::max_range(k);
                cost += ENTRY + k * run_len;
                if i < n {
                    ok &= choice == 2 || regions[i].start - regions[i - 1].end <= u16::MAX as usize;
                    if choice == 2 {
                        cost += RECORD;
                    }
                    run_start = regions[i].start;
                }
            }
            if ok {
                best = best.min(cost);
            }
        }
        best
    }

    fn regions_from(gaps_lens: &[(usize, usize)]) -> Vec<Region> {
        let mut at = 0;
        gaps_lens
            .iter()
            .map(|&(g, l)| {
                let r = Region {
                    start: at + g,
                    end: at + g + l,
                };
                at = r.end;
                r
            })
            .collect()
    }

    fn spans(regions: &[Region]) -> Vec<(u64, u64)> {
        regions.iter().map(|r| (r.start as u64, r.end as u64)).collect()
    }

    /// The records a writer makes of `regions` (`ranges::Body`, a new
    /// record whenever a range cannot follow), in bytes.
    fn written(regions: &[Region], k: usize) -> usize {
        let image = vec![7u8; regions.iter().map(Region::len).max().unwrap_or(0)];
        let images = |r: &Region| (&image[..r.len()], (k == 2).then(|| &image[..r.len()]));
        let mut bodies: Vec<Body> = Vec::new();
        for r in regions {
            let (after, before) = images(r);
            if !bodies.last_mut().is_some_and(|b| b.push(r.start as u64, after, before)) {
                bodies.push(Body::new(r.start as u64, after, before).expect("fits alone"));
            }
        }
        bodies.iter().map(|b| RANGE_AFTER + b.bytes.len() + TRAILER).sum()
    }

    #[test]
    fn paper_example() {
        // First and third words of an object changed, two images: with the
        // paper's rule (its header H = 50 as the entry cost) separate
        // ranges cost 2·(50 + 8) = 116, one range 50 + 2·12 = 74.
        let r = [Region { start: 0, end: 4 }, Region { start: 8, end: 12 }];
        let c = coalesce(&r, 50, 2);
        assert_eq!(c, vec![Region { start: 0, end: 12 }]);
        // In a ranges record the 4-byte gap costs 8 bytes, a second
        // range's entry 4: kept apart.
        assert_eq!(coalesce(&r, ENTRY, 2), r.to_vec());
        assert_eq!(batch_cost(&spans(&r), 2), RECORD + 2 * (ENTRY + 8));
        // Two fields of a part, x and y, whose low bytes changed (3 apart).
        let xy = [Region { start: 20, end: 21 }, Region { start: 24, end: 25 }];
        assert_eq!(coalesce(&xy, ENTRY, 1), vec![Region { start: 20, end: 25 }]);
    }

    #[test]
    fn records_break_where_ranges_cannot_follow() {
        assert_eq!(records_needed([]), 0);
        assert_eq!(records_needed([(10, 20), (20, 30), (65_565, 65_566)]), 1);
        assert_eq!(records_needed([(10, 20), (65_556, 65_557)]), 2);
        assert_eq!(records_needed([(10, 20), (5, 6)]), 2, "descending");
        assert_eq!(batch_cost(&[(10, 20)], 1), RECORD + ENTRY + 10);
    }

    #[test]
    fn diff_finds_runs() {
        let a = [0u8; 40];
        let mut b = a;
        b[3] = 1;
        b[4] = 1;
        b[20] = 9;
        b[39] = 9;
        assert_eq!(
            diff(&a, &b),
            vec![
                Region { start: 3, end: 5 },
                Region { start: 20, end: 21 },
                Region { start: 39, end: 40 }
            ]
        );
        assert!(diff(&a, &a).is_empty());
    }

    proptest! {
        /// The rule's partition, in the records a writer makes of it, costs
        /// the least any encoding of format 3 can: gaps of a few bytes
        /// (around the threshold), tens of bytes, and past a u16 (a record
        /// must end there).
        #[test]
        fn coalescing_is_minimal(
            gl in prop::collection::vec(
                (prop_oneof![1usize..12, 1usize..80, 65_530usize..65_545], 1usize..20),
                1..9,
            ),
            k in 1usize..3,
        ) {
            let mut r = regions_from(&gl);
            r[0].start = r[0].start.max(1) - 1; // allow a region at offset 0
            let c = coalesce(&r, ENTRY, k);
            prop_assert_eq!(batch_cost(&spans(&c), k), exhaustive_min(&r, k));
            prop_assert_eq!(written(&c, k), batch_cost(&spans(&c), k));
            prop_assert_eq!(
                batch_cost(&spans(&c), k),
                RECORD * records_needed(spans(&c)) + ranges_cost(&c, k)
            );
            // Every changed byte is still covered.
            for x in &r {
                prop_assert!(c.iter().any(|y| y.start <= x.start && x.end <= y.end));
            }
        }

        /// The rule with the paper's costs (every range its own record of
        /// header `h`) is minimal for those costs too.
        #[test]
        fn the_papers_rule_is_minimal_for_its_costs(
            gl in prop::collection::vec((1usize..60, 1usize..20), 1..10),
            h in 1usize..64,
            k in 1usize..3,
        ) {
            let r = regions_from(&gl);
            let cost = |c: &[Region]| c.iter().map(|x| h + k * x.len()).sum::<usize>();
            let n = r.len();
            let mut best = vec![usize::MAX; n + 1];
            best[0] = 0;
            for j in 1..=n {
                for i in 0..j {
                    best[j] = best[j].min(best[i] + h + k * (r[j - 1].end - r[i].start));
                }
            }
            prop_assert_eq!(cost(&coalesce(&r, h, k)), best[n]);
        }
    }
}
