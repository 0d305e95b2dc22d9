//! The server's page cache in non-volatile memory: clean pages in LRU order
//! (the ones a new page may replace) and dirty pages in a [`Pool`] by
//! cylinder (the ones a write may be chosen from, by SPTF).
//!
//! A page coming in needs a frame before it arrives: a read reserves one
//! when the device starts it ([`PageCache::reserve`], replacing the least
//! recently used clean page if no frame is free) and fills it when it
//! completes. When every frame holds a dirty page or is reserved, nothing
//! can come in until a write completes: the cache never holds more pages
//! than its capacity.

use std::collections::BTreeMap;

use super::pool::{Layout, Pool};

const RESIDENT: u8 = 1;
const DIRTY: u8 = 2;
const WRITING: u8 = 4;
const REDIRTIED: u8 = 8;

/// Every frame holds a dirty page or is reserved for a read under way:
/// nothing can come in until a write completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFrame;

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
    reserved: usize,
    dirty_count: usize,
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
            reserved: 0,
            dirty_count: 0,
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

    /// Frames a new page could take: free frames and clean pages, less the
    /// frames reserved for reads under way.
    pub fn clean_pages(&self) -> usize {
        self.capacity
            .saturating_sub(self.dirty_count)
            .saturating_sub(self.reserved)
    }

    /// Frames reserved for reads under way.
    pub fn reserved(&self) -> usize {
        self.reserved
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

    /// Takes a frame for a page about to come in: a free frame, else the
    /// least recently used clean page's (returned: it leaves the cache).
    /// [`NoFrame`] when every frame holds a dirty page or is reserved.
    pub fn reserve(&mut self) -> Result<Option<u32>, NoFrame> {
        if self.resident + self.reserved < self.capacity {
            self.reserved += 1;
            return Ok(None);
        }
        let (_, victim) = self.clean.pop_first().ok_or(NoFrame)?;
        self.flags[victim as usize] = 0;
        self.resident -= 1;
        self.reserved += 1;
        Ok(Some(victim))
    }

    /// Gives back a reserved frame unused (the page came in another way).
    pub fn unreserve(&mut self) {
        debug_assert!(self.reserved > 0);
        self.reserved -= 1;
    }

    /// Brings absent `page` into a frame reserved for it, clean or dirty.
    pub fn fill(&mut self, layout: &Layout, page: u32, dirty: bool) {
        self.unreserve();
        let evicted = self.admit(layout, page, dirty);
        debug_assert_eq!(evicted, Ok(None));
    }

    /// Brings absent `page` into the cache, clean or dirty, replacing the
    /// least recently used clean page if every frame is taken; returns the
    /// page replaced, or [`NoFrame`] (and changes nothing) when every frame
    /// holds a dirty page or is reserved.
    pub fn admit(
        &mut self,
        layout: &Layout,
        page: u32,
        dirty: bool,
    ) -> Result<Option<u32>, NoFrame> {
        debug_assert!(!self.contains(page));
        let evicted = if self.resident + self.reserved < self.capacity {
            None
        } else {
            let (_, victim) = self.clean.pop_first().ok_or(NoFrame)?;
            self.flags[victim as usize] = 0;
            self.resident -= 1;
            Some(victim)
        };
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
        Ok(evicted)
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
        assert_eq!(c.admit(&l, 1, false), Ok(None));
        assert_eq!(c.admit(&l, 2, true), Ok(None));
        assert_eq!(c.admit(&l, 3, false), Ok(None));
        c.touch(1);
        // 2 is dirty, 3 is the oldest clean page.
        assert_eq!(c.admit(&l, 4, false), Ok(Some(3)));
        assert_eq!(c.clean_pages(), 2);
        c.mark_dirty(&l, 1);
        c.mark_dirty(&l, 4);
        assert_eq!(c.clean_pages(), 0);
        // Every frame dirty: nothing comes in, nothing changes.
        assert_eq!(c.admit(&l, 5, false), Err(NoFrame));
        assert_eq!(c.reserve(), Err(NoFrame));
        assert!(!c.contains(5));
        assert_eq!(c.resident(), 3);
    }

    /// A read takes its frame when it starts (replacing the oldest clean
    /// page then) and fills it when it completes; a reserved frame is not
    /// a clean page for the write trigger, nor for another read.
    #[test]
    fn a_read_reserves_its_frame_and_the_cache_never_overfills() {
        let l = layout();
        let mut c = PageCache::new(&l, 3);
        assert_eq!(c.admit(&l, 1, true), Ok(None));
        assert_eq!(c.reserve(), Ok(None));
        assert_eq!(c.admit(&l, 2, false), Ok(None));
        assert_eq!(c.clean_pages(), 1);
        assert_eq!(c.reserve(), Ok(Some(2)));
        assert!(!c.contains(2));
        assert_eq!(c.clean_pages(), 0);
        assert_eq!(c.reserve(), Err(NoFrame));
        assert_eq!(c.admit(&l, 3, false), Err(NoFrame));
        c.fill(&l, 4, false);
        c.fill(&l, 5, true);
        assert_eq!((c.resident(), c.reserved()), (3, 0));
        assert_eq!(c.clean_pages(), 1);
        assert_eq!(c.reserve(), Ok(Some(4)));
        c.unreserve();
        assert_eq!((c.resident(), c.reserved(), c.clean_pages()), (2, 0, 1));
    }

    #[test]
    fn a_page_modified_during_its_write_stays_dirty() {
        let l = layout();
        let mut c = PageCache::new(&l, 4);
        assert_eq!(c.admit(&l, 7, true), Ok(None));
        assert_eq!(c.admit(&l, 8, true), Ok(None));
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
