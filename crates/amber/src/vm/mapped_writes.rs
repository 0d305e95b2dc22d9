//! Which pages the program wrote, with the `mapped-unverified` backend.
//!
//! The reservation is cut into windows of 64 frames (aligned). A window is
//! *unwatched* until something writes it: mapped read-only, served by the
//! kernel's faults with their fault-around. The first write to it is a
//! SIGSEGV whose handler *watches* it: registers it with a userfaultfd for
//! asynchronous write-protect, makes it writable and write-protects its
//! pages, as the userfaultfd backend's reservation is, then lets the write
//! go on. From then on `PAGEMAP_SCAN` says which of its pages were written
//! since they were last protected. Every write lands in a watched window
//! (the object layer's installs and `copy_in` watch the window first), so
//! a commit's written pages are the written pages of the watched windows:
//! a scan of them, not of the whole mapping. (Scanning the whole mapping
//! for private copies, as a first version did, cost 0.8 ms a commit on a
//! 40 MB database: docs/design.md §4.3.1.)
//!
//! Why windows and not the whole mapping: registering a range for
//! write-protect turns the kernel's fault-around off there (one minor
//! fault per page read instead of one per 16; §4.3.1), so only where the
//! program writes pays it. Each watched run of windows is a mapping of its
//! own (the `vm.max_map_count` limit, §4.3): a window that cannot be
//! watched is an error where one can be returned, and for a plain store
//! the process stops naming the remedy, as the SIGSEGV backend's
//! `mprotect` does. A window left without a private copy when the copies
//! go back to the file is unwatched again.
//!
//! The handler does async-signal-safe work only: a window's state is an
//! atomic (unwatched, being watched, watched), claimed with a CAS so that
//! one thread watches it while the others wait, and the watching is three
//! system calls.

use std::sync::atomic::{AtomicU8, Ordering};

use super::mapped::{MappedState, os};
use super::space::FrameSpace;
use super::sys::{Mapping, fatal};
use super::uffd;
use super::{FrameNo, VmError};

/// Frames per window.
pub(crate) const WINDOW: FrameNo = 64;

const UNWATCHED: u8 = 0;
const WATCHING: u8 = 1;
const WATCHED: u8 = 2;

/// The windows' states, one byte each, in memory the kernel hands out as
/// it is touched (most windows of a reservation are never written).
pub(crate) struct Windows {
    states: Mapping,
    count: usize,
}

impl Windows {
    pub(crate) fn new(frames: u32) -> std::io::Result<Windows> {
        let count = (frames as usize).div_ceil(WINDOW as usize);
        let states = Mapping::anon(count.max(1), libc::PROT_READ | libc::PROT_WRITE)?;
        Ok(Windows { states, count })
    }

    fn state(&self, w: FrameNo) -> &AtomicU8 {
        assert!((w as usize) < self.count, "window {w} of {}", self.count);
        // SAFETY: `w` is in bounds (above); the mapping is `count` bytes,
        // zero-initialised, alive as long as `self`, and reached only
        // through atomics (an all-zero `AtomicU8` is valid).
        unsafe { &*self.states.ptr().cast::<AtomicU8>().add(w as usize) }
    }

    pub(crate) fn watched(&self, w: FrameNo) -> bool {
        self.state(w).load(Ordering::Acquire) == WATCHED
    }

    /// Runs `[first, end)` of consecutive watched windows below `end`.
    fn runs(&self, end: FrameNo) -> Vec<(FrameNo, FrameNo)> {
        let mut out: Vec<(FrameNo, FrameNo)> = Vec::new();
        for w in 0..end.min(self.count as FrameNo) {
            if !self.watched(w) {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.1 == w => last.1 = w + 1,
                _ => out.push((w, w + 1)),
            }
        }
        out
    }
}

impl FrameSpace {
    /// The frames of `[s, e)` (addresses) as runs reported by a scan, into
    /// `out` (ascending, deduplicated as they come).
    fn push_frames(&self, out: &mut Vec<FrameNo>, s: u64, e: u64) {
        let first = ((s as usize - self.base) >> self.shift) as FrameNo;
        let last = ((e as usize - 1 - self.base) >> self.shift) as FrameNo;
        for fr in first..=last {
            if out.last() != Some(&fr) {
                out.push(fr);
            }
        }
    }

    /// The bytes of windows `[a, b)`, clipped to the reservation.
    pub(crate) fn window_range(&self, a: FrameNo, b: FrameNo) -> (usize, usize) {
        let end = (b.saturating_mul(WINDOW)).min(self.table.nframes());
        let lo = self.frame_addr(a * WINDOW);
        (lo, self.frame_addr(end) - lo)
    }

    /// The windows with a frame below `end`.
    fn windows_below(&self, end: FrameNo) -> FrameNo {
        end.div_ceil(WINDOW)
    }

    /// Watches window `w` (see the module docs) unless it is; waits while
    /// another thread changes it. True if this call watched it.
    /// Async-signal-safe.
    pub(crate) fn watch(&self, m: &MappedState, w: FrameNo) -> Result<bool, VmError> {
        let s = m.windows.state(w);
        loop {
            match s.compare_exchange(UNWATCHED, WATCHING, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(WATCHED) => return Ok(false),
                // SAFETY: sched_yield has no preconditions.
                Err(_) => unsafe {
                    libc::sched_yield();
                },
            }
        }
        let (lo, len) = self.window_range(w, w + 1);
        let done = m
            .uffd
            .register(lo, len, uffd::UFFDIO_REGISTER_MODE_WP)
            .map_err(os("UFFDIO_REGISTER"))
            .and_then(|()| {
                m.uffd
                    .writeprotect(lo, len, true)
                    .map_err(os("UFFDIO_WRITEPROTECT"))
            })
            .and_then(|()| self.grant(m, w * WINDOW, (w + 1) * WINDOW, libc::PROT_READ | libc::PROT_WRITE));
        match done {
            Ok(()) => {
                s.store(WATCHED, Ordering::Release);
                Ok(true)
            }
            Err(e) => {
                let _ = m.uffd.unregister(lo, len);
                s.store(UNWATCHED, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Runs `f(watched)` with window `w`'s state claimed (`WATCHING`), so
    /// that no other thread changes the window's protection meanwhile
    /// (`mapped_checks.rs`); waits while another thread has it. `f` may
    /// change `watched`, which the window's state then says.
    /// Async-signal-safe if `f` is.
    pub(crate) fn with_window<T>(&self, m: &MappedState, w: FrameNo, f: impl FnOnce(&mut bool) -> T) -> T {
        let s = m.windows.state(w);
        let was = loop {
            let cur = s.load(Ordering::Acquire);
            if cur != WATCHING
                && s.compare_exchange(cur, WATCHING, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                break cur;
            }
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        };
        let mut watched = was == WATCHED;
        let out = f(&mut watched);
        s.store(if watched { WATCHED } else { UNWATCHED }, Ordering::Release);
        out
    }

    /// `mapped`: opens the checked frames of window `w` (read-write where
    /// it is watched, read-only where not). Async-signal-safe.
    pub(crate) fn open_window(&self, m: &MappedState, w: FrameNo) -> Result<(), VmError> {
        self.with_window(m, w, |watched| {
            let prot = if *watched {
                libc::PROT_READ | libc::PROT_WRITE
            } else {
                libc::PROT_READ
            };
            self.grant(m, w * WINDOW, (w + 1) * WINDOW, prot)
        })
    }

    /// Watches the windows of frames `f..f+n` (and, with checks, opens
    /// them: the frames were just checked, and a window watched already
    /// does not open them again).
    pub(crate) fn watch_frames(&self, m: &MappedState, f: FrameNo, n: u32) -> Result<(), VmError> {
        for w in f / WINDOW..=(f + n - 1) / WINDOW {
            if !self.watch(m, w)? && m.checks.is_some() {
                self.open_window(m, w)?;
            }
        }
        Ok(())
    }

    /// A SIGSEGV at `addr`, frame `f`, in the signal handler, `f` checked
    /// (with checks) or readable (without): a write to an unwatched
    /// window, which is watched; with checks also a touch of a checked
    /// frame not opened yet, whose window is opened. Returning retries the
    /// access.
    pub(crate) fn mapped_fault(&self, m: &MappedState, addr: usize, f: FrameNo, write: Option<bool>) {
        if self.is_unassigned(f) || (write == Some(false) && m.checks.is_none()) {
            fatal(format_args!(
                "a fault at {addr:#x}, frame {f} of a mapped frame space, which is readable everywhere \
                 (a wild or stale pointer)"
            ));
        }
        let w = f / WINDOW;
        let done = if write == Some(false) {
            self.open_window(m, w)
        } else {
            match self.watch(m, w) {
                Ok(false) if m.checks.is_some() => self.open_window(m, w),
                r => r.map(drop),
            }
        };
        if let Err(e) = done {
            fatal(format_args!("a write to frame {f} at {addr:#x}: {e}"));
        }
    }

    /// Frames written since the last call with `take` (ascending): the
    /// pages written in watched windows, protected again with `take`.
    pub(crate) fn mapped_written(&self, m: &MappedState, take: bool) -> Result<Vec<FrameNo>, VmError> {
        let mut out = Vec::new();
        let windows = self.windows_below(self.table.assigned());
        for (a, b) in m.windows.runs(windows) {
            let (lo, len) = self.window_range(a, b);
            m.pagemap
                .written(lo as u64, (lo + len) as u64, take, &mut |s, e| self.push_frames(&mut out, s, e))
                .map_err(os("PAGEMAP_SCAN"))?;
        }
        Ok(out)
    }

    /// The frames holding a private copy (written since they last read the
    /// file), ascending: every write lands in a watched window, so only
    /// those are scanned.
    pub fn copies(&self) -> Result<Vec<FrameNo>, VmError> {
        let Some(m) = self.mapped_state() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let windows = self.windows_below(self.table.assigned());
        for (a, b) in m.windows.runs(windows) {
            let (lo, len) = self.window_range(a, b);
            m.pagemap
                .copied(lo as u64, (lo + len) as u64, &mut |s, e| self.push_frames(&mut out, s, e))
                .map_err(os("PAGEMAP_SCAN"))?;
        }
        Ok(out)
    }

    /// Frames `[f, end)` were mapped anew (read-only, unregistered) or
    /// their copies dropped (dropped unprotected pages would come back
    /// unprotected): where they lie in watched windows, registered,
    /// writable and protected again.
    pub(crate) fn rewatch(&self, m: &MappedState, f: FrameNo, end: FrameNo) -> Result<(), VmError> {
        let mut at = f;
        while at < end {
            let w = at / WINDOW;
            let to = ((w + 1) * WINDOW).min(end);
            if m.windows.watched(w) {
                let (lo, len) = (self.frame_addr(at), (to - at) as usize * self.frame_size);
                m.uffd
                    .register(lo, len, uffd::UFFDIO_REGISTER_MODE_WP)
                    .map_err(os("UFFDIO_REGISTER"))?;
                m.uffd.writeprotect(lo, len, true).map_err(os("UFFDIO_WRITEPROTECT"))?;
                self.grant(m, at, to, libc::PROT_READ | libc::PROT_WRITE)?;
            } else if m.checks.is_some() {
                // Mapped anew inaccessible: the checked frames open again.
                self.grant(m, at, to, libc::PROT_READ)?;
            }
            at = to;
        }
        Ok(())
    }

    /// Write-protects frames `f..f+n` again where they are watched (the
    /// layer above restored their committed bytes with `copy_in`).
    pub(crate) fn mapped_write_protect(&self, m: &MappedState, f: FrameNo, n: u32) -> Result<(), VmError> {
        let mut at = f;
        while at < f + n {
            let w = at / WINDOW;
            let to = ((w + 1) * WINDOW).min(f + n);
            if m.windows.watched(w) {
                let (lo, len) = (self.frame_addr(at), (to - at) as usize * self.frame_size);
                m.uffd.writeprotect(lo, len, true).map_err(os("UFFDIO_WRITEPROTECT"))?;
            }
            at = to;
        }
        Ok(())
    }

    /// `copy_in` with the mapped backend: lets `store` write at `addr`
    /// (inside one frame) without changing whether the frame counts as written: its
    /// window watched first (an unwatched one holds no write), the page
    /// protected after unless the program had written it.
    pub(crate) fn mapped_copy_in(
        &self,
        m: &MappedState,
        addr: usize,
        store: impl FnOnce(*mut u8),
    ) -> Result<(), VmError> {
        let f = ((addr - self.base) >> self.shift) as FrameNo;
        self.watch(m, f / WINDOW)?;
        let lo = self.frame_addr(f);
        let mut written = false;
        m.pagemap
            .written(lo as u64, (lo + self.frame_size) as u64, false, &mut |_, _| written = true)
            .map_err(os("PAGEMAP_SCAN"))?;
        // The window is watched, so writable; what `store` writes lies in
        // frame `f` (the caller's contract), and the lock keeps other
        // copies out.
        store(addr as *mut u8);
        if written {
            return Ok(());
        }
        self.mapped_write_protect(m, f, 1)
    }

    /// Unwatches the windows that hold no copy any more: read-only and
    /// unregistered again (their fault-around comes back). Between
    /// transactions only, so that no write is under way.
    pub(crate) fn unwatch_idle(&self, m: &MappedState) -> Result<(), VmError> {
        let copies = self.copies()?;
        let mut busy: Vec<FrameNo> = copies.iter().map(|&f| f / WINDOW).collect();
        busy.dedup();
        let windows = self.windows_below(self.table.assigned());
        for (a, b) in m.windows.runs(windows) {
            for w in (a..b).filter(|w| busy.binary_search(w).is_err()) {
                let (lo, len) = self.window_range(w, w + 1);
                self.with_window(m, w, |watched| {
                    self.grant(m, w * WINDOW, (w + 1) * WINDOW, libc::PROT_READ)?;
                    m.uffd.unregister(lo, len).map_err(os("UFFDIO_UNREGISTER"))?;
                    *watched = false;
                    Ok::<(), VmError>(())
                })?;
            }
        }
        Ok(())
    }
}
