//! How a database stores the pointers that are swizzled at fault time
//! (`PRef`, `Option<PRef>`, the buffer of a `PVec`/`PBytes`/`PString`).
//!
//! A database of superblock version 2 has a **home**: an address of the
//! program's address space, chosen at random when the database is created
//! and recorded in the superblock. Such a pointer is stored as its
//! persistent address plus the home (wrapping), which is exactly the
//! virtual address its target has when the database's reservation sits at
//! its home (frame `p` at `home + p · page size`, the identity region of
//! `vm/frame_table.rs`): pages read there need no translation at all
//! (ObjectStore's pointers stored swizzled; DESIGN.md, decision 2). When
//! the home is taken (another database, something else mapped there) the
//! reservation goes elsewhere and a fetched page is translated as before,
//! from the persistent address the stored word gives back.
//!
//! The encoding is a bijection on non-null words: persistent addresses stay
//! the logical identity, null stays 0, and every reader of stored bytes
//! (swizzling, deep verification, the collector) goes through
//! [`Home::paddr`] and [`Home::stored`]. Smart pointers and index nodes,
//! which are translated at each use rather than swizzled, keep plain
//! persistent addresses. A database of version 1 has no home
//! ([`Home::NONE`]): its words are persistent addresses.

use std::fmt;

/// A database's home: the stored form of its swizzled pointers is the
/// persistent address plus this (0: version 1, plain persistent addresses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Home(u64);

/// Homes are multiples of this, so that the encoding keeps every offset in
/// a page (and a reservation at home is aligned for every page size).
pub const HOME_ALIGN: u64 = 1 << 30;

/// Homes chosen for new databases lie in `[LOW, LOW + SLOTS · SPAN)`: above
/// where x86-64 Linux puts a program's binary, heap and libraries, below
/// where it puts its mappings and stacks (top-down from 128 TiB), one
/// reservation of the default size (64 GiB) apart.
const LOW: u64 = 16 << 40;
const SPAN: u64 = 64 << 30;
const SLOTS: u64 = 1024;

impl Home {
    /// No home: stored words are persistent addresses (version 1).
    pub const NONE: Home = Home(0);

    /// The home at `addr`, which must be 0 or a multiple of `HOME_ALIGN`.
    pub fn new(addr: u64) -> Result<Home, String> {
        if !addr.is_multiple_of(HOME_ALIGN) {
            return Err(format!(
                "home {addr:#x} is not a multiple of {HOME_ALIGN:#x}"
            ));
        }
        Ok(Home(addr))
    }

    /// A home for a new database, picked among the slots above with
    /// `random` (so that databases open together seldom share one).
    pub fn pick(random: u64) -> Home {
        Home(LOW + (random % SLOTS) * SPAN)
    }

    /// The address, 0 for none.
    pub fn addr(self) -> u64 {
        self.0
    }

    /// Whether the database has a home (version 2).
    pub fn is_some(self) -> bool {
        self.0 != 0
    }

    /// The persistent address a non-null stored word stands for.
    #[inline(always)]
    pub fn paddr(self, stored: u64) -> u64 {
        stored.wrapping_sub(self.0)
    }

    /// The stored word of persistent address `paddr` (not null). The one
    /// address whose sum wraps to 0 would read back as null: it is refused
    /// (it lies in the last home's worth of a 2^64-byte address space).
    #[inline(always)]
    pub fn stored(self, paddr: u64) -> Result<u64, String> {
        match paddr.wrapping_add(self.0) {
            0 => Err(no_stored_form(paddr, self)),
            v => Ok(v),
        }
    }
}

#[cold]
#[inline(never)]
fn no_stored_form(paddr: u64, home: Home) -> String {
    format!("persistent address {paddr:#x} has no stored form at home {home}")
}

impl fmt::Display for Home {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bijection_on_non_null_words() {
        let h = Home::new(0x1234 << 30).expect("aligned");
        for p in [8u64, 0x2000, 0x7fff_fff8, u64::MAX - 7] {
            let s = h.stored(p).expect("stored form");
            assert_ne!(s, 0);
            assert_eq!(h.paddr(s), p);
        }
        assert!(h.stored(0u64.wrapping_sub(h.addr())).is_err());
        assert_eq!(Home::NONE.stored(0x2008), Ok(0x2008));
        assert_eq!(Home::NONE.paddr(0x2008), 0x2008);
        assert!(Home::new(4096).is_err());
    }

    #[test]
    fn picked_homes_are_aligned_and_spread() {
        let homes: std::collections::BTreeSet<u64> =
            (0..SLOTS).map(|r| Home::pick(r * 7919).addr()).collect();
        assert_eq!(homes.len() as u64, SLOTS);
        assert!(homes.iter().all(|h| h.is_multiple_of(HOME_ALIGN) && *h >= LOW));
        assert!(homes.iter().all(|h| h + SPAN <= 1 << 47));
    }
}
