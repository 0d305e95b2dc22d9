//! The server's buffer pool: fetch clusters already read, verified and
//! framed, kept per database for the connections that ask for them again
//! (as the ESM server of QuickStore's paper keeps its pages in its own
//! buffer pool). A hit is sent as it was framed, without a read, a
//! checksum or an encoding (docs/design.md §10.15).
//!
//! Connections have snapshots of their own, so an entry says at which
//! snapshots its images are right: a range of snapshot LSNs `lo..=hi`.
//! It is read at one snapshot (`lo == hi`); a connection that moves its
//! snapshot from `s` to `t` learns which pages commits changed in between
//! (`Refreshed::Pages`, the list a client drops from its own cache), and
//! the pool records that move: an entry right at `s` that holds none of
//! those pages is right at `t` too. Entries are carried along the
//! recorded moves when they are looked up, not when a move is recorded,
//! so that a refresh costs the same however many entries the pool holds.
//! A move past a checkpoint (`Refreshed::Everything`) is not recorded:
//! entries are not carried across it, and age out. Whether each block of
//! the cluster is still where it was at `t` (a free changes no page) is
//! checked at each hit by the connection against its own block map.
//!
//! Only clusters whose every block was read whole are kept: an answer
//! carrying a damaged block's error is read again each time, so the
//! error is reported as the file is. The pool is bounded in bytes and
//! lets the least recently used entry go first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What a `ReadCluster` asked for: its first page, and its page count
/// cut at the snapshot's last page.
pub type ClusterKey = (u64, u64);

/// A cluster's answer as it was sent: the frame's head (length prefix,
/// kind, block list) and its images.
#[derive(Debug)]
pub struct Framed {
    /// Everything of the frame before the images.
    pub head: Vec<u8>,
    /// The images.
    pub tail: Vec<u8>,
    /// The blocks it holds, head and pages: the cluster's layout when read.
    pub blocks: Vec<(u64, u32)>,
}

impl Framed {
    /// The memory it holds.
    fn bytes(&self) -> usize {
        self.head.capacity() + self.tail.capacity() + self.blocks.capacity() * 16
    }

    /// The pages from its first block's head to its last block's end.
    fn span(&self) -> std::ops::Range<u64> {
        match (self.blocks.first(), self.blocks.last()) {
            (Some(&(first, _)), Some(&(last, n))) => first..last + u64::from(n),
            _ => 0..0,
        }
    }
}

/// One database's pool.
#[derive(Debug)]
pub struct ImageCache {
    /// The most bytes of entries it holds; 0 keeps nothing.
    capacity: usize,
    inner: Mutex<Inner>,
}

/// An entry: its answer and the snapshots it is right at.
#[derive(Debug)]
struct Slot {
    framed: Arc<Framed>,
    lo: u64,
    hi: u64,
    /// When it was last used, its key in `Inner::by_use`.
    used: u64,
}

#[derive(Debug, Default)]
struct Inner {
    slots: HashMap<ClusterKey, Slot>,
    /// The entries by last use, oldest first.
    by_use: BTreeMap<u64, ClusterKey>,
    clock: u64,
    bytes: usize,
    hits: u64,
    misses: u64,
    /// The moves of connections' snapshots recorded, `(from, to)`, and
    /// the pages commits changed in between (sorted).
    moves: BTreeMap<(u64, u64), Vec<u64>>,
    /// The pages those lists hold.
    move_pages: usize,
}

/// The most moves the pool records, and the most pages their lists hold
/// (8 bytes each): the oldest go first. An entry last known right at a
/// snapshot older than every move kept is not carried further.
const MOVES_KEPT: usize = 4096;
const MOVE_PAGES_KEPT: usize = 1 << 20;

/// What `Status` reports of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// The bytes its entries hold.
    pub bytes: usize,
    /// Its entries.
    pub entries: usize,
    /// Clusters answered from it.
    pub hits: u64,
    /// Clusters read because it had no entry right at the snapshot.
    pub misses: u64,
}

impl Inner {
    fn touch(&mut self, key: ClusterKey) {
        self.clock += 1;
        let now = self.clock;
        if let Some(slot) = self.slots.get_mut(&key) {
            self.by_use.remove(&slot.used);
            slot.used = now;
            self.by_use.insert(now, key);
        }
    }

    /// Whether the entry of `key` is right at `snapshot`: read at or
    /// before it, and carried to it along recorded moves none of which
    /// changed a page of it. How far it was carried is kept.
    fn right_at(&mut self, key: ClusterKey, snapshot: u64) -> bool {
        let Some(slot) = self.slots.get_mut(&key) else {
            return false;
        };
        if snapshot < slot.lo {
            return false;
        }
        let span = slot.framed.span();
        while slot.hi < snapshot {
            // The longest recorded move from where the entry is known
            // right that does not pass `snapshot`: the commits it spans
            // are all before `snapshot`, so a page of the entry changed
            // there is changed at `snapshot` too.
            let from = slot.hi;
            let Some((&(_, to), changed)) = self
                .moves
                .range((from, from + 1)..=(from, snapshot))
                .next_back()
            else {
                return false;
            };
            let i = changed.partition_point(|&p| p < span.start);
            if changed.get(i).is_some_and(|&p| p < span.end) {
                return false;
            }
            slot.hi = to;
        }
        true
    }

    fn remove(&mut self, key: ClusterKey) {
        if let Some(slot) = self.slots.remove(&key) {
            self.by_use.remove(&slot.used);
            self.bytes -= slot.framed.bytes();
        }
    }
}

impl ImageCache {
    /// A pool of at most `capacity` bytes.
    pub fn new(capacity: usize) -> ImageCache {
        ImageCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer to `key` at `snapshot`, if an entry is right there and
    /// its blocks are where `in_place` finds them.
    pub fn get(
        &self,
        key: ClusterKey,
        snapshot: u64,
        in_place: impl FnOnce(&Framed) -> bool,
    ) -> Option<Arc<Framed>> {
        let found = {
            let mut inner = self.lock();
            (inner.right_at(key, snapshot))
                .then(|| inner.slots.get(&key).map(|s| s.framed.clone()))
                .flatten()
        };
        // Checked without the pool's lock: `in_place` takes the store's.
        let hit = found.filter(|f| in_place(f));
        let mut inner = self.lock();
        if hit.is_some() {
            inner.hits += 1;
            inner.touch(key);
        } else {
            inner.misses += 1;
        }
        hit
    }

    /// Keeps `framed`, read at `snapshot`, as the answer to `key`, in
    /// place of any entry not right at a later snapshot (one carried to
    /// `snapshot` may have its blocks elsewhere there: a connection read
    /// because it did); the least recently used entries go to make room.
    pub fn put(&self, key: ClusterKey, snapshot: u64, framed: Framed) {
        let size = framed.bytes();
        if size > self.capacity {
            return;
        }
        let mut inner = self.lock();
        if inner.slots.get(&key).is_some_and(|s| s.hi > snapshot) {
            return;
        }
        inner.remove(key);
        while inner.bytes + size > self.capacity {
            let Some((_, &oldest)) = inner.by_use.iter().next() else {
                break;
            };
            inner.remove(oldest);
        }
        inner.clock += 1;
        let used = inner.clock;
        inner.by_use.insert(used, key);
        inner.bytes += size;
        let framed = Arc::new(framed);
        inner.slots.insert(
            key,
            Slot {
                framed,
                lo: snapshot,
                hi: snapshot,
                used,
            },
        );
    }

    /// A connection moved its snapshot from `from` to `to`, and commits
    /// in between changed `changed` (sorted): recorded, so that an entry
    /// right at `from` that holds none of those pages is right at `to`.
    pub fn moved(&self, from: u64, to: u64, changed: &[u64]) {
        if self.capacity == 0 || to <= from || changed.len() > MOVE_PAGES_KEPT {
            return;
        }
        let mut inner = self.lock();
        if inner.moves.contains_key(&(from, to)) {
            return;
        }
        inner.moves.insert((from, to), changed.to_vec());
        inner.move_pages += changed.len();
        while inner.moves.len() > MOVES_KEPT || inner.move_pages > MOVE_PAGES_KEPT {
            let Some((_, gone)) = inner.moves.pop_first() else {
                break;
            };
            inner.move_pages -= gone.len();
        }
    }

    /// The most bytes it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Its figures, for `Status`.
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            bytes: inner.bytes,
            entries: inner.slots.len(),
            hits: inner.hits,
            misses: inner.misses,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(blocks: &[(u64, u32)], fill: u8) -> Framed {
        Framed {
            head: vec![fill; 8],
            tail: vec![fill; 4096 * blocks.iter().map(|b| b.1 as usize).sum::<usize>()],
            blocks: blocks.to_vec(),
        }
    }

    #[test]
    fn an_entry_is_right_only_at_the_snapshots_it_was_read_or_carried_to() {
        let c = ImageCache::new(1 << 20);
        c.put((10, 4), 5, framed(&[(10, 2), (12, 2)], 1));
        assert!(c.get((10, 4), 5, |_| true).is_some());
        assert!(c.get((10, 4), 4, |_| true).is_none(), "older snapshot");
        assert!(
            c.get((10, 4), 6, |_| true).is_none(),
            "newer snapshot, not carried"
        );
        assert!(c.get((10, 8), 5, |_| true).is_none(), "another range");
        assert!(
            c.get((10, 4), 5, |f| f.blocks == [(10, 4)]).is_none(),
            "the blocks are no longer where they were"
        );
        // A commit that changed page 13 (in the cluster): not carried.
        c.moved(5, 7, &[3, 13, 40]);
        assert!(c.get((10, 4), 7, |_| true).is_none());
        // One that changed pages on either side of it: carried.
        c.moved(5, 9, &[3, 9, 14, 40]);
        assert!(c.get((10, 4), 9, |_| true).is_some());
        assert!(
            c.get((10, 4), 7, |_| true).is_some(),
            "right at every snapshot between"
        );
        // From a snapshot it was not right at: not carried.
        c.moved(11, 12, &[]);
        assert!(c.get((10, 4), 12, |_| true).is_none());
        let s = c.stats();
        assert_eq!((s.entries, s.hits, s.misses), (1, 3, 6));
        // A read at a snapshot the entry was carried to replaces it: the
        // connection read because the blocks were elsewhere there.
        c.put((10, 4), 9, framed(&[(10, 4)], 2));
        assert_eq!(c.get((10, 4), 9, |_| true).unwrap().blocks, [(10, 4)]);
        assert!(c.get((10, 4), 7, |_| true).is_none());
        // Along a chain of moves, each as far as it goes without passing
        // the snapshot asked for.
        c.moved(9, 10, &[]);
        c.moved(10, 20, &[12]);
        c.moved(10, 11, &[20]);
        assert!(c.get((10, 4), 11, |_| true).is_some());
        c.moved(11, 12, &[]);
        assert!(c.get((10, 4), 12, |_| true).is_some(), "9 → 10 → 11 → 12");
        assert!(c.get((10, 4), 20, |_| true).is_none(), "12 → 20 unknown");
    }

    #[test]
    fn the_oldest_moves_go_first() {
        let c = ImageCache::new(1 << 20);
        c.put((0, 1), 0, framed(&[(0, 1)], 1));
        for s in 0..MOVES_KEPT as u64 {
            c.moved(s, s + 1, &[100]);
        }
        assert!(c.get((0, 1), MOVES_KEPT as u64, |_| true).is_some());
        c.moved(MOVES_KEPT as u64, MOVES_KEPT as u64 + 1, &[100]);
        assert!(
            c.get((0, 1), 1, |_| true).is_some(),
            "carried already: right at 1 though the move from 0 is gone"
        );
        // The move from 0 is gone: an entry read at 0 is not carried.
        c.put((5, 1), 0, framed(&[(5, 1)], 1));
        assert!(c.get((5, 1), 1, |_| true).is_none());
        assert!(c.get((5, 1), 0, |_| true).is_some());
        // A list longer than the pages kept is not recorded.
        c.put((7, 1), MOVES_KEPT as u64 + 1, framed(&[(7, 1)], 1));
        let long: Vec<u64> = (1000..1000 + MOVE_PAGES_KEPT as u64 + 1).collect();
        c.moved(MOVES_KEPT as u64 + 1, MOVES_KEPT as u64 + 2, &long);
        assert!(c.get((7, 1), MOVES_KEPT as u64 + 2, |_| true).is_none());
    }

    #[test]
    fn a_newer_read_replaces_an_older_entry_and_the_least_used_goes_first() {
        let one = framed(&[(0, 1)], 0).bytes();
        let c = ImageCache::new(2 * one);
        c.put((0, 1), 1, framed(&[(0, 1)], 1));
        c.put((0, 1), 3, framed(&[(0, 1)], 3));
        assert!(c.get((0, 1), 1, |_| true).is_none());
        assert_eq!(c.get((0, 1), 3, |_| true).unwrap().head[0], 3);
        // An older read does not replace a newer entry.
        c.put((0, 1), 2, framed(&[(0, 1)], 2));
        assert_eq!(c.get((0, 1), 3, |_| true).unwrap().head[0], 3);
        c.put((1, 1), 3, framed(&[(1, 1)], 4));
        assert!(c.get((0, 1), 3, |_| true).is_some());
        // Full: (1, 1) was used least recently.
        c.put((2, 1), 3, framed(&[(2, 1)], 5));
        assert!(c.get((1, 1), 3, |_| true).is_none());
        assert!(c.get((0, 1), 3, |_| true).is_some() && c.get((2, 1), 3, |_| true).is_some());
        assert_eq!(c.stats().bytes, 2 * one);
        // Nothing larger than the pool is kept, and a pool of 0 keeps nothing.
        let none = ImageCache::new(0);
        none.put((0, 1), 1, framed(&[(0, 1)], 1));
        assert_eq!(none.stats().entries, 0);
    }
}
