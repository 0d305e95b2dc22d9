//! QuickStore's recovery buffer (`papers/002_*` §3.2.1): with the SIGSEGV
//! backend, the first write to a page faults, and the handler copies the
//! page's clean content here before enabling writes. At commit the copy is
//! the clean version the page is diffed against, saving a read of the
//! committed image.
//!
//! The buffer holds `M` pages (an open option). When it is full the oldest
//! copy is marked for early logging: at the transaction's next call into
//! Amber, that page's changes so far are logged (with before-images, ignored
//! by recovery unless the transaction commits) and kept (`Spill`), and the
//! copy is dropped; the commit diffs the page against the changes kept.
//! Without a cache budget the page stays writable (re-protecting it so that
//! its next write took a fresh copy logged a page per write once the
//! written pages outnumbered the buffer); under one it is write-protected
//! again, so that eviction may drop it (it faults back with its changes). A
//! reserve of slots beyond `M` absorbs the writes made before that call;
//! should even the reserve fill, the oldest marked copy is dropped unlogged
//! and its page falls back to the committed image as clean version, which is
//! correct, only slower -- unless the page was already logged early in this
//! transaction: the committed image is not its clean version then, and the
//! commit logs the page whole. A page logged early that leaves memory
//! before the transaction ends faults back with its changes.
//!
//! `save` runs inside the SIGSEGV handler of the writing thread, so it is
//! async-signal-safe: the buffer is behind a [`SpinLock`] (no futex, no
//! allocation; re-entry by its holder is a clear abort), and every
//! structure is preallocated for all its slots when the buffer is made --
//! the queues never grow past their capacity, and frames are found through
//! a fixed open-addressing table ([`FrameIndex`]) instead of a `HashMap`,
//! which may rehash (allocate) on an insert after many removals.

use crate::vm::{AmberLock, FrameNo, SpinGuard, SpinLock};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug)]
struct Inner {
    data: Vec<u8>,
    /// Slot → frame whose clean copy it holds.
    owner: Vec<Option<FrameNo>>,
    by_frame: FrameIndex,
    /// Occupied slots, oldest first (not yet marked).
    fifo: VecDeque<usize>,
    /// Slots marked for early logging, oldest first.
    marked: VecDeque<usize>,
    free: Vec<usize>,
}

/// Frame → slot, for at most `slots` frames: linear probing in a table of
/// twice as many entries (a power of two), deletion by backward shift, so
/// it never needs tombstones or a rehash.
#[derive(Debug)]
struct FrameIndex {
    /// Frame + 1 (0: empty), and its slot.
    entries: Vec<(u64, usize)>,
}

impl FrameIndex {
    fn new(slots: usize) -> FrameIndex {
        FrameIndex {
            entries: vec![(0, 0); (slots * 2).next_power_of_two()],
        }
    }

    fn home(&self, frame: FrameNo) -> usize {
        (u64::from(frame).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
            & (self.entries.len() - 1)
    }

    /// The entry holding `frame`, or the empty one where it would go.
    fn find(&self, frame: FrameNo) -> usize {
        let mask = self.entries.len() - 1;
        let key = u64::from(frame) + 1;
        let mut i = self.home(frame);
        while self.entries[i].0 != 0 && self.entries[i].0 != key {
            i = (i + 1) & mask;
        }
        i
    }

    fn get(&self, frame: FrameNo) -> Option<usize> {
        let (k, slot) = self.entries[self.find(frame)];
        (k != 0).then_some(slot)
    }

    /// Records `frame` in `slot`; the caller keeps at most `slots` frames.
    fn insert(&mut self, frame: FrameNo, slot: usize) {
        let i = self.find(frame);
        self.entries[i] = (u64::from(frame) + 1, slot);
    }

    fn remove(&mut self, frame: FrameNo) -> Option<usize> {
        let mask = self.entries.len() - 1;
        let mut i = self.find(frame);
        let (k, slot) = self.entries[i];
        if k == 0 {
            return None;
        }
        // Backward shift: move up every later entry of the probe run that
        // may sit at or before the hole, so lookups never stop early.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let (kj, _) = self.entries[j];
            if kj == 0 {
                break;
            }
            let home = self.home((kj - 1) as FrameNo);
            // Whether `home` lies cyclically in (i, j]: then it stays.
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.entries[i] = self.entries[j];
                i = j;
            }
        }
        self.entries[i] = (0, 0);
        Some(slot)
    }

    fn clear(&mut self) {
        self.entries.iter_mut().for_each(|e| *e = (0, 0));
    }
}

/// The recovery buffer.
#[derive(Debug)]
pub(crate) struct RecoveryBuffer {
    page_size: usize,
    /// Copies beyond which the oldest is marked for early logging.
    limit: usize,
    inner: SpinLock<Inner>,
    /// Set when copies are waiting to be logged early.
    pub(crate) attention: AtomicBool,
    /// Copies dropped unlogged because even the reserve was full.
    pub(crate) dropped: AtomicU64,
    /// Pages logged early so far.
    pub(crate) early_logged: AtomicU64,
}

impl RecoveryBuffer {
    /// A buffer of `pages` pages plus a reserve of an eighth more.
    pub(crate) fn new(pages: usize, page_size: usize) -> RecoveryBuffer {
        let pages = pages.max(1);
        let total = pages + (pages / 8).max(2);
        RecoveryBuffer {
            page_size,
            limit: pages,
            inner: SpinLock::new(
                AmberLock::RecoveryBuffer,
                Inner {
                    data: vec![0u8; total * page_size],
                    owner: vec![None; total],
                    by_frame: FrameIndex::new(total),
                    fifo: VecDeque::with_capacity(total),
                    marked: VecDeque::with_capacity(total),
                    free: (0..total).rev().collect(),
                },
            ),
            attention: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            early_logged: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> SpinGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Keeps `clean` as the clean copy of `frame` (from the SIGSEGV handler:
    /// async-signal-safe, see the module docs).
    pub(crate) fn save(&self, frame: FrameNo, clean: &[u8]) {
        let mut g = self.lock();
        if g.by_frame.get(frame).is_some() {
            return;
        }
        if g.fifo.len() >= self.limit
            && let Some(old) = g.fifo.pop_front()
        {
            g.marked.push_back(old);
            self.attention.store(true, Ordering::Release);
        }
        let slot = match g.free.pop() {
            Some(s) => s,
            None => {
                // Even the reserve is full: drop the oldest marked copy.
                let Some(s) = g.marked.pop_front().or_else(|| g.fifo.pop_front()) else {
                    return;
                };
                if let Some(f) = g.owner[s].take() {
                    g.by_frame.remove(f);
                }
                self.dropped.fetch_add(1, Ordering::Relaxed);
                s
            }
        };
        let ps = self.page_size;
        let n = clean.len().min(ps);
        g.data[slot * ps..slot * ps + n].copy_from_slice(&clean[..n]);
        g.owner[slot] = Some(frame);
        g.by_frame.insert(frame, slot);
        g.fifo.push_back(slot);
    }

    /// The clean copy of `frame`, if the buffer has one.
    pub(crate) fn copy_of(&self, frame: FrameNo) -> Option<Vec<u8>> {
        let g = self.lock();
        let slot = g.by_frame.get(frame)?;
        let ps = self.page_size;
        Some(g.data[slot * ps..(slot + 1) * ps].to_vec())
    }

    /// Drops the copy of `frame`, if any (its page was spilled).
    pub(crate) fn forget(&self, frame: FrameNo) {
        let mut g = self.lock();
        if let Some(slot) = g.by_frame.remove(frame) {
            g.owner[slot] = None;
            g.fifo.retain(|&s| s != slot);
            g.marked.retain(|&s| s != slot);
            g.free.push(slot);
        }
    }

    /// Takes the copies marked for early logging: `(frame, clean copy)`.
    pub(crate) fn take_marked(&self) -> Vec<(FrameNo, Vec<u8>)> {
        let mut g = self.lock();
        self.attention.store(false, Ordering::Release);
        let ps = self.page_size;
        let mut out = Vec::with_capacity(g.marked.len());
        while let Some(slot) = g.marked.pop_front() {
            if let Some(f) = g.owner[slot].take() {
                g.by_frame.remove(f);
                out.push((f, g.data[slot * ps..(slot + 1) * ps].to_vec()));
            }
            g.free.push(slot);
        }
        out
    }

    /// Forgets every copy (the transaction ended).
    pub(crate) fn clear(&self) {
        let mut g = self.lock();
        let total = g.owner.len();
        g.owner.iter_mut().for_each(|o| *o = None);
        g.by_frame.clear();
        g.fifo.clear();
        g.marked.clear();
        g.free.clear();
        g.free.extend((0..total).rev());
        self.attention.store(false, Ordering::Release);
    }

    /// Copies held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().owner.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_marks_the_oldest_then_drops() {
        let b = RecoveryBuffer::new(4, 16);
        for f in 0..4u32 {
            b.save(f, &[f as u8; 16]);
        }
        assert!(!b.attention.load(Ordering::Acquire));
        b.save(4, &[4; 16]);
        assert!(b.attention.load(Ordering::Acquire));
        assert_eq!(b.copy_of(4), Some(vec![4; 16]));
        let m = b.take_marked();
        assert_eq!(m, vec![(0, vec![0; 16])]);
        assert_eq!(b.copy_of(0), None);
        // Fill everything, reserve included: copies get dropped, never lost
        // silently (counted).
        for f in 10..40u32 {
            b.save(f, &[1; 16]);
        }
        assert!(b.dropped.load(Ordering::Relaxed) > 0);
        b.clear();
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn frame_index_against_a_model() {
        let mut ix = FrameIndex::new(8);
        let mut model = std::collections::HashMap::new();
        let mut x = 12345u64;
        for step in 0..20_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct frames, colliding often in a 16-entry table.
            let f = (x % 40) as FrameNo * 16;
            if model.len() < 8 && !x.is_multiple_of(3) {
                if let std::collections::hash_map::Entry::Vacant(e) = model.entry(f) {
                    ix.insert(f, step);
                    e.insert(step);
                }
            } else {
                assert_eq!(ix.remove(f), model.remove(&f), "remove {f} at {step}");
            }
            for g in (0..40).map(|k| k * 16) {
                assert_eq!(ix.get(g), model.get(&g).copied(), "get {g} at {step}");
            }
        }
        ix.clear();
        assert!((0..40).all(|k| ix.get(k * 16).is_none()));
    }
}
