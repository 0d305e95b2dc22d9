//! The locks the SIGSEGV handler may take: spinlocks that know their owner.
//!
//! [`OwnerLock`] is the one lock of a FrameSpace; [`SpinLock`] wraps a
//! value in one (the recovery buffer's, which the handler fills at a first
//! write). They must be usable from the SIGSEGV handler, so they cannot be
//! futex-backed mutexes whose slow path might allocate or whose state a
//! signal could find half updated. They record the owning thread so that
//! the only way one could deadlock -- the owner itself re-entering it from
//! a fault taken while holding it -- is turned into an immediate, clearly
//! worded abort, and they count as Amber locks held by the thread
//! (`held.rs`), so that any fault taken while holding one is refused.
//!
//! Why no other deadlock is possible: every critical section is short and
//! straight-line (table updates, a memcpy through the staging view, mprotect,
//! madvise, an ioctl); none of them waits for another thread, takes another
//! lock, calls the FaultService, or touches the reservation through the
//! application's view (so none can fault into our own handler). A thread that
//! spins therefore waits for at most one such section of another thread.

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::held::{AmberLock, Held, held_local};
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
    kind: AmberLock,
}

/// Holds an [`OwnerLock`] until dropped.
pub(crate) struct Guard<'a> {
    _held: Held<Unlock<'a>>,
}

/// Releases the lock when dropped (inside [`Held`], so that the thread's
/// record of held locks is updated after the lock is released).
struct Unlock<'a>(&'a OwnerLock);

impl OwnerLock {
    pub(crate) const fn new(kind: AmberLock) -> OwnerLock {
        OwnerLock {
            owner: AtomicUsize::new(0),
            kind,
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
                Ok(_) => {
                    return Guard {
                        _held: held_local(self.kind, Unlock(self)),
                    };
                }
                Err(cur) if cur == me => fatal(format_args!(
                    "{} was re-entered by the thread holding it (a persistent \
                     page was touched from a signal handler, or from inside \
                     Amber while it held the lock)",
                    self.kind.name()
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

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        self.0.owner.store(0, Ordering::Release);
    }
}

/// A value behind an owner-recording spinlock: a mutex the SIGSEGV handler
/// may take.
pub struct SpinLock<T> {
    lock: OwnerLock,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, which the lock makes
// exclusive; moving the lock moves the value (hence `T: Send` for both).
unsafe impl<T: Send> Send for SpinLock<T> {}
// SAFETY: as above: `&SpinLock` gives `&mut T` to one thread at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Exclusive access to a [`SpinLock`]'s value.
pub struct SpinGuard<'a, T> {
    _guard: Guard<'a>,
    value: &'a mut T,
}

impl<T> SpinLock<T> {
    /// `value` behind a lock named `kind` in messages and in the thread's
    /// record of held locks.
    pub fn new(kind: AmberLock, value: T) -> SpinLock<T> {
        SpinLock {
            lock: OwnerLock::new(kind),
            value: UnsafeCell::new(value),
        }
    }

    /// Spins until the lock is free (usable in a signal handler). Re-entry
    /// by the holder aborts with a message naming the lock.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let guard = self.lock.lock();
        // SAFETY: the lock is held until `guard` drops, and the reference
        // does not outlive it (both live in the SpinGuard), so it is the
        // only reference to the value.
        let value = unsafe { &mut *self.value.get() };
        SpinGuard {
            _guard: guard,
            value,
        }
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

impl<T> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpinLock({})", self.lock.kind.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn excludes_other_threads() {
        let lock = Arc::new(OwnerLock::new(AmberLock::FrameTable));
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
