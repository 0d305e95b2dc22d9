//! The one lock of a FrameSpace: a spinlock that knows its owner.
//!
//! It must be usable from the SIGSEGV handler, so it cannot be a futex-backed
//! mutex whose slow path might allocate or whose state a signal could find half
//! updated. It records the owning thread so that the only way it could deadlock
//! — the owner itself re-entering it from a fault taken while holding it — is
//! turned into an immediate, clearly worded abort.
//!
//! Why no other deadlock is possible: every critical section is short and
//! straight-line (table updates, a memcpy through the staging view, mprotect,
//! madvise, an ioctl); none of them waits for another thread, takes another
//! lock, calls the FaultService, or touches the reservation through the
//! application's view (so none can fault into our own handler). A thread that
//! spins therefore waits for at most one such section of another thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::sys::fatal;

thread_local! {
    /// Its address identifies the thread. Const-initialised with no destructor,
    /// so reading it is a plain TLS access, safe inside a signal handler.
    static TOKEN: Cell<u8> = const { Cell::new(0) };
}

/// A non-zero value unique to the calling thread while it lives.
pub(crate) fn thread_token() -> usize {
    TOKEN.with(|c| c as *const Cell<u8> as usize)
}

pub(crate) struct OwnerLock {
    owner: AtomicUsize,
}

pub(crate) struct Guard<'a> {
    lock: &'a OwnerLock,
}

impl OwnerLock {
    pub(crate) const fn new() -> OwnerLock {
        OwnerLock {
            owner: AtomicUsize::new(0),
        }
    }

    pub(crate) fn lock(&self) -> Guard<'_> {
        let me = thread_token();
        let mut spins = 0u32;
        loop {
            match self
                .owner
                .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Guard { lock: self },
                Err(cur) if cur == me => fatal(format_args!(
                    "the frame table lock was re-entered by the thread holding it \
                     (a persistent page was touched from a signal handler or from \
                     inside the vm module while it held the lock)"
                )),
                Err(_) => {
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        // On 2 vCPUs the owner may be descheduled: let it run.
                        // sched_yield is async-signal-safe.
                        // SAFETY: sched_yield has no preconditions.
                        unsafe {
                            libc::sched_yield();
                        }
                    }
                }
            }
        }
    }

    /// Whether the calling thread holds the lock.
    #[cfg(test)]
    pub(crate) fn held_by_me(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == thread_token()
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.lock.owner.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn excludes_other_threads() {
        let lock = Arc::new(OwnerLock::new());
        let counter = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (lock, counter) = (lock.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let _g = lock.lock();
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("thread");
        }
        assert_eq!(counter.load(Ordering::Relaxed), 40_000);
        assert!(!lock.held_by_me());
    }
}
