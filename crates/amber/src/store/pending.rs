//! Committed changes not yet installed in the page file.
//!
//! The page file changes only at a checkpoint, so between checkpoints the
//! committed state of a block is its page-file image with the changes of the
//! log since the checkpoint laid over it. A [`Patch`] holds those changes for
//! one block: either a whole new image (a freshly formatted block, or one
//! rebuilt during recovery), or byte extents over the page-file image. Reading
//! the page-file image is deferred to when the block is read or installed
//! (the installation read).

use crate::format::page;
use std::collections::BTreeMap;

/// Where a patched block's bytes come from before the extents are applied.
#[derive(Debug, Clone)]
pub enum Base {
    /// The image in the page file.
    File,
    /// A complete image held in memory.
    Image(Box<[u8]>),
}

/// Changes to one block since the last checkpoint.
#[derive(Debug, Clone)]
pub struct Patch {
    /// Pages in the block.
    pub run_len: u32,
    /// The base image.
    pub base: Base,
    /// Byte extents over the base: start → bytes, disjoint and not adjacent.
    extents: BTreeMap<u32, Vec<u8>>,
    /// LSN of the last record applied.
    pub lsn: u64,
}

impl Patch {
    /// Changes over the page-file image.
    pub fn over_file(run_len: u32) -> Self {
        Patch {
            run_len,
            base: Base::File,
            extents: BTreeMap::new(),
            lsn: 0,
        }
    }

    /// A whole image.
    pub fn image(run_len: u32, image: Box<[u8]>, lsn: u64) -> Self {
        Patch {
            run_len,
            base: Base::Image(image),
            extents: BTreeMap::new(),
            lsn,
        }
    }

    /// Memory held, roughly, for the checkpoint trigger.
    pub fn bytes(&self) -> usize {
        let base = match &self.base {
            Base::File => 0,
            Base::Image(i) => i.len(),
        };
        base + self.extents.values().map(|v| v.len() + 32).sum::<usize>()
    }

    /// Applies new bytes at block offset `off`.
    pub fn write(&mut self, off: u32, data: &[u8], lsn: u64) {
        self.lsn = self.lsn.max(lsn);
        if let Base::Image(img) = &mut self.base {
            let o = off as usize;
            img[o..o + data.len()].copy_from_slice(data);
            return;
        }
        let start = off;
        let end = off + data.len() as u32;
        // Extents that overlap or touch [start, end) merge into one.
        let first = self
            .extents
            .range(..=start)
            .next_back()
            .filter(|(s, v)| **s + v.len() as u32 >= start)
            .map(|(s, _)| *s)
            .unwrap_or(start);
        let touching: Vec<u32> = self.extents.range(first..=end).map(|(s, _)| *s).collect();
        let mut lo = start;
        let mut hi = end;
        for s in &touching {
            let l = self.extents[s].len() as u32;
            lo = lo.min(*s);
            hi = hi.max(s + l);
        }
        let mut merged = vec![0u8; (hi - lo) as usize];
        for s in touching {
            if let Some(v) = self.extents.remove(&s) {
                let a = (s - lo) as usize;
                merged[a..a + v.len()].copy_from_slice(&v);
            }
        }
        let a = (start - lo) as usize;
        merged[a..a + data.len()].copy_from_slice(data);
        self.extents.insert(lo, merged);
    }

    /// Lays the extents over `block` (the base image).
    pub fn apply(&self, block: &mut [u8]) {
        for (s, v) in &self.extents {
            let o = *s as usize;
            block[o..o + v.len()].copy_from_slice(v);
        }
    }

    /// Turns the patch into a whole image (after an installation read).
    pub fn materialize(&mut self, mut file_image: Box<[u8]>) {
        self.apply(&mut file_image);
        self.extents.clear();
        self.base = Base::Image(file_image);
    }

    /// The final image of a block whose base is in memory, sealed with the
    /// patch's LSN; `None` when the base is the page file.
    pub fn sealed_image(&self) -> Option<Vec<u8>> {
        match &self.base {
            Base::File => None,
            Base::Image(img) => {
                let mut v = img.to_vec();
                self.apply(&mut v);
                page::seal(&mut v, self.lsn);
                Some(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn extents_equal_direct_writes(writes in prop::collection::vec((0u32..200, prop::collection::vec(any::<u8>(), 1..40)), 1..30)) {
            let mut p = Patch::over_file(1);
            let mut direct = vec![0u8; 256];
            for (lsn, (off, data)) in writes.iter().enumerate() {
                p.write(*off, data, lsn as u64 + 1);
                direct[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
            let mut via = vec![0u8; 256];
            p.apply(&mut via);
            prop_assert_eq!(via, direct);
            prop_assert_eq!(p.lsn, writes.len() as u64);
        }
    }
}
