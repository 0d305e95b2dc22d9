//! The object cache's table: the copies in slots, the OID hash table from
//! persistent address to slot (EPVM 2.0's OID hash table), clock
//! replacement, and each copy's swizzled pointers.
//!
//! A slot is named by its index *and* the persistent address of the copy
//! it holds: a handle or a swizzled pointer whose slot now holds another
//! object (or none) no longer matches and is looked up again. That is how
//! eviction "unswizzles" the pointers to a victim without finding them.

use crate::fasthash::IntMap;
use crate::vm::CopyBuf;

/// A swizzled pointer of a copy: the field at `offset` leads to the copy in
/// `slot`, which is valid while that slot holds `paddr`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    pub(crate) offset: u32,
    pub(crate) slot: u32,
    pub(crate) paddr: u64,
}

/// One cached object.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) paddr: u64,
    /// Its type id, for finding its pointers (eager swizzling).
    pub(crate) type_id: u32,
    pub(crate) buf: CopyBuf,
    /// The bytes `[lo, hi)` changed since the last commit (EPVM 2.0's low
    /// and high byte counts), if any.
    pub(crate) modified: Option<(usize, usize)>,
    /// Clock's reference bit.
    pub(crate) referenced: bool,
    /// Its swizzled pointer fields (a handful: one per pointer field
    /// followed or discovered).
    pub(crate) links: Vec<Link>,
    /// Eager swizzling: every pointer of the copy has been discovered (its
    /// targets copied in and linked) since it was copied in or last written.
    pub(crate) discovered: bool,
}

impl Entry {
    /// Widens the modified range to cover `[lo, hi)`, and drops the
    /// swizzled pointers the write may have changed.
    pub(crate) fn note_write(&mut self, lo: usize, hi: usize) {
        self.modified = Some(match self.modified {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        });
        self.links
            .retain(|l| (l.offset as usize) + 8 <= lo || l.offset as usize >= hi);
        // The write may have stored a pointer: the next use discovers again.
        self.discovered = false;
    }

    /// The link of the pointer field at `offset`, if it has one and its
    /// target is still in the slot it names (checked by the caller).
    #[inline]
    pub(crate) fn link(&self, offset: u32) -> Option<Link> {
        self.links.iter().find(|l| l.offset == offset).copied()
    }

    /// Links the pointer field at `l.offset` (replacing its old link).
    pub(crate) fn set_link(&mut self, l: Link) {
        match self.links.iter_mut().find(|x| x.offset == l.offset) {
            Some(x) => *x = l,
            None => self.links.push(l),
        }
    }

    /// The bytes the cache charges for it: the copy, in whole words.
    pub(crate) fn charge(&self) -> usize {
        self.buf.len().div_ceil(8) * 8
    }
}

/// The slots, the hash table and the clock.
#[derive(Debug, Default)]
pub(crate) struct Table {
    map: IntMap<u64, u32>,
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    hand: usize,
    /// Bytes charged for the copies held.
    pub(crate) bytes: usize,
}

impl Table {
    /// The slot holding the copy of the object at `paddr`.
    #[inline]
    pub(crate) fn lookup(&self, paddr: u64) -> Option<u32> {
        self.map.get(&paddr).copied()
    }

    /// The copy in `slot`, if it is still the one of `paddr`.
    #[inline(always)]
    pub(crate) fn entry(&self, slot: u32, paddr: u64) -> Option<&Entry> {
        match self.slots.get(slot as usize) {
            Some(Some(e)) if e.paddr == paddr => Some(e),
            _ => None,
        }
    }

    /// [`entry`](Self::entry), mutably.
    #[inline(always)]
    pub(crate) fn entry_mut(&mut self, slot: u32, paddr: u64) -> Option<&mut Entry> {
        match self.slots.get_mut(slot as usize) {
            Some(Some(e)) if e.paddr == paddr => Some(e),
            _ => None,
        }
    }

    /// The copy in `slot`, whichever it is.
    pub(crate) fn at(&mut self, slot: u32) -> Option<&mut Entry> {
        self.slots.get_mut(slot as usize)?.as_mut()
    }

    /// Caches `buf` as the copy of the object at `paddr` (not cached yet).
    pub(crate) fn insert(&mut self, paddr: u64, type_id: u32, buf: CopyBuf) -> u32 {
        let e = Entry {
            paddr,
            type_id,
            buf,
            modified: None,
            referenced: true,
            links: Vec::new(),
            discovered: false,
        };
        self.bytes += e.charge();
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(e);
                s
            }
            None => {
                self.slots.push(Some(e));
                (self.slots.len() - 1) as u32
            }
        };
        self.map.insert(paddr, slot);
        slot
    }

    /// The next victim of clock replacement: the first copy from the hand
    /// on whose reference bit is clear, clearing the bits it passes; `None`
    /// if the table is empty.
    pub(crate) fn victim(&mut self) -> Option<u32> {
        let n = self.slots.len();
        for _ in 0..2 * n + 1 {
            if n == 0 {
                return None;
            }
            let at = self.hand % n;
            self.hand = at + 1;
            if let Some(e) = &mut self.slots[at] {
                if !e.referenced {
                    return Some(at as u32);
                }
                e.referenced = false;
            }
        }
        None
    }

    /// Removes the copy in `slot`.
    pub(crate) fn remove(&mut self, slot: u32) -> Option<Entry> {
        let e = self.slots.get_mut(slot as usize)?.take()?;
        self.map.remove(&e.paddr);
        self.free.push(slot);
        self.bytes -= e.charge();
        Some(e)
    }

    /// The slots of the copies with a modified range.
    pub(crate) fn modified(&self) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|&s| matches!(&self.slots[s as usize], Some(e) if e.modified.is_some()))
            .collect()
    }

    /// The number of copies held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Drops every copy.
    pub(crate) fn clear(&mut self) {
        *self = Table::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(n: usize) -> CopyBuf {
        CopyBuf::new(&vec![7; n])
    }

    #[test]
    fn slots_are_named_by_address_too() {
        let mut t = Table::default();
        let a = t.insert(0x1008, 1, buf(16));
        assert_eq!(t.lookup(0x1008), Some(a));
        assert!(t.entry(a, 0x1008).is_some());
        assert!(t.entry(a, 0x2008).is_none(), "another object's handle");
        t.remove(a);
        let b = t.insert(0x2008, 1, buf(8));
        assert_eq!(a, b, "the slot is reused");
        assert!(t.entry(a, 0x1008).is_none(), "a handle to the victim");
        assert_eq!(t.bytes, 8);
    }

    #[test]
    fn clock_gives_a_second_chance() {
        let mut t = Table::default();
        let a = t.insert(8, 1, buf(8));
        let b = t.insert(16, 1, buf(8));
        // Both referenced: the first sweep clears both bits, then `a` goes.
        assert_eq!(t.victim(), Some(a));
        // `a` used again before it went: the hand passes it, clearing it,
        // and takes `b`, unused since the sweep.
        if let Some(e) = t.entry_mut(a, 8) {
            e.referenced = true;
        }
        assert_eq!(t.victim(), Some(b));
        assert!(
            t.entry(a, 8).is_some_and(|e| e.referenced),
            "the hand stopped at `b`"
        );
    }

    #[test]
    fn a_write_widens_the_range_and_drops_links_it_covers() {
        let mut t = Table::default();
        let a = t.insert(8, 1, buf(48));
        let e = t.entry_mut(a, 8).expect("cached");
        e.links.push(Link {
            offset: 16,
            slot: 9,
            paddr: 99,
        });
        e.links.push(Link {
            offset: 32,
            slot: 9,
            paddr: 98,
        });
        e.note_write(20, 24);
        assert_eq!(e.modified, Some((20, 24)));
        assert_eq!(e.links.len(), 1, "the link at 16..24 was written over");
        e.note_write(4, 8);
        assert_eq!(e.modified, Some((4, 24)));
        assert_eq!(t.modified(), vec![a]);
    }
}
