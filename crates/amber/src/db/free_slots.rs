//! Free slots available for type-stable reuse: found in fetched pages, or
//! freed by committed transactions.
//!
//! Slots are kept per (type id, body size) in the order they were recorded, so
//! that the allocator tries the one recorded last — after fetching the page of a
//! candidate, the slots that fetch recorded follow it, and the candidate is
//! found near the end. A set of every recorded address makes recording
//! idempotent in constant time: a page is fetched again after every eviction,
//! and each fetch reports all its free slots again (a linear search of the
//! list instead cost 12% of a cold OO1 lookup, whose pages hold the old
//! buffers of grown vectors).
//!
//! Fetches only report their slots, in a plain list sorted in when the
//! allocator next asks: a program that reads (the OO1 lookups and traversals
//! touch every page of the database, with about 3,700 free slots, the old
//! buffers of grown vectors) pays a push per slot instead of two hash
//! insertions.

use crate::fasthash::{IntMap, IntSet};

/// Type id and body size: slots are reused only by objects of both.
pub(crate) type SlotKey = (u32, u32);

/// Reported slots beyond which they are sorted in at once (bounds the list
/// when pages are fetched again and again under a small budget).
const REPORTED_MAX: usize = 1 << 16;

#[derive(Debug, Default)]
pub(crate) struct FreeSlots {
    by_key: IntMap<SlotKey, Vec<u64>>,
    known: IntSet<u64>,
    /// Reported by fetches, in order, not sorted in yet.
    reported: Vec<(SlotKey, u64)>,
}

impl FreeSlots {
    /// Records the free slot at persistent address `addr`, unless recorded.
    pub(crate) fn add(&mut self, key: SlotKey, addr: u64) {
        if self.known.insert(addr) {
            self.by_key.entry(key).or_default().push(addr);
        }
    }

    /// Records a free slot found by a fetch (sorted in later; see the module
    /// docs).
    pub(crate) fn report(&mut self, key: SlotKey, addr: u64) {
        self.reported.push((key, addr));
        if self.reported.len() >= REPORTED_MAX {
            self.settle();
        }
    }

    /// Sorts the reported slots in.
    fn settle(&mut self) {
        for (key, addr) in std::mem::take(&mut self.reported) {
            self.add(key, addr);
        }
    }

    /// The slot of `key` recorded last.
    pub(crate) fn last(&mut self, key: SlotKey) -> Option<u64> {
        self.settle();
        self.by_key.get(&key).and_then(|v| v.last().copied())
    }

    /// Takes the slot at `addr` out; whether it was there.
    pub(crate) fn take(&mut self, key: SlotKey, addr: u64) -> bool {
        self.settle();
        let Some(v) = self.by_key.get_mut(&key) else {
            return false;
        };
        // Near the end: only what a fetch recorded after it follows it.
        match v.iter().rposition(|&a| a == addr) {
            Some(i) => {
                v.remove(i);
                self.known.remove(&addr);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_is_idempotent_and_taking_forgets() {
        let mut s = FreeSlots::default();
        s.add((1, 16), 100);
        s.add((1, 16), 200);
        s.add((1, 16), 100);
        assert_eq!(s.last((1, 16)), Some(200));
        assert!(s.take((1, 16), 200));
        assert!(!s.take((1, 16), 200));
        assert_eq!(s.last((1, 16)), Some(100));
        assert!(s.take((1, 16), 100));
        assert_eq!(s.last((1, 16)), None);
        s.add((1, 16), 100);
        assert_eq!(s.last((1, 16)), Some(100));
        assert_eq!(s.last((2, 16)), None);
    }

    #[test]
    fn reported_slots_are_sorted_in_when_asked() {
        let mut s = FreeSlots::default();
        s.add((1, 16), 100);
        s.report((1, 16), 300);
        s.report((1, 16), 100);
        s.report((2, 8), 400);
        assert_eq!(s.last((1, 16)), Some(300));
        assert!(s.take((2, 8), 400));
        assert!(s.take((1, 16), 300));
        assert_eq!(s.last((1, 16)), Some(100));
        assert!(s.take((1, 16), 100));
        assert_eq!(s.last((1, 16)), None);
    }
}
