//! Card marking (Hosking et al. §4): the frame space is divided into cards
//! of 2^k bytes (8 to 4096) and the barrier stores zero into the byte of
//! every card a write touches (one shift and one store; clean cards hold
//! one). The commit scans the whole table, eight cards per load, and takes
//! each run of contiguous dirty cards as one range.
//!
//! Hosking's card scheme also keeps, per card, the last object header in
//! it, so that a dirty card can be scanned object by object. Amber diffs
//! block images in persistent form, byte by byte, so a card's bytes need
//! no object boundaries and that table is not kept.

use super::Ranges;

const CLEAN: u8 = 1;
const DIRTY: u8 = 0;

/// One byte per card of the frame space, grown as writes reach further.
#[derive(Debug)]
pub(super) struct CardTable {
    shift: u32,
    base: u64,
    table: Vec<u8>,
}

impl CardTable {
    /// Cards of `bytes` bytes (a power of two) from address `base`.
    pub(super) fn new(bytes: u32, base: u64) -> CardTable {
        CardTable {
            shift: bytes.trailing_zeros(),
            base,
            table: Vec::new(),
        }
    }

    /// The barrier: marks the cards of `[at, at + len)` dirty.
    #[inline]
    pub(super) fn mark(&mut self, at: u64, len: usize) {
        let (first, last) = self.cards(at, len);
        self.table[first..=last].fill(DIRTY);
    }

    /// The barrier when the cards are the copies' chunks: marks the cards
    /// of `[at, at + len)` dirty and calls `fresh` with the address of
    /// each that was clean (written for the first time since the last
    /// commit). A repeated write costs one load and one compare.
    #[inline]
    pub(super) fn mark_fresh(&mut self, at: u64, len: usize, mut fresh: impl FnMut(u64)) {
        let (first, last) = self.cards(at, len);
        if first == last && self.table[first] == DIRTY {
            return;
        }
        for i in first..=last {
            if self.table[i] == CLEAN {
                self.table[i] = DIRTY;
                fresh(self.base + ((i as u64) << self.shift));
            }
        }
    }

    /// The first and last card of `[at, at + len)`, the table grown to
    /// hold them.
    #[inline]
    fn cards(&mut self, at: u64, len: usize) -> (usize, usize) {
        let first = ((at - self.base) >> self.shift) as usize;
        let last = ((at + len.max(1) as u64 - 1 - self.base) >> self.shift) as usize;
        if last >= self.table.len() {
            self.grow(last);
        }
        (first, last)
    }

    /// Card size in bytes.
    pub(super) fn bytes(&self) -> u64 {
        1 << self.shift
    }

    #[cold]
    fn grow(&mut self, last: usize) {
        self.table.resize((last + 1).next_power_of_two(), CLEAN);
    }

    /// Appends the runs of dirty cards to `out` and cleans the table.
    pub(super) fn take(&mut self, out: &mut Ranges) {
        const ALL_CLEAN: u64 = u64::from_ne_bytes([CLEAN; 8]);
        let card = 1u64 << self.shift;
        let mut run: Option<usize> = None;
        let mut i = 0;
        let n = self.table.len();
        while i < n {
            if run.is_none()
                && i + 8 <= n
                && u64::from_ne_bytes(self.table[i..i + 8].try_into().unwrap_or([DIRTY; 8]))
                    == ALL_CLEAN
            {
                i += 8;
                continue;
            }
            match (self.table[i] == DIRTY, run) {
                (true, None) => run = Some(i),
                (false, Some(s)) => {
                    out.push((self.base + s as u64 * card, self.base + i as u64 * card));
                    self.table[s..i].fill(CLEAN);
                    run = None;
                }
                _ => {}
            }
            i += 1;
        }
        if let Some(s) = run {
            out.push((self.base + s as u64 * card, self.base + n as u64 * card));
            self.table[s..n].fill(CLEAN);
        }
    }

    pub(super) fn clear(&mut self) {
        self.table.fill(CLEAN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_dirty_cards_become_ranges() {
        let mut t = CardTable::new(16, 0x1000);
        t.mark(0x1000 + 5, 1);
        t.mark(0x1000 + 16, 20); // cards 1 and 2
        t.mark(0x1000 + 16 * 40, 16); // card 40 only
        let mut out = Vec::new();
        t.take(&mut out);
        assert_eq!(out, vec![(0x1000, 0x1000 + 48), (0x1000 + 640, 0x1000 + 656)]);
        out.clear();
        t.take(&mut out);
        assert!(out.is_empty(), "take cleans the table");
    }

    #[test]
    fn only_fresh_cards_are_reported() {
        let mut t = CardTable::new(8, 0);
        let mut fresh = Vec::new();
        t.mark_fresh(8, 8, |c| fresh.push(c));
        t.mark_fresh(4, 16, |c| fresh.push(c)); // cards 0, 1 (dirty), 2
        t.mark_fresh(9, 2, |c| fresh.push(c));
        assert_eq!(fresh, vec![8, 0, 16]);
    }
}
