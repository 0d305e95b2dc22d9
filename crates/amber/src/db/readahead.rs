//! How many pages a fault fetches: a window that grows while the faults
//! show locality and shrinks when they stop, as an operating system's
//! readahead does for files.
//!
//! A fetched neighbour pays when the program goes on to touch about a third
//! of such neighbours (docs/design.md, 4.3). A program walking a
//! neighbourhood of the page file (a traversal), or covering a small
//! database, touches most of them; random accesses to a database much larger than
//! what they touch, or the first steps of a lookup through an index, touch
//! almost none. No fixed window suits both, so the window follows the
//! faults:
//!
//! - The page file is cut into neighbourhoods of the largest window
//!   (`Options::fetch_cluster`). The neighbourhoods of the last [`RECENT`]
//!   faults are remembered.
//! - A fault is *near* when at least [`NEAR`] of those faults other than the
//!   latest one landed in its neighbourhood or next to it: the program keeps
//!   coming back to where it faults. A step from the latest fault to a
//!   neighbour is not counted: an index entry and the object it leads to
//!   are often allocated together, so every lookup would take two faults in
//!   a row close to each other while touching nothing else around them. Nor
//!   is one earlier fault close by: random faults in a database of 150
//!   neighbourhoods (OO1's 200,000 parts) land next to one of 7 others about
//!   one time in eight, and growing on that fetched half as many pages again
//!   as 1,000 random lookups touch; next to three of them, a few times in
//!   ten thousand.
//! - A near fault multiplies the window by [`STEP`] (up to the largest), a
//!   far one divides it (down to one page). The first fault of a session
//!   fetches one page.
//! - A file of at most [`SMALL`] neighbourhoods (2,048 pages, 8 MiB, with
//!   the default largest window of 64) is small, and every fault of a
//!   session on it fetches the largest window, as an operating system reads
//!   a small file whole. There random faults are a program covering the
//!   database (OO1's 1,000 lookups touch 606 of its 1,034 pages), which the
//!   largest window serves with 15 faults where adapting took 26–40 (the
//!   window climbs only after runs of near faults); and the price is
//!   bounded: the whole file comes in with 32 faults, and a program that
//!   touches one object pays one 64-page fault (about 0.5 ms instead of
//!   0.15). The bound is a choice between OO1's two databases: at 1,034
//!   pages the largest window is best for every operation, at 9,100 one
//!   page per fault is best or close to it. The file's size is taken when
//!   the database is opened.
//!
//! The state is a few atomics per database, read and written without
//! locks: concurrent faults (SIGSEGV, several threads) may interleave their
//! updates, which perturbs the estimate and nothing else. A fault allocates
//! nothing here. Under a cache budget the pager caps the window at the room
//! left (prefetching never evicts, see `Pager::fetch_window`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Faults remembered: with neighbourhoods of 64 pages, the last 8 faults
/// reach 24 of them, most of a 1,000-page database and a seventh of a
/// 10,000-page one.
pub(crate) const RECENT: usize = 8;

/// Remembered faults (besides the latest) around a fault that make it near.
pub(crate) const NEAR: usize = 3;

/// The factor a near fault grows the window by, and a far one shrinks it
/// by: 1, 4, 16, 64 pages, so that a walk reaches the largest window of the
/// default in three near faults.
pub(crate) const STEP: u32 = 4;

/// Files of at most this many neighbourhoods are small (see the module
/// docs).
pub(crate) const SMALL: u64 = 4 * RECENT as u64;

/// The fetch-window policy of one open database.
#[derive(Debug)]
pub(crate) struct Readahead {
    /// The largest window (`Options::fetch_cluster`), at least 1.
    max: u32,
    /// Whether the window adapts; else every fault fetches `max` (asked
    /// for, or a small file).
    adaptive: bool,
    /// log2 of the current window.
    level: AtomicU32,
    /// The neighbourhoods (page / `max`, plus one; 0: none yet) of the last
    /// faults, a ring indexed by `seen`.
    recent: [AtomicU64; RECENT],
    /// Faults seen.
    seen: AtomicU64,
}

impl Readahead {
    /// The policy for a file of `file_pages` pages: adaptive if asked for
    /// and the file is not small.
    pub(crate) fn new(max: u32, adaptive: bool, file_pages: u64) -> Readahead {
        let max = max.max(1);
        Readahead {
            max,
            adaptive: adaptive && file_pages > SMALL * u64::from(max),
            level: AtomicU32::new(0),
            recent: Default::default(),
            seen: AtomicU64::new(0),
        }
    }

    /// The largest window.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// The current window, in pages.
    pub(crate) fn current(&self) -> u32 {
        if !self.adaptive {
            return self.max;
        }
        self.window(self.level.load(Ordering::Relaxed))
    }

    fn window(&self, level: u32) -> u32 {
        1u32.checked_shl(level).unwrap_or(u32::MAX).min(self.max)
    }

    /// The level of the largest window.
    fn top(&self) -> u32 {
        self.max.next_power_of_two().trailing_zeros()
    }

    /// Records a fault at `page` and returns the window it fetches.
    pub(crate) fn on_fault(&self, page: u64) -> u32 {
        if !self.adaptive || self.max == 1 {
            return self.max;
        }
        let hood = page / u64::from(self.max) + 1;
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        let slot = (n % RECENT as u64) as usize;
        let latest = (slot + RECENT - 1) % RECENT;
        let around = self
            .recent
            .iter()
            .enumerate()
            .filter(|&(i, h)| {
                let h = h.load(Ordering::Relaxed);
                i != latest && h != 0 && h.abs_diff(hood) <= 1
            })
            .count();
        let near = around >= NEAR;
        self.recent[slot].store(hood, Ordering::Relaxed);
        let step = STEP.trailing_zeros();
        let old = self.level.load(Ordering::Relaxed);
        let level = if near {
            (old + step).min(self.top())
        } else {
            old.saturating_sub(step)
        };
        self.level.store(level, Ordering::Relaxed);
        self.window(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_windows_do_not_adapt() {
        let r = Readahead::new(64, false, u64::MAX);
        assert_eq!(r.on_fault(5), 64);
        assert_eq!(r.on_fault(1 << 40), 64);
        assert_eq!(r.current(), 64);
        let one = Readahead::new(0, true, u64::MAX);
        assert_eq!(one.on_fault(3), 1);
    }

    #[test]
    fn a_walk_grows_the_window_and_a_jump_shrinks_it() {
        let r = Readahead::new(64, true, u64::MAX);
        // The first faults of a session, and of a neighbourhood: far.
        for p in [10, 20, 5_000, 30, 70] {
            assert_eq!(r.on_fault(p), 1, "page {p}");
        }
        // Three earlier faults around (the latest not counted): near.
        assert_eq!(r.on_fault(40), 4);
        assert_eq!(r.on_fault(100), 16);
        assert_eq!(r.on_fault(50), 64);
        assert_eq!(r.on_fault(110), 64);
        assert_eq!(r.current(), 64);
        // Far away: shrinks.
        assert_eq!(r.on_fault(90_000), 16);
        assert_eq!(r.on_fault(190_000), 4);
        assert_eq!(r.on_fault(290_000), 1);
        assert_eq!(r.on_fault(390_000), 1);
    }

    #[test]
    fn a_step_to_the_latest_neighbourhood_alone_is_not_near() {
        // Lookups: an index chunk, then the part next to it; then elsewhere.
        let r = Readahead::new(64, true, u64::MAX);
        for i in 0..100u64 {
            let chunk = (i * 7_919) % 10_000 * 64;
            assert_eq!(r.on_fault(chunk), 1, "lookup {i}");
            assert_eq!(r.on_fault(chunk + 3), 1, "lookup {i}");
        }
    }

    #[test]
    fn a_small_file_fetches_the_largest_window() {
        let r = Readahead::new(64, true, 2_048);
        assert_eq!(r.on_fault(10), 64);
        assert_eq!(r.on_fault(1_000), 64);
        assert_eq!(Readahead::new(64, true, 2_049).on_fault(10), 1);
    }

    #[test]
    fn windows_never_exceed_a_largest_that_is_not_a_power_of_two() {
        let r = Readahead::new(3, true, u64::MAX);
        for p in [0, 1, 2, 3, 4, 5] {
            assert!(r.on_fault(p) <= 3);
        }
        assert_eq!(r.current(), 3);
    }
}
