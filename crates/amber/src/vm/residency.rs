//! Making frames resident and non-resident, and the locked copies the layer
//! above uses instead of dereferencing: `install`, `evict`, `copy_out`,
//! `copy_in`.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::frame_table::{self, CLEAN, DIRTY, NOT_RESIDENT};
use super::lock::Guard;
use super::sigsegv::prepare_thread;
use super::space::{FrameSpace, Imp};
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
        prepare_thread();
        let g = self.lock.lock();
        let dirty = how == InstallAs::Dirty || !self.track_writes;
        let state = if dirty { DIRTY } else { CLEAN };
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
                    .copy(addr, bytes, !dirty, self.host_page)
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
                    let prot = if dirty {
                        libc::PROT_READ | libc::PROT_WRITE
                    } else {
                        libc::PROT_READ
                    };
                    self.protect(frame + i, j - i, prot)?;
                }
            }
            for k in i..j {
                if let Some(m) = self.table.meta(frame + k) {
                    m.state.store(state, Ordering::Release);
                }
                if dirty && self.track_writes {
                    self.note_written(&g, frame + k);
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
        let _g = self.lock.lock();
        let (addr, bytes) = (self.frame_addr(f), n as usize * self.frame_size);
        match &self.imp {
            Imp::Uffd(_) => {
                sys::madvise(addr, bytes, libc::MADV_DONTNEED).map_err(|e| VmError::Os {
                    op: "madvise",
                    err: e,
                })?
            }
            Imp::Sigsegv(s) => {
                // Inaccessible first, so that nobody reads the hole being punched.
                self.protect(f, n, libc::PROT_NONE)?;
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
        for k in 0..n {
            if let Some(m) = self.table.meta(f + k) {
                m.state.store(NOT_RESIDENT, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Drops frames `f..f+n` like [`evict`](Self::evict), but only if none of
    /// them was written since the last [`take_written`](Self::take_written)
    /// (their content would be lost). Returns whether it evicted.
    pub fn evict_clean(&self, f: FrameNo, n: u32) -> Result<bool, VmError> {
        self.check_frames(f, n)?;
        {
            let _g = self.lock.lock();
            let resident =
                (f..f + n).any(|fr| frame_table::is_resident_state(self.table.state(fr)));
            if !resident {
                return Ok(false);
            }
            let written = match &self.imp {
                Imp::Uffd(u) => {
                    let (lo, hi) = (
                        self.frame_addr(f),
                        self.frame_addr(f) + n as usize * self.frame_size,
                    );
                    let mut w: Vec<(u64, u64)> = Vec::new();
                    if self.track_writes {
                        u.pagemap_written(lo, hi, &mut w)?;
                    }
                    // Unpopulated pages look written; only resident ones count.
                    !w.is_empty()
                        && (f..f + n).any(|fr| {
                            let a = self.frame_addr(fr) as u64;
                            frame_table::is_resident_state(self.table.state(fr))
                                && w.iter()
                                    .any(|&(s, e)| a < e && s < a + self.frame_size as u64)
                        })
                }
                Imp::Sigsegv(_) => (f..f + n).any(|fr| {
                    self.table.state(fr) != CLEAN && self.table.state(fr) != NOT_RESIDENT
                }),
            };
            if written || !self.track_writes {
                return Ok(false);
            }
        }
        // The program cannot write these frames meanwhile: writes come from
        // the one thread holding the database exclusively, which is the one
        // faulting (or calling) now.
        self.evict(f, n)?;
        Ok(true)
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
        prepare_thread();
        while at < end {
            let fr = (at >> self.shift) as FrameNo;
            let n = (((fr as usize + 1) << self.shift).min(end)) - at;
            loop {
                self.fill(fr)?;
                let g = self.lock.lock();
                // Evicted between fill and lock: fetch again.
                if frame_table::is_resident_state(self.table.state(fr)) {
                    piece(&g, self.base + at, at - start - offset, n)?;
                    break;
                }
            }
            at += n;
        }
        Ok(())
    }
}
