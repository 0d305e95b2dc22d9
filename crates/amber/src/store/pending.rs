//! Committed changes not yet installed in the page file.
//!
//! The page file changes only at a checkpoint, so between checkpoints the
//! committed state of a block is its page-file image with the changes of the
//! log since the checkpoint laid over it. A [`Patch`] holds those changes for
//! one block: either a whole new image (a freshly formatted block, or one
//! rebuilt during recovery), or the changed bytes over the page-file image,
//! kept in a block-sized buffer with the list of ranges written, so that
//! applying a record is one copy however many came before. Reading the
//! page-file image is deferred to when the block is read or installed (the
//! installation read).

use crate::format::page;

/// Where a patched block's bytes come from before the changes are applied.
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
    /// Over a file base: the new bytes, at their block offsets.
    data: Box<[u8]>,
    /// Over a file base: the ranges of `data` that were written, sorted,
    /// disjoint and not adjacent.
    ranges: Vec<(u32, u32)>,
    /// LSN of the commit of the last record applied.
    pub lsn: u64,
}

impl Patch {
    /// Changes over the page-file image of a block of `run_len` pages of
    /// `page_size` bytes.
    pub fn over_file(run_len: u32) -> Self {
        Patch {
            run_len,
            base: Base::File,
            data: Box::default(),
            ranges: Vec::new(),
            lsn: 0,
        }
    }

    /// A whole image.
    pub fn image(run_len: u32, image: Box<[u8]>, lsn: u64) -> Self {
        Patch {
            run_len,
            base: Base::Image(image),
            data: Box::default(),
            ranges: Vec::new(),
            lsn,
        }
    }

    /// Memory held, for the checkpoint trigger.
    pub fn bytes(&self) -> usize {
        let base = match &self.base {
            Base::File => 0,
            Base::Image(i) => i.len(),
        };
        base + self.data.len() + self.ranges.len() * 8
    }

    /// Applies new bytes at block offset `off`; `block_len` is the block's
    /// size in bytes.
    pub fn write(&mut self, off: u32, bytes: &[u8], lsn: u64, block_len: usize) {
        self.lsn = self.lsn.max(lsn);
        let o = off as usize;
        if let Base::Image(img) = &mut self.base {
            img[o..o + bytes.len()].copy_from_slice(bytes);
            return;
        }
        if self.data.is_empty() {
            self.data = vec![0u8; block_len].into_boxed_slice();
        }
        self.data[o..o + bytes.len()].copy_from_slice(bytes);
        self.add_range(off, off + bytes.len() as u32);
    }

    /// Records `[start, end)` as written, merging with overlapping or
    /// adjacent ranges.
    fn add_range(&mut self, start: u32, end: u32) {
        // Common case: appending after, or extending, the last range.
        if let Some(last) = self.ranges.last_mut() {
            if start > last.1 {
                self.ranges.push((start, end));
                return;
            }
            if start >= last.0 {
                last.1 = last.1.max(end);
                return;
            }
        } else {
            self.ranges.push((start, end));
            return;
        }
        let first = self.ranges.partition_point(|r| r.1 < start);
        let last = self.ranges.partition_point(|r| r.0 <= end);
        if first == last {
            self.ranges.insert(first, (start, end));
            return;
        }
        let lo = start.min(self.ranges[first].0);
        let hi = end.max(self.ranges[last - 1].1);
        self.ranges.drain(first + 1..last);
        self.ranges[first] = (lo, hi);
    }

    /// Lays the changes over `block` (the base image).
    pub fn apply(&self, block: &mut [u8]) {
        for &(s, e) in &self.ranges {
            let (s, e) = (s as usize, e as usize);
            block[s..e].copy_from_slice(&self.data[s..e]);
        }
    }

    /// Turns the patch into a whole image (after an installation read).
    pub fn materialize(&mut self, mut file_image: Box<[u8]>) {
        self.apply(&mut file_image);
        self.data = Box::default();
        self.ranges.clear();
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
        fn changes_equal_direct_writes(writes in prop::collection::vec((0u32..200, prop::collection::vec(any::<u8>(), 1..40)), 1..30)) {
            let mut p = Patch::over_file(1);
            let mut direct = vec![7u8; 256];
            let mut via = vec![7u8; 256];
            for (lsn, (off, data)) in writes.iter().enumerate() {
                p.write(*off, data, lsn as u64 + 1, 256);
                direct[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
            p.apply(&mut via);
            prop_assert_eq!(via, direct);
            prop_assert_eq!(p.lsn, writes.len() as u64);
            for w in p.ranges.windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
        }
    }
}
