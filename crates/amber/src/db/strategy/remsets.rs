//! Remembered sets (Hosking et al. §4): the barrier hashes the updated
//! object into a set, so repeated updates of one object cost one entry;
//! the commit visits only the set, taking each object's body whole (its
//! size from its header).

use super::{Ranges, Scan};
use crate::fasthash::IntSet;
use crate::format::objects::OBJECT_HEADER;

/// The objects updated in the open transaction (their body addresses).
#[derive(Debug, Default)]
pub(super) struct RememberedSet {
    set: IntSet<u64>,
}

impl RememberedSet {
    #[inline]
    pub(super) fn insert(&mut self, object: u64) {
        self.set.insert(object);
    }

    /// Appends the bodies of the remembered objects to `out`; empties the
    /// set.
    pub(super) fn take(&mut self, scan: &mut Scan<'_>, out: &mut Ranges) {
        for object in self.set.drain() {
            let header = *scan.access.obj::<u64>(object - OBJECT_HEADER as u64);
            out.push((object, object + (header >> 32)));
        }
    }

    pub(super) fn clear(&mut self) {
        self.set.clear();
    }
}
