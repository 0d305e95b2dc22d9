//! The fault handler's work: fetch a block from the store (checksum
//! verified), swizzle every pointer in it (reserving frames for the blocks
//! they point to: Texas's wave-front), install it, fetch its neighbours (the
//! fetch cluster), and keep resident memory within the cache budget by
//! evicting clean blocks.
//!
//! Replacement is first-in first-out over installed blocks, skipping blocks
//! written in the open transaction (a block whose changes were logged early
//! or spilled may go: it faults back with them, see `Spill`). A
//! fault installs its cluster neighbours first and its own block last, so
//! that its own eviction round keeps it. Userspace cannot see the hardware's
//! referenced bits cheaply (`PAGEMAP_SCAN` has no accessed category, and
//! idle-page tracking needs privilege), so a recency policy would have to
//! sample; FIFO costs nothing on the fault path and, for traversals that sweep
//! the database, evicts what LRU would.
//!
//! Runs inside the SIGSEGV handler of the faulting thread (sigsegv backend)
//! or on the handler thread (userfaultfd); either way the faulting thread
//! resumes only when it returns, so evicting a block found unwritten cannot
//! race with a write to it. Concurrent faults of other threads may evict
//! what it installed: the caller fetches again (`FrameSpace::fill`). It takes the store's and its own
//! locks, which Amber never holds while touching frame memory, so the code a
//! fault interrupts can never be holding them.

use super::free_slots::FreeSlots;
use super::recovery_buffer::RecoveryBuffer;
use crate::format::PageNo;
use crate::format::objects::{self, FLAG_FREE};
use crate::format::page::{BlockKind, PageHeader};
use crate::schema::registry::Registry;
use crate::store::Store;
use crate::translate::swizzle::{AddrMap, Direction, convert_block};
use crate::vm::{FaultError, FaultService, FrameNo, FrameSpace, InstallAs, Installer};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Maps addresses through a frame space's frame table.
pub(crate) struct FrameMap<'a> {
    fs: &'a FrameSpace,
    shift: u32,
    /// The last page translated and its frame's address: the pointers of a
    /// page mostly go to a few pages (its neighbours, its own).
    last: std::cell::Cell<(u64, u64)>,
}

impl<'a> FrameMap<'a> {
    pub(crate) fn new(fs: &'a FrameSpace) -> Self {
        FrameMap {
            fs,
            shift: fs.frame_size().trailing_zeros(),
            last: std::cell::Cell::new((u64::MAX, 0)),
        }
    }
}

impl AddrMap for FrameMap<'_> {
    fn to_va(&self, paddr: u64, pages: u32) -> Result<u64, String> {
        let page = paddr >> self.shift;
        let off = paddr & ((1 << self.shift) - 1);
        let (last_page, last_addr) = self.last.get();
        if page == last_page && pages == 1 {
            return Ok(last_addr + off);
        }
        let f = self
            .fs
            .assign(page, pages)
            .map_err(|e| format!("pointer to persistent address {paddr:#x}: {e}"))?;
        let addr = self.fs.frame_addr(f) as u64;
        if pages == 1 {
            self.last.set((page, addr));
        }
        Ok(addr + off)
    }

    fn to_paddr(&self, va: u64) -> Result<u64, String> {
        let f = self
            .fs
            .frame_at(va as usize)
            .ok_or_else(|| format!("pointer {va:#x} does not point into this database"))?;
        let (head, idx, _) = self
            .fs
            .page_of(f)
            .ok_or_else(|| format!("pointer {va:#x} points to an unassigned frame"))?;
        Ok(((head + u64::from(idx)) << self.shift) | (va & ((1 << self.shift) - 1)))
    }
}

/// Counters for benchmarks and tests.
#[derive(Debug, Default)]
pub struct PagerStats {
    /// Blocks fetched by faults (cluster neighbours included).
    pub fetched: AtomicU64,
    /// Faults served.
    pub faults: AtomicU64,
    /// Blocks evicted to stay within the budget.
    pub evicted: AtomicU64,
    /// Frames resident (as counted by the pager).
    pub resident: AtomicU64,
    /// Dirty blocks spilled by transactions larger than the budget.
    pub spilled: AtomicU64,
}

/// The fault service of one open database.
#[derive(Debug)]
pub(crate) struct Pager {
    pub(crate) store: Arc<Store>,
    pub(crate) registry: Arc<Registry>,
    page_size: usize,
    shift: u32,
    /// Pages fetched per fault (1: just the faulting block).
    cluster: u32,
    /// Cache budget in frames; `None`: unlimited.
    budget: Option<u64>,
    /// Installed blocks, oldest first: (first frame, frames).
    fifo: Mutex<VecDeque<(FrameNo, u32)>>,
    /// Free slots found in fetched pages (and freed by committed
    /// transactions), for type-stable reuse.
    free_slots: Mutex<FreeSlots>,
    pub(crate) stats: PagerStats,
    /// Clean copies taken at first write (SIGSEGV backend only).
    pub(crate) rbuf: OnceLock<RecoveryBuffer>,
    /// Slots the open transaction freed: not reusable until it commits, so a
    /// refetch of their page (after a spill) must not record them.
    pub(crate) freed_now: Mutex<std::collections::HashSet<u64>>,
    /// Blocks the open transaction spilled: their uncommitted changes, laid
    /// over the committed image when they fault back in.
    spilled: Mutex<HashMap<PageNo, Spill>>,
    /// Set when the budget could not be met by evicting clean blocks: the
    /// open transaction should spill dirty ones at its next call.
    pub(crate) pressure: AtomicBool,
}

/// The uncommitted changes of a spilled block, in persistent form.
#[derive(Debug, Default)]
pub(crate) struct Spill {
    /// Allocated by the open transaction: the base is the empty block.
    pub(crate) new_block: bool,
    /// (offset, after-image) in the order they were spilled.
    pub(crate) changes: Vec<(usize, Vec<u8>)>,
}

impl Spill {
    /// The block as the open transaction left it: its base (committed or
    /// empty) with the spilled changes laid over.
    pub(crate) fn image(
        &self,
        store: &Store,
        head: PageNo,
        run: u32,
        page_size: usize,
    ) -> crate::error::Result<Vec<u8>> {
        let mut img = if self.new_block {
            let mut v = vec![0u8; run as usize * page_size];
            crate::format::page::format(&mut v, BlockKind::Data, head, run);
            v
        } else {
            store.read_block(head)?
        };
        for (off, data) in &self.changes {
            if let Some(dst) = img.get_mut(*off..off + data.len()) {
                dst.copy_from_slice(data);
            }
        }
        Ok(img)
    }
}

impl Pager {
    pub(crate) fn new(
        store: Arc<Store>,
        registry: Arc<Registry>,
        cluster: u32,
        budget_bytes: Option<u64>,
    ) -> Pager {
        let page_size = store.page_size();
        Pager {
            store,
            registry,
            page_size,
            shift: page_size.trailing_zeros(),
            cluster: cluster.max(1),
            budget: budget_bytes.map(|b| (b / page_size as u64).max(4)),
            fifo: Mutex::new(VecDeque::new()),
            free_slots: Mutex::new(FreeSlots::default()),
            stats: PagerStats::default(),
            rbuf: OnceLock::new(),
            freed_now: Mutex::new(std::collections::HashSet::new()),
            spilled: Mutex::new(HashMap::new()),
            pressure: AtomicBool::new(false),
        }
    }

    fn fifo(&self) -> MutexGuard<'_, VecDeque<(FrameNo, u32)>> {
        self.fifo.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn spills(&self) -> MutexGuard<'_, HashMap<PageNo, Spill>> {
        self.spilled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The budget in frames, if any.
    pub(crate) fn budget(&self) -> Option<u64> {
        self.budget
    }

    pub(crate) fn slots(&self) -> MutexGuard<'_, FreeSlots> {
        self.free_slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads block `head` from the store and swizzles it, ready to install.
    pub(crate) fn fetch(
        &self,
        fs: &FrameSpace,
        head: PageNo,
        run: u32,
        read: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, FaultError> {
        let err = |message: String| FaultError {
            page: head,
            message,
        };
        let mut block = match (self.spills().get(&head), read) {
            (Some(spill), _) => spill.image(&self.store, head, run, self.page_size),
            (None, Some(img)) => Ok(img),
            (None, None) => self.store.read_block(head),
        }
        .map_err(|e| err(e.to_string()))?;
        if PageHeader::read(&block).is_none_or(|h| h.kind != BlockKind::Data as u8) {
            return Err(err("not a data block (a pointer into metadata?)".into()));
        }
        if block.len() != run as usize * self.page_size {
            return Err(err(format!(
                "block is {} pages, but pointers to it say {run}",
                block.len() / self.page_size
            )));
        }
        let types = self.registry.snapshot();
        let map = FrameMap::new(fs);
        convert_block(&mut block, self.page_size, &types, &map, Direction::Swizzle).map_err(err)?;
        self.note_free_slots(head, &block);
        Ok(block)
    }

    /// Records the free slots of a fetched block for reuse.
    fn note_free_slots(&self, head: PageNo, block: &[u8]) {
        let Some(h) = PageHeader::read(block) else {
            return;
        };
        let mut found = Vec::new();
        let freed_now = self.freed_now.lock().unwrap_or_else(|e| e.into_inner());
        for e in objects::walk(block, h.used as usize).flatten() {
            let addr = (head << self.shift) + e.body as u64;
            if e.flags & FLAG_FREE != 0 && !freed_now.contains(&addr) {
                found.push(((e.type_id, e.size as u32), addr));
            }
        }
        drop(freed_now);
        if found.is_empty() {
            return;
        }
        let mut slots = self.slots();
        for (k, addr) in found {
            slots.add(k, addr);
        }
    }

    /// Records an installed block for replacement and enforces the budget.
    pub(crate) fn installed(&self, fs: &FrameSpace, frame: FrameNo, frames: u32) {
        self.fifo().push_back((frame, frames));
        self.stats
            .resident
            .fetch_add(u64::from(frames), Ordering::Relaxed);
        self.enforce_budget(fs, frame);
    }

    /// Evicts the oldest clean blocks until resident frames fit the budget
    /// (never `keep`, the block just installed).
    fn enforce_budget(&self, fs: &FrameSpace, keep: FrameNo) {
        let Some(budget) = self.budget else { return };
        let mut tries = self.fifo().len();
        while self.stats.resident.load(Ordering::Relaxed) > budget && tries > 0 {
            tries -= 1;
            let Some((f, n)) = self.fifo().pop_front() else {
                break;
            };
            if f == keep {
                self.fifo().push_back((f, n));
                continue;
            }
            match fs.evict_clean(f, n) {
                Ok(true) => {
                    self.stats
                        .resident
                        .fetch_sub(u64::from(n), Ordering::Relaxed);
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                }
                // Written in the open transaction (or already gone): keep it
                // in line, it becomes evictable after the commit.
                Ok(false) if fs.is_resident(f) => self.fifo().push_back((f, n)),
                Ok(false) | Err(_) => {
                    self.stats
                        .resident
                        .fetch_sub(u64::from(n), Ordering::Relaxed);
                }
            }
        }
        if self.stats.resident.load(Ordering::Relaxed) > budget {
            self.pressure.store(true, Ordering::Release);
        }
    }

    /// Forgets a block that was evicted by someone else (an abort).
    pub(crate) fn forget(&self, frame: FrameNo) {
        let mut q = self.fifo();
        if let Some(i) = q.iter().position(|&(f, _)| f == frame)
            && let Some((_, n)) = q.remove(i)
        {
            self.stats
                .resident
                .fetch_sub(u64::from(n), Ordering::Relaxed);
        }
    }

    /// Fetches and installs the block at `head` (of `run` pages) if it is not
    /// resident; used for the faulting block and its cluster neighbours.
    /// `read`: the block's committed image when the caller read it already
    /// (with its cluster).
    fn bring_in(
        &self,
        inst: &mut Installer<'_>,
        head: PageNo,
        run: u32,
        read: Option<Vec<u8>>,
    ) -> Result<(), FaultError> {
        let fs = inst.space();
        if fs.lookup(head).is_some_and(|f| fs.is_resident(f)) {
            return Ok(());
        }
        let block = self.fetch(fs, head, run, read)?;
        let frame = fs.assign(head, run).map_err(|e| FaultError {
            page: head,
            message: e.to_string(),
        })?;
        let n = inst
            .install(frame, &block, InstallAs::Clean)
            .map_err(|e| FaultError {
                page: head,
                message: format!("install: {e}"),
            })?;
        self.stats.fetched.fetch_add(1, Ordering::Relaxed);
        if n > 0 {
            self.installed(fs, frame, run);
        }
        Ok(())
    }
}

impl FaultService for Pager {
    fn missing(&self, frame: FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError> {
        self.stats.faults.fetch_add(1, Ordering::Relaxed);
        let fs = inst.space();
        let (head, _, run) = fs.page_of(frame).ok_or(FaultError {
            page: u64::MAX,
            message: format!("frame {frame} has no page"),
        })?;
        // The fetch cluster: the blocks that start in the pages around the
        // faulting one (half before, half after: objects allocated together
        // sit on neighbouring pages, and a traversal moves both ways through
        // them), fetched now — frames reserved for them if nothing points to
        // them yet — so that the accesses that touch them next do not fault.
        // They go in before the faulting block, whose own installation then
        // keeps it from eviction: a neighbour's would evict it once every
        // older block is written (unevictable), and the fault would find its
        // page gone.
        let mut own = None;
        if self.cluster > 1 {
            let before = u64::from(self.cluster - 1) / 2;
            let from = head
                .saturating_sub(before)
                .max(self.store.first_data_page());
            for (h, n, img) in self.store.read_blocks(from, u64::from(self.cluster)) {
                if h == head {
                    own = img.ok();
                } else if let Ok(img) = img {
                    // A neighbour that cannot be read (or is not a data
                    // block) is left for its own fault to report.
                    let _ = self.bring_in(inst, h, n, Some(img));
                }
            }
        }
        self.bring_in(inst, head, run, own)
    }

    fn first_write(&self, frame: FrameNo, clean: &[u8]) {
        if let Some(b) = self.rbuf.get() {
            b.save(frame, clean);
        }
    }
}
