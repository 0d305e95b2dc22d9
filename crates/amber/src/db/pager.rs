//! The fault service's state: the store it fetches from, the cache budget
//! and the replacement queue, the dead space of transactions that did not
//! commit, and the blocks the open transaction spilled. What a fault does is in `fetch.rs`.
//!
//! Replacement is first-in first-out over installed blocks, skipping blocks
//! written in the open transaction (a block whose changes were logged early
//! or spilled may go: it faults back with them, see `Spill`). A fault makes
//! room for its cluster before installing it, so the blocks it installs are
//! never its own victims. Userspace cannot see the hardware's referenced bits
//! cheaply (`PAGEMAP_SCAN` has no accessed category, and idle-page tracking
//! needs privilege), so a recency policy would have to sample; FIFO costs
//! nothing on the fault path and, for traversals that sweep the database,
//! evicts what LRU would.
//!
//! Faults are served by the frame space's service thread (SIGSEGV backend)
//! or handler thread (userfaultfd), or in a thread calling `try_get`, while
//! the program's other threads run: a transaction's threads may be writing
//! the very blocks a fault evicts to make room. `FrameSpace::evict_clean`
//! makes "found unwritten, dropped" one step as far as any writer can tell
//! (see there); a block written meanwhile stays. Concurrent faults may evict
//! what one installed: the caller fetches again (`FrameSpace::fill`). The
//! service takes the store's and the pager's locks, which Amber never holds
//! while touching frame memory; every accessor counts them as held
//! (`vm::held`), so a fault taken while holding one is refused with a
//! message naming it instead of deadlocking.

use super::dead::Dead;
use super::readahead::Readahead;
use super::recovery_buffer::RecoveryBuffer;
use crate::format::PageNo;
use crate::format::page::BlockKind;
use crate::schema::registry::Registry;
use crate::source::Source;
use crate::store::pending::Patch;
use crate::vm::{AmberLock, FrameNo, FrameSpace, Held, held};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

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
    /// Switches between page protection and a software barrier.
    pub detection_switches: AtomicU64,
}

/// The fault service of one open database.
#[derive(Debug)]
pub(crate) struct Pager {
    pub(crate) source: Arc<dyn Source>,
    pub(crate) registry: Arc<Registry>,
    pub(super) page_size: usize,
    /// The fetch window: a fault fetches the blocks that start in the
    /// aligned window of this many pages around the faulting one (less under
    /// a full cache budget, see `fetch_window`), and frames are assigned to
    /// such a window at a time (1: one block).
    pub(crate) readahead: Readahead,
    /// What the fault path keeps between faults.
    pub(crate) scratch: Mutex<Scratch>,
    /// Cache budget in frames; `None`: unlimited.
    budget: Option<u64>,
    /// Installed blocks in line for replacement, and those set aside.
    fifo: Mutex<Line>,
    /// Space given out by transactions that did not commit (`dead.rs`).
    pub(crate) dead: Dead,
    pub(crate) stats: PagerStats,
    /// Clean copies taken at first write (SIGSEGV backend only).
    pub(crate) rbuf: OnceLock<RecoveryBuffer>,
    /// Blocks the open transaction spilled: their uncommitted changes, laid
    /// over the committed image when they fault back in.
    spilled: Mutex<HashMap<PageNo, Spill>>,
    /// Set when the budget could not be met by evicting clean blocks: the
    /// open transaction should spill dirty ones at its next call.
    pub(crate) pressure: AtomicBool,
}

/// The installed blocks, (first frame, frames).
#[derive(Debug, Default)]
struct Line {
    /// In line for replacement, oldest first.
    queue: VecDeque<(FrameNo, u32)>,
    /// Found written in the open transaction, which cannot be evicted
    /// until it ends: set aside rather than put back in line, so that each
    /// fault of a transaction larger than the budget does not walk past
    /// every block it wrote (`make_room`). Back in line when it ends.
    held: Vec<(FrameNo, u32)>,
}

/// The fault path's large working memory, kept between faults so that a
/// fault does not allocate it again: the buffer a cluster is read into and
/// the translation cache of `FrameMap` (the small per-block lists a fault
/// builds are still allocated). A fault that finds it in use (another thread's, with
/// SIGSEGV) works with an empty one.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) buf: Vec<u8>,
    pub(crate) cache: super::fetch::Translations,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("buf", &self.buf.len())
            .field("cache", &self.cache.len())
            .finish()
    }
}

/// The uncommitted changes of a spilled block, in persistent form.
///
/// Kept as the store keeps a block's pending changes (`Patch`: the changed
/// bytes in a block-sized buffer with a bitmap of those written), so that a
/// block spilled again and again holds at most its own size however many
/// times it changed: a transaction that toggles index entries under a full
/// budget respills the same leaves hundreds of thousands of times.
#[derive(Debug)]
pub(crate) struct Spill {
    /// Allocated by the open transaction: the base is the empty block.
    pub(crate) new_block: bool,
    /// The changed bytes, newest laid over oldest.
    changes: Patch,
}

impl Spill {
    pub(crate) fn new(new_block: bool, run: u32) -> Spill {
        Spill {
            new_block,
            changes: Patch::over_file(run),
        }
    }

    /// Records `bytes` at block offset `off` (over what was recorded
    /// before); `block_len` is the block's size in bytes.
    pub(crate) fn record(&mut self, off: usize, bytes: &[u8], block_len: usize) {
        if off + bytes.len() <= block_len {
            self.changes.write(off as u32, bytes, 0, block_len);
        }
    }

    /// The block as the open transaction left it: its base (committed or
    /// empty) with the spilled changes laid over.
    pub(crate) fn image(
        &self,
        source: &dyn Source,
        head: PageNo,
        run: u32,
        page_size: usize,
    ) -> crate::error::Result<Vec<u8>> {
        let mut img = if self.new_block {
            let mut v = vec![0u8; run as usize * page_size];
            crate::format::page::format(&mut v, BlockKind::Data, head, run);
            v
        } else {
            source.read_block(head)?
        };
        if img.len() == self.changes.run_len as usize * page_size {
            self.changes.apply(&mut img);
        }
        Ok(img)
    }
}

impl Pager {
    pub(crate) fn new(
        source: Arc<dyn Source>,
        registry: Arc<Registry>,
        readahead: Readahead,
        budget_bytes: Option<u64>,
    ) -> Pager {
        let page_size = source.page_size();
        let budget = budget_bytes.map(|b| (b / page_size as u64).max(4));
        Pager {
            source,
            registry,
            page_size,
            readahead,
            scratch: Mutex::new(Scratch {
                buf: Vec::new(),
                cache: super::fetch::translations(),
            }),
            budget,
            fifo: Mutex::new(Line::default()),
            dead: Dead::default(),
            stats: PagerStats::default(),
            rbuf: OnceLock::new(),
            spilled: Mutex::new(HashMap::new()),
            pressure: AtomicBool::new(false),
        }
    }

    fn fifo(&self) -> Held<MutexGuard<'_, Line>> {
        held(
            AmberLock::PagerQueue,
            self.fifo.lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    pub(crate) fn spills(&self) -> Held<MutexGuard<'_, HashMap<PageNo, Spill>>> {
        held(
            AmberLock::PagerSpills,
            self.spilled.lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// The budget in frames, if any.
    pub(crate) fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// Records a block installed outside a fault (a new block) and enforces
    /// the budget.
    pub(crate) fn installed(&self, fs: &FrameSpace, frame: FrameNo, frames: u32) {
        self.record(frame, frames);
        self.make_room(fs, 0);
    }

    /// Puts an installed block in line for replacement.
    pub(crate) fn record(&self, frame: FrameNo, frames: u32) {
        self.fifo().queue.push_back((frame, frames));
        self.stats
            .resident
            .fetch_add(u64::from(frames), Ordering::Relaxed);
    }

    /// Evicts the oldest clean blocks until `incoming` more frames fit the
    /// budget. A fault makes room before it installs its cluster, so that
    /// resident memory never exceeds the budget (except by blocks written in
    /// the open transaction, which cannot be evicted: then `pressure` asks the
    /// transaction to spill some).
    ///
    /// Victims are evicted in batches (`FrameSpace::evict_clean_batch`: one
    /// protection change and one written-page scan per batch on
    /// userfaultfd), each of what is needed plus a thirty-second of the
    /// budget, so that the faults after it find room without evicting.
    pub(crate) fn make_room(&self, fs: &FrameSpace, incoming: u64) {
        let Some(budget) = self.budget else { return };
        let target = budget.saturating_sub(incoming);
        let resident = || self.stats.resident.load(Ordering::Relaxed);
        let slack = self.slack();
        let mut tries = self.fifo().queue.len();
        while resident() > target && tries > 0 {
            let want = resident() - target + slack;
            let mut victims = Vec::new();
            {
                let mut line = self.fifo();
                let mut frames = 0;
                while frames < want && tries > 0 {
                    let Some(v) = line.queue.pop_front() else {
                        break;
                    };
                    tries -= 1;
                    frames += u64::from(v.1);
                    victims.push(v);
                }
            }
            if victims.is_empty() {
                break;
            }
            let mut evicted = vec![false; victims.len()];
            let result = fs.evict_clean_batch(&victims, &mut evicted);
            let mut line = self.fifo();
            let mut keep = Vec::new();
            for (&(f, n), &e) in victims.iter().zip(&evicted) {
                if e || !fs.is_resident(f) {
                    // Evicted (or already gone).
                    self.stats
                        .resident
                        .fetch_sub(u64::from(n), Ordering::Relaxed);
                    if e {
                        self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                    }
                } else if result.is_ok() {
                    // Written in the open transaction: evictable after it.
                    line.held.push((f, n));
                } else {
                    keep.push((f, n));
                }
            }
            // Could not be dropped (an mprotect refused for want of map
            // entries): still resident, and so would the next be.
            if let Err(e) = result {
                log::warn!("cannot evict {} blocks: {e}", keep.len());
                for v in keep.into_iter().rev() {
                    line.queue.push_front(v);
                }
                break;
            }
        }
        if resident() > target {
            self.pressure.store(true, Ordering::Release);
        }
    }

    /// Frames a batch of evictions frees beyond what the fault needs: a
    /// thirty-second of the budget (none without one).
    pub(crate) fn slack(&self) -> u64 {
        self.budget.map_or(0, |b| (b / 32).max(1))
    }

    /// Puts the blocks set aside as written back in line: the transaction
    /// that wrote them has ended (or is starting).
    pub(crate) fn release_held(&self) {
        let mut line = self.fifo();
        let held = std::mem::take(&mut line.held);
        line.queue.extend(held);
    }

    /// Puts the block at `frame` back in line if it was set aside as
    /// written: its changes were logged early and it was write-protected
    /// again, so it may be evicted (it faults back with them).
    pub(crate) fn requeue(&self, frame: FrameNo) {
        let mut line = self.fifo();
        if let Some(i) = line.held.iter().position(|&(f, _)| f == frame) {
            let v = line.held.swap_remove(i);
            line.queue.push_back(v);
        }
    }

    /// The installed blocks, (first frame, frames), oldest first.
    pub(crate) fn resident_blocks(&self) -> Vec<(FrameNo, u32)> {
        let line = self.fifo();
        line.queue.iter().chain(&line.held).copied().collect()
    }

    /// Forgets a block that was evicted by someone else (an abort).
    pub(crate) fn forget(&self, frame: FrameNo) {
        let mut line = self.fifo();
        let n = match line.held.iter().position(|&(f, _)| f == frame) {
            Some(i) => Some(line.held.swap_remove(i).1),
            None => (line.queue.iter().position(|&(f, _)| f == frame))
                .and_then(|i| line.queue.remove(i))
                .map(|(_, n)| n),
        };
        if let Some(n) = n {
            self.stats
                .resident
                .fetch_sub(u64::from(n), Ordering::Relaxed);
        }
    }
}
