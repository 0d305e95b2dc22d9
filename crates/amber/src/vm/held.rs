//! Which Amber locks a thread holds, so that touching frame memory while
//! holding one is a clear error instead of a deadlock.
//!
//! A fault is served by code that takes locks: the store's state, the
//! pager's queues, the schema registry, the frame table, and so on (the
//! [`AmberLock`] kinds). A thread that touched a non-resident frame while
//! holding one of them would wait for a service that waits for that lock:
//! a deadlock, with the SIGSEGV backend's service thread, with the
//! userfaultfd handler thread, or (`ensure_resident`) in the thread itself.
//! Amber's rule is that none of them is ever held while frame memory can
//! fault. Rather than rely on it, every such lock is taken through [`held`]
//! (or, for the locks the SIGSEGV handler itself takes, [`held_local`]),
//! which counts it in a thread-local record, and each way into the fault
//! path checks the faulting thread's record first:
//!
//! - the SIGSEGV handler runs on the faulting thread and reads its record
//!   ([`local`]): a fault with a lock held aborts with a message naming it;
//! - `ensure_resident` and the locked copies run the service in the calling
//!   thread and return an error naming it;
//! - the userfaultfd handler thread is another thread: the kernel names the
//!   faulting thread in the fault message (`UFFD_FEATURE_THREAD_ID`), and
//!   every thread's record is published in a process-wide table keyed by
//!   thread id ([`of_thread`]).
//!
//! The thread-local part is const-initialised and has no destructor, so the
//! signal handler may read and update it. The published part is claimed the
//! first time a thread takes a lock through [`held`] (never from a signal
//! handler: those locks are not taken there) and released when the thread
//! exits. A process with more than [`TABLE`] threads alive that take Amber
//! locks publishes only the first ones; the others are still checked by
//! the SIGSEGV handler and `ensure_resident`.

use std::cell::Cell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};

/// The locks the fault path takes, which no thread may hold while it
/// touches frame memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AmberLock {
    /// `Store::lock`: the store's committed state.
    StoreState,
    /// The log writer's state (`wal/writer.rs`).
    LogWriter,
    /// The schema registry (`schema/registry.rs`).
    Registry,
    /// The fault path's scratch buffers (`db/fetch.rs`).
    PagerScratch,
    /// The pager's replacement queue (`db/pager.rs`).
    PagerQueue,
    /// The pager's table of spilled blocks.
    PagerSpills,
    /// The pager's free slots.
    PagerSlots,
    /// QuickStore's recovery buffer (`db/recovery_buffer.rs`).
    RecoveryBuffer,
    /// A frame space's own lock (`vm/lock.rs`).
    FrameTable,
}

const KINDS: usize = 9;

impl AmberLock {
    const ALL: [AmberLock; KINDS] = [
        AmberLock::StoreState,
        AmberLock::LogWriter,
        AmberLock::Registry,
        AmberLock::PagerScratch,
        AmberLock::PagerQueue,
        AmberLock::PagerSpills,
        AmberLock::PagerSlots,
        AmberLock::RecoveryBuffer,
        AmberLock::FrameTable,
    ];

    /// How messages name it.
    pub fn name(self) -> &'static str {
        match self {
            AmberLock::StoreState => "the store's state lock",
            AmberLock::LogWriter => "the log writer's lock",
            AmberLock::Registry => "the schema registry's lock",
            AmberLock::PagerScratch => "the fault path's scratch lock",
            AmberLock::PagerQueue => "the pager's replacement-queue lock",
            AmberLock::PagerSpills => "the pager's spill-table lock",
            AmberLock::PagerSlots => "the pager's free-slot lock",
            AmberLock::RecoveryBuffer => "the recovery buffer's lock",
            AmberLock::FrameTable => "the frame table lock",
        }
    }

    fn bit(self) -> u32 {
        1 << self as u8
    }
}

/// A set of [`AmberLock`] kinds (bit `k` for kind `k`); `Display` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HeldSet(pub u32);

impl HeldSet {
    /// Whether no lock is held.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: AmberLock) -> bool {
        self.0 & kind.bit() != 0
    }
}

impl fmt::Display for HeldSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for k in AmberLock::ALL.iter().filter(|k| self.contains(**k)) {
            if !first {
                f.write_str(" and ")?;
            }
            f.write_str(k.name())?;
            first = false;
        }
        if first {
            f.write_str("no Amber lock")?;
        }
        Ok(())
    }
}

/// The calling thread's record: how many times it holds each kind.
struct Local {
    counts: [Cell<u8>; KINDS],
    mask: Cell<u32>,
    /// Index in [`PUBLISHED`] + 1 once claimed; 0 before; `usize::MAX` when
    /// the table was full.
    published: Cell<usize>,
}

thread_local! {
    // Const-initialised, no destructor: readable inside a signal handler.
    static LOCAL: Local = const {
        Local {
            counts: [const { Cell::new(0) }; KINDS],
            mask: Cell::new(0),
            published: Cell::new(0),
        }
    };
    // Frees the thread's published entry when it exits.
    static CLAIM: Claim = Claim::new();
}

/// Threads that take Amber locks whose records are published at once.
pub(crate) const TABLE: usize = 1024;

/// One published record, on its own cache line (each thread writes only
/// its own).
#[repr(align(64))]
struct Entry {
    /// Kernel thread id; 0: free.
    tid: AtomicI32,
    mask: AtomicU32,
}

static PUBLISHED: [Entry; TABLE] = [const {
    Entry {
        tid: AtomicI32::new(0),
        mask: AtomicU32::new(0),
    }
}; TABLE];
/// Entries `0..HIGH` have been claimed at some time: lookups scan no further.
static HIGH: AtomicUsize = AtomicUsize::new(0);

struct Claim(Option<usize>);

impl Claim {
    fn new() -> Claim {
        let tid = gettid();
        for (i, e) in PUBLISHED.iter().enumerate() {
            if e.tid
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                HIGH.fetch_max(i + 1, Ordering::AcqRel);
                return Claim(Some(i));
            }
        }
        Claim(None)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            let _ = LOCAL.try_with(|l| l.published.set(usize::MAX));
            PUBLISHED[i].mask.store(0, Ordering::Relaxed);
            PUBLISHED[i].tid.store(0, Ordering::Release);
        }
    }
}

/// The kernel's id of the calling thread.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Counts `kind` as held by this thread; `publish`: also in the table the
/// userfaultfd handler thread reads. Returns nothing; [`release`] undoes it.
fn acquire(kind: AmberLock, publish: bool) {
    let _ = LOCAL.try_with(|l| {
        let c = &l.counts[kind as usize];
        c.set(c.get().saturating_add(1));
        l.mask.set(l.mask.get() | kind.bit());
        if publish {
            if l.published.get() == 0 {
                let slot = CLAIM
                    .try_with(|c| c.0.map_or(usize::MAX, |i| i + 1))
                    .unwrap_or(usize::MAX);
                l.published.set(slot);
            }
            publish_mask(l);
        }
    });
}

fn release(kind: AmberLock) {
    let _ = LOCAL.try_with(|l| {
        let c = &l.counts[kind as usize];
        c.set(c.get().saturating_sub(1));
        if c.get() == 0 {
            l.mask.set(l.mask.get() & !kind.bit());
        }
        publish_mask(l);
    });
}

fn publish_mask(l: &Local) {
    let p = l.published.get();
    if p != 0 && p != usize::MAX {
        PUBLISHED[p - 1].mask.store(l.mask.get(), Ordering::Release);
    }
}

/// The Amber locks the calling thread holds (safe in a signal handler).
pub fn local() -> HeldSet {
    HeldSet(LOCAL.try_with(|l| l.mask.get()).unwrap_or(0))
}

/// The Amber locks the thread with kernel id `tid` holds, as far as it
/// published them (see the module docs). Meant for a thread that is
/// blocked in a fault, whose record cannot change meanwhile.
pub fn of_thread(tid: i32) -> HeldSet {
    let high = HIGH.load(Ordering::Acquire).min(TABLE);
    let mut mask = 0;
    for e in &PUBLISHED[..high] {
        if e.tid.load(Ordering::Acquire) == tid {
            mask |= e.mask.load(Ordering::Acquire);
        }
    }
    HeldSet(mask)
}

/// A lock guard counted as an Amber lock held by this thread until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub struct Held<G> {
    guard: G,
    kind: AmberLock,
}

/// Wraps `guard`, a lock of kind `kind` just taken, so that the fault path
/// knows this thread holds it. For locks taken outside signal handlers.
pub fn held<G>(kind: AmberLock, guard: G) -> Held<G> {
    acquire(kind, true);
    Held { guard, kind }
}

/// [`held`] for the locks the SIGSEGV handler itself takes (the frame
/// table's, the recovery buffer's): counted for this thread only, since
/// publishing may allocate the first time.
pub(crate) fn held_local<G>(kind: AmberLock, guard: G) -> Held<G> {
    acquire(kind, false);
    Held { guard, kind }
}

impl<G> Held<G> {
    /// The wrapped guard, no longer counted (for `Condvar::wait`, which
    /// takes the `MutexGuard` itself); wrap it again with [`held`].
    pub fn into_inner(self) -> G {
        let me = std::mem::ManuallyDrop::new(self);
        release(me.kind);
        // SAFETY: `me` is never dropped, so the guard is moved out exactly
        // once.
        unsafe { std::ptr::read(&me.guard) }
    }
}

/// A `Held<MutexGuard<T>>` reads and writes the `T`, as the guard does.
impl<G: Deref> Deref for Held<G> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: DerefMut> DerefMut for Held<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

impl<G> Drop for Held<G> {
    fn drop(&mut self) {
        // The guard field is dropped (the lock released) after this; the
        // record is briefly pessimistic, never optimistic.
        release(self.kind);
    }
}

impl<G: fmt::Debug> fmt::Debug for Held<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.guard.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nested_and_published() {
        assert!(local().is_empty());
        let a = held(AmberLock::StoreState, ());
        let b = held(AmberLock::Registry, ());
        let c = held(AmberLock::StoreState, ());
        assert_eq!(
            local().to_string(),
            "the store's state lock and the schema registry's lock"
        );
        assert_eq!(of_thread(gettid()), local());
        drop(a);
        assert!(local().contains(AmberLock::StoreState));
        drop(c);
        assert!(!local().contains(AmberLock::StoreState));
        b.into_inner();
        assert!(local().is_empty());
        assert!(of_thread(gettid()).is_empty());
        // Another thread's record is its own.
        let h = held(AmberLock::PagerQueue, ());
        let tid = std::thread::spawn(|| {
            let _g = held(AmberLock::LogWriter, ());
            let me = gettid();
            assert_eq!(of_thread(me), HeldSet(AmberLock::LogWriter.bit()));
            me
        })
        .join()
        .expect("thread");
        assert!(of_thread(tid).is_empty(), "freed at thread exit");
        assert_eq!(local(), HeldSet(AmberLock::PagerQueue.bit()));
        drop(h);
    }
}
