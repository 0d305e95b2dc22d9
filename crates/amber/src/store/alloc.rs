//! The page allocator and its free-space map.
//!
//! Pages `[first_data_page, page_count)` exist; each is free or belongs to an
//! allocated block (a single page, or a multi-page run for a large object).
//! Free space is kept as coalesced extents, indexed by start and by size
//! (best fit); allocated runs longer than one page are listed, so any page can
//! be mapped to its block. Memory is proportional to fragmentation, not to the
//! size of the database, so opening stays fast however big the file.
//!
//! Allocations of transactions that have not committed are *reserved*: taken
//! out of the free space (so no one else gets them) but written to a
//! checkpoint's free-space map as free, because a crash forgets them.

use crate::format::PageNo;
use crate::format::meta::FsmImage;
use std::collections::{BTreeMap, BTreeSet};

/// The free-space map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSpace {
    first: PageNo,
    page_count: PageNo,
    /// start → len.
    free: BTreeMap<PageNo, u64>,
    /// (len, start), for best fit.
    by_size: BTreeSet<(u64, PageNo)>,
    /// Allocated blocks of more than one page: head → len.
    runs: BTreeMap<PageNo, u32>,
    /// Blocks allocated by uncommitted transactions: head → len.
    reserved: BTreeMap<PageNo, u32>,
}

impl FreeSpace {
    /// An empty map for a new database.
    pub fn new(first_data_page: PageNo) -> Self {
        FreeSpace {
            first: first_data_page,
            page_count: first_data_page,
            free: BTreeMap::new(),
            by_size: BTreeSet::new(),
            runs: BTreeMap::new(),
            reserved: BTreeMap::new(),
        }
    }

    /// Loads a persisted map, checking that it is consistent.
    pub fn from_image(img: &FsmImage, first_data_page: PageNo) -> Result<Self, String> {
        let mut fs = FreeSpace::new(first_data_page);
        if img.page_count < first_data_page {
            return Err(format!(
                "page count {} below the first data page {first_data_page}",
                img.page_count
            ));
        }
        fs.page_count = img.page_count;
        let mut prev_end = first_data_page;
        for &(s, l) in &img.free {
            let end = s.checked_add(l).ok_or("free extent overflows")?;
            if l == 0 || s < prev_end || end > img.page_count {
                return Err(format!(
                    "free extent {s}+{l} overlaps another or lies outside [{first_data_page}, {})",
                    img.page_count
                ));
            }
            fs.insert_free(s, l);
            prev_end = end;
        }
        let mut prev_end = first_data_page;
        for &(h, l) in &img.runs {
            let end = h.checked_add(u64::from(l)).ok_or("run overflows")?;
            if l < 2 || h < prev_end || end > img.page_count || fs.overlaps_free(h, u64::from(l)) {
                return Err(format!("allocated run {h}+{l} is impossible"));
            }
            fs.runs.insert(h, l);
            prev_end = end;
        }
        Ok(fs)
    }

    /// The map as it must be persisted: reserved blocks shown as free.
    pub fn image(&self) -> FsmImage {
        let mut copy = self.clone();
        let reserved: Vec<_> = copy.reserved.iter().map(|(&h, &l)| (h, l)).collect();
        for (h, l) in reserved {
            copy.release(h, l);
        }
        FsmImage {
            page_count: copy.page_count,
            free: copy.free.iter().map(|(&s, &l)| (s, l)).collect(),
            runs: copy.runs.iter().map(|(&h, &l)| (h, l)).collect(),
        }
    }

    /// One past the highest existing page.
    pub fn page_count(&self) -> PageNo {
        self.page_count
    }

    /// The first page that can hold data.
    pub fn first_data_page(&self) -> PageNo {
        self.first
    }

    /// Free pages below the high-water mark.
    pub fn free_pages(&self) -> u64 {
        self.free.values().sum()
    }

    /// Free extents, in order.
    pub fn free_extents(&self) -> impl Iterator<Item = (PageNo, u64)> + '_ {
        self.free.iter().map(|(&s, &l)| (s, l))
    }

    fn insert_free(&mut self, start: PageNo, len: u64) {
        self.free.insert(start, len);
        self.by_size.insert((len, start));
    }

    fn remove_free(&mut self, start: PageNo) -> Option<u64> {
        let len = self.free.remove(&start)?;
        self.by_size.remove(&(len, start));
        Some(len)
    }

    /// The free extent containing `page`, if any.
    fn free_extent_of(&self, page: PageNo) -> Option<(PageNo, u64)> {
        let (&s, &l) = self.free.range(..=page).next_back()?;
        (page < s + l).then_some((s, l))
    }

    fn overlaps_free(&self, start: PageNo, len: u64) -> bool {
        if self.free_extent_of(start).is_some() {
            return true;
        }
        self.free.range(start..start + len).next().is_some()
    }

    /// Returns `[start, start + len)` to the free space, coalescing.
    fn release(&mut self, start: PageNo, len: u32) {
        self.runs.remove(&start);
        self.reserved.remove(&start);
        let mut s = start;
        let mut l = u64::from(len);
        if let Some((ps, pl)) = self.free.range(..s).next_back().map(|(&a, &b)| (a, b))
            && ps + pl == s
        {
            self.remove_free(ps);
            s = ps;
            l += pl;
        }
        if let Some(nl) = self.free.get(&(s + l)).copied() {
            self.remove_free(s + l);
            l += nl;
        }
        // Space at the top of the file simply lowers the high-water mark.
        if s + l == self.page_count {
            self.page_count = s;
        } else {
            self.insert_free(s, l);
        }
    }

    /// Takes `[start, start + len)` out of the free space (it must be free or
    /// above the high-water mark) and records the block.
    fn take(&mut self, start: PageNo, len: u32, reserve: bool) -> Result<(), String> {
        let l = u64::from(len);
        let end = start.checked_add(l).ok_or("page range overflows")?;
        if len == 0 || start < self.first {
            return Err(format!("cannot allocate {len} pages at page {start}"));
        }
        if end > self.page_count {
            // Grow; pages between the old mark and `start` become free.
            let top = self.page_count;
            if start < top {
                // The part below the mark must be free.
                let (fs, fl) = self
                    .free_extent_of(start)
                    .ok_or_else(|| format!("page {start} is already allocated"))?;
                if fs + fl != top {
                    return Err(format!("pages {start}..{end} overlap allocated pages"));
                }
                self.remove_free(fs);
                if fs < start {
                    self.insert_free(fs, start - fs);
                }
            } else if start > top {
                self.insert_free(top, start - top);
            }
            self.page_count = end;
        } else {
            let (fs, fl) = self
                .free_extent_of(start)
                .ok_or_else(|| format!("page {start} is already allocated"))?;
            if end > fs + fl {
                return Err(format!("pages {start}..{end} overlap allocated pages"));
            }
            self.remove_free(fs);
            if fs < start {
                self.insert_free(fs, start - fs);
            }
            if end < fs + fl {
                self.insert_free(end, fs + fl - end);
            }
        }
        if len > 1 {
            self.runs.insert(start, len);
        }
        if reserve {
            self.reserved.insert(start, len);
        }
        Ok(())
    }

    /// Reserves a block of `len` pages for an uncommitted transaction (best
    /// fit among free extents, else at the end of the file).
    pub fn reserve(&mut self, len: u32) -> Result<PageNo, String> {
        let want = u64::from(len);
        let start = match self.by_size.range((want, 0)..).next() {
            Some(&(_, s)) => s,
            None => self.page_count,
        };
        self.take(start, len, true)?;
        Ok(start)
    }

    /// Reserves the specific block `[start, start + len)`.
    pub fn reserve_at(&mut self, start: PageNo, len: u32) -> Result<(), String> {
        self.take(start, len, true)
    }

    /// A reserved block's transaction committed.
    pub fn confirm(&mut self, start: PageNo) {
        self.reserved.remove(&start);
    }

    /// A reserved block's transaction aborted.
    pub fn unreserve(&mut self, start: PageNo) {
        if let Some(len) = self.reserved.get(&start).copied() {
            self.release(start, len);
        }
    }

    /// Allocates a block directly as committed (recovery replay, metadata).
    pub fn allocate_at(&mut self, start: PageNo, len: u32) -> Result<(), String> {
        self.take(start, len, false)
    }

    /// Allocates a committed block anywhere (checkpoint metadata blobs).
    pub fn allocate(&mut self, len: u32) -> Result<PageNo, String> {
        let p = self.reserve(len)?;
        self.confirm(p);
        Ok(p)
    }

    /// Frees the committed block at `start` of `len` pages.
    pub fn free(&mut self, start: PageNo, len: u32) -> Result<(), String> {
        match self.block_of(start) {
            Some((h, l)) if h == start && l == len && !self.reserved.contains_key(&start) => {
                self.release(start, len);
                Ok(())
            }
            Some((h, l)) => Err(format!(
                "free of {len} pages at {start}, but the block there is {l} pages at {h}"
            )),
            None => Err(format!("free of page {start}, which is not allocated")),
        }
    }

    /// The block `(head, len)` containing `page`, if it is allocated.
    pub fn block_of(&self, page: PageNo) -> Option<(PageNo, u32)> {
        if page < self.first || page >= self.page_count || self.free_extent_of(page).is_some() {
            return None;
        }
        if let Some((&h, &l)) = self.runs.range(..=page).next_back()
            && page < h + u64::from(l)
        {
            return Some((h, l));
        }
        Some((page, 1))
    }

    /// Whether the block at `head` is reserved (its transaction has not
    /// committed).
    pub fn is_reserved(&self, head: PageNo) -> bool {
        self.reserved.contains_key(&head)
    }

    /// Every allocated block, in order (committed and reserved).
    pub fn blocks(&self) -> Blocks<'_> {
        Blocks {
            fs: self,
            page: self.first,
        }
    }
}

/// Iterator over allocated blocks.
#[derive(Debug)]
pub struct Blocks<'a> {
    fs: &'a FreeSpace,
    page: PageNo,
}

impl Iterator for Blocks<'_> {
    type Item = (PageNo, u32);

    fn next(&mut self) -> Option<Self::Item> {
        while self.page < self.fs.page_count {
            if let Some(&l) = self.fs.free.get(&self.page) {
                self.page += l;
                continue;
            }
            let len = self.fs.runs.get(&self.page).copied().unwrap_or(1);
            let b = (self.page, len);
            self.page += u64::from(len);
            return Some(b);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reserve_free_and_coalesce() {
        let mut fs = FreeSpace::new(2);
        let a = fs.reserve(1).expect("a");
        let b = fs.reserve(3).expect("b");
        let c = fs.reserve(1).expect("c");
        assert_eq!((a, b, c), (2, 3, 6));
        fs.confirm(a);
        fs.confirm(b);
        fs.confirm(c);
        assert_eq!(fs.block_of(4), Some((3, 3)));
        fs.free(b, 3).expect("free b");
        assert_eq!(fs.block_of(4), None);
        assert_eq!(fs.reserve(2).expect("fits in hole"), 3);
        fs.unreserve(3);
        fs.free(c, 1).expect("free c");
        // Freeing the top lowers the mark.
        assert_eq!(fs.page_count(), 3);
        assert!(fs.free(a, 2).is_err());
    }

    #[test]
    fn reserved_blocks_persist_as_free() {
        let mut fs = FreeSpace::new(2);
        let a = fs.allocate(1).expect("a");
        let _r = fs.reserve(4).expect("r");
        let img = fs.image();
        let back = FreeSpace::from_image(&img, 2).expect("valid");
        assert_eq!(back.block_of(a), Some((a, 1)));
        assert_eq!(back.page_count(), 3);
    }

    #[test]
    fn far_pages() {
        let mut fs = FreeSpace::new(2);
        let far = 1u64 << 33;
        fs.reserve_at(far, 2).expect("far block");
        assert_eq!(fs.block_of(far + 1), Some((far, 2)));
        assert_eq!(fs.free_pages(), far - 2);
        assert_eq!(fs.reserve(1).expect("low"), 2);
    }

    proptest! {
        #[test]
        fn image_round_trips_and_blocks_partition(ops in prop::collection::vec((0u8..3, 1u32..5), 1..60)) {
            let mut fs = FreeSpace::new(2);
            let mut live: Vec<(u64, u32)> = Vec::new();
            for (op, n) in ops {
                match op {
                    0 | 1 => { let p = fs.allocate(n).expect("alloc"); live.push((p, n)); }
                    _ => if let Some((p, l)) = live.pop() { fs.free(p, l).expect("free"); }
                }
            }
            let back = FreeSpace::from_image(&fs.image(), 2).expect("valid image");
            prop_assert_eq!(&back.image(), &fs.image());
            let mut blocks: Vec<_> = fs.blocks().collect();
            live.sort();
            blocks.sort();
            prop_assert_eq!(blocks, live.clone());
            let used: u64 = live.iter().map(|&(_, l)| u64::from(l)).sum();
            prop_assert_eq!(used + fs.free_pages() + 2, fs.page_count());
        }
    }
}
