//! Dead space: what transactions that did not commit had given out.
//!
//! A transaction that aborts (or fails to commit, or is forgotten) leaves
//! nothing in the committed state, but the program may still hold `PRef`s
//! to the objects it allocated. So that such a stale pointer never reads
//! another object, the space those objects took is never handed out again
//! in this session:
//!
//! - a block the transaction allocated stays reserved in the store (a
//!   checkpoint writes reserved pages as free, so a later session reuses
//!   it, when no `PRef` of this session can be alive) and its frames are
//!   dropped; touching one again installs zeros (`fetch.rs`), whose object
//!   headers say "no object here";
//! - an existing page it placed objects in gets its committed image back,
//!   which is zero past the committed end of its object area, and no object
//!   is placed in it again this session.
//!
//! Every dereference checks the object header it lands on (`vm/typed.rs`),
//! so a stale pointer into dead space fails that check (a panic naming the
//! pointer, or `Error::Dangling` from the checked calls) instead of reading
//! zeros as a value. And no commit may store a pointer into dead space
//! (`commit.rs`), since a later session reuses it: a committed pointer
//! would then lead to whatever was placed there.

use crate::fasthash::IntMap;
use crate::format::PageNo;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The dead space of one open database.
#[derive(Debug, Default)]
pub(crate) struct Dead {
    /// Whether anything is dead: the commit path's check costs one load
    /// while nothing is.
    any: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Blocks allocated by transactions that did not commit: head → pages.
    blocks: IntMap<PageNo, u32>,
    /// Existing pages with objects of such transactions: page → the offset
    /// where their object area ended before (everything from there on is
    /// dead).
    tails: IntMap<PageNo, u32>,
}

impl Dead {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether anything is dead.
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Records blocks (head, pages) and page tails (page, offset) as dead.
    pub(crate) fn add(
        &self,
        blocks: impl IntoIterator<Item = (PageNo, u32)>,
        tails: impl IntoIterator<Item = (PageNo, u32)>,
    ) {
        let mut g = self.lock();
        g.blocks.extend(blocks);
        for (page, from) in tails {
            let f = g.tails.entry(page).or_insert(from);
            *f = (*f).min(from);
        }
        if !g.blocks.is_empty() || !g.tails.is_empty() {
            self.any.store(true, Ordering::Release);
        }
    }

    /// The pages of the dead block whose first page is `head`, if it is one.
    pub(crate) fn block(&self, head: PageNo) -> Option<u32> {
        if !self.any() {
            return None;
        }
        self.lock().blocks.get(&head).copied()
    }

    /// The dead blocks, (head, pages).
    pub(crate) fn blocks(&self) -> Vec<(PageNo, u32)> {
        self.lock().blocks.iter().map(|(&h, &n)| (h, n)).collect()
    }

    /// Whether no object may be placed on page `page` this session.
    pub(crate) fn closed(&self, page: PageNo) -> bool {
        if !self.any() {
            return false;
        }
        let g = self.lock();
        g.blocks.contains_key(&page) || g.tails.contains_key(&page)
    }

    /// Whether persistent address `paddr` (pages of `1 << shift` bytes)
    /// lies in dead space. Pointers lead to object bodies, which lie in
    /// their block's first page, so the page is a block's head.
    pub(crate) fn contains(&self, paddr: u64, shift: u32) -> bool {
        if !self.any() {
            return false;
        }
        let page = paddr >> shift;
        let off = paddr - (page << shift);
        let g = self.lock();
        g.blocks.contains_key(&page) || g.tails.get(&page).is_some_and(|&from| off >= u64::from(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_tails() {
        let d = Dead::default();
        assert!(!d.any() && !d.contains(5 << 12, 12) && !d.closed(5));
        d.add([(5, 2)], [(9, 400), (9, 600)]);
        assert!(d.any());
        assert_eq!(d.block(5), Some(2));
        assert_eq!(d.block(9), None);
        assert!(d.contains((5 << 12) + 40, 12));
        assert!(d.contains((9 << 12) + 400, 12));
        assert!(!d.contains((9 << 12) + 399, 12));
        assert!(d.closed(9) && d.closed(5) && !d.closed(6));
    }
}
