//! The `mapped` backend: the `mapped-unverified` mapping (`mapped.rs`), its
//! pages verified before the program can read them.
//!
//! A frame of the mapping is inaccessible (`PROT_NONE`) until it is known
//! clean: its block checked as a fetch checks one (checksum, the changes
//! committed since the last checkpoint, the object map, nulls in non-null
//! fields, a data block: `db/mapped.rs`), or installed by Amber (a new
//! block), which the frame table records (`CLEAN`/`DIRTY` rather than the
//! identity region's zero state, "not resident"). The first touch of an
//! unchecked frame is a SIGSEGV whose handler posts the frame to the
//! space's service thread (`service.rs`, as the SIGSEGV backend does: the
//! check reads files, takes locks and allocates, none of which a signal
//! handler may) and waits. The service checks every block that starts in
//! the frame's *check window* ([`CHECK_WINDOW`] frames, aligned) where
//! the OS page cache holds them, through a read-only shared view of the
//! page file ([`FrameSpace::file_view`]: nothing copied; a block with
//! changes the file does not hold yet is read and patched instead), then
//! opens the frames of the blocks found clean (`grant`): one
//! fault per window, not per page. A block found damaged stays closed; the
//! faulting frame's own damage fails the request, and the faulting thread
//! aborts with `amber: fatal: page N: …` as on the other backends
//! (`Db::try_get` runs the same service in the calling thread and returns
//! the error). A damaged neighbour is left for its own touch to report.
//!
//! **Protections.** A frame's protection follows from two things only: the
//! frame checked or not (none if not), and its write window (`WINDOW`,
//! `mapped_writes.rs`) watched or not (read-write if it is, read-only if
//! not). Every change of protection inside a window is made with the
//! window's state claimed (`WATCHING`), so that a thread opening frames a
//! check found clean and one watching or unwatching the window never
//! interleave their `mprotect`s. A thread faulting on a checked frame
//! (opened by another thread meanwhile, or a block of several pages whose
//! other windows were not opened yet) opens the frame's window again and
//! retries.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::frame_table::NOT_RESIDENT;
use super::mapped::MappedState;
use super::service::{Requests, ServiceThread};
use super::space::FrameSpace;
use super::mapped::file_len;
use super::sys::{self, Mapping, StackBuf};
use super::{FrameNo, VmError};

/// Frames a check covers: 16 (64 KiB with 4 KiB pages), the kernel's
/// fault-around on a page file written page by page. A larger window pays
/// its fault over more pages, but checks more pages the program may never
/// read (docs/design.md §4.3.1 has the measurements behind the choice).
pub const CHECK_WINDOW: FrameNo = 16;

/// The service thread of a `mapped` space, the requests the signal
/// handler posts to it, and the view of the page file its checks read.
pub(crate) struct Checks {
    pub(crate) requests: Arc<Requests>,
    service: Mutex<Option<ServiceThread>>,
    /// The page file mapped shared and read-only over the identity
    /// region's length (`FrameSpace::file_view`): the OS page cache's own
    /// pages, which a check reads where they lie instead of copying them
    /// out with `pread` (a copy was the largest part of a check).
    view: Mapping,
    /// The page file, whose length bounds what the view may be read at
    /// (past the end a read would be a SIGBUS).
    file: libc::c_int,
}

impl Checks {
    /// `file`: the page file's descriptor (the mapped state's own, which
    /// lives as long as this); `identity`: the identity region's length.
    pub(crate) fn new(wait_poll: Duration, file: libc::c_int, identity: usize) -> Result<Checks, String> {
        let view = Mapping::shared_fd(identity, libc::PROT_READ, file)
            .map_err(|e| format!("mapping the page file for checks: {e}"))?;
        let _ = sys::madvise(view.addr(), view.len(), libc::MADV_DONTFORK);
        Ok(Checks {
            requests: Requests::new(wait_poll).into(),
            service: Mutex::new(None),
            view,
            file,
        })
    }

    /// Starts the service thread; `serve` checks a frame's window.
    pub(crate) fn spawn(
        &self,
        spin: Duration,
        serve: impl Fn(FrameNo, &mut StackBuf) -> bool + Send + 'static,
    ) -> Result<(), VmError> {
        let t = ServiceThread::spawn(self.requests.clone(), spin, serve).map_err(|e| VmError::Os {
            op: "spawn fault service thread",
            err: e,
        })?;
        *self.service.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        Ok(())
    }

    /// Stops and joins the service thread.
    pub(crate) fn stop(&self) {
        drop(self.service.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

impl FrameSpace {
    /// With the `mapped` backend, the frames `[first, end)` of the check
    /// window holding frame `f` (clipped to the reservation): the blocks
    /// starting there are checked together at the window's first touch.
    /// None with any other backend.
    pub fn check_window(&self, f: FrameNo) -> Option<(FrameNo, FrameNo)> {
        let m = self.mapped_state()?;
        m.checks.as_ref()?;
        let first = f - f % CHECK_WINDOW;
        Some((first, (first + CHECK_WINDOW).min(self.table.nframes())))
    }

    /// With the `mapped` backend, pages `[page, page + pages)` of the page
    /// file as the OS page cache holds them (the checks' read-only view),
    /// if they lie within the file now; None past its end or with any
    /// other backend. Nothing is copied: a check reads the kernel's pages.
    ///
    /// The bytes change only where a checkpoint writes the file, which it
    /// does only to blocks with changes pending: the caller reads blocks
    /// the store listed without any, and trusts what it read only if the
    /// store still says so afterwards (`Core::check_in_view`).
    pub fn file_view(&self, page: u64, pages: u64) -> Option<&[u8]> {
        let c = self.mapped_state()?.checks.as_ref()?;
        let ps = self.frame_size as u64;
        let (from, len) = (page.checked_mul(ps)?, pages.checked_mul(ps)?);
        let end = from.checked_add(len)?;
        if end > c.view.len() as u64 || end > file_len(c.file)? {
            return None;
        }
        // SAFETY: `[from, end)` lies in the view, a live read-only mapping
        // owned by this space (dropped with it, after every borrow of
        // `self`), and within the page file, which never shrinks while it
        // is open, so reading it cannot raise SIGBUS. Nothing in this
        // process writes through the view; the kernel changes its bytes
        // only where a checkpoint writes, which the caller rules out above.
        Some(unsafe { std::slice::from_raw_parts(c.view.ptr().add(from as usize), len as usize) })
    }

    /// Unmaps pages `[page, page + pages)` from the checks' view (the OS
    /// page cache keeps them): a page read through both the view and the
    /// program's mapping would otherwise count twice in the process's
    /// resident set for as long as the space lives. A later read of the
    /// view maps it again. Nothing with any other backend.
    pub fn release_view(&self, page: u64, pages: u64) {
        let Some(c) = self.mapped_state().and_then(|m| m.checks.as_ref()) else {
            return;
        };
        let ps = self.frame_size as u64;
        let (from, len) = (page.saturating_mul(ps), pages.saturating_mul(ps));
        if from.saturating_add(len) <= c.view.len() as u64 && len > 0 {
            let _ = sys::madvise(c.view.addr() + from as usize, len as usize, libc::MADV_DONTNEED);
        }
    }

    /// Gives frames `[f, end)` protection `prot`: all of them without
    /// checks, only the checked ones with (the others stay inaccessible).
    /// The caller holds their windows' claim or knows nobody changes them.
    /// Async-signal-safe.
    pub(crate) fn grant(&self, m: &MappedState, f: FrameNo, end: FrameNo, prot: libc::c_int) -> Result<(), VmError> {
        let end = end.min(self.table.nframes());
        if m.checks.is_none() {
            return if f < end { self.protect(f, end - f, prot) } else { Ok(()) };
        }
        let mut at = f;
        while at < end {
            if !self.checked(at) {
                at += 1;
                continue;
            }
            let mut to = at + 1;
            while to < end && self.checked(to) {
                to += 1;
            }
            self.protect(at, to - at, prot)?;
            at = to;
        }
        Ok(())
    }

    /// `mapped`: frames `f..f+n` are to be checked again at their next
    /// touch (evicted: they read the file again): unchecked and closed,
    /// window by window under its claim.
    pub(crate) fn close_frames(&self, m: &MappedState, f: FrameNo, n: u32) -> Result<(), VmError> {
        if m.checks.is_none() {
            return Ok(());
        }
        let end = f + n;
        let mut at = f;
        while at < end {
            let to = ((at / super::mapped_writes::WINDOW + 1) * super::mapped_writes::WINDOW).min(end);
            let w = at / super::mapped_writes::WINDOW;
            self.with_window(m, w, |_| {
                for k in at..to {
                    if let Some(meta) = self.table.meta(k) {
                        meta.state.store(NOT_RESIDENT, Ordering::Release);
                    }
                }
                self.protect(at, to - at, libc::PROT_NONE)
            })?;
            at = to;
        }
        Ok(())
    }
}
