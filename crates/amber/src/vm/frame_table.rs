//! The address-mapping table: persistent page number → virtual frame and back.
//!
//! This is Texas's page-wise table, filled lazily: a page gets a frame the
//! first time a pointer to it is swizzled, not when it is loaded. Both
//! directions live in memory obtained from `mmap` and are read without locks,
//! because the SIGSEGV handler needs `frame → page` and the fault service
//! (running inside that handler) needs `page → frame` while swizzling.
//! Writers hold the FrameSpace lock (proved by passing its `Guard`).
//!
//! - `frame → page`: a flat array of [`FrameMeta`], one per frame of the
//!   reservation, reserved up front with MAP_NORESERVE: only the pages of the
//!   array that describe assigned frames ever become resident.
//! - `page → frame`: an open-addressing hash table (linear probing, at most
//!   half full). Page numbers are sparse u64s, so a flat array is impossible.
//!   It grows by doubling into a fresh mapping; old tables stay mapped until the
//!   FrameSpace is dropped so that a lock-free reader holding an old pointer
//!   reads valid (if slightly stale) memory. The waste is bounded by the size
//!   of the current table.
//!
//! Frames are handed out by a bump pointer and never reused for another page
//! while the FrameSpace lives, so a swizzled pointer never changes meaning.
//!
//! **The identity region.** The first `direct` frames (set at creation: the
//! pages a database had when it was opened, at most half the reservation)
//! are page `f`'s frame for every page `f < direct`, without an entry in
//! the hash table: translating a pointer to such a page is one add
//! (DESIGN.md, decision 2: "when a whole database fits, one relocation add
//! is a valid fast path"), and nothing is reserved when a pointer to it is
//! first swizzled. Their metadata starts all zero, which there means a
//! one-page block, not resident; the run of a block of several pages is
//! recorded when a pointer to it is swizzled or its window is fetched (an
//! object's body lies in its block's first page, so the other pages are
//! reached only through its head). A block that starts below `direct` but
//! ends above it (one allocated at the end of a file that shrank) gets its
//! frames from the bump pointer like pages beyond `direct`, and its head's
//! identity frame is marked [`FORWARDED`] so that lookups go to the hash
//! table. Pages beyond `direct` (a database that grew, or page numbers
//! above the reservation: Texas's huge address spaces) get frames lazily
//! from the bump pointer, which starts at `direct`.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::lock::Guard;
use super::sys::Mapping;
use super::{FrameNo, VmError};

/// Frame states (the `state` word of [`FrameMeta`]).
pub(crate) const UNASSIGNED: u32 = 0;
/// Assigned to a page, content not present: a touch faults.
pub(crate) const NOT_RESIDENT: u32 = 1;
/// Resident and, when writes are tracked, write-protected.
pub(crate) const CLEAN: u32 = 2;
/// sigsegv backend: a thread is running `first_write` for this frame.
pub(crate) const WRITE_PENDING: u32 = 3;
/// Resident and known written in the open transaction: sigsegv, writable
/// and in the written set; userfaultfd, installed as written or found
/// written by an eviction check; under a software barrier, pinned. Never
/// evicted as clean; `take_written` makes it CLEAN again.
pub(crate) const DIRTY: u32 = 4;
/// An identity frame whose page's block has frames elsewhere (a block
/// crossing the end of the identity region): never resident.
pub(crate) const FORWARDED: u32 = 5;
/// Claimed by an eviction that found it clean (from CLEAN, or with
/// userfaultfd DIRTY: see `evict_clean`); becomes NOT_RESIDENT, or CLEAN
/// again if the eviction is abandoned. Counts as not resident.
pub(crate) const EVICTING: u32 = 6;

pub(crate) fn is_resident_state(s: u32) -> bool {
    matches!(s, CLEAN | WRITE_PENDING | DIRTY)
}

#[repr(C)]
pub(crate) struct FrameMeta {
    /// Head page of the run + 1; 0 while unassigned.
    head_plus_one: AtomicU64,
    /// `index_in_run << 32 | run_len`.
    run: AtomicU64,
    pub(crate) state: AtomicU32,
    _pad: u32,
}

#[repr(C)]
struct Slot {
    /// Page + 1; 0 = empty. Written last, with Release, so a reader that sees
    /// the key also sees the frame.
    key: AtomicU64,
    frame: AtomicU32,
    _pad: u32,
}

/// First words of every hash-table mapping.
#[repr(C)]
struct TableHeader {
    /// Number of slots, a power of two.
    cap: u64,
    _pad: u64,
}

const INITIAL_SLOTS: usize = 4096;
const MAX_TABLES: usize = 48;

struct Mutable {
    /// Entries in the hash table (pages assigned).
    pages: usize,
    /// Every hash table ever allocated; the last one is current.
    tables: [Option<Mapping>; MAX_TABLES],
    ntables: usize,
}

pub(crate) struct FrameTable {
    meta: Mapping,
    nframes: u32,
    /// Frames `0..direct` are the identity region (see the module docs).
    direct: u32,
    /// Frames handed out so far (the bump pointer).
    next_free: AtomicU32,
    /// Start of the current hash-table mapping.
    current: AtomicPtr<u8>,
    /// Only touched with the FrameSpace lock held.
    mutable: UnsafeCell<Mutable>,
}

// SAFETY: the raw mappings are shared memory read through atomics; `mutable`
// is only accessed by a thread holding the FrameSpace lock (every such method
// takes a `&Guard`).
unsafe impl Send for FrameTable {}
// SAFETY: as above.
unsafe impl Sync for FrameTable {}

fn hash(page: u64, mask: usize) -> usize {
    // Fibonacci hashing: page numbers are often consecutive, and the
    // multiplication spreads them over the whole table.
    (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as usize & mask
}

fn new_table(cap: usize) -> Result<Mapping, VmError> {
    let bytes = std::mem::size_of::<TableHeader>() + cap * std::mem::size_of::<Slot>();
    let m = Mapping::anon(bytes, libc::PROT_READ | libc::PROT_WRITE).map_err(|e| VmError::Os {
        op: "mmap page table",
        err: e,
    })?;
    // SAFETY: the mapping is fresh, writable, zeroed and large enough for the
    // header; no other thread can see it yet.
    unsafe { (*m.ptr().cast::<TableHeader>()).cap = cap as u64 };
    Ok(m)
}

/// # Safety
/// `t` must point at a live table mapping created by `new_table`.
unsafe fn slots<'a>(t: *const u8) -> &'a [Slot] {
    // SAFETY: per the contract the header is initialised and `cap` slots
    // follow it, zero-initialised (an all-zero Slot is a valid empty slot).
    unsafe {
        let cap = (*t.cast::<TableHeader>()).cap as usize;
        let first = t.add(std::mem::size_of::<TableHeader>()).cast::<Slot>();
        std::slice::from_raw_parts(first, cap)
    }
}

impl FrameTable {
    /// A table of `nframes` frames whose first `direct` (at most half of
    /// them) are the identity region.
    pub(crate) fn new(nframes: u32, direct: u64) -> Result<FrameTable, VmError> {
        let direct = direct.min(u64::from(nframes / 2)) as u32;
        let meta_bytes = (nframes as usize).max(1) * std::mem::size_of::<FrameMeta>();
        let meta = Mapping::anon(meta_bytes, libc::PROT_READ | libc::PROT_WRITE).map_err(|e| {
            VmError::Os {
                op: "mmap frame table",
                err: e,
            }
        })?;
        let first = new_table(INITIAL_SLOTS)?;
        let current = AtomicPtr::new(first.ptr());
        let mut tables: [Option<Mapping>; MAX_TABLES] = std::array::from_fn(|_| None);
        tables[0] = Some(first);
        Ok(FrameTable {
            meta,
            nframes,
            direct,
            next_free: AtomicU32::new(direct),
            current,
            mutable: UnsafeCell::new(Mutable {
                pages: 0,
                tables,
                ntables: 1,
            }),
        })
    }

    pub(crate) fn nframes(&self) -> u32 {
        self.nframes
    }

    /// Frames handed out so far; frames `0..assigned()` are assigned.
    pub(crate) fn assigned(&self) -> u32 {
        self.next_free.load(Ordering::Acquire)
    }

    pub(crate) fn meta(&self, f: FrameNo) -> Option<&FrameMeta> {
        if f >= self.nframes {
            return None;
        }
        // SAFETY: f < nframes and the mapping holds nframes zero-initialised
        // FrameMeta (all-zero is valid for atomics); it lives as long as self.
        Some(unsafe { &*self.meta.ptr().cast::<FrameMeta>().add(f as usize) })
    }

    /// Frames `0..direct()` are the identity region.
    pub(crate) fn direct(&self) -> u32 {
        self.direct
    }

    pub(crate) fn state(&self, f: FrameNo) -> u32 {
        match self.meta(f).map(|m| m.state.load(Ordering::Acquire)) {
            Some(UNASSIGNED) if f < self.direct => NOT_RESIDENT,
            Some(FORWARDED) | None => UNASSIGNED,
            Some(s) => s,
        }
    }

    pub(crate) fn page_of(&self, f: FrameNo) -> Option<(u64, u32, u32)> {
        let m = self.meta(f)?;
        let head = m.head_plus_one.load(Ordering::Acquire);
        if head == 0 {
            return (f < self.direct && m.state.load(Ordering::Acquire) != FORWARDED).then_some((
                u64::from(f),
                0,
                1,
            ));
        }
        let run = m.run.load(Ordering::Relaxed);
        Some((head - 1, (run >> 32) as u32, run as u32))
    }

    /// Whether `f` is an identity frame never given a run nor a state:
    /// [`assign`](Self::assign) can make it part of a block of any shape.
    pub(crate) fn unshaped(&self, f: FrameNo) -> bool {
        f < self.direct
            && self.meta(f).is_some_and(|m| {
                m.head_plus_one.load(Ordering::Acquire) == 0
                    && m.state.load(Ordering::Acquire) == UNASSIGNED
            })
    }

    /// Whether `page..page + run_len` lies in the identity region.
    pub(crate) fn is_direct(&self, page: u64, run_len: u32) -> bool {
        page.checked_add(u64::from(run_len))
            .is_some_and(|end| end <= u64::from(self.direct))
    }

    pub(crate) fn lookup(&self, page: u64) -> Option<FrameNo> {
        if page < u64::from(self.direct) {
            let forwarded = self
                .meta(page as FrameNo)
                .is_some_and(|m| m.state.load(Ordering::Acquire) == FORWARDED);
            if !forwarded {
                return Some(page as FrameNo);
            }
        }
        let key = page.checked_add(1)?;
        // SAFETY: `current` always points at a live table: tables are only
        // unmapped when the FrameTable is dropped.
        let slots = unsafe { slots(self.current.load(Ordering::Acquire)) };
        let mask = slots.len() - 1;
        let mut i = hash(page, mask);
        loop {
            let k = slots[i].key.load(Ordering::Acquire);
            if k == key {
                return Some(slots[i].frame.load(Ordering::Relaxed));
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Returns the frame of `page`, or assigns `run_len` fresh contiguous frames
    /// to `page..page+run_len`.
    pub(crate) fn assign(
        &self,
        _g: &Guard<'_>,
        page: u64,
        run_len: u32,
    ) -> Result<FrameNo, VmError> {
        if run_len == 0 {
            return Err(VmError::InvalidArgument("run_len must be at least 1"));
        }
        // Keys are page + 1, so every page of the run must be below u64::MAX.
        if page.checked_add(u64::from(run_len)).is_none() {
            return Err(VmError::BadPage { page });
        }
        if self.is_direct(page, run_len) {
            return self.assign_direct(page, run_len);
        }
        if page < u64::from(self.direct) {
            self.forward(page, run_len)?;
        }
        if let Some(f) = self.lookup(page) {
            if run_len > 1 {
                match self.page_of(f) {
                    Some((head, 0, len)) if head == page && len == run_len => {}
                    _ => return Err(VmError::RunConflict { page, run_len }),
                }
            }
            return Ok(f);
        }
        for i in 1..u64::from(run_len) {
            if self.lazy_lookup(page + i).is_some() {
                return Err(VmError::RunConflict { page, run_len });
            }
        }
        let first = self.take_frames(run_len)?;
        // SAFETY: we hold the lock (the guard), the only way to reach `mutable`.
        let mutable = unsafe { &mut *self.mutable.get() };
        self.reserve_slots(mutable, mutable.pages + run_len as usize)?;
        self.place(mutable, page, run_len, first)?;
        self.next_free.store(first + run_len, Ordering::Release);
        Ok(first)
    }

    /// The frame of a page that is not the head of its block, past the
    /// identity region: the identity pages of a block crossing its end are
    /// that block's own.
    fn lazy_lookup(&self, page: u64) -> Option<FrameNo> {
        if page < u64::from(self.direct) {
            return None;
        }
        self.lookup(page)
    }

    /// `assign` in the identity region: the frame is the page; the run of a
    /// block of several pages is recorded, unless one of its pages is known
    /// as something else (a resident block, another run).
    fn assign_direct(&self, page: u64, run_len: u32) -> Result<FrameNo, VmError> {
        let f = page as FrameNo;
        if run_len == 1 {
            return Ok(f);
        }
        if self.page_of(f) == Some((page, 0, run_len)) {
            return Ok(f);
        }
        for i in 0..run_len {
            let m = self.meta(f + i).ok_or(VmError::BadFrame { frame: f + i })?;
            if m.head_plus_one.load(Ordering::Acquire) != 0
                || m.state.load(Ordering::Acquire) != UNASSIGNED
            {
                return Err(VmError::RunConflict { page, run_len });
            }
        }
        for i in 0..run_len {
            if let Some(m) = self.meta(f + i) {
                m.run
                    .store(u64::from(i) << 32 | u64::from(run_len), Ordering::Relaxed);
                m.head_plus_one.store(page + 1, Ordering::Release);
            }
        }
        Ok(f)
    }

    /// Marks the identity frame of `page` (a block of `run_len` pages
    /// crossing the end of the identity region) as forwarded to the hash
    /// table, unless it is already.
    fn forward(&self, page: u64, run_len: u32) -> Result<(), VmError> {
        let m = self.meta(page as FrameNo).ok_or(VmError::BadFrame {
            frame: page as FrameNo,
        })?;
        if m.head_plus_one.load(Ordering::Acquire) != 0 {
            return Err(VmError::RunConflict { page, run_len });
        }
        match m
            .state
            .compare_exchange(UNASSIGNED, FORWARDED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) | Err(FORWARDED) => Ok(()),
            Err(_) => Err(VmError::RunConflict { page, run_len }),
        }
    }

    /// Assigns frames to the blocks `blocks` (`(head, run_len)`, ascending and
    /// disjoint, none before `lo`) laid out as their pages are: block `(h, n)`
    /// gets frames `first + (h - lo)..`, where `first` starts a fresh span
    /// reaching the end of the last block. Blocks that are neighbours in the
    /// page file are then neighbours in memory, so a fetch cluster is
    /// installed with one call. Blocks that already have a frame, or that
    /// overlap a page that has one, keep what they have (their places in the
    /// span stay unused: frames are address space, not memory).
    pub(crate) fn assign_span(
        &self,
        _g: &Guard<'_>,
        lo: u64,
        blocks: &[(u64, u32)],
    ) -> Result<(), VmError> {
        let mut end = lo;
        let mut new = Vec::with_capacity(blocks.len());
        for &(head, run_len) in blocks {
            if head < end || run_len == 0 {
                return Err(VmError::InvalidArgument(
                    "blocks of a span must be ascending and disjoint",
                ));
            }
            end = head
                .checked_add(u64::from(run_len))
                .ok_or(VmError::BadPage { page: head })?;
            if self.is_direct(head, run_len) {
                // Best effort, as for blocks that have frames.
                let _ = self.assign_direct(head, run_len);
                continue;
            }
            if head < u64::from(self.direct) && self.forward(head, run_len).is_err() {
                continue;
            }
            if self.lookup(head).is_none()
                && (1..u64::from(run_len)).all(|i| self.lazy_lookup(head + i).is_none())
            {
                new.push((head, run_len));
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        let span = u32::try_from(end - lo).map_err(|_| VmError::Exhausted {
            requested: u32::MAX,
            free: self.nframes - self.next_free.load(Ordering::Relaxed),
            frames: self.nframes,
        })?;
        let first = self.take_frames(span)?;
        // SAFETY: we hold the lock (the guard), the only way to reach `mutable`.
        let mutable = unsafe { &mut *self.mutable.get() };
        let pages: usize = new.iter().map(|&(_, n)| n as usize).sum();
        self.reserve_slots(mutable, mutable.pages + pages)?;
        for (head, run_len) in new {
            self.place(mutable, head, run_len, first + (head - lo) as u32)?;
        }
        self.next_free.store(first + span, Ordering::Release);
        Ok(())
    }

    /// The first of `n` unused frames (the bump pointer moves when the caller
    /// stores it).
    fn take_frames(&self, n: u32) -> Result<FrameNo, VmError> {
        let first = self.next_free.load(Ordering::Relaxed);
        let free = self.nframes - first;
        if n > free {
            return Err(VmError::Exhausted {
                requested: n,
                free,
                frames: self.nframes,
            });
        }
        Ok(first)
    }

    /// Records frames `first..first + run_len` as pages `page..` (hash slots
    /// reserved by the caller).
    fn place(
        &self,
        mutable: &mut Mutable,
        page: u64,
        run_len: u32,
        first: FrameNo,
    ) -> Result<(), VmError> {
        for i in 0..run_len {
            let f = first + i;
            let m = self.meta(f).ok_or(VmError::BadFrame { frame: f })?;
            m.run
                .store(u64::from(i) << 32 | u64::from(run_len), Ordering::Relaxed);
            m.state.store(NOT_RESIDENT, Ordering::Relaxed);
            m.head_plus_one.store(page + 1, Ordering::Release);
        }
        // SAFETY: reserve_slots left `current` pointing at a live table.
        let slots = unsafe { slots(self.current.load(Ordering::Acquire)) };
        for i in 0..run_len {
            insert(slots, page + u64::from(i), first + i);
        }
        mutable.pages += run_len as usize;
        Ok(())
    }

    /// Grows the hash table so that `want` entries keep it at most half full.
    fn reserve_slots(&self, mutable: &mut Mutable, want: usize) -> Result<(), VmError> {
        // SAFETY: `current` is live (see lookup).
        let old = unsafe { slots(self.current.load(Ordering::Acquire)) };
        if want * 2 <= old.len() {
            return Ok(());
        }
        if mutable.ntables == MAX_TABLES {
            return Err(VmError::InvalidArgument("page table grew too many times"));
        }
        let cap = (want * 2).next_power_of_two().max(old.len() * 2);
        let table = new_table(cap)?;
        // SAFETY: `table` was just created by new_table.
        let fresh = unsafe { slots(table.ptr()) };
        for s in old {
            let k = s.key.load(Ordering::Acquire);
            if k != 0 {
                insert(fresh, k - 1, s.frame.load(Ordering::Relaxed));
            }
        }
        self.current.store(table.ptr(), Ordering::Release);
        mutable.tables[mutable.ntables] = Some(table);
        mutable.ntables += 1;
        Ok(())
    }
}

fn insert(slots: &[Slot], page: u64, frame: FrameNo) {
    let mask = slots.len() - 1;
    let mut i = hash(page, mask);
    while slots[i].key.load(Ordering::Relaxed) != 0 {
        i = (i + 1) & mask;
    }
    slots[i].frame.store(frame, Ordering::Relaxed);
    slots[i].key.store(page + 1, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::super::lock::OwnerLock;
    use super::*;

    #[test]
    fn assigns_lazily_and_contiguously() {
        let lock = OwnerLock::new(crate::vm::held::AmberLock::FrameTable);
        let t = FrameTable::new(100_000, 0).expect("table");
        let g = lock.lock();
        assert_eq!(t.lookup(5), None);
        let a = t.assign(&g, 5, 1).expect("assign");
        assert_eq!(t.assign(&g, 5, 1).expect("again"), a);
        let b = t.assign(&g, 1 << 40, 3).expect("run");
        assert_eq!(b, a + 1);
        for i in 0..3 {
            assert_eq!(t.lookup((1 << 40) + i), Some(b + i as u32));
            assert_eq!(t.page_of(b + i as u32), Some((1 << 40, i as u32, 3)));
        }
        assert!(matches!(
            t.assign(&g, (1 << 40) + 1, 2),
            Err(VmError::RunConflict { .. })
        ));
        assert!(matches!(
            t.assign(&g, 4, 2),
            Err(VmError::RunConflict { .. })
        ));
        // Growth: many pages, all still found.
        for p in 0..20_000u64 {
            t.assign(&g, 1_000_000 + p * 7, 1).expect("assign many");
        }
        for p in 0..20_000u64 {
            let f = t.lookup(1_000_000 + p * 7).expect("found");
            assert_eq!(t.page_of(f), Some((1_000_000 + p * 7, 0, 1)));
        }
        assert!(matches!(
            t.assign(&g, u64::MAX, 1),
            Err(VmError::BadPage { .. })
        ));
        t.assign(&g, u64::MAX - 1, 1).expect("largest page");
    }

    #[test]
    fn spans_follow_the_page_layout() {
        let lock = OwnerLock::new(crate::vm::held::AmberLock::FrameTable);
        let t = FrameTable::new(1000, 0).expect("table");
        let g = lock.lock();
        let before = t.assign(&g, 12, 1).expect("assign");
        // Pages 10, 12 (assigned already), 13..16 (a run), 17; 11 is free.
        t.assign_span(&g, 8, &[(10, 1), (12, 1), (13, 3), (17, 1)])
            .expect("span");
        let first = before + 1;
        assert_eq!(t.lookup(10), Some(first + 2));
        assert_eq!(t.lookup(11), None);
        assert_eq!(t.lookup(12), Some(before));
        for i in 0..3 {
            assert_eq!(t.page_of(first + 5 + i), Some((13, i, 3)));
        }
        assert_eq!(t.lookup(17), Some(first + 9));
        assert_eq!(t.assigned(), first + 10);
        assert!(matches!(
            t.assign_span(&g, 20, &[(25, 1), (24, 1)]),
            Err(VmError::InvalidArgument(_))
        ));
        // Nothing new: no frames taken.
        t.assign_span(&g, 8, &[(10, 1)]).expect("again");
        assert_eq!(t.assigned(), first + 10);
    }

    #[test]
    fn identity_region() {
        let lock = OwnerLock::new(crate::vm::held::AmberLock::FrameTable);
        let t = FrameTable::new(100, 20).expect("table");
        let g = lock.lock();
        assert_eq!((t.direct(), t.assigned()), (20, 20));
        // Pages below 20 are their own frames: one-page blocks, not resident.
        assert_eq!(t.lookup(7), Some(7));
        assert_eq!(t.state(7), NOT_RESIDENT);
        assert_eq!(t.page_of(7), Some((7, 0, 1)));
        assert_eq!(t.assign(&g, 7, 1).expect("one"), 7);
        // A run is recorded, and then known.
        assert_eq!(t.assign(&g, 10, 3).expect("run"), 10);
        assert_eq!(t.page_of(11), Some((10, 1, 3)));
        assert_eq!(t.assign(&g, 10, 3).expect("again"), 10);
        assert!(matches!(
            t.assign(&g, 11, 2),
            Err(VmError::RunConflict { .. })
        ));
        // Pages beyond come from the bump pointer, which starts at 20.
        assert_eq!(t.assign(&g, 500, 1).expect("lazy"), 20);
        assert_eq!(t.page_of(20), Some((500, 0, 1)));
        // A block crossing the end of the region is forwarded to the table.
        assert_eq!(t.assign(&g, 18, 4).expect("crossing"), 21);
        assert_eq!(t.lookup(18), Some(21));
        assert_eq!(t.state(18), UNASSIGNED);
        assert_eq!(t.page_of(18), None);
        assert_eq!(t.page_of(22), Some((18, 1, 4)));
        assert_eq!(t.assign(&g, 18, 4).expect("crossing again"), 21);
        // Spans record the runs of identity blocks and take no frames.
        t.assign_span(&g, 0, &[(2, 1), (4, 2)]).expect("span");
        assert_eq!(t.page_of(5), Some((4, 1, 2)));
        assert_eq!(t.assigned(), 25);
        // At most half the frames.
        assert_eq!(FrameTable::new(10, 1000).expect("table").direct(), 5);
    }

    #[test]
    fn exhaustion_is_an_error() {
        let lock = OwnerLock::new(crate::vm::held::AmberLock::FrameTable);
        let t = FrameTable::new(4, 0).expect("table");
        let g = lock.lock();
        t.assign(&g, 0, 3).expect("fits");
        assert!(matches!(
            t.assign(&g, 10, 2),
            Err(VmError::Exhausted {
                requested: 2,
                free: 1,
                ..
            })
        ));
        t.assign(&g, 10, 1).expect("last frame");
    }
}
