//! Large scratch buffers backed by transparent huge pages, for the buffers
//! recovery reads the log through: a fresh `Vec` of a few MiB costs a page
//! fault per 4 KiB as the first read fills it, a huge-page mapping one per
//! 2 MiB.

use std::ops::{Deref, DerefMut};

/// A zero-filled buffer: in its own anonymous mapping, or on the heap when
/// it is short (a refresh reading a few commits): mapping and unmapping a
/// fresh region costs more than so few bytes.
#[derive(Debug)]
pub struct BigBuf(Mem);

#[derive(Debug)]
enum Mem {
    Heap(Vec<u8>),
    Mapped {
        ptr: *mut u8,
        len: usize,
        map_len: usize,
    },
}

// SAFETY: the buffer owns its mapping exclusively, like a `Vec<u8>`.
unsafe impl Send for BigBuf {}
// SAFETY: shared access only reads.
unsafe impl Sync for BigBuf {}

const HUGE: usize = 2 << 20;
const SMALL: usize = 4096;
/// The longest buffer taken from the heap.
const HEAP: usize = 64 << 10;

impl BigBuf {
    /// A buffer of `len` zero bytes; `None` if the mapping fails.
    pub fn new(len: usize) -> Option<BigBuf> {
        if len <= HEAP {
            return Some(BigBuf(Mem::Heap(vec![0; len])));
        }
        // Huge pages only for buffers that fill most of one: a small buffer
        // in a huge page would cost a 2 MiB clear for a few KiB used.
        let huge = len >= HUGE / 2;
        let page = if huge { HUGE } else { SMALL };
        let map_len = len.div_ceil(page) * page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        if huge {
            // SAFETY: advice on the mapping just made; failure (no THP) is
            // harmless, the buffer then uses small pages.
            unsafe { libc::madvise(p, map_len, libc::MADV_HUGEPAGE) };
        }
        Some(BigBuf(Mem::Mapped {
            ptr: p.cast(),
            len,
            map_len,
        }))
    }
}

impl Deref for BigBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Mem::Heap(v) => v,
            // SAFETY: `ptr..ptr+len` is our mapping (zero-filled by the
            // kernel, so initialised), alive until drop.
            Mem::Mapped { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl DerefMut for BigBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Mem::Heap(v) => v,
            // SAFETY: as for `deref`, and `&mut self` makes the access
            // unique.
            Mem::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(*ptr, *len)
            },
        }
    }
}

impl Drop for BigBuf {
    fn drop(&mut self) {
        if let Mem::Mapped { ptr, map_len, .. } = self.0 {
            // SAFETY: unmapping exactly the mapping we made; no reference to
            // it outlives `self`.
            unsafe { libc::munmap(ptr.cast(), map_len) };
        }
    }
}
