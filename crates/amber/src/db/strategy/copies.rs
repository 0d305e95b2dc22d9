//! Clean copies taken by the barrier: the clean version of the software
//! schemes (QuickStore's sub-page differencing, `papers/002_*` §3.3).
//!
//! At the first write into each aligned chunk in a transaction, the
//! barrier copies the chunk as it is then (swizzled, in memory form). At
//! commit the recorded ranges are diffed object by object against these
//! copies (`diff.rs`), so the commit reads neither the whole written block
//! nor its committed image back from the store. Copies are capped
//! ([`CAP_BYTES`]): past the cap the barrier stops copying, and a block
//! with a recorded chunk that has no copy is diffed whole against its
//! committed image, as page protection's are.
//!
//! The chunk is QuickStore's sub-page block: 8 to 64 bytes. Under card
//! marking with cards of at most 64 bytes it is the card, so that the
//! card table says whether a chunk was copied and a repeated write costs
//! no lookup here (`Software::note`); otherwise it is 64 bytes.

use crate::fasthash::IntMap;
use crate::vm::Memory;

/// The largest chunk, and the chunk of the schemes without small cards.
pub(crate) const MAX_CHUNK: u64 = 64;

/// Largest total of copies per transaction.
pub(crate) const CAP_BYTES: usize = 64 << 20;

/// The open transaction's clean copies, by chunk address.
#[derive(Debug)]
pub(crate) struct CleanCopies {
    /// Bytes per chunk (a power of two from 8 to [`MAX_CHUNK`]).
    chunk: u64,
    /// Chunk address to the copy's offset in `arena`.
    index: IntMap<u64, u32>,
    arena: Vec<u8>,
    /// Set when a chunk went uncopied for the cap.
    pub(crate) overflowed: bool,
}

impl CleanCopies {
    /// Copies of `chunk`-byte chunks.
    pub(crate) fn new(chunk: u64) -> CleanCopies {
        debug_assert!(chunk.is_power_of_two() && (8..=MAX_CHUNK).contains(&chunk));
        CleanCopies {
            chunk,
            index: IntMap::default(),
            arena: Vec::new(),
            overflowed: false,
        }
    }

    /// Bytes per chunk.
    pub(crate) fn chunk(&self) -> u64 {
        self.chunk
    }

    /// Copies every chunk of `[at, at + len)` not copied yet.
    #[inline]
    pub(crate) fn save(&mut self, at: u64, len: usize, memory: &Memory<'_>) {
        let first = at & !(self.chunk - 1);
        let end = at + len.max(1) as u64;
        let mut c = first;
        while c < end {
            if !self.index.contains_key(&c) {
                self.save_new(c, memory);
            }
            c += self.chunk;
        }
    }

    /// Copies the chunks of `[at, at + len)`, known not to be copied yet
    /// (their cards were clean).
    #[inline]
    pub(crate) fn save_unseen(&mut self, at: u64, len: usize, memory: &Memory<'_>) {
        let mut c = at & !(self.chunk - 1);
        let end = at + len.max(1) as u64;
        while c < end {
            self.save_new(c, memory);
            c += self.chunk;
        }
    }

    #[cold]
    fn save_new(&mut self, chunk: u64, memory: &Memory<'_>) {
        if self.arena.len() >= CAP_BYTES {
            self.overflowed = true;
            return;
        }
        let off = self.arena.len();
        self.arena.resize(off + self.chunk as usize, 0);
        memory.read(chunk, &mut self.arena[off..]);
        self.index.insert(chunk, off as u32);
    }

    /// The copy of the chunk at `chunk` (aligned), if one was taken.
    pub(crate) fn get(&self, chunk: u64) -> Option<&[u8]> {
        let off = *self.index.get(&chunk)? as usize;
        Some(&self.arena[off..off + self.chunk as usize])
    }

    pub(crate) fn clear(&mut self) {
        self.index.clear();
        self.arena.clear();
        self.overflowed = false;
    }
}
