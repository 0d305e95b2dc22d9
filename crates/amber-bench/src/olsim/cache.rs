//! The server's page cache in non-volatile memory: clean pages in LRU order
//! (the ones a new page may replace) and dirty pages in a [`Pool`] by
//! cylinder (the ones a write may be chosen from, by SPTF).

use std::collections::BTreeMap;

use super::pool::{Layout, Pool};

const RESIDENT: u8 = 1;
const DIRTY: u8 = 2;
const WRITING: u8 = 4;
const REDIRTIED: u8 = 8;

/// The page cache.
#[derive(Clone, Debug)]
pub struct PageCache {
    capacity: usize,
    flags: Vec<u8>,
    stamp: Vec<u64>,
    next_stamp: u64,
    clean: BTreeMap<u64, u32>,
    dirty: Pool,
    resident: usize,
    dirty_count: usize,
    /// Pages admitted while every frame held a dirty page (the cache then
    /// holds one page more than its capacity until a write completes). The
    /// write trigger is meant to keep this at zero; it is reported.
    pub overflows: u64,
}

impl PageCache {
    /// An empty cache of `capacity` pages over the pages of `layout`.
    pub fn new(layout: &Layout, capacity: usize) -> Self {
        Self {
            capacity,
            flags: vec![0; layout.pages as usize],
            stamp: vec![0; layout.pages as usize],
            next_stamp: 1,
            clean: BTreeMap::new(),
            dirty: Pool::new(layout),
            resident: 0,
            dirty_count: 0,
            overflows: 0,
        }
    }

    /// Frames in the cache.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether `page` is in the cache.
    pub fn contains(&self, page: u32) -> bool {
        self.flags[page as usize] & RESIDENT != 0
    }

    /// Whether `page` is dirty (including while it is being written).
    pub fn is_dirty(&self, page: u32) -> bool {
        self.flags[page as usize] & DIRTY != 0
    }

    /// Frames not holding a dirty page: free frames and clean pages.
    pub fn clean_pages(&self) -> usize {
        self.capacity.saturating_sub(self.dirty_count)
    }

    /// Dirty pages, including those being written.
    pub fn dirty_pages(&self) -> usize {
        self.dirty_count
    }

    /// Dirty pages not being written: the pool writes are chosen from.
    pub fn dirty_pool(&self) -> &Pool {
        &self.dirty
    }

    /// Pages in the cache.
    pub fn resident(&self) -> usize {
        self.resident
    }

    fn fresh_stamp(&mut self, page: u32) {
        self.stamp[page as usize] = self.next_stamp;
        self.next_stamp += 1;
    }

    /// Marks a use of resident `page` (moves it to the LRU's young end).
    pub fn touch(&mut self, page: u32) {
        let f = self.flags[page as usize];
        if f & RESIDENT == 0 {
            return;
        }
        if f & DIRTY == 0 {
            self.clean.remove(&self.stamp[page as usize]);
            self.fresh_stamp(page);
            self.clean.insert(self.stamp[page as usize], page);
        } else {
            self.fresh_stamp(page);
        }
    }

    /// Brings absent `page` into the cache, clean or dirty, replacing the
    /// least recently used clean page if every frame is taken; returns the
    /// page replaced.
    pub fn admit(&mut self, layout: &Layout, page: u32, dirty: bool) -> Option<u32> {
        debug_assert!(!self.contains(page));
        let mut evicted = None;
        if self.resident >= self.capacity {
            match self.clean.pop_first() {
                Some((_, victim)) => {
                    self.flags[victim as usize] = 0;
                    self.resident -= 1;
                    evicted = Some(victim);
                }
                None => self.overflows += 1,
            }
        }
        self.flags[page as usize] = RESIDENT;
        self.resident += 1;
        self.fresh_stamp(page);
        if dirty {
            self.flags[page as usize] |= DIRTY;
            self.dirty_count += 1;
            self.dirty.insert(layout, page);
        } else {
            self.clean.insert(self.stamp[page as usize], page);
        }
        evicted
    }

    /// Marks resident `page` modified. A page being written stays dirty
    /// after its write completes.
    pub fn mark_dirty(&mut self, layout: &Layout, page: u32) {
        let f = self.flags[page as usize];
        debug_assert!(f & RESIDENT != 0);
        if f & WRITING != 0 {
            self.flags[page as usize] |= REDIRTIED;
        } else if f & DIRTY == 0 {
            self.clean.remove(&self.stamp[page as usize]);
            self.flags[page as usize] |= DIRTY;
            self.dirty_count += 1;
            self.dirty.insert(layout, page);
        }
    }

    /// Takes dirty `page` out of the write pool: its write starts.
    pub fn start_write(&mut self, layout: &Layout, page: u32) {
        debug_assert!(self.dirty.contains(page));
        self.dirty.remove(layout, page);
        self.flags[page as usize] |= WRITING;
    }

    /// `page`'s write completed: it is clean unless modified meanwhile.
    pub fn finish_write(&mut self, layout: &Layout, page: u32) {
        let f = self.flags[page as usize];
        self.flags[page as usize] &= !(WRITING | REDIRTIED);
        if f & REDIRTIED != 0 {
            self.dirty.insert(layout, page);
        } else {
            self.flags[page as usize] &= !DIRTY;
            self.dirty_count -= 1;
            self.clean.insert(self.stamp[page as usize], page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            pages: 1000,
            sectors_per_page: 8,
            first_lbn: 0,
            sectors_per_bucket: 1368,
        }
    }

    #[test]
    fn lru_replaces_the_oldest_clean_page_never_a_dirty_one() {
        let l = layout();
        let mut c = PageCache::new(&l, 3);
        assert_eq!(c.admit(&l, 1, false), None);
        assert_eq!(c.admit(&l, 2, true), None);
        assert_eq!(c.admit(&l, 3, false), None);
        c.touch(1);
        // 2 is dirty, 3 is the oldest clean page.
        assert_eq!(c.admit(&l, 4, false), Some(3));
        assert_eq!(c.clean_pages(), 2);
        c.mark_dirty(&l, 1);
        c.mark_dirty(&l, 4);
        assert_eq!(c.clean_pages(), 0);
        assert_eq!(c.admit(&l, 5, false), None);
        assert_eq!(c.overflows, 1);
    }

    #[test]
    fn a_page_modified_during_its_write_stays_dirty() {
        let l = layout();
        let mut c = PageCache::new(&l, 4);
        c.admit(&l, 7, true);
        c.admit(&l, 8, true);
        c.start_write(&l, 7);
        c.start_write(&l, 8);
        assert!(c.dirty_pool().is_empty());
        c.mark_dirty(&l, 8);
        c.finish_write(&l, 7);
        c.finish_write(&l, 8);
        assert!(!c.is_dirty(7) && c.is_dirty(8));
        assert_eq!(c.dirty_pool().pages().collect::<Vec<_>>(), vec![8]);
        assert_eq!(c.dirty_pages(), 1);
    }
}
