//! Swizzling upon discovery: following a [`Lazy`] pointer (White & DeWitt
//! 1992, EPVM 2.0's lazy swizzling).
//!
//! A `Lazy` word holds a persistent address until it is followed while its
//! target is resident; the field is then rewritten to the target's direct
//! address (bit 0 set), and later reads take it as it is, without the
//! frame-table lookup a [`Smart`](crate::Smart) pays at each use. The
//! rewrite is a compare-and-swap through [`FrameSpace::rewrite_word`],
//! which no detection scheme counts as a write: under page protection the
//! frame is not listed as written (so whole-page logging does not log it),
//! under a software scheme no barrier runs; and whatever the scheme, a
//! commit unswizzles every `Lazy` slot back to its persistent address
//! (`swizzle.rs`), so a rewrite is never logged nor written to the page
//! file.
//!
//! When the target is not resident the word is left as it is and the
//! dereference faults the target in: the next read swizzles it. The eager
//! variant ([`Discovery::Eager`]) rewrites at the first read whatever the
//! target's residency (its frame is reserved, as fetching a page reserves
//! those of its `PRef`s' targets).

use crate::db::translate;
use crate::error::Result;
use crate::ptr::{LAZY_DIRECT, Lazy};
use crate::vm::FrameSpace;
use std::path::Path;

/// When a read rewrites a `Lazy` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discovery {
    /// Only when the target is resident (EPVM 2.0's lazy variant).
    Lazy,
    /// At the first read, resident or not (the eager variant).
    Eager,
}

/// The virtual address of lazy pointer `l`'s target, whose block spans
/// `pages` pages, when `l` holds its persistent address `paddr`: translated,
/// and the field rewritten to the result when `how` says so. What the
/// address leads to is the caller's to check (a live `T`).
#[inline(never)]
pub(crate) fn discover<T>(
    fs: &FrameSpace,
    path: &Path,
    l: &Lazy<T>,
    paddr: u64,
    pages: u32,
    how: Discovery,
) -> Result<u64> {
    let shift = fs.frame_size().trailing_zeros();
    let resident = || fs.lookup(paddr >> shift).is_some_and(|f| fs.is_resident(f));
    let swizzle = how == Discovery::Eager || resident();
    let va = translate(fs, paddr, pages)?;
    // Only a field in this database's frames is rewritten: a `Lazy` the
    // program holds elsewhere is translated at each use, as a `Smart` is
    // (it may lie in another database's frames, which must not be written).
    let at = l.word_addr();
    if swizzle && fs.frame_at(at).is_some() {
        fs.rewrite_word(at, paddr, va | LAZY_DIRECT)
            .map_err(|e| e.into_error(path, "swizzling a lazy pointer"))?;
    }
    Ok(va)
}
