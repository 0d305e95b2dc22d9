//! The read set of a transaction on a server's database: the frames its
//! references were made into.
//!
//! A server validates a commit against what the transaction may have read
//! (docs/design.md §11.3). Without help it must assume every page it ever
//! shipped the connection, neighbours of a fetch cluster included; with
//! this record the client ships the pages it did read. [`Access`] is the
//! only place where a frame address becomes a reference, shared or
//! mutable, so a record kept there misses no read, whatever path (an
//! object, a vector, an index node, the allocator, a barrier's scan) made
//! it.
//!
//! Recording costs the plain pointer load nothing: while a read set is
//! armed, the accessor's fast range check is made to fail (its upper bound
//! is its lower one), and the out-of-line path that would report a foreign
//! pointer records the frames and checks the address against the real
//! bounds instead. A transaction whose reads are not wanted (a local one)
//! arms nothing.
//!
//! [`Access`]: super::Access

use super::types::FrameNo;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// The frames read since the set was armed. Shared references are made
/// through `&Access`, possibly from several threads: a mutex over the set,
/// and the last frame noted beside it, so that the reads of one object's
/// fields, or of neighbours on one page, take no lock.
#[derive(Debug, Default)]
pub(crate) struct ReadSet {
    frames: Mutex<HashSet<FrameNo>>,
    /// The last frame noted, plus one (0: none).
    last: AtomicU32,
}

impl ReadSet {
    /// Notes frames `first..=last`.
    pub(crate) fn note(&self, first: FrameNo, last: FrameNo) {
        if first == last && self.last.load(Ordering::Relaxed) == first.wrapping_add(1) {
            return;
        }
        let mut set = self.frames.lock().unwrap_or_else(|e| e.into_inner());
        set.extend(first..=last);
        self.last.store(last.wrapping_add(1), Ordering::Relaxed);
    }

    /// The frames noted, ascending.
    pub(crate) fn into_frames(self) -> Vec<FrameNo> {
        let set = self.frames.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut frames: Vec<FrameNo> = set.into_iter().collect();
        frames.sort_unstable();
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_every_frame_of_a_span_once() {
        let r = ReadSet::default();
        r.note(7, 7);
        r.note(7, 7);
        r.note(3, 5);
        r.note(7, 7);
        r.note(4, 4);
        assert_eq!(r.into_frames(), vec![3, 4, 5, 7]);
    }
}
