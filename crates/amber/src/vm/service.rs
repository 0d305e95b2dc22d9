//! The SIGSEGV backend's service thread: the signal handler of a thread
//! that touched a non-resident frame posts a request here and waits; this
//! thread fetches the page (the fault service: store reads, locks,
//! allocation) and wakes it.
//!
//! Why not serve the fault in the handler, as Texas and QuickStore did: the
//! service takes std mutexes, allocates and reads files, none of which is
//! async-signal-safe, and it needs more stack than a thread's alternate
//! signal stack has (Rust gives every thread 8 KiB, and a thread started by
//! other code may have none), so every thread that dereferenced persistent
//! pointers had to be prepared first. The handler now does only
//! async-signal-safe work: atomics, `futex`, `sched_yield`, `write` of a
//! fatal message. Any thread may dereference without preparation.
//!
//! **Requests.** A fixed array of slots, so that posting needs no
//! allocation: the handler claims a free slot (CAS), writes the frame,
//! marks it posted, sets its bit in `posted` and rings the doorbell (a
//! futex word), waking the service thread only if it sleeps; then it waits
//! on the slot's state word with `FUTEX_WAIT` until the service marks it
//! done or failed. A failure carries its message in the slot, and the
//! faulting thread aborts with it (`amber: fatal: page N: ...`), so the
//! abort happens on the thread whose load could not be served. More
//! faulting threads than slots wait for a slot to free up.
//!
//! **Waiting policy**, as for the userfaultfd handler thread (`uffd.rs`):
//! after serving, the thread keeps polling (yielding) for
//! `VmConfig::service_spin` before it sleeps on the doorbell, so a burst of
//! faults pays the wake-up at most once and an idle program pays no CPU.
//! The faulting thread, too, polls its slot (yielding, so that a service
//! thread queued on its CPU runs) for that long before it sleeps on it: a
//! futex wake-up of a sleeping thread costs an inter-processor interrupt,
//! which in a virtual machine is several microseconds.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::FrameNo;
use super::sys::{self, StackBuf, fatal};

const SLOTS: usize = 64;
const MSG: usize = 512;

// Slot states.
const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const POSTED: u32 = 2;
const DONE: u32 = 3;
const FAILED: u32 = 4;

struct Slot {
    state: AtomicU32,
    frame: AtomicU32,
    len: AtomicU32,
    /// The failure message: written by the service before it publishes
    /// FAILED (Release), read by the poster after it sees FAILED (Acquire).
    msg: UnsafeCell<[u8; MSG]>,
}

/// The requests of one frame space, shared by its handlers and its service
/// thread.
pub(crate) struct Requests {
    slots: [Slot; SLOTS],
    /// Bit `i`: slot `i` is posted and not yet taken by the service.
    posted: AtomicU64,
    /// Bumped by every post; the service sleeps on it.
    doorbell: AtomicU32,
    sleeping: AtomicBool,
    stop: AtomicBool,
    /// How long a faulting thread polls for its answer before it sleeps.
    wait_poll_ns: u64,
}

// SAFETY: the message buffers are written only by the service thread while
// the slot is POSTED (the poster waits), and read only by the poster after
// the service published FAILED; everything else is atomics.
unsafe impl Sync for Requests {}

impl Requests {
    /// Requests whose posters poll for `wait_poll` before they sleep.
    pub(crate) fn new(wait_poll: Duration) -> Box<Requests> {
        Box::new(Requests {
            slots: [const {
                Slot {
                    state: AtomicU32::new(FREE),
                    frame: AtomicU32::new(0),
                    len: AtomicU32::new(0),
                    msg: UnsafeCell::new([0; MSG]),
                }
            }; SLOTS],
            posted: AtomicU64::new(0),
            doorbell: AtomicU32::new(0),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            wait_poll_ns: u64::try_from(wait_poll.as_nanos()).unwrap_or(u64::MAX),
        })
    }

    /// From the SIGSEGV handler: asks the service thread to make `f`
    /// resident and waits until it has tried. On failure, aborts the
    /// process with the service's message. Async-signal-safe.
    pub(crate) fn request(&self, f: FrameNo) {
        let (i, slot) = self.claim();
        slot.frame.store(f, Ordering::Relaxed);
        slot.state.store(POSTED, Ordering::Release);
        self.posted.fetch_or(1 << i, Ordering::SeqCst);
        self.doorbell.fetch_add(1, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            sys::futex_wake(&self.doorbell, 1);
        }
        let since = sys::monotonic_ns();
        let outcome = loop {
            let s = slot.state.load(Ordering::Acquire);
            if s == DONE || s == FAILED {
                break s;
            }
            if sys::monotonic_ns().saturating_sub(since) < self.wait_poll_ns {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
                continue;
            }
            sys::futex_wait(&slot.state, s);
        };
        if outcome == FAILED {
            let len = (slot.len.load(Ordering::Relaxed) as usize).min(MSG);
            // SAFETY: the service wrote `len` bytes before publishing FAILED
            // (Acquire above) and writes no more until the slot is posted
            // again, which only this thread can do before freeing it.
            let msg = unsafe { &(&*slot.msg.get())[..len] };
            fatal(format_args!("{}", valid_prefix(msg)));
        }
        slot.state.store(FREE, Ordering::Release);
    }

    /// A free slot, claimed; waits for one if all are in use.
    fn claim(&self) -> (usize, &Slot) {
        loop {
            for (i, s) in self.slots.iter().enumerate() {
                if s.state.load(Ordering::Relaxed) == FREE
                    && s.state
                        .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return (i, s);
                }
            }
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }

    /// Serves every posted request with `serve`; returns how many.
    fn serve_posted(&self, serve: &dyn Fn(FrameNo, &mut StackBuf) -> bool) -> u32 {
        let bits = self.posted.swap(0, Ordering::SeqCst);
        let mut n = 0;
        let mut rest = bits;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let slot = &self.slots[i];
            if slot.state.load(Ordering::Acquire) != POSTED {
                continue;
            }
            let mut msg = StackBuf::new();
            let ok = serve(slot.frame.load(Ordering::Relaxed), &mut msg);
            if !ok {
                let bytes = msg.as_bytes();
                let len = bytes.len().min(MSG);
                // SAFETY: the slot is POSTED, so its poster waits and nobody
                // else touches the buffer until we publish FAILED below.
                unsafe { (&mut *slot.msg.get())[..len].copy_from_slice(&bytes[..len]) };
                slot.len.store(len as u32, Ordering::Relaxed);
            }
            slot.state
                .store(if ok { DONE } else { FAILED }, Ordering::Release);
            sys::futex_wake(&slot.state, 1);
            n += 1;
        }
        n
    }

    /// The service thread's loop; returns when `stop` is set.
    fn run(&self, spin: Duration, serve: &dyn Fn(FrameNo, &mut StackBuf) -> bool) {
        let mut last = Instant::now();
        loop {
            if self.serve_posted(serve) > 0 {
                last = Instant::now();
                continue;
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if !spin.is_zero() && last.elapsed() < spin {
                // Yield rather than spin in place: the thread just woken is
                // often queued on this CPU (see `uffd.rs`).
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
                continue;
            }
            // Sleep until rung. Posters set `posted` and bump the doorbell
            // before they read `sleeping`; we set `sleeping` before we read
            // them (all SeqCst), so either they see us asleep and wake us,
            // or we see their request, or the doorbell moved and the wait
            // returns at once.
            self.sleeping.store(true, Ordering::SeqCst);
            let bell = self.doorbell.load(Ordering::SeqCst);
            if self.posted.load(Ordering::SeqCst) == 0 && !self.stop.load(Ordering::SeqCst) {
                sys::futex_wait(&self.doorbell, bell);
            }
            self.sleeping.store(false, Ordering::SeqCst);
            last = Instant::now();
        }
    }
}

/// The longest valid UTF-8 prefix of `b` (a message cut at the buffer's
/// end may end inside a character), without allocating.
fn valid_prefix(b: &[u8]) -> &str {
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
    }
}

/// The running service thread of one frame space; dropping it stops and
/// joins the thread.
pub(crate) struct ServiceThread {
    requests: Arc<Requests>,
    join: Option<JoinHandle<()>>,
}

impl ServiceThread {
    /// Starts the thread. `serve(frame, message)` makes `frame` resident;
    /// on failure it writes the message (without the `amber: fatal: `
    /// prefix) and returns false.
    pub(crate) fn spawn(
        requests: Arc<Requests>,
        spin: Duration,
        serve: impl Fn(FrameNo, &mut StackBuf) -> bool + Send + 'static,
    ) -> std::io::Result<ServiceThread> {
        let r = requests.clone();
        let join = std::thread::Builder::new()
            .name("amber-faults".into())
            .spawn(move || r.run(spin, &serve))?;
        Ok(ServiceThread {
            requests,
            join: Some(join),
        })
    }
}

impl Drop for ServiceThread {
    fn drop(&mut self) {
        self.requests.stop.store(true, Ordering::SeqCst);
        self.requests.doorbell.fetch_add(1, Ordering::SeqCst);
        sys::futex_wake(&self.requests.doorbell, 1);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
