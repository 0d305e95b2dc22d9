//! The client's clean images: committed images of blocks, kept so that a
//! commit's differencing does not cost a round trip per written block.
//!
//! A transaction that wrote a block diffs it against the block's clean
//! version (`db/commit.rs`): the recovery buffer's copy where the backend
//! keeps one, else the committed image from the source. Through a server
//! that image is a `ReadBlock` round trip, which the commit target
//! cannot afford on every commit. So the remote source keeps every image it
//! read whole (`read_block`), in persistent form, and keeps it true to its
//! snapshot: a move of the snapshot drops the blocks of the pages it names
//! (all of them after a checkpoint), and the connection's own commit lays
//! its records over the images of the blocks it wrote — what the server
//! holds then, but for the store-kept header bytes, which no record carries
//! and no diff reads (`loggen::check_covers`).
//!
//! Bounded by a byte budget ([`RemoteOptions::clean_images`]); past it the
//! lowest blocks go first (the order costs nothing to keep; a miss costs
//! one round trip).
//!
//! [`RemoteOptions::clean_images`]: super::remote::RemoteOptions::clean_images

use crate::format::PageNo;
use crate::wire::WireRecord;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Committed images by block head, within a byte budget.
#[derive(Debug)]
pub(crate) struct CleanImages {
    page_size: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    blocks: BTreeMap<PageNo, Vec<u8>>,
    bytes: usize,
    budget: usize,
}

impl Inner {
    /// The head of the kept block holding `page`, if one does.
    fn holding(&self, page: PageNo, ps: u64) -> Option<PageNo> {
        let (&h, img) = self.blocks.range(..=page).next_back()?;
        (page < h + img.len() as u64 / ps).then_some(h)
    }

    fn remove(&mut self, head: PageNo) {
        if let Some(img) = self.blocks.remove(&head) {
            self.bytes -= img.len();
        }
    }
}

impl CleanImages {
    pub(crate) fn new(page_size: usize, budget: usize) -> CleanImages {
        CleanImages {
            page_size: page_size as u64,
            inner: Mutex::new(Inner {
                budget,
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The committed image of the block at `head`, if kept.
    pub(crate) fn get(&self, head: PageNo) -> Option<Vec<u8>> {
        self.lock().blocks.get(&head).cloned()
    }

    /// Keeps `img`, the committed image of the block at `head` at the
    /// current snapshot.
    pub(crate) fn put(&self, head: PageNo, img: &[u8]) {
        let mut c = self.lock();
        if img.len() > c.budget {
            return;
        }
        c.remove(head);
        while c.bytes + img.len() > c.budget {
            let Some((&h, _)) = c.blocks.first_key_value() else {
                break;
            };
            c.remove(h);
        }
        c.bytes += img.len();
        c.blocks.insert(head, img.to_vec());
    }

    /// The snapshot moved and `pages` changed: their blocks go.
    pub(crate) fn changed(&self, pages: &[PageNo]) {
        let mut c = self.lock();
        for &p in pages {
            if let Some(h) = c.holding(p, self.page_size) {
                c.remove(h);
            }
        }
    }

    /// The snapshot moved past a checkpoint: anything may have changed.
    pub(crate) fn clear(&self) {
        let mut c = self.lock();
        c.blocks.clear();
        c.bytes = 0;
    }

    /// This connection's commit of `records` and `frees` is in: the kept
    /// images of the blocks it wrote become their committed images. A
    /// record that does not fit the block kept for its first page drops
    /// that block (the server would have refused it; nothing is guessed).
    pub(crate) fn committed(&self, records: &[WireRecord], frees: &[PageNo]) {
        let ps = self.page_size;
        let mut c = self.lock();
        for r in records {
            let (page, at, bytes) = match r {
                WireRecord::Range { addr, data } => (addr / ps, *addr, data.as_slice()),
                WireRecord::Page { page, image } => (*page, page * ps, image.as_slice()),
                // What the records on the page made it: laid already.
                WireRecord::Cached { .. } => continue,
            };
            let Some(h) = c.holding(page, ps) else {
                continue;
            };
            let from = (at - h * ps) as usize;
            let laid = (c.blocks.get_mut(&h))
                .and_then(|img| img.get_mut(from..from + bytes.len()))
                .map(|dst| dst.copy_from_slice(bytes));
            if laid.is_none() {
                c.remove(h);
            }
        }
        for &head in frees {
            c.remove(head);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: usize = 4096;

    fn range(addr: u64, data: &[u8]) -> WireRecord {
        WireRecord::Range {
            addr,
            data: data.to_vec(),
        }
    }

    #[test]
    fn a_commit_lays_its_records_over_the_kept_images() {
        let c = CleanImages::new(PS, 1 << 20);
        c.put(10, &vec![0u8; 2 * PS]);
        c.put(20, &vec![0u8; PS]);
        c.committed(
            &[
                range(11 * PS as u64 + 5, b"abc"),
                WireRecord::Page {
                    page: 20,
                    image: vec![7u8; PS],
                },
                range(30 * PS as u64, b"not kept"),
            ],
            &[],
        );
        let img = c.get(10).unwrap();
        assert_eq!(&img[PS + 5..PS + 8], b"abc");
        assert_eq!(c.get(20).unwrap(), vec![7u8; PS]);
        assert_eq!(c.get(30), None);
        // A record past its block's end drops the block.
        c.committed(&[range(12 * PS as u64 - 1, b"xy")], &[]);
        assert_eq!(c.get(10), None);
        c.committed(&[], &[20]);
        assert_eq!(c.get(20), None);
    }

    #[test]
    fn moves_of_the_snapshot_drop_what_changed() {
        let c = CleanImages::new(PS, 1 << 20);
        c.put(10, &vec![1u8; 3 * PS]);
        c.put(13, &vec![2u8; PS]);
        c.changed(&[9, 14]);
        assert!(c.get(10).is_some() && c.get(13).is_some());
        c.changed(&[12]);
        assert_eq!(c.get(10), None);
        assert!(c.get(13).is_some());
        c.clear();
        assert_eq!(c.get(13), None);
    }

    #[test]
    fn the_budget_bounds_what_is_kept() {
        let c = CleanImages::new(PS, 2 * PS);
        c.put(1, &vec![0u8; PS]);
        c.put(2, &vec![0u8; PS]);
        c.put(3, &vec![0u8; PS]);
        assert_eq!(c.get(1), None, "the lowest went first");
        assert!(c.get(2).is_some() && c.get(3).is_some());
        c.put(4, &vec![0u8; 3 * PS]);
        assert_eq!(c.get(4), None, "larger than the budget: not kept");
        let off = CleanImages::new(PS, 0);
        off.put(1, &vec![0u8; PS]);
        assert_eq!(off.get(1), None);
    }
}
