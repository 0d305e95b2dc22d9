//! Write tracking: which frames the program wrote since the last look, and
//! re-arming the protection that notices the next write.

use std::sync::atomic::Ordering;

use super::frame_table::{self, CLEAN, DIRTY};
use super::lock::Guard;
use super::space::{FrameSpace, Imp};
use super::sys::fatal;
use super::{FrameNo, VmError};

impl FrameSpace {
    /// sigsegv: records a frame that became writable (lock held).
    pub(crate) fn note_written(&self, _g: &Guard<'_>, f: FrameNo) {
        let Imp::Sigsegv(s) = &self.imp else { return };
        // SAFETY: `wlen` and the list are only touched with the lock held
        // (the guard proves it); the list has room for one entry per frame.
        unsafe {
            let list = std::slice::from_raw_parts_mut(
                s.written.ptr().cast::<FrameNo>(),
                self.table.nframes() as usize,
            );
            let wlen = &mut *s.wlen.get();
            if *wlen == list.len() {
                // Full of stale entries: keep only frames still written. Sorting
                // in place does not allocate, so this is fine in the handler.
                list.sort_unstable();
                let mut k = 0;
                for i in 0..*wlen {
                    if (k == 0 || list[k - 1] != list[i]) && self.table.state(list[i]) == DIRTY {
                        list[k] = list[i];
                        k += 1;
                    }
                }
                *wlen = k;
            }
            if *wlen < list.len() {
                list[*wlen] = f;
                *wlen += 1;
            }
        }
    }

    /// Frames written since the last `take_written` (ascending), without
    /// re-protecting them or forgetting that they were written.
    pub fn peek_written(&self) -> Result<Vec<FrameNo>, VmError> {
        self.written_frames(false)
    }

    /// Frames written since the last call (ascending), write-protecting them
    /// again so the next write is noticed.
    pub fn take_written(&self) -> Result<Vec<FrameNo>, VmError> {
        self.written_frames(true)
    }

    fn written_frames(&self, take: bool) -> Result<Vec<FrameNo>, VmError> {
        if !self.track_writes {
            return Err(VmError::NotTracking);
        }
        if self.barrier_mode() {
            return Ok(self.pinned_frames(take));
        }
        let g = self.lock.lock();
        match &self.imp {
            Imp::Mapped(m) => self.mapped_written(m, take),
            Imp::Uffd(u) => {
                let mut out: Vec<FrameNo> = Vec::new();
                let end = self.frame_addr(self.table.assigned());
                u.pagemap
                    .written(self.base as u64, end as u64, take, &mut |s, e| {
                        let first = ((s as usize - self.base) >> self.shift) as FrameNo;
                        let last = ((e as usize - 1 - self.base) >> self.shift) as FrameNo;
                        for fr in first..=last {
                            if out.last() != Some(&fr) {
                                out.push(fr);
                            }
                        }
                    })
                    .map_err(|e| VmError::Os {
                        op: "PAGEMAP_SCAN",
                        err: e,
                    })?;
                // A page that is not present (never installed, or evicted) counts
                // as written until first write-protected: only resident frames
                // can really have been written.
                out.retain(|&fr| frame_table::is_resident_state(self.table.state(fr)));
                if take {
                    // Write-protected again: no longer known written
                    // (`evict_clean` passes DIRTY frames by).
                    self.clean_states(&out);
                }
                Ok(out)
            }
            Imp::Sigsegv(s) => {
                // SAFETY: lock held (g); see note_written.
                let mut out = unsafe {
                    std::slice::from_raw_parts(s.written.ptr().cast::<FrameNo>(), *s.wlen.get())
                        .to_vec()
                };
                out.sort_unstable();
                out.dedup();
                out.retain(|&fr| self.table.state(fr) == DIRTY);
                if take {
                    // All or nothing: should an mprotect fail (ENOMEM), the
                    // frames protected so far are made writable again and
                    // the list kept, so that the caller's rollback still
                    // finds every written frame.
                    if let Err((done, e)) = self.reprotect(&g, &out) {
                        self.unprotect(&g, &out[..done]);
                        return Err(e);
                    }
                    // SAFETY: lock held (g); see note_written.
                    unsafe { *s.wlen.get() = 0 };
                }
                Ok(out)
            }
        }
    }

    /// userfaultfd: frames write-protected again are CLEAN (DIRTY says
    /// only that a frame is known written: see `evict_clean`).
    fn clean_states(&self, frames: &[FrameNo]) {
        for &fr in frames {
            if let Some(m) = self.table.meta(fr) {
                let _ = m
                    .state
                    .compare_exchange(DIRTY, CLEAN, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    /// sigsegv: makes DIRTY frames (ascending) read-only and CLEAN again.
    /// On failure, how many of them it did, and why it stopped.
    fn reprotect(&self, _g: &Guard<'_>, frames: &[FrameNo]) -> Result<(), (usize, VmError)> {
        let mut i = 0;
        while i < frames.len() {
            let mut j = i + 1;
            while j < frames.len() && frames[j] == frames[j - 1] + 1 {
                j += 1;
            }
            self.protect(frames[i], (j - i) as u32, libc::PROT_READ)
                .map_err(|e| (i, e))?;
            for &fr in &frames[i..j] {
                if let Some(m) = self.table.meta(fr) {
                    m.state.store(CLEAN, Ordering::Release);
                }
            }
            i = j;
        }
        Ok(())
    }

    /// sigsegv: undoes `reprotect` of `frames` (ascending). Restoring the
    /// protection they had a moment ago needs no more map entries than
    /// there were then, so it does not fail for want of them; should it
    /// fail anyway, the written set can no longer be trusted, and nothing
    /// could report that later: the process stops.
    fn unprotect(&self, _g: &Guard<'_>, frames: &[FrameNo]) {
        for &fr in frames {
            if let Err(e) = self.protect(fr, 1, libc::PROT_READ | libc::PROT_WRITE) {
                fatal(format_args!(
                    "making frame {fr} writable again after a failed write-protect: {e}"
                ));
            }
            if let Some(m) = self.table.meta(fr) {
                let _ = m
                    .state
                    .compare_exchange(CLEAN, DIRTY, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    /// Write-protects frames `f..f+n` again without reporting them (e.g. after
    /// the layer above restored their clean content with `copy_in`).
    pub fn write_protect(&self, f: FrameNo, n: u32) -> Result<(), VmError> {
        if !self.track_writes {
            return Err(VmError::NotTracking);
        }
        self.check_frames(f, n)?;
        if self.barrier_mode() {
            // Nothing to protect: no longer written is all it means.
            self.unpin(&(f..f + n).collect::<Vec<_>>());
            return Ok(());
        }
        let g = self.lock.lock();
        match &self.imp {
            Imp::Mapped(m) => self.mapped_write_protect(m, f, n),
            Imp::Uffd(u) => {
                u.uffd
                    .writeprotect(self.frame_addr(f), n as usize * self.frame_size, true)
                    .map_err(|e| VmError::Os {
                        op: "UFFDIO_WRITEPROTECT",
                        err: e,
                    })?;
                self.clean_states(&(f..f + n).collect::<Vec<_>>());
                Ok(())
            }
            Imp::Sigsegv(_) => {
                let dirty: Vec<FrameNo> = (f..f + n)
                    .filter(|&fr| self.table.state(fr) == DIRTY)
                    .collect();
                self.reprotect(&g, &dirty).map_err(|(_, e)| e)
            }
        }
    }

    /// Write-protects every resident frame and forgets what was written.
    pub fn write_protect_all(&self) -> Result<(), VmError> {
        if self.mapped_state().is_some() {
            // Nothing is protected (and the identity region is half the
            // reservation: no loop over it).
            if self.barrier_mode() {
                self.pinned.lock().unwrap_or_else(|p| p.into_inner()).clear();
            }
            return Ok(());
        }
        let n = self.table.assigned();
        if n == 0 {
            return if self.track_writes {
                Ok(())
            } else {
                Err(VmError::NotTracking)
            };
        }
        self.write_protect(0, n)?;
        if self.barrier_mode() {
            self.pinned.lock().unwrap_or_else(|p| p.into_inner()).clear();
        } else if let Imp::Sigsegv(s) = &self.imp {
            let _g = self.lock.lock();
            // SAFETY: lock held; see note_written.
            unsafe { *s.wlen.get() = 0 };
        }
        Ok(())
    }
}
