//! Allocation in a transaction: where a new object goes, and what freeing
//! one leaves.
//!
//! New objects are placed in pages near a given object, else in the current
//! allocation page, else in a new page; objects larger than a page get a run
//! of pages of their own. Pages where a transaction that did not commit had
//! placed objects are not placed in again this session (`dead.rs`).
//!
//! Freeing (`free.rs`) marks headers free and nothing more: a freed slot is
//! never reused, so a stale pointer to it always lands on that free header
//! (and is refused at the dereference), never on another object. Reusing
//! slots and pages needs proof that no pointer to them is left — a
//! reachability pass — so space is not reclaimed within a session, and an
//! object that is allocated but unreachable at commit is still stored.

use super::tx::Tx;
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::format::objects::{encode_header, slot_size};
use crate::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use crate::ptr::PRef;
use crate::schema::layout::{is_large, pages_for};
use crate::vm::{InstallAs, Persistent};
use std::num::NonZeroU64;

impl Tx<'_> {
    /// Allocates and initialises a new object.
    pub fn alloc<T: Persistent>(&mut self, value: T) -> Result<PRef<T>> {
        self.alloc_at(value, None)
    }

    /// Allocates a new object on the same page as `near` when it has room,
    /// so that objects used together are fetched together.
    pub fn alloc_near<T: Persistent, U: Persistent>(
        &mut self,
        value: T,
        near: PRef<U>,
    ) -> Result<PRef<T>> {
        self.alloc_at(value, Some(near.addr()))
    }

    /// Allocates an object whose value `make` builds in this transaction:
    /// the one-call form for an object created with its strings and
    /// vectors, `tx.alloc_with(|tx| Ok(Node { name: tx.new_string("n")?,
    /// kids: tx.new_vec([a, b])?, .. }))`. An error from `make` allocates
    /// nothing (what it allocated before failing stays unreachable).
    pub fn alloc_with<T: Persistent>(
        &mut self,
        make: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<PRef<T>> {
        let value = make(self)?;
        self.alloc(value)
    }

    fn alloc_at<T: Persistent>(&mut self, value: T, near: Option<u64>) -> Result<PRef<T>> {
        self.tick();
        let id = self.struct_id::<T>()?;
        let va = self.alloc_raw(id, std::mem::size_of::<T>() as u32, near)?;
        self.access.write_new(va, value);
        NonZeroU64::new(va)
            .map(PRef::from_addr)
            .ok_or_else(|| Error::invalid("allocation at address 0"))
    }

    /// Allocates `size` body bytes of type `type_id`; returns the body's
    /// virtual address (8-aligned, contents unspecified).
    pub(crate) fn alloc_raw(&mut self, type_id: u32, size: u32, near: Option<u64>) -> Result<u64> {
        let ps = self.page_size;
        if is_large(u64::from(size), ps) {
            let pages = pages_for(u64::from(size), ps);
            let head = self.new_block(pages)?;
            let base = self.block_va(head)?;
            self.place(base, HEADER_SIZE as u32, type_id, size);
            return Ok(base + HEADER_SIZE as u64 + 8);
        }
        let slot = slot_size(size as usize) as u32;
        let mut candidates = Vec::with_capacity(2);
        if let Some(n) = near {
            candidates.push(n);
        }
        if let Some(cur) = self.session.current
            && let Ok(base) = self.block_va(cur)
        {
            candidates.push(base);
        }
        for c in candidates {
            let f = self
                .fs
                .frame_at(c as usize)
                .ok_or_else(|| Error::invalid("placement hint outside this database"))?;
            let Some((head, idx, run)) = self.fs.page_of(f) else {
                continue;
            };
            if run != 1 || self.pager.dead.closed(head) {
                continue;
            }
            let base = self.fs.frame_addr(f - idx) as u64;
            let used = *self.access.obj::<u32>(base + USED_OFFSET as u64);
            if used as usize + slot as usize <= ps {
                if !self.session.tx.new_blocks.contains_key(&head) {
                    self.session.tx.placed.entry(head).or_insert(used);
                }
                self.place(base, used, type_id, size);
                return Ok(base + u64::from(used) + 8);
            }
        }
        let head = self.new_block(1)?;
        self.session.current = Some(head);
        let base = self.block_va(head)?;
        self.place(base, HEADER_SIZE as u32, type_id, size);
        Ok(base + HEADER_SIZE as u64 + 8)
    }

    /// Writes an object header at `used` in the block at `base` and advances
    /// the block's object area.
    fn place(&mut self, base: u64, used: u32, type_id: u32, size: u32) {
        *self.session.tx.counts.entry(type_id).or_default() += 1;
        self.access
            .write_new(base + u64::from(used), encode_header(type_id, 0, size));
        *self.access.obj_mut::<u32>(base + USED_OFFSET as u64) =
            used + slot_size(size as usize) as u32;
    }

    /// Allocates and installs an empty data block of `pages` pages.
    ///
    /// Pages an aborted transaction allocated go back to the allocator but
    /// keep their frames, shaped as that transaction's blocks were (frames
    /// are never reassigned while the frame space lives). A block of another
    /// shape cannot use them: such a range is set aside and freed again in
    /// this transaction (nothing at commit), and another one is taken.
    fn new_block(&mut self, pages: u32) -> Result<PageNo> {
        let mut aside = Vec::new();
        let head = loop {
            let head = self.stx()?.alloc(pages, BlockKind::Data)?;
            if self.frames_fit(head, pages) {
                break head;
            }
            aside.push(head);
        };
        for h in aside {
            self.stx()?.free(h)?;
        }
        let mut img = vec![0u8; pages as usize * self.page_size];
        page::format(&mut img, BlockKind::Data, head, pages);
        let f = self
            .fs
            .assign(head, pages)
            .map_err(|e| e.into_error(self.source.name(), &format!("frames for new page {head}")))?;
        // Recorded before it is installed: should installing fail, the
        // rollback still knows the block is this transaction's.
        self.session.tx.new_blocks.insert(head, pages);
        self.fs
            .install(f, &img, InstallAs::Dirty)
            .map_err(|e| e.into_error(self.source.name(), &format!("installing new page {head}")))?;
        self.pager.installed(self.fs, f, pages);
        Ok(head)
    }

    /// Whether the frames already assigned to pages `head..head + pages`, if
    /// any, are those of a block of exactly that shape.
    fn frames_fit(&self, head: PageNo, pages: u32) -> bool {
        self.fs.block_fits(head, pages)
    }

    /// The virtual address of the block whose first page is `head`.
    fn block_va(&self, head: PageNo) -> Result<u64> {
        let f = self
            .fs
            .lookup(head)
            .ok_or_else(|| Error::invalid(format!("page {head} has no frame")))?;
        Ok(self.fs.frame_addr(f) as u64)
    }
}
