//! Making frames resident and non-resident, and the locked copies the layer
//! above uses instead of dereferencing: `install`, `evict`, `copy_out`,
//! `copy_in`.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use super::frame_table::{CLEAN, DIRTY, EVICTING, NOT_RESIDENT};
use super::lock::Guard;
use super::space::{FrameSpace, Imp, UffdState};
use super::sys;
use super::{FrameNo, InstallAs, VmError};

impl FrameSpace {
    pub(crate) fn check_frames(&self, f: FrameNo, n: u32) -> Result<(), VmError> {
        match f.checked_add(n) {
            Some(end) if n > 0 && end <= self.table.assigned() => Ok(()),
            _ => Err(VmError::BadFrame { frame: f }),
        }
    }

    /// Installs `data` (whole frames) into `frame, frame+1, ..`, atomically as
    /// seen by other threads, skipping frames already resident. Returns the
    /// number installed. Usable outside a fault, e.g. for a brand-new page.
    pub fn install(&self, frame: FrameNo, data: &[u8], how: InstallAs) -> Result<u32, VmError> {
        self.install_frames(frame, data, how, true, &mut |_, _| {})
    }

    /// `install`; with userfaultfd, `wake` wakes the threads waiting for
    /// these frames (else they wait until their own fault is served).
    /// `installed(first, n)` hears of each run of frames made resident.
    pub(crate) fn install_frames(
        &self,
        frame: FrameNo,
        data: &[u8],
        how: InstallAs,
        wake: bool,
        installed_run: &mut dyn FnMut(FrameNo, u32),
    ) -> Result<u32, VmError> {
        if data.is_empty() || !data.len().is_multiple_of(self.frame_size) {
            return Err(VmError::InvalidArgument(
                "install data must be whole frames",
            ));
        }
        let n = (data.len() / self.frame_size) as u32;
        self.check_frames(frame, n)?;
        let g = self.lock.lock();
        let dirty = how == InstallAs::Dirty || !self.track_writes;
        let state = if dirty { DIRTY } else { CLEAN };
        if let Imp::Mapped(m) = &self.imp {
            self.mapped_install(&g, m, frame, data, state)?;
            installed_run(frame, n);
            return Ok(n);
        }
        // Under a software barrier a clean frame is writable too: the
        // barrier, not the protection, notices its first write.
        let protect = !dirty && self.protecting();
        let mut installed = 0;
        let mut i = 0;
        while i < n {
            // A maximal run of missing frames is installed with one call.
            if self.table.state(frame + i) != NOT_RESIDENT {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < n && self.table.state(frame + j) == NOT_RESIDENT {
                j += 1;
            }
            let bytes = &data[i as usize * self.frame_size..j as usize * self.frame_size];
            let addr = self.frame_addr(frame + i);
            match &self.imp {
                Imp::Uffd(u) => u
                    .uffd
                    .copy(addr, bytes, protect, self.host_page)
                    .map_err(|e| VmError::Os {
                        op: "UFFDIO_COPY",
                        err: e,
                    })?,
                Imp::Sigsegv(s) => {
                    // Written into the memfd rather than copied through the
                    // staging view: the kernel allocates the pages as it
                    // copies, instead of taking a page fault (and zeroing a
                    // page) for each. The program's view of these frames is
                    // PROT_NONE, so nobody reads them meanwhile, and we hold
                    // the lock, so no other installer writes them.
                    sys::pwrite_all(s.memfd.as_raw_fd(), bytes, (addr - self.base) as u64)
                        .map_err(|e| VmError::Os {
                            op: "pwrite(memfd)",
                            err: e,
                        })?;
                    let prot = if protect {
                        libc::PROT_READ
                    } else {
                        libc::PROT_READ | libc::PROT_WRITE
                    };
                    self.protect(frame + i, j - i, prot)?;
                }
                // Installed above, every frame.
                Imp::Mapped(_) => {}
            }
            for k in i..j {
                if let Some(m) = self.table.meta(frame + k) {
                    m.state.store(state, Ordering::Release);
                }
                if dirty && self.protecting() {
                    self.note_written(&g, frame + k);
                } else if dirty && self.barrier_mode() {
                    self.note_pinned(frame + k);
                }
            }
            if let Imp::Uffd(u) = &self.imp
                && wake
            {
                u.uffd.wake(addr, bytes.len()).map_err(|e| VmError::Os {
                    op: "UFFDIO_WAKE",
                    err: e,
                })?;
            }
            installed_run(frame + i, j - i);
            installed += j - i;
            i = j;
        }
        Ok(installed)
    }

    /// `mprotect` of frames in the program's view; ENOMEM means the VMA limit.
    pub(crate) fn protect(&self, f: FrameNo, n: u32, prot: libc::c_int) -> Result<(), VmError> {
        sys::mprotect(self.frame_addr(f), n as usize * self.frame_size, prot).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOMEM) {
                VmError::MapCount { frame: f }
            } else {
                VmError::Os {
                    op: "mprotect",
                    err: e,
                }
            }
        })
    }

    /// Drops the content of frames `f..f+n` (which the layer above has saved or
    /// never changed) but keeps them assigned: the next touch faults them in.
    pub fn evict(&self, f: FrameNo, n: u32) -> Result<(), VmError> {
        self.check_frames(f, n)?;
        let g = self.lock.lock();
        self.drop_frames(&g, f, n)
    }

    /// Makes frames `f..f+n` not resident (lock held).
    fn drop_frames(&self, g: &Guard<'_>, f: FrameNo, n: u32) -> Result<(), VmError> {
        let (addr, bytes) = (self.frame_addr(f), n as usize * self.frame_size);
        match &self.imp {
            // They read the file again (zeros past it): `mapped.rs`.
            Imp::Mapped(m) => self.mapped_evict(g, m, f, n)?,
            Imp::Uffd(_) => {
                sys::madvise(addr, bytes, libc::MADV_DONTNEED).map_err(|e| VmError::Os {
                    op: "madvise",
                    err: e,
                })?
            }
            Imp::Sigsegv(s) => {
                // Inaccessible first, so that nobody reads the hole being punched.
                self.protect(f, n, libc::PROT_NONE)?;
                // Not resident from here, whatever the memory's fate: the
                // next touch faults and the install overwrites it.
                self.set_states(f, n, NOT_RESIDENT);
                // SAFETY: fallocate on our memfd within its size; the range is
                // PROT_NONE in the program's view and we hold the lock, so
                // nobody is reading it through either view.
                let rc = unsafe {
                    libc::fallocate(
                        s.memfd.as_raw_fd(),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        (addr - self.base) as libc::off_t,
                        bytes as libc::off_t,
                    )
                };
                if rc != 0 {
                    return Err(VmError::Os {
                        op: "fallocate(PUNCH_HOLE)",
                        err: std::io::Error::last_os_error(),
                    });
                }
            }
        }
        self.set_states(f, n, NOT_RESIDENT);
        Ok(())
    }

    /// Gives back frames claimed EVICTING by an eviction that did not
    /// happen (they are resident and clean as far as the table knows).
    fn unclaim(&self, f: FrameNo, n: u32) {
        for k in 0..n {
            if let Some(m) = self.table.meta(f + k) {
                let _ =
                    m.state
                        .compare_exchange(EVICTING, CLEAN, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    fn set_states(&self, f: FrameNo, n: u32, state: u32) {
        for k in 0..n {
            if let Some(m) = self.table.meta(f + k) {
                m.state.store(state, Ordering::Release);
            }
        }
    }

    /// Drops frames `f..f+n` like [`evict`](Self::evict), but only if none of
    /// them was written since the last [`take_written`](Self::take_written)
    /// (their content would be lost). Returns whether it evicted. One block
    /// of [`evict_clean_batch`](Self::evict_clean_batch).
    pub fn evict_clean(&self, f: FrameNo, n: u32) -> Result<bool, VmError> {
        let mut evicted = [false];
        self.evict_clean_batch(&[(f, n)], &mut evicted)?;
        Ok(evicted[0])
    }

    /// Drops each block `(f, n)` of `victims` whose frames were not written
    /// since the last [`take_written`](Self::take_written), and says which
    /// in `evicted` (as long as `victims`). A block written, being written
    /// or not resident is left. On an error the blocks not dropped yet are
    /// left as they were (resident).
    ///
    /// The check and the drop are one step as far as any writer can tell,
    /// though the program's threads keep running (the fault path evicts to
    /// make room while other threads, holding mutable references from one
    /// transaction, write):
    ///
    /// - SIGSEGV: every frame is claimed CLEAN → EVICTING first. The first
    ///   write to a clean frame is a fault whose handler claims it CLEAN →
    ///   WRITE_PENDING before enabling writes, so exactly one wins: a frame
    ///   the handler claimed is not evicted; a write to a frame claimed
    ///   here waits in the handler until it is gone, then fetches it again
    ///   and writes the fetched copy.
    /// - userfaultfd: the kernel resolves a first write itself, without
    ///   telling anyone. While writers may run ([`set_writers`]), the span
    ///   from the first victim to the last is made read-only with one
    ///   `mprotect` before the check: once it returns, no write can land
    ///   there (a write faults, and the SIGSEGV handler waits while the
    ///   frame is EVICTING, or returns to retry a frame that is not, until
    ///   the span is writable again), and every earlier write shows in the
    ///   one `PAGEMAP_SCAN` of the span. The victims found unwritten are
    ///   dropped (`MADV_DONTNEED`) before the protection is lifted, so a
    ///   waiting write retries into a missing page and fetches it. One
    ///   protection change for the batch, not two per block: each splits
    ///   the mapping and merges it back, which per 4 KiB page was most of
    ///   the time of a transaction larger than the budget.
    ///
    /// [`set_writers`]: FrameSpace::set_writers
    pub fn evict_clean_batch(
        &self,
        victims: &[(FrameNo, u32)],
        evicted: &mut [bool],
    ) -> Result<(), VmError> {
        if evicted.len() != victims.len() {
            return Err(VmError::InvalidArgument("one answer per victim"));
        }
        evicted.fill(false);
        for &(f, n) in victims {
            self.check_frames(f, n)?;
        }
        // The mapped backend serves no cache budget: nothing to evict (and
        // what it would drop of a written page is its only copy).
        if !self.track_writes || self.mapped_state().is_some() {
            return Ok(());
        }
        let g = self.lock.lock();
        // Only a CLEAN frame is claimed: a software barrier pins written
        // frames DIRTY (`barrier.rs`); the first-write handler makes
        // SIGSEGV frames DIRTY; a userfaultfd frame is DIRTY once installed
        // as written or found written by an earlier check here, until
        // `take_written` lists it. Any other userfaultfd frame may have been
        // written since (the kernel does not say): it is checked below.
        let claimed: Vec<bool> = victims.iter().map(|&(f, n)| self.claim(f, n)).collect();
        let result = match &self.imp {
            // Claimed CLEAN: not pinned, so not written (`barrier.rs`).
            Imp::Uffd(u) if !self.barrier_mode() => {
                self.evict_if_unwritten(&g, u, victims, &claimed, evicted)
            }
            _ => (victims.iter().zip(&claimed).zip(evicted.iter_mut()))
                .filter(|((_, c), _)| **c)
                .try_for_each(|((&(f, n), _), e)| {
                    self.drop_frames(&g, f, n)?;
                    *e = true;
                    Ok(())
                }),
        };
        for ((&(f, n), &c), &e) in victims.iter().zip(&claimed).zip(evicted.iter()) {
            if !c || e {
                continue;
            }
            self.unclaim(f, n);
            if let (Ok(()), Imp::Uffd(_)) = (&result, &self.imp) {
                // Written: remembered, so that the next eviction passes it
                // by without a system call (a transaction larger than the
                // budget would otherwise check every written block at every
                // fault). `take_written` makes it CLEAN again.
                self.set_states(f, n, DIRTY);
            }
        }
        result
    }

    /// Claims every frame of `f..f+n` CLEAN → EVICTING, or none.
    fn claim(&self, f: FrameNo, n: u32) -> bool {
        for k in 0..n {
            let claimed = self.table.meta(f + k).is_some_and(|m| {
                m.state
                    .compare_exchange(CLEAN, EVICTING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            });
            if !claimed {
                // Written, being written, or not resident: leave the block.
                self.unclaim(f, k);
                return false;
            }
        }
        true
    }

    /// userfaultfd: drops the `claimed` blocks of `victims` (claimed
    /// EVICTING) that `PAGEMAP_SCAN` says were not written, marking them in
    /// `evicted`; see `evict_clean_batch`.
    fn evict_if_unwritten(
        &self,
        _g: &Guard<'_>,
        u: &UffdState,
        victims: &[(FrameNo, u32)],
        claimed: &[bool],
        evicted: &mut [bool],
    ) -> Result<(), VmError> {
        let picked = || victims.iter().zip(claimed).filter(|(_, c)| **c).map(|(v, _)| *v);
        let (Some(lo), Some(hi)) = (picked().map(|(f, _)| f).min(), picked().map(|(f, n)| f + n).max())
        else {
            return Ok(());
        };
        let shield = self.writers.load(Ordering::Acquire);
        if shield {
            self.protect(lo, hi - lo, libc::PROT_READ)?;
        }
        let mut w: Vec<(u64, u64)> = Vec::new();
        let mut result = u.pagemap_written(self.frame_addr(lo), self.frame_addr(hi), &mut w);
        if result.is_ok() {
            for ((&(f, n), _), e) in (victims.iter().zip(claimed).zip(evicted.iter_mut()))
                .filter(|((_, c), _)| **c)
            {
                let (a, b) = (self.frame_addr(f) as u64, self.frame_addr(f + n) as u64);
                // `w` is in address order.
                let from = w.partition_point(|&(_, end)| end <= a);
                if w.get(from).is_some_and(|&(start, _)| start < b) {
                    continue;
                }
                let dropped = sys::madvise(a as usize, (b - a) as usize, libc::MADV_DONTNEED);
                if let Err(err) = dropped {
                    result = Err(VmError::Os { op: "madvise", err });
                    break;
                }
                *e = true;
            }
        }
        if shield {
            // Writable again, as the rest of the reservation. Failing here
            // would leave writers faulting for ever; it cannot fail for lack
            // of map entries, since it restores the layout from before.
            if let Err(e) = self.protect(lo, hi - lo, libc::PROT_READ | libc::PROT_WRITE) {
                sys::fatal(format_args!(
                    "making frames {lo}..{hi} writable again after an eviction check: {e}"
                ));
            }
        }
        // Only now: a write waiting for the frames retries into missing
        // pages, not into the write protection.
        for (&(f, n), _) in victims.iter().zip(evicted.iter()).filter(|(_, e)| **e) {
            self.set_states(f, n, NOT_RESIDENT);
        }
        result
    }

    /// Copies bytes out of frames starting at `offset` into frame `f` (may span
    /// into the following assigned frames), faulting them in first if needed.
    pub fn copy_out(&self, f: FrameNo, offset: usize, buf: &mut [u8]) -> Result<(), VmError> {
        let len = buf.len();
        self.copy(f, offset, len, |g, addr, at, n| {
            self.read_frame(g, addr, &mut buf[at..at + n]);
            Ok(())
        })
    }

    /// Copies bytes into frames. Not a program write: a frame's clean/written
    /// status is unchanged (see the module docs).
    pub fn copy_in(&self, f: FrameNo, offset: usize, data: &[u8]) -> Result<(), VmError> {
        self.copy(f, offset, data.len(), |g, addr, at, n| {
            self.write_frame(g, addr, &data[at..at + n])
        })
    }

    /// Rewrites the 8-aligned word at `addr`, in an assigned frame, from
    /// `old` to `new` if it still holds `old` (a compare-and-swap: threads
    /// loading the word see one value or the other), without counting as a
    /// program write, as [`copy_in`](Self::copy_in): swizzling a `Lazy`
    /// pointer upon discovery, which must never be logged. Returns whether
    /// the word was rewritten: not if it changed meanwhile, nor if its
    /// frame was evicted (never fetched for this).
    pub fn rewrite_word(&self, addr: usize, old: u64, new: u64) -> Result<bool, VmError> {
        let f = (self.frame_at(addr))
            .ok_or(VmError::InvalidArgument("a rewritten word outside the frames"))?;
        if !addr.is_multiple_of(8) {
            return Err(VmError::InvalidArgument("a rewritten word not 8-aligned"));
        }
        let g = self.lock.lock();
        // Evicted since it was read: its next fetch brings the stored word
        // back, and there is nothing to rewrite (nor a reason to fetch).
        if !self.is_resident(f) {
            return Ok(false);
        }
        let mut swapped = false;
        self.store_frame(&g, addr, 8, |word| {
            // SAFETY: `store_frame` hands a pointer to the 8 writable bytes
            // of the word in a resident frame (the lock keeps it resident),
            // 8-aligned as `addr` is (frames are page-aligned in every
            // view); other threads touch it only through atomic loads and
            // this swap.
            let word = unsafe { AtomicU64::from_ptr(word.cast::<u64>()) };
            swapped = word
                .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        })?;
        Ok(swapped)
    }

    /// Splits a copy into per-frame pieces, each done under the lock on a
    /// resident frame: `piece(guard, address, offset in buffer, length)`.
    fn copy(
        &self,
        f: FrameNo,
        offset: usize,
        len: usize,
        mut piece: impl FnMut(&Guard<'_>, usize, usize, usize) -> Result<(), VmError>,
    ) -> Result<(), VmError> {
        let start = (f as usize) << self.shift;
        let end = start
            .checked_add(offset)
            .and_then(|s| s.checked_add(len))
            .filter(|&e| e <= (self.table.assigned() as usize) << self.shift)
            .ok_or(VmError::OutOfBounds {
                frame: f,
                offset,
                len,
            })?;
        let mut at = start + offset;
        while at < end {
            let fr = (at >> self.shift) as FrameNo;
            let n = (((fr as usize + 1) << self.shift).min(end)) - at;
            loop {
                self.fill_here(fr)?;
                let g = self.lock.lock();
                // Evicted between fill and lock: fetch again.
                if self.is_resident(fr) {
                    piece(&g, self.base + at, at - start - offset, n)?;
                    break;
                }
            }
            at += n;
        }
        Ok(())
    }
}
