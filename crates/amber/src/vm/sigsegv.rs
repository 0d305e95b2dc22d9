//! The process-wide SIGSEGV handler, the registry of live `Sigsegv`
//! FrameSpaces it consults, and the per-thread alternate signal stacks.
//!
//! The handler is installed once, with `SA_SIGINFO | SA_ONSTACK | SA_NODEFER`.
//! SA_NODEFER because the fault service may itself touch another persistent
//! page (or crash) while we are inside the handler: with SIGSEGV blocked the
//! kernel would kill the process instead of delivering the nested fault.
//! Addresses outside every live FrameSpace go to the previous handler, exactly
//! as it would have been called (Rust's own stack-overflow handler, usually).
//!
//! The registry is a fixed array of slots so that the handler can search it
//! without allocating or locking. A slot is pinned by a user count while the
//! handler uses the FrameSpace it points to; dropping a FrameSpace clears its
//! slot and waits for the count to fall to zero (a Dekker pair on SeqCst
//! atomics), so the handler never touches a freed FrameSpace.

use std::cell::{Cell, RefCell};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::VmError;
use super::space::FrameSpace;
use super::sys::{self, Mapping};

const SLOTS: usize = 64;

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

/// Stack the fault service gets at the least; below this the handler refuses
/// to run it (and says so) rather than overflow.
pub(crate) const MIN_SERVICE_STACK: usize = 64 * 1024;
const ALT_STACK: usize = 256 * 1024;

/// Bytes left on the alternate signal stack, if the handler is running on one.
pub(crate) fn altstack_room() -> Option<usize> {
    // SAFETY: an all-zero stack_t is valid to be filled in by sigaltstack.
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying only (new stack null); sigaltstack is async-signal-safe.
    if unsafe { libc::sigaltstack(ptr::null(), &mut ss) } != 0
        || ss.ss_flags & libc::SS_ONSTACK == 0
    {
        return None;
    }
    let here = &ss as *const libc::stack_t as usize;
    Some(here.saturating_sub(ss.ss_sp as usize))
}

struct AltStack {
    map: Mapping,
    prev: libc::stack_t,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: an all-zero stack_t is valid to be filled in.
        let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: querying, then (only if ours is installed) restoring the
        // stack that was there before; the thread is not on it (thread exit).
        unsafe {
            libc::sigaltstack(ptr::null(), &mut cur);
            if cur.ss_flags & libc::SS_DISABLE == 0
                && cur.ss_sp as usize == self.map.addr() + sys::host_page_size()
            {
                libc::sigaltstack(&self.prev, ptr::null_mut());
            }
        }
    }
}

thread_local! {
    static PREPARED: Cell<bool> = const { Cell::new(false) };
    static ALT: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

/// Gives the calling thread an alternate signal stack big enough to run the
/// fault service from the SIGSEGV handler (256 KiB plus a guard page).
///
/// Every FrameSpace method that may run the service calls it; a thread that
/// only dereferences persistent pointers must call it once itself when the
/// `Sigsegv` backend is in use. Cheap after the first call; harmless with the
/// `Uffd` backend. Must not be called from a signal handler.
pub fn prepare_thread() {
    if PREPARED.with(|p| p.get()) {
        return;
    }
    PREPARED.with(|p| p.set(true));
    // A failure leaves the thread on its previous stack; the handler then
    // reports a too-small stack if the service cannot run.
    let _ = ALT.try_with(|a| {
        if let Ok(mut slot) = a.try_borrow_mut()
            && slot.is_none()
        {
            *slot = new_altstack();
        }
    });
}

fn new_altstack() -> Option<AltStack> {
    let page = sys::host_page_size();
    let map = Mapping::anon(ALT_STACK + page, libc::PROT_READ | libc::PROT_WRITE).ok()?;
    // The lowest page is a guard: an overflowing service faults there instead
    // of writing into whatever lies below.
    sys::mprotect(map.addr(), page, libc::PROT_NONE).ok()?;
    let ss = libc::stack_t {
        ss_sp: (map.addr() + page) as *mut libc::c_void,
        ss_flags: 0,
        ss_size: ALT_STACK,
    };
    // SAFETY: an all-zero stack_t is valid to be filled in.
    let mut prev: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: `ss` describes memory we own that outlives its installation (the
    // AltStack is dropped, restoring `prev`, only at thread exit); we are not on
    // an alternate stack here (not called from a handler).
    if unsafe { libc::sigaltstack(&ss, &mut prev) } != 0 {
        return None;
    }
    Some(AltStack { map, prev })
}
