//! Clean copies taken by the barrier: the clean version of the software
//! schemes (QuickStore's sub-page differencing, `papers/002_*` §3.3, at a
//! fixed block of [`CHUNK`] bytes).
//!
//! At the first write into each aligned chunk of 64 bytes in a
//! transaction, the barrier copies the chunk as it is then (swizzled, in
//! memory form). At commit the recorded ranges are diffed object by
//! object against these copies (`diff.rs`), so the commit reads
//! neither the whole written block nor its committed image back from the
//! store. Copies are capped ([`CAP_BYTES`]): past the cap the barrier stops
//! copying, and a block with a recorded chunk that has no copy is diffed
//! whole against its committed image, as page protection's are.

use crate::fasthash::IntMap;
use crate::vm::Memory;

/// Bytes per copied chunk (a power of two dividing every page size).
pub(crate) const CHUNK: u64 = 64;

/// Largest total of copies per transaction.
pub(crate) const CAP_BYTES: usize = 64 << 20;

/// The open transaction's clean copies, by chunk address.
#[derive(Debug, Default)]
pub(crate) struct CleanCopies {
    chunks: IntMap<u64, [u8; CHUNK as usize]>,
    /// Set when a chunk went uncopied for the cap.
    pub(crate) overflowed: bool,
}

impl CleanCopies {
    /// Copies every chunk of `[at, at + len)` not copied yet.
    #[inline]
    pub(crate) fn save(&mut self, at: u64, len: usize, memory: &Memory<'_>) {
        let first = at & !(CHUNK - 1);
        let end = at + len.max(1) as u64;
        let mut c = first;
        while c < end {
            if !self.chunks.contains_key(&c) {
                self.save_new(c, memory);
            }
            c += CHUNK;
        }
    }

    #[cold]
    fn save_new(&mut self, chunk: u64, memory: &Memory<'_>) {
        if self.chunks.len() * CHUNK as usize >= CAP_BYTES {
            self.overflowed = true;
            return;
        }
        let mut buf = [0u8; CHUNK as usize];
        memory.read(chunk, &mut buf);
        self.chunks.insert(chunk, buf);
    }

    /// The copy of the chunk at `chunk` (aligned), if one was taken.
    pub(crate) fn get(&self, chunk: u64) -> Option<&[u8; CHUNK as usize]> {
        self.chunks.get(&chunk)
    }

    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.overflowed = false;
    }
}
