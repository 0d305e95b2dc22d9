//! The userfaultfd backend's kernel interface and its handler thread.
//!
//! Structures and ioctl numbers are transcribed from
//! `include/uapi/linux/userfaultfd.h` (checked against the system header where
//! it has them; `UFFD_FEATURE_WP_ASYNC` is newer than Debian's headers).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sys::{self, ior, iowr};

const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
pub(crate) const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFDIO_WRITEPROTECT` of a range leaves markers in its unpopulated
/// entries, so that a page mapped there later is write-protected too.
pub(crate) const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
/// Fault messages name the faulting thread (so that the handler can check
/// the Amber locks it holds, `held.rs`).
pub(crate) const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
pub(crate) const UFFD_PAGEFAULT_FLAG_WP: u64 = 1 << 1;
pub(crate) const UFFDIO_REGISTER_MODE_MISSING: u64 = 1 << 0;
pub(crate) const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_COPY_MODE_DONTWAKE: u64 = 1 << 0;
const UFFDIO_COPY_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// `struct uffd_msg` (packed in C, but these fields need no padding).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UffdMsg {
    event: u8,
    _reserved1: u8,
    _reserved2: u16,
    _reserved3: u32,
    /// For a page fault: flags, address, thread id.
    arg: [u64; 3],
}

const UFFDIO_API: libc::c_ulong = iowr(0xAA, 0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: libc::c_ulong = iowr(0xAA, 0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_UNREGISTER: libc::c_ulong = ior(0xAA, 0x01, std::mem::size_of::<UffdioRange>());
const UFFDIO_WAKE: libc::c_ulong = ior(0xAA, 0x02, std::mem::size_of::<UffdioRange>());
const UFFDIO_COPY: libc::c_ulong = iowr(0xAA, 0x03, std::mem::size_of::<UffdioCopy>());
const UFFDIO_WRITEPROTECT: libc::c_ulong =
    iowr(0xAA, 0x06, std::mem::size_of::<UffdioWriteprotect>());

// Values printed by a C program against <linux/userfaultfd.h>.
const _: () = assert!(UFFDIO_API == 0xc018_aa3f);
const _: () = assert!(UFFDIO_REGISTER == 0xc020_aa00);
const _: () = assert!(UFFDIO_UNREGISTER == 0x8010_aa01);
const _: () = assert!(UFFDIO_WAKE == 0x8010_aa02);
const _: () = assert!(UFFDIO_COPY == 0xc028_aa03);
const _: () = assert!(UFFDIO_WRITEPROTECT == 0xc018_aa06);
const _: () = assert!(std::mem::size_of::<UffdMsg>() == 32);

/// An open userfaultfd with the API handshake done.
pub(crate) struct Uffd {
    fd: OwnedFd,
}

impl UffdMsg {
    pub(crate) fn is_pagefault(&self) -> bool {
        self.event == UFFD_EVENT_PAGEFAULT
    }
    pub(crate) fn flags(&self) -> u64 {
        self.arg[0]
    }
    pub(crate) fn address(&self) -> u64 {
        self.arg[1]
    }
    /// The faulting thread's kernel id (`UFFD_FEATURE_THREAD_ID`).
    pub(crate) fn thread_id(&self) -> i32 {
        self.arg[2] as u32 as i32
    }
}

impl Uffd {
    /// Opens a non-blocking userfaultfd for user-mode faults only (so no
    /// privilege is needed even when `vm.unprivileged_userfaultfd` is 0), and
    /// enables `features`. The error is a sentence fit for `backend_reason`.
    pub(crate) fn open(features: u64) -> Result<Uffd, String> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
        // SAFETY: the userfaultfd syscall takes one int of flags and returns a
        // new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd < 0 {
            return Err(format!(
                "userfaultfd(UFFD_USER_MODE_ONLY) failed: {}",
                io::Error::last_os_error()
            ));
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features,
            ioctls: 0,
        };
        // SAFETY: UffdioApi matches struct uffdio_api for UFFDIO_API.
        match unsafe { sys::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } {
            Ok(_) if api.features & features == features => Ok(Uffd { fd }),
            Ok(_) => Err(format!(
                "userfaultfd lacks features {:#x} (kernel offers {:#x})",
                features & !api.features,
                api.features
            )),
            Err(e) => Err(format!(
                "UFFDIO_API with features {features:#x} failed: {e} (needs Linux 6.7+ for WP_ASYNC)"
            )),
        }
    }

    pub(crate) fn register(&self, start: usize, len: usize, mode: u64) -> io::Result<()> {
        let mut r = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode,
            ioctls: 0,
        };
        // SAFETY: matches struct uffdio_register; the range is our reservation.
        unsafe { sys::ioctl(self.fd.as_raw_fd(), UFFDIO_REGISTER, &mut r) }.map(|_| ())
    }

    /// Stops watching `[start, start+len)` (its write-protect bits go).
    pub(crate) fn unregister(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: matches struct uffdio_range for UFFDIO_UNREGISTER; the
        // range is ours.
        unsafe { sys::ioctl(self.fd.as_raw_fd(), UFFDIO_UNREGISTER, &mut r) }.map(|_| ())
    }

    /// Atomically fills `[dst, dst+src.len())` (page-aligned, currently
    /// missing) with `src`, write-protected if `wp`. Pages already present are
    /// skipped. Waiting threads are not woken: the caller first records the
    /// frames as resident, then calls `wake`, so that a woken thread never
    /// finds the frame table lagging behind the page table.
    pub(crate) fn copy(&self, dst: usize, src: &[u8], wp: bool, page: usize) -> io::Result<()> {
        let mut done = 0usize;
        while done < src.len() {
            let mut c = UffdioCopy {
                dst: (dst + done) as u64,
                src: src[done..].as_ptr() as u64,
                len: (src.len() - done) as u64,
                mode: UFFDIO_COPY_MODE_DONTWAKE | if wp { UFFDIO_COPY_MODE_WP } else { 0 },
                copy: 0,
            };
            // SAFETY: matches struct uffdio_copy; `src` is readable for `len`
            // bytes for the duration of the call; `dst` lies in our registered range.
            match unsafe { sys::ioctl(self.fd.as_raw_fd(), UFFDIO_COPY, &mut c) } {
                Ok(_) => done = src.len(),
                Err(e) => {
                    if c.copy > 0 {
                        done += c.copy as usize;
                    } else if e.raw_os_error() == Some(libc::EEXIST) {
                        done += page;
                    } else if e.raw_os_error() != Some(libc::EAGAIN) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn writeprotect(&self, start: usize, len: usize, wp: bool) -> io::Result<()> {
        let mut w = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: if wp { UFFDIO_WRITEPROTECT_MODE_WP } else { 0 },
        };
        // SAFETY: matches struct uffdio_writeprotect; the range is ours.
        unsafe { sys::ioctl(self.fd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut w) }.map(|_| ())
    }

    pub(crate) fn wake(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: matches struct uffdio_range for UFFDIO_WAKE.
        unsafe { sys::ioctl(self.fd.as_raw_fd(), UFFDIO_WAKE, &mut r) }.map(|_| ())
    }

    /// Reads pending messages without blocking; returns how many were read.
    fn read(&self, msgs: &mut [UffdMsg]) -> io::Result<usize> {
        let bytes = std::mem::size_of_val(msgs);
        // SAFETY: `msgs` is writable for `bytes` bytes and every bit pattern is a
        // valid UffdMsg.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), msgs.as_mut_ptr().cast(), bytes) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EAGAIN) {
                Ok(0)
            } else {
                Err(e)
            };
        }
        Ok(n as usize / std::mem::size_of::<UffdMsg>())
    }
}

/// Serves fault messages until told to stop.
///
/// Waiting policy. Measured with `examples/vm_costs.rs` on the 2-vCPU guest
/// (Linux 6.18), median cold read fault served by this thread:
///
/// | policy | back-to-back faults | fault after 1 ms idle |
/// |---|---|---|
/// | block in `poll` | 7–31 µs (bimodal, run to run) | 11–22 µs |
/// | poll without blocking for 200 µs, then block (default) | 7–16 µs | 9.5–15 µs |
/// | never block | 7–9 µs | 9–12 µs |
///
/// The slow mode of the blocking policy is a thread wake-up per fault, paid
/// when the scheduler puts the two threads on one CPU. Never blocking is a
/// little faster still but burns a CPU for as long as the FrameSpace lives,
/// half the machine here. Faults come in bursts (a traversal touches page
/// after page), so the thread keeps polling for `spin` after each fault and
/// then blocks: a burst pays the wake-up at most once, an idle program pays no
/// CPU. While polling it yields instead of spinning in place: the thread it
/// just woke is often queued on the same CPU, and a pure spin made that
/// thread wait out the whole window (218 µs per isolated fault, measured).
pub(crate) struct HandlerThread {
    stop: Arc<AtomicBool>,
    wake: OwnedFd,
    join: Option<JoinHandle<()>>,
}

impl HandlerThread {
    /// `serve` handles one page-fault message; it runs on the new thread.
    pub(crate) fn spawn(
        uffd: Arc<Uffd>,
        spin: Duration,
        serve: impl Fn(&UffdMsg) + Send + 'static,
    ) -> io::Result<HandlerThread> {
        // SAFETY: eventfd takes an initial value and flags, returns a new fd or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: efd is a fresh descriptor that nothing else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, wake_fd) = (stop.clone(), wake.as_raw_fd());
        let join = std::thread::Builder::new()
            .name("amber-uffd".into())
            .spawn(move || run(&uffd, wake_fd, &stop2, spin, &serve))?;
        Ok(HandlerThread {
            stop,
            wake,
            join: Some(join),
        })
    }
}

impl Drop for HandlerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writing 8 initialised bytes to our eventfd.
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

fn run(
    uffd: &Uffd,
    wake_fd: libc::c_int,
    stop: &AtomicBool,
    spin: Duration,
    serve: &dyn Fn(&UffdMsg),
) {
    let mut msgs = [UffdMsg {
        event: 0,
        _reserved1: 0,
        _reserved2: 0,
        _reserved3: 0,
        arg: [0; 3],
    }; 16];
    let mut last = Instant::now();
    loop {
        let n = match uffd.read(&mut msgs) {
            Ok(n) => n,
            Err(e) => sys::fatal(format_args!("reading the userfaultfd failed: {e}")),
        };
        for m in &msgs[..n] {
            serve(m);
        }
        if n > 0 {
            last = Instant::now();
            continue;
        }
        if stop.load(Ordering::Acquire) {
            return;
        }
        if !spin.is_zero() && last.elapsed() < spin {
            // Yield rather than spin in place (see above).
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
            continue;
        }
        let mut fds = [
            libc::pollfd {
                fd: uffd.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake_fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the call's duration.
        unsafe {
            libc::poll(fds.as_mut_ptr(), 2, -1);
        }
        last = Instant::now();
    }
}
