//! Committed changes not yet installed in the page file.
//!
//! The page file changes only at a checkpoint, so between checkpoints the
//! committed state of a block is its page-file image with the changes of the
//! log since the checkpoint laid over it. A [`Patch`] holds those changes for
//! one block: either a whole new image (a freshly formatted block, or one
//! rebuilt during recovery), or the changed bytes over the page-file image,
//! kept in a block-sized buffer with a bitmap of the bytes written, so that
//! applying a record is one copy and a few word writes however many came
//! before and wherever they fell (recovery applies hundreds of thousands of
//! small ranges at random places; keeping a sorted list of extents cost more
//! than the copies). Reading the page-file image is deferred to when the
//! block is read or installed (the installation read).
//!
//! Whole-page logging adds a third source: a page whose latest committed
//! image is a page record in the log is an entry of the WPL table
//! ([`LoggedPage`], kept in its block's patch, `wpl.rs`): the image stays in
//! the log and is read from there. A block's committed image is then its
//! base, with its logged pages laid over it, with the changed bytes laid
//! over that — which is LSN order, because a page record clears the
//! changed bytes of its page that came before it.

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
    /// Over a file base: bit `i` is set when byte `i` of `data` was written
    /// (but see `unmarked`).
    written: Box<[u64]>,
    /// Over a file base: the last ranges written, not yet marked in
    /// `written`. Marking one is a read-modify-write of a bitmap word that
    /// is seldom in the cache, which stalls; appending a range here is a
    /// store, which does not, and marking a few dozen at once touches each
    /// of the bitmap's cache lines once, with their misses overlapping.
    unmarked: Vec<(u32, u32)>,
    /// LSN of the commit of the last record applied.
    pub lsn: u64,
    /// Over a file base: the block's pages whose latest committed image is
    /// a page record in the log (its WPL table entries), one per page.
    pub logged: Vec<LoggedPage>,
}

/// An entry of the WPL table: a page whose latest committed image is a
/// page record in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedPage {
    /// The page's index in its block.
    pub index: u32,
    /// LSN of the page record.
    pub lsn: u64,
    /// LSN of its transaction's commit record.
    pub commit_lsn: u64,
}

impl Patch {
    /// Changes over the page-file image of a block of `run_len` pages of
    /// `page_size` bytes.
    pub fn over_file(run_len: u32) -> Self {
        Patch {
            run_len,
            base: Base::File,
            data: Box::default(),
            written: Box::default(),
            unmarked: Vec::new(),
            lsn: 0,
            logged: Vec::new(),
        }
    }

    /// A whole image.
    pub fn image(run_len: u32, image: Box<[u8]>, lsn: u64) -> Self {
        Patch {
            run_len,
            base: Base::Image(image),
            data: Box::default(),
            written: Box::default(),
            unmarked: Vec::new(),
            lsn,
            logged: Vec::new(),
        }
    }

    /// Memory held, for the checkpoint trigger.
    pub fn bytes(&self) -> usize {
        let base = match &self.base {
            Base::File => 0,
            Base::Image(i) => i.len(),
        };
        base + self.data.len()
            + self.written.len() * 8
            + self.unmarked.capacity() * 8
            + self.logged.capacity() * size_of::<LoggedPage>()
    }

    /// Makes `page` the image of page `page.index` (over a file base):
    /// the bytes `supersedes` of the block that were changed before it no
    /// longer count.
    pub fn log_page(&mut self, page: LoggedPage, supersedes: &[(usize, usize)]) {
        self.lsn = self.lsn.max(page.commit_lsn);
        match self.logged.iter_mut().find(|l| l.index == page.index) {
            Some(l) => *l = page,
            None => self.logged.push(page),
        }
        if self.data.is_empty() {
            return;
        }
        self.mark_all();
        for &(s, e) in supersedes {
            unmark(&mut self.written, s, e);
        }
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
            self.written = vec![0u64; block_len.div_ceil(64)].into_boxed_slice();
            self.unmarked = Vec::with_capacity(UNMARKED);
        }
        self.data[o..o + bytes.len()].copy_from_slice(bytes);
        if self.unmarked.len() == UNMARKED {
            self.mark_all();
        }
        self.unmarked.push((off, off + bytes.len() as u32));
    }

    /// Moves the ranges written but not yet marked into the bitmap.
    fn mark_all(&mut self) {
        for &(s, e) in &self.unmarked {
            mark(&mut self.written, s as usize, e as usize);
        }
        self.unmarked.clear();
    }

    /// Lays the changes over `block` (the base image).
    pub fn apply(&self, block: &mut [u8]) {
        let mut at = 0;
        while let Some(s) = next_bit(&self.written, at, true) {
            let e = next_bit(&self.written, s, false).unwrap_or(self.data.len());
            block[s..e].copy_from_slice(&self.data[s..e]);
            at = e;
        }
        for &(s, e) in &self.unmarked {
            let (s, e) = (s as usize, e as usize);
            block[s..e].copy_from_slice(&self.data[s..e]);
        }
    }

    /// The changed bytes over a file base as maximal runs, in block order:
    /// `(offset, bytes)`, the newest byte written at each offset.
    pub fn runs(&mut self) -> impl Iterator<Item = (usize, &[u8])> {
        self.mark_all();
        let (bits, data) = (&self.written, &self.data);
        let mut at = 0;
        std::iter::from_fn(move || {
            let s = next_bit(bits, at, true)?;
            let e = next_bit(bits, s, false).unwrap_or(data.len());
            at = e;
            Some((s, &data[s..e]))
        })
    }

    /// Turns the patch into a whole image: `base_image` is the page-file
    /// image with the logged pages laid over it (after an installation
    /// read).
    pub fn materialize(&mut self, mut base_image: Box<[u8]>) {
        self.apply(&mut base_image);
        self.logged = Vec::new();
        self.data = Box::default();
        self.written = Box::default();
        self.unmarked = Vec::new();
        self.base = Base::Image(base_image);
    }
}

/// Ranges a patch keeps unmarked at most (512 bytes of them, as much as the
/// bitmap of a 4 KiB block).
const UNMARKED: usize = 64;

/// Sets bits `[start, end)` of `bits`.
fn mark(bits: &mut [u64], start: usize, end: usize) {
    set_bits(bits, start, end, true);
}

/// Clears bits `[start, end)` of `bits`.
fn unmark(bits: &mut [u64], start: usize, end: usize) {
    set_bits(bits, start, end, false);
}

/// Sets (`on`) or clears bits `[start, end)` of `bits`, a word at a time.
fn set_bits(bits: &mut [u64], start: usize, end: usize, on: bool) {
    if start >= end {
        return;
    }
    let (first, last) = (start / 64, (end - 1) / 64);
    let head = !0u64 << (start % 64);
    let tail = !0u64 >> (63 - (end - 1) % 64);
    let apply = |w: &mut u64, m: u64| {
        if on {
            *w |= m;
        } else {
            *w &= !m;
        }
    };
    if first == last {
        apply(&mut bits[first], head & tail);
        return;
    }
    apply(&mut bits[first], head);
    bits[first + 1..last].fill(if on { !0 } else { 0 });
    apply(&mut bits[last], tail);
}

/// The first bit at or after `from` that is `set` (or clear), if any.
fn next_bit(bits: &[u64], from: usize, set: bool) -> Option<usize> {
    let mut i = from / 64;
    let flip = if set { 0 } else { !0 };
    let mut w = (*bits.get(i)? ^ flip) & (!0u64 << (from % 64));
    loop {
        if w != 0 {
            return Some(i * 64 + w.trailing_zeros() as usize);
        }
        i += 1;
        w = *bits.get(i)? ^ flip;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn changes_equal_direct_writes(writes in prop::collection::vec((0u32..200, prop::collection::vec(any::<u8>(), 1..40)), 1..30), cut in (0usize..256).prop_flat_map(|s| (Just(s), s..=256))) {
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
            // Exactly the bytes written are marked.
            p.mark_all();
            let mut marked = vec![false; 256];
            for (off, data) in &writes {
                marked[*off as usize..*off as usize + data.len()].fill(true);
            }
            for (i, m) in marked.iter().enumerate() {
                prop_assert_eq!(p.written[i / 64] >> (i % 64) & 1 == 1, *m, "byte {}", i);
            }
            // A logged page supersedes exactly the bytes it names.
            let page = LoggedPage { index: 0, lsn: 1, commit_lsn: 99 };
            p.log_page(page, &[(cut.0, cut.1)]);
            for (i, m) in marked.iter().enumerate() {
                let want = *m && !(cut.0..cut.1).contains(&i);
                prop_assert_eq!(p.written[i / 64] >> (i % 64) & 1 == 1, want, "byte {}", i);
            }
            prop_assert_eq!((p.lsn, &p.logged[..]), (99, &[page][..]));
        }
    }
}
