//! Which pages the program wrote, with the `mapped-unverified` backend.
//!
//! A write to a page of the file gives the process a private copy of it,
//! which `PAGEMAP_SCAN` tells from the file's pages (present, not the
//! file's, not the shared zero page): every page written since the file
//! was mapped there. A copy stays until a checkpoint has installed its
//! changes, though, over many transactions; listing all of them at every
//! commit would diff again, each time, every page written since the last
//! checkpoint. So the windows (64 frames, aligned) holding copies are
//! *watched* once a commit has listed them: registered with a userfaultfd
//! for asynchronous write-protect and write-protected, as the userfaultfd
//! backend's reservation is, so that `PAGEMAP_SCAN` then says which of
//! their pages were written since. A transaction's written pages are the
//! copies outside watched windows and the written pages inside them.
//!
//! Why windows and not the whole mapping: registering a range for
//! write-protect turns the kernel's fault-around off there (one minor
//! fault per page read instead of one per 16; measured in docs/design.md
//! §4.3.1), so only where the program writes pays it. Each watched run of
//! windows is a mapping of its own (the `vm.max_map_count` limit, §4.3): a
//! window that cannot be registered stays unwatched, its copies listed at
//! every commit (correct, only slower). A window left without a copy when
//! copies go back to the file is no longer watched.

use super::lock::Guard;
use super::mapped::{MappedState, os};
use super::space::FrameSpace;
use super::uffd;
use super::{FrameNo, VmError};

/// Frames per watched window.
const WINDOW: FrameNo = 64;

/// The watched windows: one bit per window.
#[derive(Default)]
pub(crate) struct Watched {
    bits: Vec<u64>,
}

impl Watched {
    fn get(&self, w: FrameNo) -> bool {
        self.bits
            .get((w / 64) as usize)
            .is_some_and(|b| b & (1 << (w % 64)) != 0)
    }

    fn set(&mut self, w: FrameNo, on: bool) {
        let i = (w / 64) as usize;
        if self.bits.len() <= i {
            self.bits.resize(i + 1, 0);
        }
        if on {
            self.bits[i] |= 1 << (w % 64);
        } else {
            self.bits[i] &= !(1 << (w % 64));
        }
    }

    /// Runs `[first, end)` of consecutive watched windows, ascending.
    fn runs(&self) -> Vec<(FrameNo, FrameNo)> {
        let mut out: Vec<(FrameNo, FrameNo)> = Vec::new();
        for (i, &word) in self.bits.iter().enumerate() {
            let mut b = word;
            while b != 0 {
                let w = i as FrameNo * 64 + b.trailing_zeros();
                b &= b - 1;
                match out.last_mut() {
                    Some(last) if last.1 == w => last.1 = w + 1,
                    _ => out.push((w, w + 1)),
                }
            }
        }
        out
    }
}

/// Runs of consecutive windows among `windows` (ascending, deduplicated).
fn runs_of(windows: &[FrameNo]) -> Vec<(FrameNo, FrameNo)> {
    let mut out: Vec<(FrameNo, FrameNo)> = Vec::new();
    for &w in windows {
        match out.last_mut() {
            Some(last) if last.1 == w => last.1 = w + 1,
            _ => out.push((w, w + 1)),
        }
    }
    out
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

    /// The frames holding a private copy, ascending.
    fn copied_frames(&self, m: &MappedState) -> Result<Vec<FrameNo>, VmError> {
        let mut out = Vec::new();
        let end = self.frame_addr(m.layout().copies_end.min(self.table.assigned()));
        m.pagemap
            .copied(self.base as u64, end as u64, &mut |s, e| self.push_frames(&mut out, s, e))
            .map_err(os("PAGEMAP_SCAN"))?;
        Ok(out)
    }

    /// The bytes of windows `[a, b)`, clipped to the reservation.
    fn window_range(&self, a: FrameNo, b: FrameNo) -> (usize, usize) {
        let end = (b.saturating_mul(WINDOW)).min(self.table.nframes());
        let lo = self.frame_addr(a * WINDOW);
        (lo, self.frame_addr(end) - lo)
    }

    /// Frames written since the last call with `take` (ascending): copies
    /// outside watched windows, pages written inside them. With `take`,
    /// the written pages of watched windows are protected again and the
    /// windows of the other copies watched.
    pub(crate) fn mapped_written(&self, _g: &Guard<'_>, m: &MappedState, take: bool) -> Result<Vec<FrameNo>, VmError> {
        let copies = self.copied_frames(m)?;
        let mut layout = m.layout();
        let mut out: Vec<FrameNo> = copies
            .into_iter()
            .filter(|&f| !layout.watched.get(f / WINDOW))
            .collect();
        let unwatched: Vec<FrameNo> = {
            let mut w: Vec<FrameNo> = out.iter().map(|&f| f / WINDOW).collect();
            w.dedup();
            w
        };
        let mut inside = Vec::new();
        for (a, b) in layout.watched.runs() {
            let (lo, len) = self.window_range(a, b);
            m.pagemap
                .written(lo as u64, (lo + len) as u64, take, &mut |s, e| {
                    self.push_frames(&mut inside, s, e)
                })
                .map_err(os("PAGEMAP_SCAN"))?;
        }
        out.extend(inside);
        out.sort_unstable();
        out.dedup();
        if take {
            for (a, b) in runs_of(&unwatched) {
                let (lo, len) = self.window_range(a, b);
                // Registered and protected, or left unwatched (its copies
                // are then listed again next time: correct, slower).
                let watched = m
                    .uffd
                    .register(lo, len, uffd::UFFDIO_REGISTER_MODE_WP)
                    .and_then(|()| m.uffd.writeprotect(lo, len, true));
                match watched {
                    Ok(()) => (a..b).for_each(|w| layout.watched.set(w, true)),
                    Err(e) => {
                        let _ = m.uffd.unregister(lo, len);
                        log::warn!("frames {}..: not watched for writes: {e}", a * WINDOW);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Frames `[f, end)` were mapped anew (a new mapping is not registered)
    /// or their copies dropped (dropped unprotected pages would come back
    /// unprotected): where they lie in watched windows, registered and
    /// protected again.
    pub(crate) fn rewatch(&self, _g: &Guard<'_>, m: &MappedState, f: FrameNo, end: FrameNo) -> Result<(), VmError> {
        let layout = m.layout();
        let mut at = f;
        while at < end {
            let w = at / WINDOW;
            let to = ((w + 1) * WINDOW).min(end);
            if layout.watched.get(w) {
                let (lo, len) = (self.frame_addr(at), (to - at) as usize * self.frame_size);
                m.uffd
                    .register(lo, len, uffd::UFFDIO_REGISTER_MODE_WP)
                    .map_err(os("UFFDIO_REGISTER"))?;
                m.uffd.writeprotect(lo, len, true).map_err(os("UFFDIO_WRITEPROTECT"))?;
            }
            at = to;
        }
        Ok(())
    }

    /// Write-protects frames `f..f+n` again where they are watched (the
    /// layer above restored their committed bytes with `copy_in`); a copy
    /// in an unwatched window stays listed.
    pub(crate) fn mapped_write_protect(&self, _g: &Guard<'_>, m: &MappedState, f: FrameNo, n: u32) -> Result<(), VmError> {
        let layout = m.layout();
        let mut at = f;
        while at < f + n {
            let w = at / WINDOW;
            let to = ((w + 1) * WINDOW).min(f + n);
            if layout.watched.get(w) {
                let (lo, len) = (self.frame_addr(at), (to - at) as usize * self.frame_size);
                m.uffd.writeprotect(lo, len, true).map_err(os("UFFDIO_WRITEPROTECT"))?;
            }
            at = to;
        }
        Ok(())
    }

    /// `copy_in` with the mapped backend: copies `data` to `addr` (inside
    /// one frame) without changing whether the frame counts as written. A
    /// copy it makes is not a program write: the page is protected (its
    /// window watched first, the copies the program made there left
    /// unprotected, so still listed), unless the program had written it.
    pub(crate) fn mapped_copy_in(&self, _g: &Guard<'_>, m: &MappedState, addr: usize, data: &[u8]) -> Result<(), VmError> {
        let f = ((addr - self.base) >> self.shift) as FrameNo;
        let w = f / WINDOW;
        let (lo, len) = self.window_range(w, w + 1);
        let watched = m.layout().watched.get(w);
        let mut written: Vec<FrameNo> = Vec::new();
        if watched {
            m.pagemap
                .written(lo as u64, (lo + len) as u64, false, &mut |s, e| self.push_frames(&mut written, s, e))
        } else {
            m.pagemap
                .copied(lo as u64, (lo + len) as u64, &mut |s, e| self.push_frames(&mut written, s, e))
        }
        .map_err(os("PAGEMAP_SCAN"))?;
        // SAFETY: the reservation is readable and writable everywhere;
        // `addr..addr + data.len()` lies in frame `f` (the caller's
        // contract), and the lock keeps other copies out.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        if written.contains(&f) {
            return Ok(());
        }
        if !watched {
            m.uffd
                .register(lo, len, uffd::UFFDIO_REGISTER_MODE_WP)
                .map_err(os("UFFDIO_REGISTER"))?;
            m.layout().watched.set(w, true);
        }
        // Protected: the frame, and on a window watched just now every
        // frame but the program's copies.
        let first = w * WINDOW;
        let end = first + (len / self.frame_size) as FrameNo;
        let mut at = if watched { f } else { first };
        let stop = if watched { f + 1 } else { end };
        while at < stop {
            if written.contains(&at) {
                at += 1;
                continue;
            }
            let mut to = at + 1;
            while to < stop && !written.contains(&to) {
                to += 1;
            }
            let (a, l) = (self.frame_addr(at), (to - at) as usize * self.frame_size);
            m.uffd.writeprotect(a, l, true).map_err(os("UFFDIO_WRITEPROTECT"))?;
            at = to;
        }
        Ok(())
    }

    /// Stops watching the windows that hold no copy any more (their
    /// fault-around comes back).
    pub(crate) fn unwatch_idle(&self, _g: &Guard<'_>, m: &MappedState) -> Result<(), VmError> {
        let copies = self.copied_frames(m)?;
        let mut layout = m.layout();
        let mut busy: Vec<FrameNo> = copies.iter().map(|&f| f / WINDOW).collect();
        busy.dedup();
        let idle: Vec<FrameNo> = layout
            .watched
            .runs()
            .into_iter()
            .flat_map(|(a, b)| a..b)
            .filter(|w| busy.binary_search(w).is_err())
            .collect();
        for (a, b) in runs_of(&idle) {
            let (lo, len) = self.window_range(a, b);
            m.uffd.unregister(lo, len).map_err(os("UFFDIO_UNREGISTER"))?;
            (a..b).for_each(|w| layout.watched.set(w, false));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_windows_as_runs() {
        let mut w = Watched::default();
        for i in [3, 4, 5, 64, 65, 200] {
            w.set(i, true);
        }
        assert_eq!(w.runs(), vec![(3, 6), (64, 66), (200, 201)]);
        w.set(4, false);
        assert!(!w.get(4) && w.get(5) && !w.get(1000));
        assert_eq!(w.runs(), vec![(3, 4), (5, 6), (64, 66), (200, 201)]);
        assert_eq!(runs_of(&[1, 2, 3, 7, 9, 10]), vec![(1, 4), (7, 8), (9, 11)]);
    }
}
