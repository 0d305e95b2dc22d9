//! Pools of pending disk operations and shortest-positioning-time-first
//! selection over them.
//!
//! A [`Pool`] holds database pages bucketed by cylinder, so that the search
//! for the operation with the shortest positioning time can start at the
//! arm's cylinder and stop, branch-and-bound, as soon as the seek to the next
//! cylinders alone exceeds the best time found (the seek curve is
//! increasing). With 30,000 dirty pages the search usually ends in the arm's
//! own cylinder; it is exact, not approximate (tested against brute force).

use super::disk::{Geometry, HeadPos};

/// Where the database's pages are on the device: page `p` starts at logical
/// block `first_lbn + p · sectors_per_page`.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Pages in the database.
    pub pages: u32,
    /// Sectors per page.
    pub sectors_per_page: u32,
    /// First logical block of page 0.
    pub first_lbn: u64,
    /// Sectors per cylinder (1 when the device has no cylinders: one bucket).
    pub sectors_per_bucket: u64,
}

impl Layout {
    /// First logical block of `page`.
    pub fn lbn(&self, page: u32) -> u64 {
        self.first_lbn + u64::from(page) * u64::from(self.sectors_per_page)
    }

    /// The bucket (cylinder) of `page`.
    pub fn bucket(&self, page: u32) -> u32 {
        (self.lbn(page) / self.sectors_per_bucket) as u32
    }

    /// Buckets the database spans (from bucket 0).
    pub fn buckets(&self) -> u32 {
        if self.pages == 0 {
            return 1;
        }
        self.bucket(self.pages - 1) + 1
    }
}

const ABSENT: u32 = u32::MAX;

/// A set of pages bucketed by cylinder.
#[derive(Clone, Debug)]
pub struct Pool {
    buckets: Vec<Vec<u32>>,
    index: Vec<u32>,
    len: usize,
}

impl Pool {
    /// An empty pool for the pages of `layout`.
    pub fn new(layout: &Layout) -> Self {
        Self {
            buckets: vec![Vec::new(); layout.buckets() as usize],
            index: vec![ABSENT; layout.pages as usize],
            len: 0,
        }
    }

    /// Pages in the pool.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `page` is in the pool.
    pub fn contains(&self, page: u32) -> bool {
        self.index[page as usize] != ABSENT
    }

    /// Adds `page` (no effect if present).
    pub fn insert(&mut self, layout: &Layout, page: u32) {
        if self.contains(page) {
            return;
        }
        let b = &mut self.buckets[layout.bucket(page) as usize];
        self.index[page as usize] = b.len() as u32;
        b.push(page);
        self.len += 1;
    }

    /// Removes `page` (no effect if absent).
    pub fn remove(&mut self, layout: &Layout, page: u32) {
        let i = self.index[page as usize];
        if i == ABSENT {
            return;
        }
        let b = &mut self.buckets[layout.bucket(page) as usize];
        b.swap_remove(i as usize);
        if let Some(&moved) = b.get(i as usize) {
            self.index[moved as usize] = i;
        }
        self.index[page as usize] = ABSENT;
        self.len -= 1;
    }

    /// Any page of the pool (the first of the lowest non-empty bucket).
    pub fn any(&self) -> Option<u32> {
        self.buckets.iter().find_map(|b| b.first().copied())
    }

    /// Every page, in bucket order (for brute-force checks and tests).
    pub fn pages(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets.iter().flatten().copied()
    }

    /// The page with the smallest effective positioning time
    /// `T_pos − credit(page)` from arm position `from` with the arm starting
    /// to move at `t`, and that time. `max_credit` must bound `credit` from
    /// above (0 for pure SPTF). Ties go to the page met first.
    pub fn nearest(
        &self,
        g: &Geometry,
        layout: &Layout,
        from: HeadPos,
        t: f64,
        credit: impl Fn(u32) -> f64,
        max_credit: f64,
    ) -> Option<(u32, f64)> {
        if self.len == 0 {
            return None;
        }
        let n = self.buckets.len() as i64;
        let c = i64::from(from.cyl);
        let mut best: Option<(u32, f64)> = None;
        for d in 0i64.. {
            if d > 0 {
                if let Some((_, b)) = best
                    && g.seek.ms(d as u32) - max_credit >= b
                {
                    break;
                }
                if c - d < 0 && c + d >= n {
                    break;
                }
            }
            let sides = if d == 0 { [c, -1] } else { [c - d, c + d] };
            for cyl in sides {
                if cyl < 0 || cyl >= n {
                    continue;
                }
                for &p in &self.buckets[cyl as usize] {
                    let eff = g.positioning_ms(from, t, layout.lbn(p)) - credit(p);
                    if best.is_none_or(|(_, b)| eff < b) {
                        best = Some((p, eff));
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn hp_layout() -> (Geometry, Layout) {
        let g = Geometry::hp97560();
        let layout = Layout {
            pages: (g.capacity_sectors() / 8) as u32,
            sectors_per_page: 8,
            first_lbn: 0,
            sectors_per_bucket: g.sectors_per_cylinder(),
        };
        (g, layout)
    }

    #[test]
    fn insert_remove_keep_the_index() {
        let (_, layout) = hp_layout();
        let mut pool = Pool::new(&layout);
        for p in [5, 6, 7, 171, 172, 300_000] {
            pool.insert(&layout, p);
        }
        pool.insert(&layout, 6);
        assert_eq!(pool.len(), 6);
        pool.remove(&layout, 5);
        pool.remove(&layout, 5);
        assert!(!pool.contains(5) && pool.contains(7) && pool.contains(6));
        pool.remove(&layout, 7);
        pool.remove(&layout, 6);
        let mut left: Vec<u32> = pool.pages().collect();
        left.sort_unstable();
        assert_eq!(left, vec![171, 172, 300_000]);
        assert_eq!(pool.any(), Some(171));
    }

    /// SPTF's branch and bound finds the true minimum, for pools from 1 to
    /// 3,000 pages, with and without an age credit.
    #[test]
    fn nearest_is_the_brute_force_minimum() {
        let (g, layout) = hp_layout();
        let mut rng = Rng::seed_from_u64(11);
        for (round, size) in [1usize, 2, 10, 100, 3000].into_iter().enumerate() {
            let mut pool = Pool::new(&layout);
            while pool.len() < size {
                pool.insert(&layout, rng.below(u64::from(layout.pages)) as u32);
            }
            for trial in 0..20 {
                let from = HeadPos {
                    cyl: rng.below(1962) as u32,
                    head: rng.below(19) as u32,
                };
                let t = rng.next_f64() * 1000.0;
                let w = if trial % 2 == 0 { 0.0 } else { 0.5 };
                let credit = |p: u32| w * f64::from(p % 97);
                let max_credit = w * 96.0;
                let (page, eff) = pool
                    .nearest(&g, &layout, from, t, credit, max_credit)
                    .expect("pool not empty");
                let brute = pool
                    .pages()
                    .map(|p| g.positioning_ms(from, t, layout.lbn(p)) - credit(p))
                    .fold(f64::INFINITY, f64::min);
                assert_eq!(eff, brute, "round {round} trial {trial}");
                assert_eq!(
                    g.positioning_ms(from, t, layout.lbn(page)) - credit(page),
                    brute
                );
            }
        }
    }
}
