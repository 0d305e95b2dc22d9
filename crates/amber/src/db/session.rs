//! What a database keeps from one call to the next: where small objects are
//! being placed, whether memory could not be restored, and the open
//! transaction's bookkeeping.
//!
//! The bookkeeping lives here, in the `Db`, not in the `Tx`: a transaction
//! dropped with `mem::forget` runs no destructor, and its writes are still
//! in memory, marked written. The next `begin` (or `checkpoint`, or
//! `close`) finds the transaction still marked active and rolls it back
//! from this record, so none of its bytes is ever logged.
//!
//! Rolling back ([`rollback`]) is the same whoever asks — an abort, a
//! failed commit, a dropped or a forgotten transaction: every block the
//! transaction may have written gets its committed image back (a block
//! whose committed image cannot be read is dropped from memory instead, so
//! that the next touch fetches it and reports the damage), the blocks it
//! allocated and the objects it placed in existing pages become dead space
//! (`dead.rs`), and the allocation, type and recovery-buffer state it left
//! is forgotten.

use super::fetch::FrameMap;
use super::pager::Pager;
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::schema::registry::Registry;
use crate::source::Source;
use crate::translate::swizzle::{Direction, convert_block};
use crate::vm::{FrameNo, FrameSpace, VmError};
use std::collections::{BTreeMap, HashMap};

/// State that lives across transactions.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// A page with room for more small objects.
    pub(crate) current: Option<PageNo>,
    /// Set when a rollback could not bring memory back to the committed
    /// state: the database must be reopened.
    pub(crate) broken: Option<String>,
    /// The open transaction's bookkeeping.
    pub(crate) tx: TxState,
    /// What `Strategy::AUTO` has learnt of recent transactions.
    pub(crate) auto: super::strategy::auto::Auto,
    /// The store's count of checkpoint moves when the mapped backend last
    /// gave settled pages back to the page file (`mapped.rs`).
    pub(crate) settled: u64,
}

/// The bookkeeping of the open transaction.
#[derive(Debug, Default)]
pub(crate) struct TxState {
    /// Set by `begin`, cleared when the transaction commits or rolls back:
    /// found set at the next `begin`, the transaction was forgotten.
    pub(crate) active: bool,
    /// Its store transaction id.
    pub(crate) txid: u32,
    /// Blocks it allocated: head → pages.
    pub(crate) new_blocks: HashMap<PageNo, u32>,
    /// Existing pages it placed objects in: page → where their object area
    /// ended before.
    pub(crate) placed: HashMap<PageNo, u32>,
    /// Blocks whose changes were logged early (recovery-buffer overflow,
    /// spilling): they hold its changes even when not listed as written.
    pub(crate) early_pages: HashMap<PageNo, u32>,
    /// Blocks a commit took the written status of (`take_written`
    /// re-protects them): should the commit fail, they are rolled back
    /// with the others.
    pub(crate) taken: BTreeMap<PageNo, (FrameNo, u32)>,
    /// Objects it allocated less objects it freed, by type id: what it
    /// changed of the committed census (`View::count`).
    pub(crate) counts: HashMap<u32, i64>,
}

impl TxState {
    /// Starts the bookkeeping of transaction `txid`.
    pub(crate) fn start(&mut self, txid: u32) {
        *self = TxState {
            active: true,
            txid,
            ..TxState::default()
        };
    }
}

/// What rolling back needs of an open database.
pub(crate) struct Parts<'a> {
    pub(crate) source: &'a dyn Source,
    pub(crate) fs: &'a FrameSpace,
    pub(crate) pager: &'a Pager,
    pub(crate) registry: &'a Registry,
}

impl Parts<'_> {
    /// The blocks of `frames`, as head page → (first frame, pages).
    pub(crate) fn blocks_of(&self, frames: &[FrameNo]) -> BTreeMap<PageNo, (FrameNo, u32)> {
        let mut blocks = BTreeMap::new();
        for &f in frames {
            if let Some((head, idx, run)) = self.fs.page_of(f) {
                blocks.insert(head, (f - idx, run));
            }
        }
        blocks
    }

    /// Gives block `head` (resident at `frame`, `run` pages) its committed
    /// image back, swizzled and write-protected.
    fn restore_block(&self, head: PageNo, frame: FrameNo, run: u32) -> Result<()> {
        let mut img = self.source.read_block(head)?;
        let map = FrameMap::new(self.fs, self.source.home());
        convert_block(
            &mut img,
            self.fs.frame_size(),
            &self.registry.snapshot(),
            &map,
            Direction::Swizzle,
        )
        .map_err(|e| Error::internal(format!("page {head}: swizzling its committed image: {e}")))?;
        self.fs
            .copy_in(frame, 0, &img)
            .and_then(|()| self.fs.write_protect(frame, run))
            .map_err(|e| e.into_error(self.source.name(), &format!("restoring page {head}")))
    }

    /// Drops block `head` from memory: its next touch fetches it.
    pub(crate) fn drop_block(&self, frame: FrameNo, run: u32) -> std::result::Result<(), VmError> {
        self.pager.forget(frame);
        if self.fs.is_resident(frame) {
            self.fs.evict(frame, run)?;
        }
        Ok(())
    }

    /// Drops block `head`, allocated by a transaction that did not commit:
    /// its next touch finds no object (zeros, `dead.rs`).
    fn discard_block(&self, frame: FrameNo, run: u32) -> std::result::Result<(), VmError> {
        self.pager.forget(frame);
        self.fs.discard(frame, run)
    }

    /// Drops every resident block: when the written blocks cannot be
    /// listed, this is the one way back to the committed state.
    pub(crate) fn drop_all(&self) -> std::result::Result<(), VmError> {
        for (frame, run) in self.pager.resident_blocks() {
            self.drop_block(frame, run)?;
        }
        Ok(())
    }
}

/// Rolls the transaction of `st` back (see the module docs). Returns why
/// memory could not be brought back, if it could not.
pub(crate) fn rollback(p: &Parts<'_>, st: &mut TxState, current: &mut Option<PageNo>) -> Option<String> {
    let mut broken = None;
    p.pager.spills().clear();
    let mut blocks = std::mem::take(&mut st.taken);
    match p.fs.take_written() {
        Ok(frames) => blocks.extend(p.blocks_of(&frames)),
        Err(e) => {
            // Which pages were written is unknown: drop them all.
            if let Err(e2) = p.drop_all() {
                broken = Some(format!(
                    "listing written pages failed ({e}) and dropping every page failed ({e2})"
                ));
            }
        }
    }
    // Pages logged early were write-protected again, so they may not be
    // listed as written; they hold this transaction's changes all the same.
    for (&head, &run) in &st.early_pages {
        if let Some(f) = p.fs.lookup(head) {
            blocks.insert(head, (f, run));
        }
    }
    for (&head, &(frame, run)) in &blocks {
        if st.new_blocks.contains_key(&head) || !p.fs.is_resident(frame) {
            continue;
        }
        // A committed image that cannot be read (damaged since it was
        // fetched, an I/O error) cannot be restored; dropped, the page is
        // fetched again at its next touch, which reports the damage.
        if p.restore_block(head, frame, run).is_err()
            && let Err(e) = p.drop_block(frame, run)
        {
            broken = Some(format!("page {head} could be neither restored nor dropped: {e}"));
        }
    }
    for (&head, &run) in &st.new_blocks {
        if let Some(f) = p.fs.lookup(head)
            && let Err(e) = p.discard_block(f, run)
        {
            broken = Some(format!("dropping new page {head}: {e}"));
        }
    }
    p.pager.dead.add(
        st.new_blocks.iter().map(|(&h, &n)| (h, n)),
        st.placed.iter().map(|(&pg, &from)| (pg, from)),
    );
    p.registry.abort();
    if let Some(b) = p.pager.rbuf.get() {
        b.clear();
    }
    *current = None;
    *st = TxState::default();
    p.fs.set_writers(false);
    p.pager.release_held();
    broken
}
