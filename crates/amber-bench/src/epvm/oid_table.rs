//! EPVM 1.0's OID hash table: from an object's OID to the user descriptor
//! of its copy pinned in the buffer pool (White & DeWitt §4.1, Figure 6).
//! Open addressing with linear probing, at most half full, keys hashed by
//! a Fibonacci multiply; an OID is never 0 (page 0 is the superblock's),
//! so 0 marks an empty slot.

use super::pool::Ud;

/// The table.
#[derive(Clone, Debug)]
pub struct OidTable {
    keys: Vec<u64>,
    values: Vec<Ud>,
    len: usize,
    shift: u32,
}

const EMPTY: u64 = 0;
const MIN_SLOTS: usize = 1024;

impl Default for OidTable {
    fn default() -> Self {
        Self::with_slots(MIN_SLOTS)
    }
}

impl OidTable {
    fn with_slots(slots: usize) -> OidTable {
        let slots = slots.next_power_of_two();
        OidTable {
            keys: vec![EMPTY; slots],
            values: vec![
                Ud {
                    frame: 0,
                    offset: 0
                };
                slots
            ],
            len: 0,
            shift: 64 - slots.trailing_zeros(),
        }
    }

    #[inline]
    fn slot(&self, oid: u64) -> usize {
        (oid.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The descriptor of `oid`, if it is in the table.
    #[inline]
    pub fn get(&self, oid: u64) -> Option<Ud> {
        let mask = self.keys.len() - 1;
        let mut i = self.slot(oid);
        loop {
            match self.keys[i] {
                EMPTY => return None,
                k if k == oid => return Some(self.values[i]),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Enters `oid` (absent: a caller looks it up first).
    pub fn insert(&mut self, oid: u64, ud: Ud) {
        debug_assert_ne!(oid, EMPTY, "OID 0 is the empty slot");
        if 2 * (self.len + 1) > self.keys.len() {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(oid);
        while self.keys[i] != EMPTY && self.keys[i] != oid {
            i = (i + 1) & mask;
        }
        if self.keys[i] == EMPTY {
            self.len += 1;
        }
        self.keys[i] = oid;
        self.values[i] = ud;
    }

    fn grow(&mut self) {
        let mut bigger = OidTable::with_slots(self.keys.len() * 2);
        for (&k, &v) in self.keys.iter().zip(&self.values) {
            if k != EMPTY {
                bigger.insert(k, v);
            }
        }
        *self = bigger;
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the table, handing every descriptor to `f` (to unpin it).
    pub fn drain(&mut self, mut f: impl FnMut(Ud)) {
        for (k, v) in self.keys.iter_mut().zip(&self.values) {
            if *k != EMPTY {
                f(*v);
                *k = EMPTY;
            }
        }
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn ud(n: u64) -> Ud {
        Ud {
            frame: n as u32,
            offset: (n % 4096) as u16,
        }
    }

    #[test]
    fn finds_what_it_holds_across_growth() {
        let mut t = OidTable::default();
        let mut model = HashMap::new();
        // OIDs as the database makes them: pages × 4096 + record offsets,
        // so that many share their low bits.
        for page in 1..3_000u64 {
            for rec in [40u64, 144, 248] {
                let oid = page * 4096 + rec;
                t.insert(oid, ud(page * 3 + rec));
                model.insert(oid, ud(page * 3 + rec));
            }
        }
        assert_eq!(t.len(), model.len());
        for (&oid, &v) in &model {
            assert_eq!(t.get(oid), Some(v));
        }
        assert_eq!(t.get(4096 + 41), None);
        assert_eq!(t.get(5_000 * 4096 + 40), None);
        assert!(t.keys.len() >= 2 * t.len(), "at most half full");
    }

    #[test]
    fn inserting_again_replaces() {
        let mut t = OidTable::default();
        t.insert(4136, ud(1));
        t.insert(4136, ud(2));
        assert_eq!((t.len(), t.get(4136)), (1, Some(ud(2))));
    }

    #[test]
    fn drain_hands_back_every_entry_and_empties() {
        let mut t = OidTable::default();
        for oid in 1..=700u64 {
            t.insert(oid * 4096 + 40, ud(oid));
        }
        let mut seen = Vec::new();
        t.drain(|u| seen.push(u.frame));
        seen.sort_unstable();
        assert_eq!(seen, (1..=700).collect::<Vec<u32>>());
        assert!(t.is_empty());
        assert_eq!(t.get(4096 + 40), None);
        t.insert(4096 + 40, ud(9));
        assert_eq!(t.get(4096 + 40), Some(ud(9)));
    }
}
