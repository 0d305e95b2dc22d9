//! Log generators (QuickStore, `papers/002_*` §3): what goes into the log
//! for each block a transaction wrote, given what the detection scheme
//! recorded.
//!
//! - [`Differencing`] (`differencing.rs`): the differences against the
//!   clean version, coalesced by the minimal-log rule — page differencing
//!   under page protection, sub-page differencing against the barrier's
//!   copies under a software scheme.
//! - [`SubPage`] (`sub_page.rs`): what the barrier recorded, whole.
//! - [`WholePage`] (`whole_page.rs`): the after-image of every page written.
//!
//! The commit (`db/commit.rs`) asks the transaction's generator for each
//! written block's records and appends them; nothing else in the commit
//! path depends on which generator runs.

mod differencing;
mod sub_page;
mod whole_page;

use super::Log;
use super::copies::CleanCopies;
use crate::db::tx::{CommitStats, Tx};
use crate::error::Result;
use crate::format::PageNo;
use crate::vm::FrameNo;
use std::collections::BTreeSet;

pub(crate) use differencing::Differencing;
pub(crate) use sub_page::SubPage;
pub(crate) use whole_page::WholePage;

/// A block the transaction wrote, as the commit found it.
pub(crate) struct Written<'a> {
    /// First page of the block.
    pub(crate) head: PageNo,
    /// Its first frame.
    pub(crate) frame: FrameNo,
    /// Its pages.
    pub(crate) run: u32,
    /// Under a software scheme, the block-relative ranges the barrier
    /// recorded (ascending, disjoint); `None` under page protection.
    pub(crate) within: Option<Vec<(usize, usize)>>,
    /// The frames the fault backend found written (page protection).
    pub(crate) frames: &'a BTreeSet<FrameNo>,
    /// The barrier's clean copies, when complete (software schemes).
    pub(crate) copies: Option<&'a CleanCopies>,
}

/// One record to log.
pub(crate) enum Record {
    /// Bytes at a persistent address (an after-image) that a diff found
    /// changed: what the minimal log counts.
    Diffed(u64, Vec<u8>),
    /// Bytes at a persistent address (an after-image) logged as the
    /// detection scheme recorded them, without a diff.
    Range(u64, Vec<u8>),
    /// A whole page image.
    Page(PageNo, Vec<u8>),
    /// The addresses `[start, end)` of a changed range a diff found in a
    /// block logged otherwise (a whole page): counted by the minimal log as
    /// a [`Record::Diffed`] of it would be, and not logged.
    Counted(u64, u64),
}

/// A log generator.
pub(crate) trait LogGenerator {
    /// Appends the records of block `b` to `out`, counting in `stats`.
    fn block(&self, tx: &Tx<'_>, b: &Written<'_>, out: &mut Vec<Record>, stats: &mut CommitStats) -> Result<()>;
}

/// The generator of `log`.
pub(crate) fn generator(log: Log) -> &'static dyn LogGenerator {
    match log {
        Log::Diff => &Differencing,
        Log::SubPages => &SubPage,
        Log::WholePages => &WholePage,
    }
}

/// Debug builds: laying `records` (block-relative offsets) over the clean
/// image must give the dirty one, or a write the detection scheme missed
/// would be lost.
#[cfg(debug_assertions)]
fn check_covers(tx: &Tx<'_>, head: PageNo, clean: &[u8], dirty: &[u8], records: &[(usize, &[u8])]) -> Result<()> {
    use crate::format::page::{HEADER_SIZE, USED_OFFSET};
    let mut img = clean.to_vec();
    for &(at, bytes) in records {
        img[at..at + bytes.len()].copy_from_slice(bytes);
    }
    // The header's store-kept bytes are never logged.
    let logical = |b: &[u8]| [b[USED_OFFSET..USED_OFFSET + 4].to_vec(), b[HEADER_SIZE..].to_vec()];
    if logical(&img) != logical(dirty) {
        return Err(crate::error::Error::internal(format!(
            "page {head}: the {} log misses bytes the transaction changed",
            tx.strategy
        )));
    }
    Ok(())
}
