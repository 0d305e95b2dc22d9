//! The `mapped-unverified` backend: the page file itself, mapped
//! copy-on-write at the database's home, its pages served by the kernel.
//!
//! A database at its home stores each swizzled pointer as the address its
//! target has there (`format/home.rs`), so a page of the file is already in
//! memory form: the file is mapped `MAP_PRIVATE` over the start of the
//! identity region (frame `p` = page `p`, at `home + p · page size`), and a
//! first touch is the kernel's minor fault on its page cache, with its
//! fault-around, as LMDB's reads are. Nothing is copied, checksummed or
//! swizzled, and no fault reaches Amber. Past the file's end the
//! reservation is private anonymous memory, where blocks allocated past it
//! live until a checkpoint has written them (a read where nothing was
//! written gives zeros, which no object header is).
//!
//! **Checks.** A plain load reads what the file holds, unchecked: the
//! backend's name says so (`amber verify` finds damage; docs/design.md
//! §4.3.1 says what else is traded). A block first reached through a call
//! that can return an error (`Db::try_get`, the locked copies the commit
//! path makes) is checked as a fetch checks it — its committed image's
//! checksum, object map and non-null fields, by the fault service
//! (`db/mapped.rs`) — and its frames are then known clean (`CLEAN` in the
//! table): a damaged page is that call's error here as elsewhere.
//!
//! **Writes** (`mapped_writes.rs`). A write gives the process a private copy
//! of the page (copy on write), which `PAGEMAP_SCAN` tells from the file's
//! pages; a page keeps its copy until a checkpoint has installed its
//! changes and the layer above asks [`FrameSpace::to_file`] to drop it.
//! Every committed change was a write through memory in this process, so a
//! checkpoint writing the page file in place only changes pages whose copy
//! this process holds: what the file mapping shows never changes under a
//! reader.
//!
//! **Which frames read the file.** The file is mapped over its length when
//! the space is set up; `to_file` maps it over frames past that once the
//! file has grown over them, so the frames that read the file are a set of
//! runs, kept here. `evict` makes frames read the file (or zeros past it);
//! [`FrameSpace::discard`] gives frames fresh zeros (the space of a
//! transaction that did not commit, which must read as no object).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::frame_table::{CLEAN, DIRTY, NOT_RESIDENT, UNASSIGNED};
use super::lock::Guard;
use super::mapped_checks::Checks;
use super::mapped_writes::Windows;
use super::pagemap::PageMap;
use super::space::{FrameSpace, Imp};
use super::sys::{self, Mapping};
use super::uffd::{self, Uffd};
use super::{FrameNo, VmError};

/// The page file to map: a descriptor (duplicated, so the caller keeps its
/// own) and its length in bytes.
#[derive(Clone, Copy, Debug)]
pub struct MappedFile {
    /// An open descriptor of the page file, readable.
    pub fd: libc::c_int,
    /// Its length.
    pub len: u64,
}

pub(crate) struct MappedState {
    /// The `mapped` backend's checks at first touch (`mapped_checks.rs`);
    /// none for `mapped-unverified`. First, so that it is dropped (its
    /// service thread stopped) before the descriptor its view reads.
    pub(crate) checks: Option<Checks>,
    /// The page file, a descriptor of our own.
    file: OwnedFd,
    /// What the mappings of the reservation are; changed with the frame
    /// space's lock held.
    pub(crate) layout: Mutex<Layout>,
    /// Write-protects the pages of watched windows (`mapped_writes.rs`).
    pub(crate) uffd: Uffd,
    /// Which windows are watched (`mapped_writes.rs`); read by the signal
    /// handler, so atomics, not under the layout's lock.
    pub(crate) windows: Windows,
    pub(crate) pagemap: PageMap,
}

/// Which frames read the file.
pub(crate) struct Layout {
    /// Runs of frames `[start, end)` that read the file (ascending,
    /// disjoint, merged).
    file_runs: Vec<(FrameNo, FrameNo)>,
}

pub(crate) fn os(op: &'static str) -> impl FnOnce(std::io::Error) -> VmError {
    move |err| VmError::Os { op, err }
}

/// Maps `len` bytes of `fd` from offset `off` over `addr` (private, with
/// protection `prot`: read-only, or none with checks; `rewatch` opens what
/// it should), or fresh zeros with `fd` -1, replacing what was there.
fn map_over(fd: libc::c_int, addr: usize, len: usize, off: u64, prot: libc::c_int) -> std::io::Result<()> {
    let flags = libc::MAP_PRIVATE
        | libc::MAP_FIXED
        | if fd < 0 { libc::MAP_ANONYMOUS } else { 0 };
    // Callers pass a range inside a reservation owned by a live FrameSpace;
    // a reader of a replaced page reads the same bytes before and after
    // (`to_file`'s contract) or, for `discard`, space nobody may read as an
    // object.
    // SAFETY: MAP_FIXED replaces only that range, which no Rust reference
    // points into (frames are reached through raw pointers).
    unsafe { sys::map_raw(addr, len, prot, flags, fd, off)? };
    let _ = sys::madvise(addr, len, libc::MADV_DONTFORK);
    Ok(())
}

/// Sets `main` (the reservation, placed at the home) up as the mapped
/// backend's: the first `file.len` bytes of the file over its start (whole
/// frames), anonymous memory after it, all read-only until written
/// (`mapped_writes.rs`), or, with `checks` (the service's polling time),
/// inaccessible until checked (`mapped_checks.rs`).
pub(crate) fn new(
    main: &Mapping,
    file: MappedFile,
    frame_size: usize,
    checks: Option<Duration>,
) -> Result<MappedState, String> {
    let prot = base_prot(checks.is_some());
    sys::mprotect(main.addr(), main.len(), prot)
        .map_err(|e| format!("protecting the reservation: {e}"))?;
    let windows = Windows::new((main.len() / frame_size) as u32)
        .map_err(|e| format!("the windows' states: {e}"))?;
    let pagemap = PageMap::open().map_err(|e| format!("PAGEMAP_SCAN unavailable: {e}"))?;
    let uffd = Uffd::open(uffd::UFFD_FEATURE_WP_ASYNC | uffd::UFFD_FEATURE_WP_UNPOPULATED)?;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor the caller keeps open
    // for the call; it returns a new descriptor or -1.
    let fd = unsafe { libc::fcntl(file.fd, libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!(
            "duplicating the page file's descriptor: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let checks = match checks {
        Some(poll) => Some(Checks::new(poll, owned.as_raw_fd(), main.len() / 2)?),
        None => None,
    };
    let frames = (file.len / frame_size as u64).min((main.len() / frame_size) as u64) as FrameNo;
    if frames > 0 {
        map_over(owned.as_raw_fd(), main.addr(), frames as usize * frame_size, 0, prot)
            .map_err(|e| format!("mapping the page file: {e}"))?;
    }
    Ok(MappedState {
        checks,
        file: owned,
        layout: Mutex::new(Layout {
            file_runs: if frames > 0 { vec![(0, frames)] } else { Vec::new() },
        }),
        uffd,
        windows,
        pagemap,
    })
}

/// The protection of a frame nothing has opened: read-only without checks,
/// none with.
fn base_prot(checks: bool) -> libc::c_int {
    if checks { libc::PROT_NONE } else { libc::PROT_READ }
}

impl Layout {
    /// Whether frame `f` reads the file.
    fn reads_file(&self, f: FrameNo) -> bool {
        let i = self.file_runs.partition_point(|&(_, e)| e <= f);
        self.file_runs.get(i).is_some_and(|&(s, _)| s <= f)
    }

    /// Records that frames `[s, e)` read the file (`yes`) or not.
    fn set_file(&mut self, s: FrameNo, e: FrameNo, yes: bool) {
        let mut out: Vec<(FrameNo, FrameNo)> = Vec::with_capacity(self.file_runs.len() + 1);
        for &(a, b) in &self.file_runs {
            if b <= s || e <= a {
                out.push((a, b));
                continue;
            }
            if a < s {
                out.push((a, s));
            }
            if e < b {
                out.push((e, b));
            }
        }
        if yes {
            out.push((s, e));
        }
        out.sort_unstable();
        self.file_runs.clear();
        for (a, b) in out {
            match self.file_runs.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => self.file_runs.push((a, b)),
            }
        }
    }
}

/// The length of the file open as `fd` now, or None if `fstat` fails.
pub(crate) fn file_len(fd: libc::c_int) -> Option<u64> {
    // SAFETY: an all-zero stat is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on a descriptor the caller keeps open, into a stat we own.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_size as u64)
}

impl MappedState {
    /// The file's length now.
    fn file_len(&self) -> Result<u64, VmError> {
        file_len(self.file.as_raw_fd())
            .ok_or_else(|| os("fstat(page file)")(std::io::Error::last_os_error()))
    }

    pub(crate) fn layout(&self) -> std::sync::MutexGuard<'_, Layout> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl FrameSpace {
    pub(crate) fn mapped_state(&self) -> Option<&MappedState> {
        match &self.imp {
            Imp::Mapped(m) => Some(m),
            _ => None,
        }
    }

    /// Mapped backend: refuses pages past the identity region (half the
    /// reservation). Their frames would not be at the address their
    /// pages' stored pointers name, and a page holding a pointer to one
    /// would read wrong once it reads the file again.
    pub(crate) fn check_mapped(&self, page: u64, run_len: u32) -> Result<(), VmError> {
        if self.mapped_state().is_none() || self.table.is_direct(page, run_len) {
            return Ok(());
        }
        Err(VmError::Exhausted {
            requested: run_len,
            free: 0,
            frames: self.table.direct(),
        })
    }

    /// Whether pages `head..head + pages` can be a block of that shape:
    /// none has a frame of another (an identity frame never given a shape
    /// nor made resident takes any; with the mapped backend every page of
    /// a new block is one).
    pub fn block_fits(&self, head: u64, pages: u32) -> bool {
        (0..pages).all(|i| {
            let page = head + u64::from(i);
            self.table.lookup(page).is_none_or(|f| {
                self.table.page_of(f) == Some((head, i, pages)) || self.table.unshaped(f)
            })
        })
    }

    /// Mapped backend: whether frame `f` is known clean (checked by the
    /// service, installed, or written) rather than only mapped.
    pub(crate) fn checked(&self, f: FrameNo) -> bool {
        !matches!(self.table.state(f), NOT_RESIDENT | UNASSIGNED)
    }

    /// Mapped backend: notes frame `f` as checked and clean in the table
    /// (it starts as the identity region's "not resident"), unless it is
    /// known otherwise already.
    pub fn note_checked(&self, f: FrameNo) {
        if let Some(m) = self.table.meta(f) {
            for from in [UNASSIGNED, NOT_RESIDENT] {
                if m.state
                    .compare_exchange(from, CLEAN, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return;
                }
            }
        }
    }

    /// Mapped backend: copies `data` into frames `frame..` (every one:
    /// there is no missing frame to find). Written frames are found by
    /// their copies, so the table says `CLEAN`, unless the barrier notes
    /// writes and the frames are new (`state` `DIRTY`): they are pinned.
    pub(crate) fn mapped_install(
        &self,
        _g: &Guard<'_>,
        m: &MappedState,
        frame: FrameNo,
        data: &[u8],
        state: u32,
    ) -> Result<(), VmError> {
        let pin = state == DIRTY && self.barrier_mode();
        let n = (data.len() / self.frame_size) as u32;
        // Known clean before the window opens (with checks it opens only
        // checked frames); nobody reads a frame being installed.
        for k in 0..n {
            if let Some(m) = self.table.meta(frame + k) {
                m.state.store(if pin { DIRTY } else { CLEAN }, Ordering::Release);
            }
        }
        self.watch_frames(m, frame, n)?;
        // The lock keeps other installers out; nobody holds a reference into
        // a frame being installed (a new block's, or one given back its
        // committed bytes).
        // SAFETY: the frames lie in the reservation (checked by the caller),
        // readable and writable everywhere, and are not aliased (above).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.frame_addr(frame) as *mut u8, data.len())
        };
        if pin {
            for k in 0..n {
                self.note_pinned(frame + k);
            }
        }
        Ok(())
    }

    /// Mapped backend: makes the blocks `(first frame, frames)` read the
    /// page file again, dropping the copies written into them; the part of
    /// a block past the file's end is left as it is. Only for blocks whose
    /// committed image is the file's (a checkpoint has installed their
    /// changes) and that nobody writes meanwhile (no transaction open): a
    /// thread reading one meanwhile reads the same bytes before and after.
    /// Windows left without a copy are no longer watched. Other backends:
    /// nothing to do.
    pub fn to_file(&self, blocks: &[(FrameNo, u32)]) -> Result<(), VmError> {
        let Imp::Mapped(m) = &self.imp else {
            return Ok(());
        };
        let g = self.lock.lock();
        let file_frames = (m.file_len()? / self.frame_size as u64) as FrameNo;
        for &(f, n) in blocks {
            self.check_frames(f, n)?;
            let end = (f + n).min(file_frames);
            if f < end {
                self.frames_to_file(&g, m, f, end)?;
            }
        }
        self.unwatch_idle(m)
    }

    /// Frames `[f, end)` (within the file) read it again: dropped where
    /// the file is mapped, the file mapped where it is not.
    fn frames_to_file(&self, _g: &Guard<'_>, m: &MappedState, f: FrameNo, end: FrameNo) -> Result<(), VmError> {
        let mut at = f;
        while at < end {
            let mapped = m.layout().reads_file(at);
            let mut to = at + 1;
            while to < end && m.layout().reads_file(to) == mapped {
                to += 1;
            }
            let (addr, len) = (self.frame_addr(at), (to - at) as usize * self.frame_size);
            if mapped {
                sys::madvise(addr, len, libc::MADV_DONTNEED).map_err(os("madvise"))?;
            } else {
                let off = u64::from(at) * self.frame_size as u64;
                let prot = base_prot(m.checks.is_some());
                map_over(m.file.as_raw_fd(), addr, len, off, prot).map_err(os("mmap(page file)"))?;
                m.layout().set_file(at, to, true);
            }
            // Watched still: protected again where the copies were.
            self.rewatch(m, at, to)?;
            at = to;
        }
        Ok(())
    }

    /// Mapped backend: frames `f..f+n` read the file again where it
    /// reaches, zeros past it (`evict`'s meaning here: the next read gets
    /// the committed image, when that is the file's).
    pub(crate) fn mapped_evict(&self, g: &Guard<'_>, m: &MappedState, f: FrameNo, n: u32) -> Result<(), VmError> {
        let file_frames = (m.file_len()? / self.frame_size as u64) as FrameNo;
        let end = (f + n).min(file_frames).max(f);
        if f < end {
            self.frames_to_file(g, m, f, end)?;
        }
        if end < f + n {
            let (addr, len) = (self.frame_addr(end), (f + n - end) as usize * self.frame_size);
            sys::madvise(addr, len, libc::MADV_DONTNEED).map_err(os("madvise"))?;
            self.rewatch(m, end, f + n)?;
        }
        // With checks, checked again at their next touch.
        self.close_frames(m, f, n)
    }

    /// Gives frames `f..f+n` fresh zeros: the space of a transaction that
    /// did not commit, which a stale pointer must find empty (with the
    /// mapped backend the file's old bytes would be there otherwise; the
    /// others fetch zeros for it: `db/dead.rs`).
    pub fn discard(&self, f: FrameNo, n: u32) -> Result<(), VmError> {
        let Imp::Mapped(m) = &self.imp else {
            return if self.is_resident(f) {
                self.evict(f, n)
            } else {
                Ok(())
            };
        };
        self.check_frames(f, n)?;
        let _g = self.lock.lock();
        let (addr, len) = (self.frame_addr(f), n as usize * self.frame_size);
        map_over(-1, addr, len, 0, base_prot(m.checks.is_some())).map_err(os("mmap(zeros)"))?;
        m.layout().set_file(f, f + n, false);
        self.rewatch(m, f, f + n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_runs_merge_split_and_answer() {
        let mut l = Layout {
            file_runs: vec![(0, 10)],
        };
        l.set_file(12, 15, true);
        l.set_file(10, 12, true);
        assert_eq!(l.file_runs, vec![(0, 15)]);
        l.set_file(3, 5, false);
        assert_eq!(l.file_runs, vec![(0, 3), (5, 15)]);
        assert!(l.reads_file(2));
        assert!(!l.reads_file(3));
        assert!(l.reads_file(14));
        assert!(!l.reads_file(15));
    }
}
