//! Thin wrappers over the system calls the module needs, and the one way it
//! reports a fatal error from a context that must not allocate.

use std::fmt::{self, Write as _};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

/// The host's virtual-memory page size (4 KiB on x86-64, 16 KiB on some arm64 hosts).
pub(crate) fn host_page_size() -> usize {
    // SAFETY: sysconf has no preconditions; _SC_PAGESIZE is always supported on Linux.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n <= 0 { 4096 } else { n as usize }
}

/// A region of address space that is unmapped when dropped, unless it was
/// turned into a tombstone with [`Mapping::into_tombstone`].
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is only an address range plus the duty to unmap it; the
// bytes in it are accessed through raw pointers by code that synchronises on its own.
unsafe impl Send for Mapping {}
// SAFETY: as above; &Mapping hands out only the address.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Private anonymous memory, not charged against overcommit (MAP_NORESERVE):
    /// tables sized for the worst case cost only the pages actually touched.
    pub(crate) fn anon(len: usize, prot: libc::c_int) -> io::Result<Mapping> {
        Self::map(len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
    }

    /// A shared view of `fd` from offset 0.
    pub(crate) fn shared_fd(len: usize, prot: libc::c_int, fd: libc::c_int) -> io::Result<Mapping> {
        Self::map(len, prot, libc::MAP_SHARED, fd)
    }

    /// A private (copy-on-write) view of `fd` from offset 0.
    #[cfg(feature = "internals")]
    pub(crate) fn private_fd(len: usize, prot: libc::c_int, fd: libc::c_int) -> io::Result<Mapping> {
        Self::map(len, prot, libc::MAP_PRIVATE, fd)
    }

    fn map(
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        fd: libc::c_int,
    ) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        // SAFETY: a fresh mapping at an address the kernel picks (no MAP_FIXED)
        // cannot alias or clobber any existing Rust object.
        let p = unsafe { map_raw(0, len, prot, flags, fd, 0)? };
        Mapping::at(p, len)
    }

    /// A reservation of `len` bytes starting at a multiple of `align` (a
    /// power of two, a multiple of the host page size): private anonymous
    /// memory when `fd` is `None`, else a shared view of `fd` from offset 0.
    /// `hint`, if not 0, is where to try to put it (the first multiple of
    /// `align` from there; elsewhere if that is taken).
    ///
    /// Alignment holds by construction, not by where the kernel happens to
    /// place the mapping: a placeholder `align` bytes longer is mapped
    /// (inaccessible), the reservation is mapped over its first aligned
    /// address with `MAP_FIXED`, and the placeholder's slack on either side
    /// is unmapped.
    pub(crate) fn reserve(
        len: usize,
        prot: libc::c_int,
        fd: Option<libc::c_int>,
        align: usize,
        hint: usize,
    ) -> io::Result<Mapping> {
        let slack = align.saturating_sub(host_page_size());
        let total = len
            .checked_add(slack)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "reservation too large"))?;
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: without MAP_FIXED the hint only suggests a place; a fresh
        // mapping cannot alias or clobber any existing Rust object.
        let p = unsafe { map_raw(hint, total, libc::PROT_NONE, anon, -1, 0)? };
        let placeholder = Mapping::at(p, total)?;
        let lo = placeholder.addr();
        let start = lo.next_multiple_of(align);
        let (flags, fd) = backing(fd);
        // SAFETY: `start..start + len` lies inside the placeholder, which we
        // own and nothing references: MAP_FIXED replaces only it.
        let q = unsafe { map_raw(start, len, prot, flags | libc::MAP_FIXED, fd, 0)? };
        // From here the placeholder's middle is the reservation: give back
        // only the slack, and never unmap the placeholder as a whole.
        std::mem::forget(placeholder);
        for (a, n) in [(lo, start - lo), (start + len, lo + total - (start + len))] {
            if n > 0 {
                // SAFETY: slack of our own placeholder, outside the reservation.
                unsafe { libc::munmap(a as *mut libc::c_void, n) };
            }
        }
        Mapping::at(q, len)
    }

    /// [`reserve`](Self::reserve) exactly at `at` (a multiple of `align`)
    /// if nothing is mapped anywhere in `at..at + len`
    /// (`MAP_FIXED_NOREPLACE`: a database's home); `Ok(None)` if something
    /// is (or the kernel, older than 4.17, placed it elsewhere).
    pub(crate) fn reserve_at(
        len: usize,
        prot: libc::c_int,
        fd: Option<libc::c_int>,
        at: usize,
    ) -> io::Result<Option<Mapping>> {
        let (flags, fd) = backing(fd);
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping
        // (it fails with EEXIST instead), so no Rust object is clobbered.
        let placed = unsafe { map_raw(at, len, prot, flags | libc::MAP_FIXED_NOREPLACE, fd, 0) };
        let p = match placed {
            Ok(p) => p,
            Err(e) => {
                return match e.raw_os_error() {
                    Some(libc::EEXIST | libc::ENOMEM | libc::EINVAL) => Ok(None),
                    _ => Err(e),
                };
            }
        };
        let m = Mapping::at(p, len)?;
        // A kernel that does not know the flag took the address as a hint.
        Ok((m.addr() == at).then_some(m))
    }

    /// The mapping `mmap` returned at `p`, `len` bytes.
    fn at(p: usize, len: usize) -> io::Result<Mapping> {
        NonNull::new(p as *mut u8)
            .map(|ptr| Mapping { ptr, len })
            .ok_or_else(|| io::Error::other("mmap returned null"))
    }

    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Replaces the range with inaccessible, unregistered, empty memory and
    /// keeps it reserved for ever. Pointers into a dropped FrameSpace then fault
    /// (and crash through the previous SIGSEGV handler) instead of reading
    /// whatever a later mmap would have put at the same address.
    pub(crate) fn into_tombstone(self) {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED;
        // SAFETY: MAP_FIXED over our own range only replaces memory this Mapping
        // owns; every FrameSpace user has been stopped before this is called, and
        // stale raw pointers into it now fault rather than read freed memory.
        let p = unsafe { map_raw(self.addr(), self.len, libc::PROT_NONE, flags, -1, 0) };
        if p.is_err() {
            // Could not replace it: unmapping is the next safest thing, since
            // leaving a live registered range without a handler could hang.
            drop(self);
        } else {
            std::mem::forget(self);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range was returned by mmap and is owned by this value alone.
        unsafe {
            libc::munmap(self.ptr().cast(), self.len);
        }
    }
}

/// `mmap(addr, len, prot, flags | MAP_NORESERVE, fd, off)`: the address
/// mapped, or the error. `addr` is a hint unless `flags` has `MAP_FIXED` or
/// `MAP_FIXED_NOREPLACE`.
///
/// # Safety
/// With `MAP_FIXED`, `addr..addr + len` must be memory the caller owns and
/// whose replacement no Rust reference can observe.
pub(crate) unsafe fn map_raw(
    addr: usize,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    off: u64,
) -> io::Result<usize> {
    let off = libc::off_t::try_from(off).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: guaranteed by the caller for MAP_FIXED; otherwise a fresh
    // mapping cannot alias anything that exists.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            prot,
            flags | libc::MAP_NORESERVE,
            fd,
            off,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as usize)
    }
}

/// The flags and descriptor of a reservation's mapping: a shared view of
/// `fd`, or private anonymous memory.
fn backing(fd: Option<libc::c_int>) -> (libc::c_int, libc::c_int) {
    match fd {
        Some(fd) => (libc::MAP_SHARED, fd),
        None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
    }
}

/// Changes the protection of `[addr, addr+len)`, all inside one of our mappings.
pub(crate) fn mprotect(addr: usize, len: usize, prot: libc::c_int) -> io::Result<()> {
    // SAFETY: callers pass ranges inside a reservation owned by a live
    // FrameSpace; changing protection never invalidates Rust references because
    // none are handed out into the reservation.
    let rc = unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes all of `buf` at offset `off` of `fd` (async-signal-safe: only
/// `pwrite` itself).
pub(crate) fn pwrite_all(fd: libc::c_int, mut buf: &[u8], mut off: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let at =
            libc::off_t::try_from(off).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
        let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), at) };
        match n {
            n if n > 0 => {
                buf = &buf[n as usize..];
                off += n as u64;
            }
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Sleeps while `word` holds `expected` (`FUTEX_WAIT`, process-private);
/// returns at once if it does not, and on a wake-up or a signal, so callers
/// check again. Async-signal-safe.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT reads the aligned u32 at `word`, valid for the
    // call; a null timeout waits until woken.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC`. Async-signal-safe (`std::time` does not
/// promise to be).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass; it is on POSIX's
    // list of async-signal-safe functions.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Wakes up to `n` threads sleeping in [`futex_wait`] on `word`.
/// Async-signal-safe.
pub(crate) fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

/// madvise over a range of one of our mappings.
pub(crate) fn madvise(addr: usize, len: usize, advice: libc::c_int) -> io::Result<()> {
    // SAFETY: as for mprotect: the range belongs to a reservation we own and no
    // Rust reference points into it.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(crate) fn errno() -> libc::c_int {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

pub(crate) fn set_errno(v: libc::c_int) {
    // SAFETY: as in errno().
    unsafe { *libc::__errno_location() = v }
}

/// A fixed buffer that `core::fmt` can write into without allocating, so that
/// messages can be formatted inside a signal handler.
pub(crate) struct StackBuf {
    buf: [u8; 1024],
    len: usize,
}

impl StackBuf {
    pub(crate) const fn new() -> StackBuf {
        StackBuf {
            buf: [0; 1024],
            len: 0,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Writes `amber: fatal: <args>` and a newline to stderr and aborts.
///
/// Used where an error cannot be returned: a fault on a plain load or store.
/// It neither allocates nor takes locks (stderr is written with one write(2)),
/// so it is safe inside the SIGSEGV handler and the userfaultfd thread.
pub(crate) fn fatal(args: fmt::Arguments<'_>) -> ! {
    let mut b = StackBuf::new();
    let _ = b.write_str("amber: fatal: ");
    let _ = b.write_fmt(args);
    if b.len == b.buf.len() {
        b.len -= 1;
    }
    b.buf[b.len] = b'\n';
    b.len += 1;
    let bytes = b.as_bytes();
    // SAFETY: writing an initialised buffer to fd 2; a failed write is ignored
    // because we abort next anyway.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
        libc::abort()
    }
}

/// Issues an ioctl whose argument is a `#[repr(C)]` struct laid out as the kernel expects.
///
/// # Safety
/// `T` must be the exact structure the kernel reads and writes for `req`, and any
/// pointers inside it must be valid for what the ioctl does with them.
pub(crate) unsafe fn ioctl<T>(
    fd: libc::c_int,
    req: libc::c_ulong,
    arg: &mut T,
) -> io::Result<libc::c_int> {
    // SAFETY: guaranteed by the caller (see # Safety).
    let rc = unsafe { libc::ioctl(fd, req as _, arg as *mut T) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `_IOWR(ty, nr, size)` as in `asm-generic/ioctl.h`.
pub(crate) const fn iowr(ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    ((3 as libc::c_ulong) << 30)
        | ((size as libc::c_ulong) << 16)
        | ((ty as libc::c_ulong) << 8)
        | nr as libc::c_ulong
}

/// `_IOR(ty, nr, size)`.
pub(crate) const fn ior(ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    ((2 as libc::c_ulong) << 30)
        | ((size as libc::c_ulong) << 16)
        | ((ty as libc::c_ulong) << 8)
        | nr as libc::c_ulong
}
