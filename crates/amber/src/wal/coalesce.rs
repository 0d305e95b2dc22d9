//! The minimal-log coalescing rule of QuickStore (White & DeWitt, SIGMOD '95,
//! §3.2.2), generalised to records that carry one or two images.
//!
//! A diff yields the modified regions of a page, in order. Each region could
//! get its own record (header H plus its bytes once per image), or two
//! neighbouring regions could share one record that also carries the
//! unchanged gap between them. A partition of the regions into runs of
//! consecutive regions costs
//!
//! ```text
//!   Σ over runs ( H + k · (end of run − start of run) )
//! ```
//!
//! with k images per byte (1 for after-images only, 2 with before-images).
//! Rewriting the sum, the cost is `k · (changed bytes) + H · (regions)` plus,
//! for each adjacent pair that shares a record, `k · gap − H`. The choice for
//! each pair is independent of every other pair, so the partition is minimal
//! exactly when every pair with `k · gap < H` is merged and every pair with
//! `k · gap > H` is not (ties cost the same; like the paper we merge them).
//! That is the rule `2 · gap ≤ H` for the paper's before/after-image records.

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
/// share a record when `images · gap ≤ header`.
pub fn coalesce(regions: &[Region], header: usize, images: usize) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::with_capacity(regions.len());
    for &r in regions {
        match out.last_mut() {
            Some(last) if images * (r.start - last.end) <= header => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// Log bytes that records for `regions` cost: one header each plus their bytes
/// once per image.
pub fn log_cost(regions: &[Region], header: usize, images: usize) -> usize {
    regions.iter().map(|r| header + images * r.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Minimum cost over all partitions, by dynamic programming.
    fn brute_min(regions: &[Region], h: usize, k: usize) -> usize {
        let n = regions.len();
        let mut best = vec![usize::MAX; n + 1];
        best[0] = 0;
        for j in 1..=n {
            for i in 0..j {
                let run = h + k * (regions[j - 1].end - regions[i].start);
                best[j] = best[j].min(best[i] + run);
            }
        }
        best[n]
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

    #[test]
    fn paper_example() {
        // First and third words of an object changed, H = 50, two images:
        // separate records cost 2·(50 + 8) = 116, one record 50 + 2·12 = 74.
        let r = [Region { start: 0, end: 4 }, Region { start: 8, end: 12 }];
        assert_eq!(log_cost(&r, 50, 2), 116);
        let c = coalesce(&r, 50, 2);
        assert_eq!(c, vec![Region { start: 0, end: 12 }]);
        assert_eq!(log_cost(&c, 50, 2), 74);
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
        #[test]
        fn coalescing_is_minimal(
            gl in prop::collection::vec((1usize..60, 1usize..20), 1..10),
            h in 1usize..64,
            k in 1usize..3,
        ) {
            let mut r = regions_from(&gl);
            r[0].start = r[0].start.max(1) - 1; // allow a region at offset 0
            let c = coalesce(&r, h, k);
            prop_assert_eq!(log_cost(&c, h, k), brute_min(&r, h, k));
            // Every changed byte is still covered.
            for x in &r {
                prop_assert!(c.iter().any(|y| y.start <= x.start && x.end <= y.end));
            }
        }
    }
}
