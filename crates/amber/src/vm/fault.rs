//! What happens on each event: a userfaultfd message, a SIGSEGV, a request
//! to the SIGSEGV backend's service thread, a synchronous `ensure_resident`,
//! and the locked memcpys behind `copy_out`/`copy_in`.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::frame_table::{CLEAN, DIRTY, EVICTING, NOT_RESIDENT, WRITE_PENDING};
use super::held;
use super::lock::Guard;
use super::space::{FrameSpace, Imp, Installer};
use super::sys::{StackBuf, fatal};
use super::uffd::{UFFD_PAGEFAULT_FLAG_WP, UffdMsg};
use super::{FaultError, FaultKind, FrameNo, VmError};

/// Times `fill` runs the service before giving up on a frame that does not
/// stay resident.
const FILL_TRIES: u32 = 64;

/// How many fault messages in a row from one thread at one page, with Amber
/// locks held, make the handler conclude that the thread really touched
/// persistent memory under a lock (`FrameSpace::serve_uffd`): a stale
/// message is not followed by another from the same thread at the same page.
const SUSPECT_REPEATS: u32 = 64;

thread_local! {
    /// Address of the frame whose `first_write` this thread is running, to
    /// turn a touch of that frame from inside the callback (which would wait
    /// for itself) into a clear abort.
    static FIRST_WRITE_OF: Cell<usize> = const { Cell::new(0) };
    /// The frame space this thread serves faults of (its service thread):
    /// a fault of its own there would wait for itself.
    static SERVING: Cell<usize> = const { Cell::new(0) };
}

impl FrameSpace {
    /// Runs the service for `f` in the calling thread unless it is resident.
    pub(crate) fn fill(&self, f: FrameNo) -> Result<(), FaultError> {
        let page = match self.page_of(f) {
            Some((head, idx, _)) => head + u64::from(idx),
            None => {
                return Err(FaultError::new(
                    u64::MAX,
                    FaultKind::Dangling,
                    format!("frame {f} is not assigned to a page"),
                ));
            }
        };
        let mut inst = Installer {
            space: self,
            frame: f,
            hit: false,
        };
        if let Some(m) = self.mapped_state() {
            // The kernel serves every frame; a block met here for the
            // first time is checked as a fetch checks it (the service
            // returns its damage), then known clean (`mapped.rs`). With
            // checks the service checks the frame's whole check window,
            // and the checked frames of its window are opened
            // (`mapped_checks.rs`).
            if !self.checked(f) {
                self.service.missing(f, &mut inst)?;
                self.note_checked(f);
                if m.checks.is_some() {
                    self.open_window(m, f / super::mapped_writes::WINDOW)
                        .map_err(|e| FaultError::new(page, FaultKind::Vm, e.to_string()))?;
                }
            }
            return Ok(());
        }
        if self.is_resident(f) {
            return Ok(());
        }
        // The service installs the frame, but a service running at the same
        // time for another thread (an `ensure_resident`, or a fault served
        // while this one is) may evict it again, under a cache budget,
        // before it is checked here: fetch it again. A bounded number of
        // times, so that a service that never installs cannot loop forever.
        for _ in 0..FILL_TRIES {
            self.service.missing(f, &mut inst)?;
            if inst.hit || self.is_resident(f) {
                return Ok(());
            }
        }
        Err(FaultError::new(
            page,
            FaultKind::Internal,
            format!(
                "the fault service returned {FILL_TRIES} times without frame {f} being resident"
            ),
        ))
    }

    /// `fill` for a caller outside the fault path (`copy_out`, `copy_in`):
    /// refused while the calling thread holds Amber locks, which the
    /// service may need -- whether or not the frame happens to be resident,
    /// so that such a call fails in every test, not only in unlucky runs.
    pub(crate) fn fill_here(&self, f: FrameNo) -> Result<(), VmError> {
        let held = held::local();
        if !held.is_empty() {
            return Err(VmError::LockHeld { frame: f, held });
        }
        self.fill(f).map_err(VmError::Fault)
    }

    /// userfaultfd: one message, on the handler thread.
    pub(crate) fn serve_uffd(&self, m: &UffdMsg) {
        let Imp::Uffd(u) = &self.imp else { return };
        if !m.is_pagefault() || self.dropping.load(Ordering::Acquire) {
            return;
        }
        let addr = m.address() as usize;
        let page_addr = addr & !(self.host_page - 1);
        let Some(f) = self.frame_at(addr) else {
            fatal(format_args!(
                "userfaultfd fault at {addr:#x}, outside the reservation"
            ))
        };
        if m.flags() & UFFD_PAGEFAULT_FLAG_WP != 0 {
            // Not expected with WP_ASYNC; resolve it rather than hang.
            let _ = u.uffd.writeprotect(page_addr, self.host_page, false);
            return;
        }
        let held = held::of_thread(m.thread_id());
        if !held.is_empty() {
            // Either the thread touched persistent memory holding one of
            // Amber's locks (a bug: the service may need that lock), or the
            // message is stale: read just before another thread's service
            // installed the page, so that the faulting thread found it
            // present, did not wait, and went on to take locks of its own.
            // A thread that is really stopped at the fault faults again as
            // soon as it is woken; one that went on does not. So the page is
            // woken, and only the same thread at the same page with locks
            // held `SUSPECT_REPEATS` times in a row is taken for the bug.
            if u.suspect_repeats(m.thread_id(), page_addr) < SUSPECT_REPEATS {
                let _ = u.uffd.wake(page_addr, self.host_page);
                return;
            }
            fatal(format_args!(
                "frame {f} at {addr:#x} was touched by thread {} while it holds {held}; \
                 Amber never touches persistent memory holding its own locks (a bug in Amber)",
                m.thread_id()
            ));
        }
        if self.is_unassigned(f) {
            fatal(format_args!(
                "access to frame {f} at {addr:#x}, which is not assigned to any page (a wild or stale pointer)"
            ));
        }
        if let Err(e) = self.fill(f) {
            fatal(format_args!("page {}: {}", e.page, e.message));
        }
        // The service installed without waking anyone (see
        // `Installer::install`): the faulting thread resumes now that the
        // service is done, whoever installed the page.
        let _ = u.uffd.wake(page_addr, self.host_page);
    }

    /// sigsegv: a request from the handler, on the service thread. False,
    /// with the message in `msg`, if `f` could not be made resident.
    pub(crate) fn serve_request(&self, f: FrameNo, msg: &mut StackBuf) -> bool {
        SERVING.with(|c| c.set(self as *const FrameSpace as usize));
        match self.fill(f) {
            Ok(()) => true,
            Err(e) => {
                let _ = write!(msg, "page {}: {}", e.page, e.message);
                false
            }
        }
    }

    /// A SIGSEGV at `addr` inside this reservation, on the faulting thread,
    /// inside the signal handler. Returning retries the access. Only
    /// async-signal-safe work happens here: the fetch itself is the service
    /// thread's.
    pub(crate) fn on_sigsegv(&self, addr: usize, write: Option<bool>) {
        let Some(f) = self.frame_at(addr) else { return };
        if let Imp::Mapped(m) = &self.imp {
            if let Some(c) = &m.checks
                && !self.checked(f)
                && !self.is_unassigned(f)
            {
                // The first touch of a frame not checked yet: its window is
                // checked by the service thread (`mapped_checks.rs`).
                self.refuse_service_touch(f, addr);
                c.requests.request(f);
                return;
            }
            // The first write to an unwatched window (`mapped_writes.rs`),
            // or a checked frame not opened yet: no Amber lock is taken,
            // whatever the thread holds.
            self.mapped_fault(m, addr, f, write);
            return;
        }
        self.refuse_service_touch(f, addr);
        let Imp::Sigsegv(s) = &self.imp else {
            // userfaultfd: a write to a victim that eviction write-protected
            // while it checks it (`evict_clean`); wait until that is over,
            // then retry (the frame is gone, or writable again).
            while self.state(f) == EVICTING {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
            return;
        };
        loop {
            match self.state(f) {
                NOT_RESIDENT => {
                    s.requests.request(f);
                    return;
                }
                CLEAN => {
                    // A read that raced with an install: the retry succeeds.
                    if write == Some(false) || !self.track_writes {
                        return;
                    }
                    let Some(m) = self.table.meta(f) else { return };
                    if m.state
                        .compare_exchange(CLEAN, WRITE_PENDING, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        self.first_write(f);
                        return;
                    }
                }
                WRITE_PENDING => {
                    if FIRST_WRITE_OF.with(|c| c.get()) == self.frame_addr(f) {
                        fatal(format_args!("first_write for frame {f} touched that frame"));
                    }
                    // Another thread is running first_write; wait for it.
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
                EVICTING => {
                    // Being evicted (by the service thread, or a thread
                    // making room): wait, then fetch it again.
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
                DIRTY => return,
                _ => fatal(format_args!(
                    "access to frame {f} at {addr:#x}, which is not assigned to any page (a wild or stale pointer)"
                )),
            }
        }
    }

    /// In the signal handler, before a touch of frame `f` is handed to the
    /// service: aborts if this thread holds Amber locks or is the service
    /// thread itself (the service would wait for it).
    fn refuse_service_touch(&self, f: FrameNo, addr: usize) {
        let held = held::local();
        if !held.is_empty() {
            fatal(format_args!(
                "frame {f} at {addr:#x} was touched while this thread holds {held}; \
                 Amber never touches persistent memory holding its own locks (a bug in Amber)"
            ));
        }
        if SERVING.with(|c| c.get()) == self as *const FrameSpace as usize {
            fatal(format_args!(
                "the fault service touched frame {f} at {addr:#x} (a bug in Amber: it must \
                 read frames with copy_out)"
            ));
        }
    }

    /// sigsegv: this thread won the CLEAN → WRITE_PENDING race for `f`.
    fn first_write(&self, f: FrameNo) {
        let Imp::Sigsegv(s) = &self.imp else { return };
        let off = self.frame_addr(f) - self.base();
        // The frame is read-only in the program's view and WRITE_PENDING, so
        // only `copy_in` (the layer above, which coordinates with itself)
        // could change it while the slice lives, and eviction leaves it.
        let (start, len) = (s.staging.ptr().wrapping_add(off), self.frame_size);
        // SAFETY: the staging view covers the reservation and `off..off +
        // frame_size` is inside it; nothing else writes it (above).
        let clean = unsafe { std::slice::from_raw_parts(start, len) };
        FIRST_WRITE_OF.with(|c| c.set(self.frame_addr(f)));
        self.service.first_write(f, clean);
        FIRST_WRITE_OF.with(|c| c.set(0));
        let g = self.lock.lock();
        if self.state(f) != WRITE_PENDING {
            return;
        }
        if let Err(e) = self.protect(f, 1, libc::PROT_READ | libc::PROT_WRITE) {
            // A store cannot return an error: this is the one place an
            // mprotect failure is fatal (see `VmError::MapCount`).
            drop(g);
            fatal(format_args!("enabling writes to frame {f}: {e}"));
        }
        if let Some(m) = self.table.meta(f) {
            m.state.store(DIRTY, Ordering::Release);
        }
        self.note_written(&g, f);
    }

    /// Copies out of a resident frame (lock held, so it cannot be evicted).
    pub(crate) fn read_frame(&self, _g: &Guard<'_>, addr: usize, buf: &mut [u8]) {
        let src = match &self.imp {
            // SAFETY: addr - base is inside the staging view's range.
            Imp::Sigsegv(s) => unsafe { s.staging.ptr().add(addr - self.base()) },
            Imp::Uffd(_) | Imp::Mapped(_) => addr as *mut u8,
        };
        // SAFETY: the frame is resident and readable in the chosen view (the
        // caller checked under the lock, which also excludes eviction), so
        // the copy cannot fault; `buf` does not overlap the reservation.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
    }

    /// Copies into a resident frame without changing its written status.
    pub(crate) fn write_frame(
        &self,
        g: &Guard<'_>,
        addr: usize,
        data: &[u8],
    ) -> Result<(), VmError> {
        self.store_frame(g, addr, data.len(), |dst| {
            // SAFETY: `store_frame` hands a pointer to `data.len()` writable
            // bytes of a resident frame; `data` does not overlap the
            // reservation.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
        })
    }

    /// Lets `store` write the `len` bytes at `addr` of a resident frame
    /// (lock held) without changing its written status: `store` gets a
    /// pointer to them in a writable view (the staging view with SIGSEGV,
    /// the program's view otherwise, write-protected again afterwards if it
    /// was) and must write only those bytes.
    pub(crate) fn store_frame(
        &self,
        _g: &Guard<'_>,
        addr: usize,
        len: usize,
        store: impl FnOnce(*mut u8),
    ) -> Result<(), VmError> {
        match &self.imp {
            Imp::Sigsegv(s) => {
                // Inside the staging view, which is always writable;
                // resident (checked under the lock), so no hole is being
                // punched.
                store(s.staging.ptr().wrapping_add(addr - self.base()));
                Ok(())
            }
            Imp::Mapped(m) => self.mapped_copy_in(m, addr, store),
            Imp::Uffd(u) => {
                let hp = self.host_page;
                let (lo, hi) = (addr & !(hp - 1), (addr + len + hp - 1) & !(hp - 1));
                let mut written: Vec<(u64, u64)> = Vec::new();
                let protecting = self.protecting();
                if protecting {
                    u.pagemap_written(lo, hi, &mut written)?;
                }
                // Resident and writable (a write-protected page is resolved
                // by the kernel without a message: WP_ASYNC), so the store
                // cannot block on our handler thread.
                store(addr as *mut u8);
                if protecting {
                    // Re-protect the pages that were clean before our write.
                    let mut p = lo;
                    while p < hi {
                        let was_written = written
                            .iter()
                            .any(|&(s, e)| (p as u64) >= s && (p as u64) < e);
                        if !was_written {
                            u.uffd.writeprotect(p, hp, true).map_err(|e| VmError::Os {
                                op: "UFFDIO_WRITEPROTECT",
                                err: e,
                            })?;
                        }
                        p += hp;
                    }
                }
                Ok(())
            }
        }
    }
}
