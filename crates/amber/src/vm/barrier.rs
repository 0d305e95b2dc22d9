//! Software write barriers: the other way to notice writes.
//!
//! Under page protection (`tracking.rs`) a frame is write-protected until
//! its first write, which the hardware reports. Under a software detection
//! scheme (Hosking et al., `papers/000_*` §4: object marking, remembered
//! sets, card marking) every mutable reference Amber hands out passes a
//! *barrier* first, which records what is about to be written; frames are
//! installed writable and no write fault is ever taken.
//!
//! The frame space still keeps, per frame, whether it was written in the
//! open transaction (`DIRTY`), because eviction and rollback work by
//! frames: the barrier *pins* the frames it is told of (CLEAN → DIRTY, the
//! same compare-and-swap eviction's CLEAN → EVICTING claim races with, so
//! exactly one wins) before the reference exists. An unpinned frame was
//! not written, whatever its protection says; `take_written` lists the
//! pinned frames and unpins them, as it lists and re-protects the written
//! ones under page protection.
//!
//! Every `&mut` into frames is made by [`Access`], and each of its mutable
//! accessors calls the barrier; what the barrier records (a mark in the
//! object's header, an entry in a set, a card) is the layer above's
//! [`Barrier`]. Switching between page protection and a software scheme
//! ([`FrameSpace::set_barrier_mode`]) re-protects or unprotects every
//! resident frame, between transactions.

use std::any::Any;
use std::sync::atomic::Ordering;

use super::frame_table::{CLEAN, DIRTY, EVICTING, NOT_RESIDENT, WRITE_PENDING};
use super::space::{FrameSpace, Imp};
use super::sys::fatal;
use super::typed::Access;
use super::{FrameNo, VmError};
use crate::format::objects::{FLAG_MARK, OBJECT_HEADER};

/// What a software detection scheme records of a write (the layer above's).
pub trait Barrier: Send + Sync + std::fmt::Debug {
    /// `len` bytes at `at` are about to be written; they lie in the object
    /// whose body starts at `object` (0 when the caller does not know: a
    /// page header, a field reached by address). `memory` reads the bytes
    /// there now, before the write (a clean copy). Returns whether the
    /// object's header must be marked ([`FLAG_MARK`], object marking).
    fn note(&mut self, object: u64, at: u64, len: usize, memory: &Memory<'_>) -> bool;

    /// The concrete scheme, for the layer above that installed it.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Reads bytes of the frame space for a barrier (its clean copies).
pub struct Memory<'a> {
    access: &'a Access,
}

impl Memory<'_> {
    /// Copies the bytes at `addr` into `buf`: a plain load, which faults a
    /// frame in if it is not resident. Panics outside the frame space.
    pub fn read(&self, addr: u64, buf: &mut [u8]) {
        assert!(
            self.access.contains(addr, buf.len()),
            "a barrier read outside the frame space ({addr:#x}, {} bytes)",
            buf.len()
        );
        // `buf` cannot alias frames: no `&mut` into frames exists while the
        // barrier runs (inside `&mut Access`, before the reference is made).
        // SAFETY: in the mapped reservation (checked); a non-resident frame
        // is filled on touch; any byte is valid; `buf` is not a frame.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
    }
}

impl FrameSpace {
    /// Whether writes are noted by a software barrier (frames installed
    /// writable, no write protection) rather than by page protection.
    pub fn barrier_mode(&self) -> bool {
        self.software.load(Ordering::Acquire)
    }

    /// Whether frames are write-protected to notice writes.
    pub(crate) fn protecting(&self) -> bool {
        self.track_writes && !self.barrier_mode()
    }

    /// Switches between page protection (`false`) and a software barrier
    /// (`true`). Only between transactions (no frame written and not yet
    /// taken): every resident frame is made writable, or write-protected
    /// again. Returns the frames whose protection changed, for the cost of
    /// switching.
    pub fn set_barrier_mode(&self, on: bool) -> Result<u32, VmError> {
        if !self.track_writes {
            return Err(VmError::NotTracking);
        }
        let _g = self.lock.lock();
        if self.barrier_mode() == on {
            return Ok(0);
        }
        let n = self.table.assigned();
        let mut changed = 0u32;
        match &self.imp {
            Imp::Uffd(u) => {
                if n > 0 {
                    // One ioctl over the assigned range: pages not present
                    // are skipped by the kernel.
                    u.uffd
                        .writeprotect(self.frame_addr(0), n as usize * self.frame_size, !on)
                        .map_err(|e| VmError::Os {
                            op: "UFFDIO_WRITEPROTECT",
                            err: e,
                        })?;
                }
                // Between transactions no frame is written: under the
                // barrier every resident frame starts unpinned (a DIRTY one
                // here would be a frame the last commit did not list).
                for f in 0..n {
                    if let Some(m) = self.table.meta(f)
                        && (m.state.load(Ordering::Acquire) == CLEAN
                            || m.state
                                .compare_exchange(DIRTY, CLEAN, Ordering::AcqRel, Ordering::Acquire)
                                .is_ok())
                    {
                        changed += 1;
                    }
                }
            }
            Imp::Sigsegv(_) => {
                let prot = if on {
                    libc::PROT_READ | libc::PROT_WRITE
                } else {
                    libc::PROT_READ
                };
                let mut f = 0;
                while f < n {
                    if self.state(f) != CLEAN {
                        f += 1;
                        continue;
                    }
                    let mut e = f + 1;
                    while e < n && self.state(e) == CLEAN {
                        e += 1;
                    }
                    self.protect(f, e - f, prot)?;
                    changed += e - f;
                    f = e;
                }
            }
            // Nothing is protected: a write is found by its private copy,
            // and the barrier pins what it notes as it does elsewhere.
            Imp::Mapped(_) => {}
        }
        self.software.store(on, Ordering::Release);
        Ok(changed)
    }

    /// Pins the frames of `[at, at + len)` as written (see the module
    /// docs), fetching any that is not resident first. A frame that cannot
    /// be fetched is met as a plain store into it would be: the process
    /// stops with a message naming the page.
    #[inline]
    fn pin(&self, at: u64, len: usize) {
        let first = ((at as usize - self.base) >> self.shift) as FrameNo;
        let last = ((at as usize + len.max(1) - 1 - self.base) >> self.shift) as FrameNo;
        for f in first..=last {
            if self.state(f) != DIRTY {
                self.pin_slow(f);
            }
        }
    }

    #[cold]
    fn pin_slow(&self, f: FrameNo) {
        loop {
            let Some(m) = self.table.meta(f) else {
                fatal(format_args!("a write barrier met frame {f}, which no page has"));
            };
            match m.state.load(Ordering::Acquire) {
                DIRTY => return,
                CLEAN => {
                    if m.state
                        .compare_exchange(CLEAN, DIRTY, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        self.pinned.lock().unwrap_or_else(|p| p.into_inner()).push(f);
                        return;
                    }
                }
                NOT_RESIDENT => {
                    if let Err(e) = self.ensure_resident(f) {
                        fatal(format_args!("{e}"));
                    }
                }
                EVICTING | WRITE_PENDING => std::thread::yield_now(),
                s => fatal(format_args!(
                    "a write barrier met frame {f} in state {s} (a bug in Amber)"
                )),
            }
        }
    }

    /// Barrier mode: the pinned frames (ascending), unpinned with `take`.
    pub(crate) fn pinned_frames(&self, take: bool) -> Vec<FrameNo> {
        let mut list = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = if take {
            std::mem::take(&mut *list)
        } else {
            list.clone()
        };
        out.sort_unstable();
        out.dedup();
        out.retain(|&f| self.state(f) == DIRTY);
        if take {
            self.unpin(&out);
        }
        out
    }

    /// Barrier mode: frames `frames` are no longer written (DIRTY → CLEAN).
    pub(crate) fn unpin(&self, frames: &[FrameNo]) {
        for &f in frames {
            if let Some(m) = self.table.meta(f) {
                let _ = m
                    .state
                    .compare_exchange(DIRTY, CLEAN, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    /// Barrier mode: records a frame installed as written.
    pub(crate) fn note_pinned(&self, f: FrameNo) {
        self.pinned.lock().unwrap_or_else(|p| p.into_inner()).push(f);
    }
}

impl Access {
    /// Installs (or, with `None`, removes) the software barrier every
    /// mutable accessor calls. The frame space must be in barrier mode
    /// while one is installed.
    pub fn set_barrier(&mut self, barrier: Option<Box<dyn Barrier>>) {
        self.barrier = barrier;
    }

    /// The installed barrier.
    pub fn barrier_mut(&mut self) -> Option<&mut (dyn Barrier + 'static)> {
        self.barrier.as_deref_mut()
    }

    /// Removes the installed barrier, to read its records with this
    /// accessor (put it back with [`set_barrier`](Self::set_barrier)).
    pub fn take_barrier(&mut self) -> Option<Box<dyn Barrier>> {
        self.barrier.take()
    }

    /// The barrier's work for a write of `len` bytes at `at` in `object`:
    /// pin the frames, let the scheme record it, mark the header if it
    /// asks. Callers have checked `[at, at + len)` (and, for an object,
    /// its header) lies in the reservation.
    #[inline(never)]
    pub(crate) fn noted(&mut self, object: u64, at: u64, len: usize) {
        self.space().pin(at, len);
        let Some(mut b) = self.barrier.take() else {
            return;
        };
        let mark = b.note(object, at, len, &Memory { access: self });
        self.barrier = Some(b);
        if mark && object != 0 {
            self.space().pin(object - OBJECT_HEADER as u64, OBJECT_HEADER);
            // The flags are the tag's top byte: the header's fourth byte.
            let flags = (object - OBJECT_HEADER as u64 + 3) as *mut u8;
            // No reference to the header exists: references are to bodies.
            // SAFETY: the header is in the reservation (the caller checked);
            // its frame is resident and pinned (above), so writable.
            unsafe { *flags |= FLAG_MARK };
        }
    }

    /// Object marking: clears the mark of the object whose body is at
    /// `object` (its commit scan found it). Not a write the barrier sees.
    pub fn unmark(&mut self, object: u64) {
        let at = object - OBJECT_HEADER as u64 + 3;
        if !self.contains(at, 1) {
            return;
        }
        let flags = at as *mut u8;
        // SAFETY: in the reservation (checked); only marked objects are
        // unmarked, whose frames are pinned (written, writable) until the
        // commit that calls this takes them; a byte has no alignment.
        unsafe { *flags &= !FLAG_MARK };
    }
}
