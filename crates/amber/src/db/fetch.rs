//! The fault path: fetch the cluster around a faulting block, check and
//! swizzle it, and install it.
//!
//! A fault reads the blocks that start in the aligned window holding the
//! faulting block (Texas's data-fetching granularity; its size follows the
//! faults, see `readahead.rs`) with one `pread` into a buffer kept between
//! faults, verifies each block's checksum and lays the changes committed
//! since the last checkpoint over it, swizzles it in place (every pointer
//! looked up in the frame table, frames reserved for the pages it reaches:
//! Texas's wave-front), makes room under the cache budget, and installs what
//! is not resident yet.
//!
//! Frames are assigned a window at a time, laid out as the pages are
//! (`FrameSpace::assign_span`), so that the blocks of a window sit on
//! consecutive frames and a cluster is installed with one `UFFDIO_COPY`, or
//! with one write into the memfd and one `mprotect` (SIGSEGV), instead of one
//! call per block: on the 20,000-part OO1 database a per-block `mprotect` was
//! a fifth of the SIGSEGV backend's cold fault time. The windows are aligned
//! rather than centred on the faulting page so that neighbouring faults fetch
//! disjoint windows, and a window is the unit of both fetching and layout.
//!
//! A neighbour that cannot be fetched (damaged, or spilled by the open
//! transaction, whose changes must be laid over it) is left for its own fault
//! to fetch or report; only the faulting block's errors fail the fault.

use super::pager::{Pager, Scratch};
use crate::error::Error;
use crate::format::PageNo;
use crate::format::home::Home;
use crate::format::page::{BlockKind, PageHeader};
use crate::schema::registry::Snapshot;
use crate::store::ClusterBlock;
use crate::translate::swizzle::{AddrMap, Direction, convert_block};
use crate::vm::{
    AmberLock, FaultError, FaultKind, FaultService, FrameNo, FrameSpace, InstallAs,
    Installer, held,
};
use std::cell::Cell;
use std::sync::TryLockError;
use std::sync::atomic::Ordering;

/// Entries of the fault path's translation cache (a power of two): 4 MiB
/// of one-page blocks, all of OO1's 20,000-part database.
pub(super) const CACHE: usize = 1024;

/// A translation cache: `(page, frame address)`, direct-mapped by page.
pub(super) type Translations = Box<[Cell<(u64, u64)>]>;

/// An empty translation cache of [`CACHE`] entries.
pub(super) fn translations() -> Translations {
    (0..CACHE).map(|_| Cell::new((u64::MAX, 0))).collect()
}

/// Maps addresses through a frame space's frame table.
pub(crate) struct FrameMap<'a> {
    fs: &'a FrameSpace,
    /// How the database stores swizzled pointers.
    home: Home,
    shift: u32,
    /// Pages below this are in the identity region: their frame's address
    /// is `base` plus the persistent address.
    direct: u64,
    base: u64,
    /// On the fault path: pages without a frame get one with the rest of
    /// their fetch window. `None`: one block at a time.
    spans: Option<&'a Pager>,
    /// Translations of pointers to one-page blocks, direct-mapped by page
    /// number (empty outside the fault path). Frames are never reassigned,
    /// so an entry stays true for the life of the frame space: the fault
    /// path keeps the cache between faults, and a pointer mostly skips the
    /// frame table's hash lookup (with a cache built afresh per fault, 9% of
    /// OO1's pointers missed, and translating took half of swizzling).
    cache: Translations,
}

impl<'a> FrameMap<'a> {
    /// The map of frame space `fs` holding a database of home `home`.
    pub(crate) fn new(fs: &'a FrameSpace, home: Home) -> Self {
        FrameMap {
            fs,
            home,
            shift: fs.frame_size().trailing_zeros(),
            direct: u64::from(fs.direct_frames()),
            base: fs.base() as u64,
            spans: None,
            cache: Box::default(),
        }
    }

    /// The fault path's map, with the pager's cache (given back by
    /// [`into_cache`](Self::into_cache)).
    fn with_spans(fs: &'a FrameSpace, pager: &'a Pager, cache: Translations) -> Self {
        FrameMap {
            spans: Some(pager),
            cache,
            ..FrameMap::new(fs, pager.source.home())
        }
    }

    fn into_cache(self) -> Translations {
        self.cache
    }

    #[inline(always)]
    fn slot(&self, page: u64) -> Option<&Cell<(u64, u64)>> {
        // The length is 0 or a power of two.
        let n = self.cache.len();
        (n != 0).then(|| &self.cache[page as usize & (n - 1)])
    }
}

impl FrameMap<'_> {
    /// `to_va` past the cache: the frame table, reserving frames if needed.
    #[inline(never)]
    fn lookup(&self, paddr: u64, pages: u32) -> Result<u64, String> {
        let page = paddr >> self.shift;
        let off = paddr & ((1 << self.shift) - 1);
        let f = match self.fs.lookup(page) {
            Some(f) if pages == 1 => f,
            found => {
                if let (None, Some(pager)) = (found, self.spans) {
                    pager.assign_window(self.fs, page);
                }
                self.fs
                    .assign(page, pages)
                    .map_err(|e| format!("pointer to persistent address {paddr:#x}: {e}"))?
            }
        };
        let addr = self.fs.frame_addr(f) as u64;
        if let Some(slot) = self.slot(page).filter(|_| pages == 1) {
            slot.set((page, addr));
        }
        Ok(addr + off)
    }
}

impl AddrMap for FrameMap<'_> {
    fn home(&self) -> Home {
        self.home
    }

    /// Inlined into the swizzling loop: a pointer to a one-page block in
    /// the identity region is one add, most others hit the cache. (A block
    /// of several pages takes the long way, which records its run.)
    #[inline(always)]
    fn to_va(&self, paddr: u64, pages: u32) -> Result<u64, String> {
        let page = paddr >> self.shift;
        if page < self.direct && pages == 1 {
            return Ok(self.base + paddr);
        }
        if let Some(slot) = self.slot(page) {
            let (cached, addr) = slot.get();
            if cached == page && pages == 1 {
                return Ok(addr + (paddr & ((1 << self.shift) - 1)));
            }
        }
        self.lookup(paddr, pages)
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
        // The offset from the frame's base, never `va` masked: that would
        // assume the reservation aligned to the page size.
        let off = va - self.fs.frame_addr(f) as u64;
        Ok(((head + u64::from(idx)) << self.shift) + off)
    }
}

/// The kind of fault error a store error becomes.
pub(crate) fn fault_kind(e: &Error) -> FaultKind {
    match e {
        Error::Corrupt { .. } | Error::NotADatabase { .. } => FaultKind::Corrupt,
        // A server that refused the read, or broke the connection: the page
        // could not be read, as from a file that failed.
        Error::Io { .. } | Error::Poisoned { .. } | Error::Remote { .. } => FaultKind::Io,
        Error::Dangling { .. } => FaultKind::Dangling,
        Error::Vm { .. } => FaultKind::Vm,
        _ => FaultKind::Internal,
    }
}

/// A block checked and swizzled in a fetch buffer, ready to install.
#[derive(Clone, Copy)]
struct Ready {
    head: PageNo,
    frame: FrameNo,
    pages: u32,
    /// Where its image starts in the buffer.
    at: usize,
}

impl Pager {
    /// Assigns frames to the blocks of the current fetch window holding
    /// `page`, laid out as in the page file. Best effort: when it cannot (the
    /// reservation is full), frames are assigned a block at a time, which
    /// reports why. The window is the one faults fetch now: while they fetch
    /// a page each (random lookups in a large database), reserving the
    /// frames of a pointer's whole neighbourhood would cost more than the
    /// fetches (swizzling the index of OO1's 200,000 parts reaches 150
    /// neighbourhoods of 64 pages: 1.2 ms of frame-table inserts).
    pub(super) fn assign_window(&self, fs: &FrameSpace, page: PageNo) {
        let window = u64::from(self.readahead.current());
        if window <= 1 {
            return;
        }
        let lo = page - page % window;
        if let Ok(blocks) = self.source.blocks_starting_in(lo, window) {
            let _ = fs.assign_span(lo, &blocks);
        }
    }

    /// Pages a fault at `page` fetches: the window of the readahead policy,
    /// or under a cache budget no more than the room left (a power of two,
    /// so that the window lies inside the policy's). Prefetching never
    /// evicts: a neighbour fetched on speculation is worth less than a block
    /// the program has touched, and with a full cache every cluster would
    /// push out as many blocks as it brings (random OO1 lookups under a
    /// 1 MiB budget took 14 times longer with 64 pages per fault than with
    /// one).
    fn fetch_window(&self, page: PageNo) -> u64 {
        let window = u64::from(self.readahead.on_fault(page));
        let Some(budget) = self.budget() else {
            return window;
        };
        // The room eviction leaves beyond a fault's need (`slack`) is for
        // the faults after it, not for neighbours: fetched into it, they
        // pushed a working set that fits the budget out of it (OO1's hot
        // traversal under 9 MiB: 0.3 → 37 ms).
        let fits = budget
            .saturating_sub(self.stats.resident.load(Ordering::Relaxed) + self.slack())
            .max(1);
        if fits >= window {
            window
        } else {
            1 << (63 - fits.leading_zeros())
        }
    }

    /// Checks a fetched block (a data block of the `run` pages its frames
    /// have) and swizzles it in place.
    pub(super) fn prepare(
        &self,
        run: u32,
        img: &mut [u8],
        map: &FrameMap<'_>,
        types: &Snapshot,
    ) -> Result<(), String> {
        self.check_shape(run, img)?;
        convert_block(img, self.page_size, types, map, Direction::Swizzle)
    }

    /// Whether `img` can be the image of a data block of `run` pages, as
    /// its frames have.
    pub(super) fn check_shape(&self, run: u32, img: &[u8]) -> Result<(), String> {
        if PageHeader::read(img).is_none_or(|h| h.kind != BlockKind::Data as u8) {
            return Err("not a data block (a pointer into metadata?)".into());
        }
        if img.len() != run as usize * self.page_size {
            return Err(format!(
                "block is {} pages, but pointers to it say {run}",
                img.len() / self.page_size
            ));
        }
        Ok(())
    }

    /// Makes room for the blocks `ready` (in `buf`) and installs them,
    /// consecutive frames with one call each; records the ones this call
    /// installed for replacement, `own` last (the youngest, evicted last).
    fn install_ready(
        &self,
        inst: &mut Installer<'_>,
        buf: &[u8],
        ready: &[Ready],
        own: PageNo,
    ) -> Result<(), FaultError> {
        let fs = inst.space();
        let ps = self.page_size;
        self.make_room(fs, ready.iter().map(|r| u64::from(r.pages)).sum());
        let mut mine: Vec<(FrameNo, u32)> = Vec::new();
        let mut i = 0;
        while i < ready.len() {
            let mut j = i + 1;
            while j < ready.len() && {
                let (a, b) = (ready[j - 1], ready[j]);
                b.frame == a.frame + a.pages && b.at == a.at + a.pages as usize * ps
            } {
                j += 1;
            }
            let (first, last) = (ready[i], ready[j - 1]);
            let data = &buf[first.at..last.at + last.pages as usize * ps];
            let done = inst.install_span(first.frame, data, InstallAs::Clean, &mut |f, n| {
                mine.push((f, n));
            });
            if let Err(e) = done
                && ready[i..j].iter().any(|r| r.head == own)
            {
                return Err(FaultError::new(own, FaultKind::Vm, format!("install: {e}")));
            }
            i = j;
        }
        let ours = |r: &&Ready| mine.iter().any(|&(f, n)| r.frame >= f && r.frame < f + n);
        let installed = ready.iter().filter(ours);
        for r in installed.clone().filter(|r| r.head != own) {
            self.record(r.frame, r.pages);
        }
        for r in installed.filter(|r| r.head == own) {
            self.record(r.frame, r.pages);
        }
        self.stats
            .fetched
            .fetch_add(ready.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Checks and swizzles the blocks of a cluster read into `buf` that are
    /// not resident; `own`: the faulting block and its frame, whose errors
    /// fail the fault (a neighbour that cannot be fetched is left for its own
    /// fault, as is one the open transaction spilled).
    fn prepare_cluster(
        &self,
        fs: &FrameSpace,
        blocks: &[ClusterBlock],
        (head, frame): (PageNo, FrameNo),
        buf: &mut [u8],
        map: &FrameMap<'_>,
    ) -> Result<Vec<Ready>, FaultError> {
        let types = self.registry.snapshot();
        let mut ready = Vec::with_capacity(blocks.len());
        for b in blocks {
            let own = b.head == head;
            let f = if own { Some(frame) } else { fs.lookup(b.head) };
            let Some(f) = f.filter(|&f| !fs.is_resident(f)) else {
                continue;
            };
            if !own && self.spills().contains_key(&b.head) {
                continue;
            }
            let run = fs.page_of(f).map_or(b.pages, |(_, _, n)| n);
            // A block whose image could not be read has none in `buf`.
            let checked = match &b.image {
                Ok(()) => {
                    let img = &mut buf[b.at..b.at + b.pages as usize * self.page_size];
                    self.prepare(run, img, map, &types)
                        .map_err(|m| (FaultKind::Corrupt, m))
                }
                Err(e) => Err((fault_kind(e), e.to_string())),
            };
            match checked {
                Ok(()) => ready.push(Ready {
                    head: b.head,
                    frame: f,
                    pages: b.pages,
                    at: b.at,
                }),
                Err((kind, message)) if own => {
                    return Err(FaultError::new(head, kind, message));
                }
                Err(_) => {}
            }
        }
        Ok(ready)
    }

    /// Fetches a block the open transaction spilled: its base image with the
    /// spilled changes laid over.
    fn fetch_spilled(
        &self,
        inst: &mut Installer<'_>,
        head: PageNo,
        frame: FrameNo,
        run: u32,
    ) -> Result<(), FaultError> {
        let img = self
            .spills()
            .get(&head)
            .map(|s| s.image(&*self.source, head, run, self.page_size));
        let mut img = match img {
            Some(r) => r.map_err(|e| FaultError::new(head, fault_kind(&e), e.to_string()))?,
            None => {
                return Err(FaultError::new(
                    head,
                    FaultKind::Internal,
                    "its spilled changes are gone",
                ));
            }
        };
        let fs = inst.space();
        let map = FrameMap::with_spans(fs, self, Box::default());
        self.prepare(run, &mut img, &map, &self.registry.snapshot())
            .map_err(|m| FaultError::new(head, FaultKind::Corrupt, m))?;
        self.install_block(inst, head, frame, run, &img)
    }

    /// "Fetches" a block of a transaction that did not commit, touched
    /// through a stale pointer: zeros, whose object headers say no object
    /// is there, so the dereference that faulted refuses the pointer
    /// (`dead.rs`).
    fn fetch_dead(
        &self,
        inst: &mut Installer<'_>,
        head: PageNo,
        frame: FrameNo,
        run: u32,
    ) -> Result<(), FaultError> {
        let zeros = vec![0u8; run as usize * self.page_size];
        self.install_block(inst, head, frame, run, &zeros)
    }

    /// Installs the image `img` of the one block `head` at `frame`.
    fn install_block(
        &self,
        inst: &mut Installer<'_>,
        head: PageNo,
        frame: FrameNo,
        run: u32,
        img: &[u8],
    ) -> Result<(), FaultError> {
        let ready = [Ready {
            head,
            frame,
            pages: run,
            at: 0,
        }];
        self.install_ready(inst, img, &ready, head)
    }
}

impl FaultService for Pager {
    fn missing(&self, frame: FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError> {
        self.stats.faults.fetch_add(1, Ordering::Relaxed);
        let fs = inst.space();
        let (head, idx, run) = fs.page_of(frame).ok_or_else(|| {
            FaultError::new(
                u64::MAX,
                FaultKind::Dangling,
                format!("frame {frame} has no page"),
            )
        })?;
        let frame = frame - idx;
        if fs.backend().is_mapped() {
            return self.check_mapped(fs, head, frame, run);
        }
        if self.spills().contains_key(&head) {
            return self.fetch_spilled(inst, head, frame, run);
        }
        if self.dead.block(head).is_some() {
            return self.fetch_dead(inst, head, frame, run);
        }
        let window = self.fetch_window(head);
        let lo = head - head % window;
        self.with_scratch(|scratch| self.fetch_cluster(inst, (head, frame), lo, window, scratch))
    }

    fn first_write(&self, frame: FrameNo, clean: &[u8]) {
        if let Some(b) = self.rbuf.get() {
            b.save(frame, clean);
        }
    }
}

impl Pager {
    /// Runs `f` with the scratch buffer kept between faults, or a fresh one
    /// while another thread's fault is using it (SIGSEGV backend).
    pub(super) fn with_scratch<T>(&self, f: impl FnOnce(&mut Scratch) -> T) -> T {
        let mut spare = Scratch::default();
        let mut kept = match self.scratch.try_lock() {
            Ok(g) => Some(held(AmberLock::PagerScratch, g)),
            Err(TryLockError::Poisoned(p)) => Some(held(AmberLock::PagerScratch, p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        };
        let scratch: &mut Scratch = match kept.as_mut() {
            Some(g) => g,
            None => &mut spare,
        };
        let out = f(scratch);
        // A block far larger than a cluster (a long vector) is not worth
        // keeping the memory for.
        if scratch.buf.len() > 4 * self.readahead.max() as usize * self.page_size {
            scratch.buf = Vec::new();
        }
        out
    }

    /// Fetches the blocks of the cluster `lo..lo + window` holding block
    /// `head` (at `frame`) and installs the ones not resident.
    fn fetch_cluster(
        &self,
        inst: &mut Installer<'_>,
        (head, frame): (PageNo, FrameNo),
        lo: PageNo,
        window: u64,
        scratch: &mut Scratch,
    ) -> Result<(), FaultError> {
        let fs = inst.space();
        let blocks = self
            .source
            .read_cluster(lo, window, &mut scratch.buf)
            .map_err(|e| FaultError::new(head, fault_kind(&e), e.to_string()))?;
        if !blocks.iter().any(|b| b.head == head) {
            return Err(FaultError::new(
                head,
                FaultKind::Dangling,
                format!("page {head} does not start an allocated block"),
            ));
        }
        // Neighbours nothing points to yet get frames now, laid out as their
        // pages (best effort, as in `assign_window`), and the runs of blocks
        // of several pages in the identity region are recorded.
        let unmapped = |b: &ClusterBlock| match fs.lookup(b.head) {
            None => true,
            Some(f) => b.pages > 1 && fs.page_of(f) != Some((b.head, 0, b.pages)),
        };
        if blocks.iter().any(unmapped) {
            let heads: Vec<(PageNo, u32)> = blocks.iter().map(|b| (b.head, b.pages)).collect();
            let _ = fs.assign_span(lo, &heads);
        }
        let map = FrameMap::with_spans(fs, self, std::mem::take(&mut scratch.cache));
        let ready = self.prepare_cluster(fs, &blocks, (head, frame), &mut scratch.buf, &map);
        scratch.cache = map.into_cache();
        self.install_ready(inst, &scratch.buf, &ready?, head)
    }
}
