//! The process-wide SIGSEGV handler and the registry of live FrameSpaces it
//! consults.
//!
//! The handler serves the SIGSEGV backend's faults (`fault.rs`: a missing
//! page is handed to the space's service thread, a first write is noted)
//! and, for userfaultfd spaces, writes that hit a victim write-protected
//! for eviction (they wait for it). It does only async-signal-safe work,
//! and little of it, so it runs on whatever stack the thread has: no
//! thread needs preparing.
//!
//! It is installed once, with `SA_SIGINFO | SA_ONSTACK | SA_NODEFER`.
//! SA_ONSTACK so that a stack overflow, which lands here first, is handled
//! on the thread's alternate stack and chained to Rust's own handler, which
//! reports it. SA_NODEFER so that a crash inside the handler is delivered
//! (and chained) rather than killing the process silently. Addresses
//! outside every live FrameSpace go to the previous handler, exactly as it
//! would have been called.
//!
//! The registry is a fixed array of slots so that the handler can search it
//! without allocating or locking. A slot is pinned by a user count while the
//! handler uses the FrameSpace it points to; dropping a FrameSpace clears its
//! slot and waits for the count to fall to zero (a Dekker pair on SeqCst
//! atomics), so the handler never touches a freed FrameSpace.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::VmError;
use super::space::FrameSpace;
use super::sys;

/// Live frame spaces at most (every space registers, userfaultfd ones too).
pub(crate) const SLOTS: usize = 256;

struct Slot {
    space: AtomicPtr<FrameSpace>,
    users: AtomicUsize,
}

static REGISTRY: [Slot; SLOTS] = [const {
    Slot {
        space: AtomicPtr::new(ptr::null_mut()),
        users: AtomicUsize::new(0),
    }
}; SLOTS];

/// The action that was installed before ours; written once, before our handler
/// is installed, and only read afterwards.
struct Prev(std::cell::UnsafeCell<MaybeUninit<libc::sigaction>>);
// SAFETY: written once under INSTALL's lock before the handler that reads it is
// installed (the sigaction syscall orders the two); read-only afterwards.
unsafe impl Sync for Prev {}
static PREV: Prev = Prev(std::cell::UnsafeCell::new(MaybeUninit::uninit()));
static INSTALL: Mutex<bool> = Mutex::new(false);

/// Installs the handler if it is not installed yet.
pub(crate) fn install() -> Result<(), VmError> {
    let mut done = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if *done {
        return Ok(());
    }
    // SAFETY: an all-zero sigaction is a valid value to fill in.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = on_sigsegv as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
    // SAFETY: act.sa_mask is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: PREV is written only here, with INSTALL held, before any handler
    // that reads it exists; `act` is fully initialised and on_sigsegv has the
    // SA_SIGINFO signature.
    let rc = unsafe { libc::sigaction(libc::SIGSEGV, &act, (*PREV.0.get()).as_mut_ptr()) };
    if rc != 0 {
        return Err(VmError::Os {
            op: "sigaction(SIGSEGV)",
            err: std::io::Error::last_os_error(),
        });
    }
    *done = true;
    Ok(())
}

/// Publishes `space` to the handler; returns the slot to pass to `unregister`.
pub(crate) fn register(space: *const FrameSpace) -> Result<usize, VmError> {
    for (i, s) in REGISTRY.iter().enumerate() {
        if s.space
            .compare_exchange(
                ptr::null_mut(),
                space.cast_mut(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
        {
            return Ok(i);
        }
    }
    Err(VmError::TooManySpaces)
}

/// Withdraws a slot and waits until no handler is using it.
pub(crate) fn unregister(slot: usize) {
    let Some(s) = REGISTRY.get(slot) else { return };
    s.space.store(ptr::null_mut(), Ordering::SeqCst);
    while s.users.load(Ordering::SeqCst) != 0 {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// Whether the faulting access was a write, when the hardware says.
fn fault_is_write(ctx: *mut libc::c_void) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        // On x86-64 REG_ERR holds the page fault error code, whose bit 1 is
        // set for writes.
        let uc = ctx.cast::<libc::ucontext_t>();
        // SAFETY: for an SA_SIGINFO handler the third argument is the
        // ucontext_t of the interrupted thread, valid during the handler.
        let gregs = unsafe { &(*uc).uc_mcontext.gregs };
        Some(gregs[libc::REG_ERR as usize] & 2 != 0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ctx;
        None
    }
}

extern "C" fn on_sigsegv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let saved_errno = sys::errno();
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let mut handled = false;
    for s in &REGISTRY {
        if s.space.load(Ordering::Relaxed).is_null() {
            continue;
        }
        s.users.fetch_add(1, Ordering::SeqCst);
        let p = s.space.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: the slot is pinned (users > 0) and was non-null after
            // pinning, so `unregister` has not returned and the FrameSpace is alive.
            let space = unsafe { &*p };
            if space.contains(addr) {
                space.on_sigsegv(addr, fault_is_write(ctx));
                handled = true;
            }
        }
        s.users.fetch_sub(1, Ordering::SeqCst);
        if handled {
            break;
        }
    }
    if !handled {
        // SAFETY: forwarding the arguments the kernel gave us.
        unsafe { chain(sig, info, ctx) };
    }
    sys::set_errno(saved_errno);
}

/// Calls the previous handler as the kernel would have.
///
/// # Safety
/// Only from `on_sigsegv`, with the arguments it received.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: PREV was initialised by `install` before on_sigsegv could run.
    let prev = unsafe { (*PREV.0.get()).assume_init_ref() };
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO, sa_sigaction is a three-argument handler.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(prev.sa_sigaction) };
        f(sig, info, ctx);
    } else if prev.sa_sigaction == libc::SIG_DFL || prev.sa_sigaction == libc::SIG_IGN {
        // Restore the default and return: the access is retried and the
        // kernel's default action (a core-dumping kill) happens.
        // SAFETY: re-installing a sigaction value the kernel gave us.
        unsafe { libc::sigaction(sig, prev, ptr::null_mut()) };
    } else {
        // SAFETY: without SA_SIGINFO, sa_sigaction is a one-argument handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev.sa_sigaction) };
        f(sig);
    }
}
