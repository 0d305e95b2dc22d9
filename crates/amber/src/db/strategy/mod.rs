//! Update-detection strategies: how a transaction's writes are found at
//! commit (Hosking et al., `papers/000_*` §4).
//!
//! - [`Detect::Pages`]: page protection, the fault backend's own
//!   (`vm/tracking.rs`): userfaultfd write-protection or SIGSEGV with
//!   QuickStore's recovery buffer. No barrier; the commit diffs every
//!   written block whole.
//! - The software schemes, behind a write barrier that every mutable
//!   accessor calls (`vm/barrier.rs`): [`Detect::Objects`] (a mark in the
//!   object's header; the commit scans every resident object,
//!   `objects.rs`), [`Detect::Remsets`] (a set of updated objects,
//!   `remsets.rs`), [`Detect::Cards`] (a byte per card of 2^k bytes,
//!   `cards.rs`). Frames are installed writable: no write fault is taken.
//!
//! Every scheme yields the same log: the commit diffs each written block
//! against its clean version (`commit.rs`), within what the scheme says
//! was written, and coalesces the differences by the minimal-log rule. A
//! software scheme only narrows where the diff looks. Debug builds check
//! that nothing changed outside it (a write that bypassed the barrier).

pub(crate) mod auto;
mod cards;
mod choice;
pub(crate) mod copies;
mod diff;
pub(crate) mod loggen;
mod objects;
mod remsets;

pub use choice::{Detect, Log, Strategy};

use crate::vm::{Access, Barrier, FrameNo, FrameSpace, Memory};
use std::any::Any;

/// Virtual-address ranges `[start, end)`.
pub(crate) type Ranges = Vec<(u64, u64)>;

/// What a commit's scan may look at: the accessor (headers are read and
/// marks cleared through it), the frame space and the resident blocks.
pub(crate) struct Scan<'a> {
    pub(crate) access: &'a mut Access,
    pub(crate) fs: &'a FrameSpace,
    pub(crate) resident: &'a dyn Fn() -> Vec<(FrameNo, u32)>,
}

/// A software scheme's records.
#[derive(Debug)]
enum Records {
    Objects(objects::Marks),
    Remsets(remsets::RememberedSet),
    Cards(cards::CardTable),
}

/// The barrier of a software scheme, installed in the [`Access`].
#[derive(Debug)]
pub(crate) struct Software {
    detect: Detect,
    records: Records,
    /// Writes outside any object the caller knew (page headers, fields
    /// reached by address), for the object-granularity schemes.
    raw: Ranges,
    /// The clean version: chunks copied at their first write.
    pub(crate) copies: copies::CleanCopies,
}

impl Software {
    /// The barrier of software scheme `detect` (`None` for page
    /// protection, which has none); `base` is the frame space's first
    /// address.
    pub(crate) fn new(detect: Detect, base: u64) -> Option<Software> {
        let records = match detect {
            Detect::Pages => return None,
            Detect::Objects => Records::Objects(objects::Marks),
            Detect::Remsets => Records::Remsets(remsets::RememberedSet::default()),
            Detect::Cards { bytes } => Records::Cards(cards::CardTable::new(bytes, base)),
        };
        let chunk = match detect {
            Detect::Cards { bytes } => u64::from(bytes).min(copies::MAX_CHUNK),
            _ => copies::MAX_CHUNK,
        };
        Some(Software {
            detect,
            records,
            raw: Vec::new(),
            copies: copies::CleanCopies::new(chunk),
        })
    }

    /// The scheme.
    pub(crate) fn scheme(&self) -> Detect {
        self.detect
    }

    /// The ranges written since the last call, ascending and merged; the
    /// records are cleared.
    pub(crate) fn take(&mut self, scan: &mut Scan<'_>) -> Ranges {
        let mut out = std::mem::take(&mut self.raw);
        match &mut self.records {
            Records::Objects(m) => m.take(scan, &mut out),
            Records::Remsets(r) => r.take(scan, &mut out),
            Records::Cards(c) => c.take(&mut out),
        }
        merge(&mut out);
        out
    }

    /// Forgets every record (the transaction rolled back, or a new one
    /// starts). Marks left in memory are not cleared here: rollback gives
    /// every written block its committed image back.
    pub(crate) fn clear(&mut self) {
        self.raw.clear();
        self.copies.clear();
        match &mut self.records {
            Records::Objects(_) => {}
            Records::Remsets(r) => r.clear(),
            Records::Cards(c) => c.clear(),
        }
    }
}

impl Barrier for Software {
    #[inline]
    fn note(&mut self, object: u64, at: u64, len: usize, memory: &Memory<'_>) -> bool {
        let copies = &mut self.copies;
        match &mut self.records {
            // A card is a chunk: its first marking is its first write.
            Records::Cards(c) if c.bytes() == copies.chunk() => {
                c.mark_fresh(at, len, |card| copies.save_unseen(card, 1, memory));
                return false;
            }
            _ => copies.save(at, len, memory),
        }
        match &mut self.records {
            Records::Cards(c) => {
                c.mark(at, len);
                false
            }
            _ if object == 0 => {
                self.raw.push((at, at + len as u64));
                false
            }
            Records::Objects(_) => true,
            Records::Remsets(r) => {
                r.insert(object);
                false
            }
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Sorts ranges and merges overlapping or touching ones.
pub(crate) fn merge(r: &mut Ranges) {
    r.sort_unstable();
    let mut k = 0;
    for i in 0..r.len() {
        if k > 0 && r[i].0 <= r[k - 1].1 {
            r[k - 1].1 = r[k - 1].1.max(r[i].1);
        } else {
            r[k] = r[i];
            k += 1;
        }
    }
    r.truncate(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_joins_overlapping_and_touching() {
        let mut r = vec![(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)];
        merge(&mut r);
        assert_eq!(r, vec![(0, 8), (10, 30), (40, 41)]);
    }
}
