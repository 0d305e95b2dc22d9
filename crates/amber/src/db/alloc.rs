//! Allocation in a transaction: where a new object goes, and what freeing
//! one leaves.
//!
//! New objects are placed in pages near a given object, else in the current
//! allocation page, else in a new page; objects larger than a page get a run
//! of pages of their own. Freed slots keep their type and are reused only by
//! objects of the same type and size, so a stale pointer never sees another
//! type's bytes. Pages are not returned to the page allocator (that would
//! need proof that no pointer to them is left: reachability GC, future work),
//! and an object that is allocated but unreachable at commit is still stored.

use super::translate;
use super::tx::Tx;
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::format::objects::{FLAG_FREE, encode_header, slot_size};
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
        // Type-stable reuse of a freed slot. Its page is made resident before
        // the slot is taken: fetching a page records its free slots, and
        // must not record this one again once it is taken (two objects would
        // get it). Once written, the page stays resident until the end of
        // the transaction, so it is not fetched again meanwhile. The fetch
        // may record other slots (of its cluster neighbours, which it may
        // evict again): the slot taken is the one whose page is resident.
        let key = (type_id, size);
        let candidate = self.pager.slots().last(key);
        if let Some(paddr) = candidate {
            let va = translate(self.fs, paddr, pages_for(u64::from(size), ps))?;
            let f = self
                .fs
                .frame_at(va as usize)
                .ok_or_else(|| Error::invalid("free slot outside this database"))?;
            self.fs
                .ensure_resident(f)
                .map_err(|e| Error::invalid(format!("page {}: {}", e.page, e.message)))?;
        }
        let reused = candidate.filter(|&pa| self.pager.slots().take(key, pa));
        if let Some(paddr) = reused {
            self.taken.push(((type_id, size), paddr));
            let va = translate(self.fs, paddr, pages_for(u64::from(size), ps))?;
            self.access
                .write_new(va - 8, encode_header(type_id, 0, size));
            return Ok(va);
        }
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
        if let Some(cur) = self.heap.current
            && let Ok(base) = self.block_va(cur)
        {
            candidates.push(base);
        }
        for c in candidates {
            let f = self
                .fs
                .frame_at(c as usize)
                .ok_or_else(|| Error::invalid("placement hint outside this database"))?;
            let Some((_, idx, run)) = self.fs.page_of(f) else {
                continue;
            };
            if run != 1 {
                continue;
            }
            let base = self.fs.frame_addr(f - idx) as u64;
            let used = *self.access.obj::<u32>(base + USED_OFFSET as u64);
            if used as usize + slot as usize <= ps {
                self.place(base, used, type_id, size);
                return Ok(base + u64::from(used) + 8);
            }
        }
        let head = self.new_block(1)?;
        self.heap.current = Some(head);
        let base = self.block_va(head)?;
        self.place(base, HEADER_SIZE as u32, type_id, size);
        Ok(base + HEADER_SIZE as u64 + 8)
    }

    /// Writes an object header at `used` in the block at `base` and advances
    /// the block's object area.
    fn place(&mut self, base: u64, used: u32, type_id: u32, size: u32) {
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
            .map_err(|e| e.into_error(self.pager.store.path(), "assigning frames"))?;
        self.fs
            .install(f, &img, InstallAs::Dirty)
            .map_err(|e| e.into_error(self.pager.store.path(), "installing a new page"))?;
        self.pager.installed(self.fs, f, pages);
        self.new_blocks.insert(head, pages);
        Ok(head)
    }

    /// Whether the frames already assigned to pages `head..head + pages`, if
    /// any, are those of a block of exactly that shape.
    fn frames_fit(&self, head: PageNo, pages: u32) -> bool {
        (0..pages).all(|i| {
            self.fs
                .lookup(head + u64::from(i))
                .is_none_or(|f| self.fs.page_of(f) == Some((head, i, pages)))
        })
    }

    /// The virtual address of the block whose first page is `head`.
    fn block_va(&self, head: PageNo) -> Result<u64> {
        let f = self
            .fs
            .lookup(head)
            .ok_or_else(|| Error::invalid(format!("page {head} has no frame")))?;
        Ok(self.fs.frame_addr(f) as u64)
    }

    /// Frees an object. Its slot is reused only by objects of the same type
    /// and size; reading it through a stale pointer still yields a `T`.
    pub fn free<T: Persistent>(&mut self, p: PRef<T>) -> Result<()> {
        self.free_raw(p.addr())
    }

    pub(crate) fn free_raw(&mut self, va: u64) -> Result<()> {
        self.tick();
        let hdr = *self.access.obj::<[u8; 8]>(va - 8);
        let tag = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let size = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
        let flags = (tag >> 24) as u8;
        if flags & FLAG_FREE != 0 {
            return Err(Error::invalid("object freed twice"));
        }
        let type_id = tag & crate::format::objects::MAX_TYPE_ID;
        self.access
            .write_new(va - 8, encode_header(type_id, flags | FLAG_FREE, size));
        let paddr = self.paddr(va)?;
        self.pager
            .freed_now
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(paddr);
        self.freed.push(((type_id, size), paddr));
        Ok(())
    }
}
