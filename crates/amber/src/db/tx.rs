//! Transactions: updates in place at memory speed, detected by page
//! protection, turned into a minimal log at commit (`commit.rs`).
//!
//! A transaction borrows the database exclusively; `get_mut` hands out a
//! plain `&mut T` into the mapped page (and is where a software write barrier
//! goes for the detection schemes that need one). New objects are placed in
//! pages near a given object, else in the current allocation page, else in a
//! new page; objects larger than a page get a run of pages of their own.
//! Freed slots keep their type and are reused only by objects of the same
//! type and size, so a stale pointer never sees another type's bytes. Pages
//! are not returned to the page allocator (that would need proof that no
//! pointer to them is left: reachability GC, future work), and an object that
//! is allocated but unreachable at commit is still stored.

use super::pager::Pager;
use super::{Db, Heap, translate};
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::format::objects::{FLAG_FREE, encode_header, slot_size};
use crate::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use crate::ptr::{PBytes, PRef, PVec, Smart};
use crate::schema::check::Program;
use crate::schema::layout::{is_large, pages_for};
use crate::schema::registry::{Binding, Registry};
use crate::store::StoreTx;
use crate::translate::swizzle::AddrMap;
use crate::vm::{Access, Field, FrameSpace, InstallAs, Persistent};
use std::any::TypeId;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// What a commit did and what it cost, split as in Hosking et al.'s
/// breakdown: finding the changed pages, diffing and unswizzling them, and
/// writing and syncing the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Blocks found written.
    pub blocks: u64,
    /// Log bytes written (records and commit record).
    pub log_bytes: u64,
    /// Log bytes the minimal-log rule demands for the changes (headers plus
    /// changed bytes, after coalescing), commit record excluded.
    pub minimal_log_bytes: u64,
    /// Bytes that differ from the committed state.
    pub changed_bytes: u64,
    /// Time to find the written pages.
    pub detect: Duration,
    /// Time to unswizzle and diff them.
    pub diff: Duration,
    /// Time to append the records and sync the log.
    pub write: Duration,
}

/// Marker so that array types get their own registry key per element type.
struct ArrayOf<T>(PhantomData<T>);

/// An open transaction.
#[derive(Debug)]
pub struct Tx<'db> {
    pub(crate) stx: Option<StoreTx<'db>>,
    pub(crate) access: &'db mut Access,
    pub(crate) fs: &'db Arc<FrameSpace>,
    pub(crate) pager: &'db Pager,
    pub(crate) registry: &'db Registry,
    pub(crate) heap: &'db mut Heap,
    /// Blocks allocated by this transaction: head → pages.
    pub(crate) new_blocks: HashMap<PageNo, u32>,
    /// Free slots this transaction reused (returned if it aborts).
    pub(crate) taken: Vec<((u32, u32), u64)>,
    /// Slots this transaction freed (reusable once it commits).
    pub(crate) freed: Vec<((u32, u32), u64)>,
    pub(crate) done: bool,
    /// Blocks whose changes were logged early (recovery buffer overflow).
    pub(crate) early_pages: HashMap<PageNo, u32>,
    /// What early logging cost, for the commit's statistics.
    pub(crate) early_stats: CommitStats,
    /// A failure from work done on the way (early logging), reported at
    /// commit.
    pub(crate) failed: Option<Error>,

    pub(crate) page_size: usize,
}

impl<'db> Tx<'db> {
    pub(crate) fn new(db: &'db mut Db) -> Result<Tx<'db>> {
        let Db {
            store,
            registry,
            pager,
            fs,
            access,
            heap,
        } = db;
        let page_size = store.page_size();
        Ok(Tx {
            stx: Some(store.begin()?),
            access,
            fs,
            pager,
            registry,
            heap,
            new_blocks: HashMap::new(),
            taken: Vec::new(),
            freed: Vec::new(),
            done: false,
            early_pages: HashMap::new(),
            early_stats: CommitStats::default(),
            failed: None,
            page_size,
        })
    }

    pub(crate) fn stx_ref(&self) -> Result<&StoreTx<'db>> {
        self.stx
            .as_ref()
            .ok_or_else(|| Error::invalid("transaction already finished"))
    }

    pub(crate) fn stx(&mut self) -> Result<&mut StoreTx<'db>> {
        self.stx
            .as_mut()
            .ok_or_else(|| Error::invalid("transaction already finished"))
    }

    /// Reads an object.
    #[inline(always)]
    pub fn get<T: Persistent>(&self, p: PRef<T>) -> &T {
        self.access.obj(p.addr())
    }

    /// Updates an object in place: the page is marked written by the
    /// hardware on the first store.
    #[inline(always)]
    pub fn get_mut<T: Persistent>(&mut self, p: PRef<T>) -> &mut T {
        self.tick();
        self.access.obj_mut(p.addr())
    }

    /// Work owed at an entry into Amber: pages whose recovery-buffer copies
    /// must be logged early.
    #[inline(always)]
    pub(crate) fn tick(&mut self) {
        if let Some(b) = self.pager.rbuf.get()
            && b.attention.load(Ordering::Relaxed)
        {
            self.relieve();
        }
        if self.pager.pressure.load(Ordering::Relaxed) {
            self.spill_dirty();
        }
    }

    #[cold]
    fn relieve(&mut self) {
        let Some(b) = self.pager.rbuf.get() else {
            return;
        };
        for (frame, clean) in b.take_marked() {
            if let Some((head, _, run)) = self.fs.page_of(frame) {
                self.early_pages.insert(head, run);
            }
            match self.log_early(frame, clean) {
                Ok(()) => {
                    b.early_logged.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if self.failed.is_none() {
                        self.failed = Some(e);
                    }
                }
            }
        }
    }

    /// The elements of a persistent vector.
    pub fn slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> &'a [T] {
        self.access.slice(v.buf, v.len as usize)
    }

    /// The bytes of a persistent byte string.
    pub fn bytes<'a>(&'a self, b: &'a PBytes) -> &'a [u8] {
        self.access.slice(b.buf, b.len as usize)
    }

    /// Follows a smart pointer.
    pub fn smart<T: Persistent>(&self, s: Smart<T>) -> Result<&T> {
        let va = translate(
            self.fs,
            s.paddr(),
            pages_for(u64::from(T::DESC.size), self.page_size),
        )?;
        Ok(self.access.obj(va))
    }

    /// The smart (persistent-address) form of a pointer.
    pub fn to_smart<T: Persistent>(&self, p: PRef<T>) -> Result<Smart<T>> {
        let pa = self.paddr(p.addr())?;
        NonZeroU64::new(pa)
            .map(Smart::from_paddr)
            .ok_or_else(|| Error::invalid("null persistent address"))
    }

    /// The persistent address of virtual address `va`.
    pub(crate) fn paddr(&self, va: u64) -> Result<u64> {
        super::fetch::FrameMap::new(self.fs)
            .to_paddr(va)
            .map_err(Error::Invalid)
    }

    /// The catalog id of a program type, defining it in this transaction if
    /// the database has never seen it; a different stored layout of it or of
    /// any type it reaches is an error naming the type and the field.
    pub(crate) fn type_id_of(&mut self, rust: TypeId, program: Program) -> Result<u32> {
        let stored = match self.registry.bind(rust, program)? {
            Binding::Stored(id) => return Ok(id),
            Binding::New(stored) => stored,
        };
        let id = self.stx()?.define_type(&stored.encode())?;
        self.registry.define(id, Some(rust), stored);
        Ok(id)
    }

    fn struct_id<T: Persistent>(&mut self) -> Result<u32> {
        self.type_id_of(TypeId::of::<T>(), Program::Struct(&T::DESC))
    }

    pub(crate) fn array_id<T: Field>(&mut self) -> Result<u32> {
        self.type_id_of(
            TypeId::of::<ArrayOf<T>>(),
            Program::Array {
                elem: &T::KIND,
                elem_size: std::mem::size_of::<T>() as u32,
            },
        )
    }

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
            .map_err(|e| Error::invalid(format!("frame space: {e}")))?;
        self.fs
            .install(f, &img, InstallAs::Dirty)
            .map_err(|e| Error::invalid(format!("installing a new page: {e}")))?;
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

    /// Names `p` as root `name` (replacing any root of that name).
    pub fn set_root<T: Persistent>(&mut self, name: &str, p: PRef<T>) -> Result<()> {
        let id = self.struct_id::<T>()?;
        let pa = self.paddr(p.addr())?;
        self.stx()?.set_root(name, pa, id)
    }

    /// Removes root `name` (nothing if there is none). Only the name goes:
    /// the object it named stays stored (pages are not reclaimed without
    /// reachability GC).
    pub fn remove_root(&mut self, name: &str) -> Result<()> {
        self.stx()?.set_root(name, 0, 0)
    }

    /// Appends `value` to the vector `field` of object `obj`, growing its
    /// buffer (doubling) when full.
    pub fn push<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PVec<T>,
        value: T,
    ) -> Result<()> {
        self.tick();
        let vaddr = std::ptr::from_mut(field(self.access.obj_mut(obj.addr()))) as u64;
        let (buf, len, cap) = {
            let v = self.access.obj::<PVec<T>>(vaddr);
            (v.buf, v.len, v.cap)
        };
        let size = std::mem::size_of::<T>() as u64;
        let buf = if len == cap {
            let new_cap = (cap.max(2))
                .checked_mul(2)
                .ok_or_else(|| Error::invalid("vector too long"))?;
            self.regrow::<T>(buf, len, new_cap, vaddr)?
        } else {
            buf
        };
        self.access.write_new(buf + u64::from(len) * size, value);
        self.access.obj_mut::<PVec<T>>(vaddr).len = len + 1;
        Ok(())
    }

    /// Moves a buffer of `len` elements into a new one of `new_cap`, frees
    /// the old one, and points the header at `vaddr` to it.
    fn regrow<T: Field>(&mut self, buf: u64, len: u32, new_cap: u32, vaddr: u64) -> Result<u64> {
        let size = std::mem::size_of::<T>() as u32;
        let id = self.array_id::<T>()?;
        let bytes = new_cap
            .checked_mul(size)
            .ok_or_else(|| Error::invalid("vector too large"))?;
        let new = self.alloc_raw(id, bytes, (buf != 0).then_some(buf))?;
        if len > 0 {
            let old: Vec<u8> = self.access.slice::<u8>(buf, (len * size) as usize).to_vec();
            self.access
                .slice_mut::<u8>(new, old.len())
                .copy_from_slice(&old);
        }
        if buf != 0 {
            self.free_raw(buf)?;
        }
        let v = self.access.obj_mut::<PVec<T>>(vaddr);
        v.buf = new;
        v.cap = new_cap;
        Ok(new)
    }

    /// Removes and returns the last element of vector `field` of `obj`.
    pub fn pop<O: Persistent, T: Field + Copy>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PVec<T>,
    ) -> Option<T> {
        let v = field(self.access.obj_mut(obj.addr()));
        if v.len == 0 {
            return None;
        }
        v.len -= 1;
        let (buf, len) = (v.buf, v.len);
        Some(
            *self
                .access
                .obj::<T>(buf + u64::from(len) * std::mem::size_of::<T>() as u64),
        )
    }

    /// The elements of vector `field` of `obj`, mutably.
    pub fn slice_mut<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PVec<T>,
    ) -> &mut [T] {
        let v = field(self.access.obj_mut(obj.addr()));
        let (buf, len) = (v.buf, v.len as usize);
        self.access.slice_mut(buf, len)
    }

    /// Replaces the contents of byte string `field` of `obj`.
    pub fn set_bytes<O: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PBytes,
        data: &[u8],
    ) -> Result<()> {
        let baddr = std::ptr::from_mut(field(self.access.obj_mut(obj.addr()))) as u64;
        let (buf, cap) = {
            let b = self.access.obj::<PBytes>(baddr);
            (b.buf, b.cap)
        };
        let len = u32::try_from(data.len())
            .map_err(|_| Error::invalid("byte string longer than 4 GiB"))?;
        let buf = if len > cap {
            let id = self.array_id::<u8>()?;
            let cap = len.max(8);
            let new = self.alloc_raw(id, cap, Some(obj.addr()))?;
            if buf != 0 {
                self.free_raw(buf)?;
            }
            let b = self.access.obj_mut::<PBytes>(baddr);
            b.buf = new;
            b.cap = cap;
            new
        } else {
            buf
        };
        if len > 0 {
            self.access
                .slice_mut::<u8>(buf, data.len())
                .copy_from_slice(data);
        }
        self.access.obj_mut::<PBytes>(baddr).len = len;
        Ok(())
    }
}
