//! `FrameSpace`: one reservation, its frame table, and the backend serving it.
//! The public operations live here; what happens on a fault is in `fault.rs`.

use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::frame_table::{self, FrameTable, UNASSIGNED};
use super::held::{self, AmberLock};
use super::lock::OwnerLock;
use super::pagemap::PageMap;
use super::service::{Requests, ServiceThread};
use super::sigsegv;
use super::sys::{self, Mapping};
use super::types::{
    Backend, BackendChoice, FaultError, FaultKind, FaultService, FrameNo, InstallAs, VmConfig,
    VmError,
};
use super::uffd::{self, HandlerThread, Uffd};
use super::mapped::{self, MappedFile, MappedState};

/// Handed to [`FaultService::missing`]: installs pages and reaches the
/// FrameSpace (to assign frames while swizzling) without a strong reference.
pub struct Installer<'a> {
    pub(crate) space: &'a FrameSpace,
    pub(crate) frame: FrameNo,
    /// Whether an install made the faulting frame resident. Another thread
    /// may evict it again before the service returns (the faulting thread is
    /// woken by the install itself); that is not a failure, the retried
    /// access simply faults again.
    pub(crate) hit: bool,
}

impl<'a> Installer<'a> {
    /// The frame whose touch caused this call.
    pub fn frame(&self) -> FrameNo {
        self.frame
    }

    pub fn space(&self) -> &'a FrameSpace {
        self.space
    }

    /// Same as [`FrameSpace::install`], except that with userfaultfd no
    /// waiting thread is woken: the faulting thread resumes only when the
    /// service has returned, so whatever the service does after installing
    /// (fetching neighbours, evicting under a cache budget) is done before
    /// it runs again, as with the SIGSEGV backend, whose faulting thread
    /// waits for the service thread's answer. (Other threads may run
    /// meanwhile: eviction does not rely on this, see `evict_clean`.)
    pub fn install(&mut self, frame: FrameNo, data: &[u8], how: InstallAs) -> Result<u32, VmError> {
        self.install_span(frame, data, how, &mut |_, _| {})
    }

    /// [`install`](Self::install) for frames holding several blocks (a fetch
    /// cluster whose frames are contiguous): one system call for all of them.
    /// `installed(first, n)` is called for each run of frames this call made
    /// resident (frames already resident are skipped, as another thread may
    /// have installed some meanwhile), so that the caller can account for
    /// exactly the blocks it installed.
    pub fn install_span(
        &mut self,
        frame: FrameNo,
        data: &[u8],
        how: InstallAs,
        installed: &mut dyn FnMut(FrameNo, u32),
    ) -> Result<u32, VmError> {
        let n = self
            .space
            .install_frames(frame, data, how, false, installed)?;
        let frames = (data.len() / self.space.frame_size) as FrameNo;
        if (frame..frame.saturating_add(frames)).contains(&self.frame) {
            self.hit = true;
        }
        Ok(n)
    }
}

pub(crate) struct UffdState {
    pub(crate) uffd: Arc<Uffd>,
    pub(crate) pagemap: PageMap,
    thread: Mutex<Option<HandlerThread>>,
    /// The last fault message whose thread held Amber locks: its thread,
    /// its page's address, and how many such messages came in a row
    /// (`FrameSpace::serve_uffd`). Only the handler thread uses it.
    suspect: Mutex<(i32, usize, u32)>,
}

impl UffdState {
    /// How many fault messages in a row, this one included, came from
    /// thread `tid` at `page` while it held Amber locks.
    pub(crate) fn suspect_repeats(&self, tid: i32, page: usize) -> u32 {
        let mut s = self.suspect.lock().unwrap_or_else(|e| e.into_inner());
        if (s.0, s.1) == (tid, page) {
            s.2 = s.2.saturating_add(1);
        } else {
            *s = (tid, page, 1);
        }
        s.2
    }

    /// Host-page runs in `[lo, hi)` written since last protected (no re-protect).
    pub(crate) fn pagemap_written(
        &self,
        lo: usize,
        hi: usize,
        out: &mut Vec<(u64, u64)>,
    ) -> Result<(), VmError> {
        self.pagemap
            .written(lo as u64, hi as u64, false, &mut |s, e| out.push((s, e)))
            .map_err(|e| VmError::Os {
                op: "PAGEMAP_SCAN",
                err: e,
            })
    }
}

pub(crate) struct SigState {
    pub(crate) memfd: OwnedFd,
    pub(crate) staging: Mapping,
    /// Frames made writable since the last `take_written` (may hold stale
    /// entries; filtered by state). Capacity: one entry per frame.
    pub(crate) written: Mapping,
    pub(crate) wlen: UnsafeCell<usize>,
    /// Missing pages the signal handler asks the service thread for.
    pub(crate) requests: Arc<Requests>,
    service: Mutex<Option<ServiceThread>>,
}

pub(crate) enum Imp {
    Uffd(UffdState),
    Sigsegv(SigState),
    Mapped(MappedState),
}

/// A reservation of address space divided into frames; see the module docs.
pub struct FrameSpace {
    pub(crate) frame_size: usize,
    pub(crate) shift: u32,
    pub(crate) host_page: usize,
    pub(crate) base: usize,
    len: usize,
    pub(crate) track_writes: bool,
    backend: Backend,
    reason: String,
    /// Whether the reservation sits at the home it was asked for
    /// ([`VmConfig::home`](super::VmConfig::home)).
    at_home: bool,
    pub(crate) service: Arc<dyn FaultService>,
    pub(crate) table: FrameTable,
    pub(crate) lock: OwnerLock,
    pub(crate) imp: Imp,
    /// Set when dropping starts: late fault messages are then ignored.
    pub(crate) dropping: AtomicBool,
    /// Whether threads may hold mutable references into frames (see
    /// [`FrameSpace::set_writers`]).
    pub(crate) writers: AtomicBool,
    /// Whether writes are noted by a software barrier (`barrier.rs`).
    pub(crate) software: AtomicBool,
    /// Barrier mode: frames pinned as written since the last
    /// `take_written` (may hold stale entries; filtered by state).
    pub(crate) pinned: Mutex<Vec<FrameNo>>,
    /// Slot in the SIGSEGV handler's registry.
    sig_slot: AtomicUsize,
    /// Whether the one `Access` of this space is out.
    pub(crate) access_taken: super::typed::AccessTaken,
    main: Option<Mapping>,
}

// SAFETY: all shared mutable state is atomics, memory reached through raw
// pointers under the lock, or (`wlen`) only touched with the lock held.
unsafe impl Send for FrameSpace {}
// SAFETY: as above.
unsafe impl Sync for FrameSpace {}

impl std::fmt::Debug for FrameSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSpace")
            .field("backend", &self.backend)
            .field("base", &format_args!("{:#x}", self.base))
            .field("frames", &self.table.nframes())
            .field("frame_size", &self.frame_size)
            .finish()
    }
}

struct SendPtr(*const FrameSpace);
// SAFETY: FrameSpace is Sync, and the pointer is only dereferenced by the
// handler thread, which FrameSpace::drop joins before any field is freed.
unsafe impl Send for SendPtr {}

/// Whether a frame space configured with `choice` would map the page file
/// (`choice`, or the environment's override of `Auto`, is a mapped
/// backend): the object layer then lets the store install what its open
/// recovered before the page file is mapped (`db/mapped.rs`).
pub(crate) fn chooses_mapped(choice: BackendChoice) -> bool {
    let env = std::env::var("AMBER_FAULT_BACKEND").ok();
    matches!(
        choose(choice, env.as_deref()),
        Ok((BackendChoice::Mapped | BackendChoice::MappedUnverified, _))
    )
}

/// Decides the backend: explicit choice, then the environment, then a probe.
fn choose(choice: BackendChoice, env: Option<&str>) -> Result<(BackendChoice, String), VmError> {
    match (choice, env) {
        (BackendChoice::Auto, Some("uffd")) => {
            Ok((BackendChoice::Uffd, "AMBER_FAULT_BACKEND=uffd".into()))
        }
        (BackendChoice::Auto, Some("sigsegv")) => {
            Ok((BackendChoice::Sigsegv, "AMBER_FAULT_BACKEND=sigsegv".into()))
        }
        (BackendChoice::Auto, Some("mapped-unverified")) => Ok((
            BackendChoice::MappedUnverified,
            "AMBER_FAULT_BACKEND=mapped-unverified".into(),
        )),
        (BackendChoice::Auto, Some("mapped")) => {
            Ok((BackendChoice::Mapped, "AMBER_FAULT_BACKEND=mapped".into()))
        }
        (BackendChoice::Auto, Some(v)) if !v.is_empty() => Err(VmError::InvalidConfig(format!(
            "AMBER_FAULT_BACKEND={v}: expected uffd, sigsegv, mapped or mapped-unverified"
        ))),
        (BackendChoice::Auto, _) => Ok((BackendChoice::Auto, String::new())),
        (c, _) => Ok((c, "chosen by configuration".into())),
    }
}

impl FrameSpace {
    pub fn new(cfg: VmConfig, service: Arc<dyn FaultService>) -> Result<Arc<FrameSpace>, VmError> {
        let host_page = sys::host_page_size();
        let fs = cfg.frame_size;
        if !fs.is_power_of_two() || fs < host_page || fs > 1 << 20 {
            return Err(VmError::InvalidConfig(format!(
                "frame_size {fs} must be a power of two between the host page size {host_page} and 1 MiB"
            )));
        }
        let nframes = (cfg.reserve_bytes / fs as u64).min(u64::from(u32::MAX));
        if nframes == 0 || nframes as u128 * fs as u128 > isize::MAX as u128 {
            return Err(VmError::InvalidConfig(format!(
                "reserve_bytes {} is out of range",
                cfg.reserve_bytes
            )));
        }
        let nframes = nframes as u32;
        let len = nframes as usize * fs;
        let env = std::env::var("AMBER_FAULT_BACKEND").ok();
        let (choice, mut reason) = choose(cfg.backend, env.as_deref())?;
        let place = Placement {
            align: fs,
            hint: cfg.address_hint,
            home: cfg.home,
        };
        let mapped_as = match choice {
            BackendChoice::Mapped => Some(Backend::Mapped),
            BackendChoice::MappedUnverified => Some(Backend::MappedUnverified),
            _ => None,
        };
        let mapped = match (mapped_as, &cfg.file) {
            (Some(b), Ok(file)) => {
                let checks = (b == Backend::Mapped).then_some(cfg.service_spin);
                new_mapped(len, place, *file, checks)
            }
            (Some(_), Err(why)) => Err(why.clone()),
            _ => Err(String::new()),
        };
        let (imp, main, backend) = match (mapped_as, mapped) {
            (Some(b), Ok((imp, main))) => (imp, main, b),
            (Some(b), Err(why)) => {
                // Where the database cannot be served so, it is served as
                // `Auto` would serve it, saying why.
                let (imp, main, backend, auto) = auto(len, nframes, &cfg, place)?;
                reason = format!("{reason}: {b} cannot serve it ({why}); {auto}");
                (imp, main, backend)
            }
            (None, Ok(_)) => unreachable!("a mapping made for no mapped backend"),
            (None, Err(_)) if choice == BackendChoice::Sigsegv => {
                let (imp, main) = new_sigsegv(len, nframes, place, cfg.service_spin)?;
                (imp, main, Backend::Sigsegv)
            }
            (None, Err(_)) if choice == BackendChoice::Uffd => match new_uffd(len, cfg.track_writes, place) {
                Ok((imp, main)) => (imp, main, Backend::Uffd),
                Err(why) => {
                    return Err(VmError::BackendUnavailable {
                        backend: Backend::Uffd,
                        reason: why,
                    });
                }
            },
            (None, Err(_)) => {
                let (imp, main, backend, auto) = auto(len, nframes, &cfg, place)?;
                reason = auto;
                (imp, main, backend)
            }
        };
        let at_home = cfg.home != 0 && main.addr() == cfg.home;
        // The mapped backend's identity region is as large as it can be:
        // a page allocated in the session must have the frame its stored
        // address names, as every page of the file has.
        let direct = if backend.is_mapped() { u64::MAX } else { cfg.direct_pages };
        let table = FrameTable::new(nframes, direct)?;
        let space = Arc::new(FrameSpace {
            frame_size: fs,
            shift: fs.trailing_zeros(),
            host_page,
            at_home,
            base: main.addr(),
            len,
            track_writes: cfg.track_writes,
            backend,
            reason,
            service,
            table,
            lock: OwnerLock::new(AmberLock::FrameTable),
            imp,
            dropping: AtomicBool::new(false),
            writers: AtomicBool::new(cfg.writers),
            software: AtomicBool::new(false),
            pinned: Mutex::new(Vec::new()),
            sig_slot: AtomicUsize::new(usize::MAX),
            access_taken: Default::default(),
            main: Some(main),
        });
        // Every space is known to the SIGSEGV handler: the SIGSEGV
        // backend's faults go there, and so do userfaultfd writes that hit
        // a victim write-protected for eviction.
        sigsegv::install()?;
        let slot = sigsegv::register(Arc::as_ptr(&space))?;
        space.sig_slot.store(slot, Ordering::Release);
        match &space.imp {
            Imp::Uffd(u) => {
                let ptr = SendPtr(Arc::as_ptr(&space));
                let serve = move |m: &uffd::UffdMsg| {
                    let p = &ptr;
                    // SAFETY: see SendPtr: the FrameSpace outlives this thread.
                    unsafe { &*p.0 }.serve_uffd(m);
                };
                let t = HandlerThread::spawn(u.uffd.clone(), cfg.service_spin, serve).map_err(
                    |e| VmError::Os {
                        op: "spawn userfaultfd thread",
                        err: e,
                    },
                )?;
                *u.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
            }
            Imp::Sigsegv(s) => {
                let ptr = SendPtr(Arc::as_ptr(&space));
                let serve = move |f: FrameNo, msg: &mut sys::StackBuf| {
                    let p = &ptr;
                    // SAFETY: see SendPtr: the FrameSpace outlives this thread.
                    unsafe { &*p.0 }.serve_request(f, msg)
                };
                let t = ServiceThread::spawn(s.requests.clone(), cfg.service_spin, serve)
                    .map_err(|e| VmError::Os {
                        op: "spawn fault service thread",
                        err: e,
                    })?;
                *s.service.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
            }
            // The kernel serves every fault; with checks, a window's first
            // touch is checked by a service thread (`mapped_checks.rs`).
            Imp::Mapped(m) => {
                if let Some(c) = &m.checks {
                    let ptr = SendPtr(Arc::as_ptr(&space));
                    let serve = move |f: FrameNo, msg: &mut sys::StackBuf| {
                        let p = &ptr;
                        // SAFETY: see SendPtr: the FrameSpace outlives this thread.
                        unsafe { &*p.0 }.serve_request(f, msg)
                    };
                    c.spawn(cfg.service_spin, serve)?;
                }
            }
        }
        Ok(space)
    }

    /// Says whether threads may now hold mutable references into frames
    /// (the layer above: whether a transaction is open). Only the
    /// userfaultfd backend cares: its first write to a clean frame is
    /// resolved by the kernel without telling Amber, so evicting a frame
    /// found unwritten could discard a write made just after the check.
    /// While writers may run, eviction write-protects the victim first
    /// (`mprotect`, synchronous: a write after it faults and waits), then
    /// checks, drops, and lifts the protection; without writers it drops
    /// at once. The SIGSEGV backend's eviction claims the frame's state
    /// against the first-write handler instead, which costs nothing.
    pub fn set_writers(&self, may_write: bool) {
        self.writers.store(may_write, Ordering::Release);
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Why this backend was chosen (for logs and benchmark reports).
    pub fn backend_reason(&self) -> &str {
        &self.reason
    }

    pub fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Frames in the reservation.
    pub fn frame_count(&self) -> u32 {
        self.table.nframes()
    }

    /// Frames `0..n` are the identity region: frame `f` is page `f`'s (see
    /// [`VmConfig::direct_pages`](super::VmConfig::direct_pages)).
    pub fn direct_frames(&self) -> u32 {
        self.table.direct()
    }

    /// Frames assigned so far (frames `0..n`, the identity region's
    /// included).
    pub fn assigned_frames(&self) -> u32 {
        self.table.assigned()
    }

    pub fn base(&self) -> usize {
        self.base
    }

    /// Whether the reservation sits at the home it was asked for: frame
    /// `p` of the identity region is then at the address a database with
    /// that home stores for page `p` (`format/home.rs`).
    pub fn at_home(&self) -> bool {
        self.at_home
    }

    /// Address of the first byte of frame `f` (computed; not checked).
    pub fn frame_addr(&self, f: FrameNo) -> usize {
        self.base + ((f as usize) << self.shift)
    }

    pub(crate) fn contains(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.base) < self.len
    }

    pub fn frame_at(&self, addr: usize) -> Option<FrameNo> {
        self.contains(addr)
            .then(|| ((addr - self.base) >> self.shift) as FrameNo)
    }

    pub fn lookup(&self, page: u64) -> Option<FrameNo> {
        self.table.lookup(page)
    }

    /// The frame of `page`, assigning fresh frames if it has none: `run_len`
    /// contiguous ones for `page..page+run_len` (a large object).
    pub fn assign(&self, page: u64, run_len: u32) -> Result<FrameNo, VmError> {
        self.check_mapped(page, run_len)?;
        // Already assigned, as this run (what the locked path would answer):
        // no lock on the swizzling path.
        if let Some(f) = self.table.lookup(page)
            && (run_len == 1 || self.table.page_of(f) == Some((page, 0, run_len)))
        {
            return Ok(f);
        }
        let g = self.lock.lock();
        self.table.assign(&g, page, run_len)
    }

    /// Assigns frames to the blocks `blocks` (`(head page, run length)`,
    /// ascending, disjoint, none before page `lo`) laid out as their pages:
    /// block `(h, n)` gets the frames at `h - lo` in a fresh span, so that
    /// neighbouring blocks can be installed with one call. Blocks that have a
    /// frame keep it.
    pub fn assign_span(&self, lo: u64, blocks: &[(u64, u32)]) -> Result<(), VmError> {
        for &(h, n) in blocks {
            self.check_mapped(h, n)?;
        }
        let g = self.lock.lock();
        self.table.assign_span(&g, lo, blocks)
    }

    /// `(head page, index in run, run length)` of an assigned frame.
    pub fn page_of(&self, f: FrameNo) -> Option<(u64, u32, u32)> {
        self.table.page_of(f)
    }

    pub fn is_resident(&self, f: FrameNo) -> bool {
        match &self.imp {
            // Every assigned frame reads the file or memory of its own.
            Imp::Mapped(_) => self.table.state(f) != UNASSIGNED,
            _ => frame_table::is_resident_state(self.table.state(f)),
        }
    }

    /// Makes `f` resident by running the service in the calling thread, so
    /// that a bad page is an error here instead of an abort on a later load.
    /// A thread holding Amber locks gets an error (the service might need
    /// them).
    pub fn ensure_resident(&self, f: FrameNo) -> Result<(), FaultError> {
        let held = held::local();
        if !held.is_empty() {
            let page = self.page_of(f).map_or(u64::MAX, |(h, i, _)| h + u64::from(i));
            return Err(FaultError::new(
                page,
                FaultKind::Internal,
                VmError::LockHeld { frame: f, held }.to_string(),
            ));
        }
        let page = self.page_of(f).map_or(u64::MAX, |(h, i, _)| h + u64::from(i));
        self.fill(f)?;
        // An identity frame whose page lies inside a block that starts
        // elsewhere is forwarded by the fill (the block gets frames of its
        // own): a load through it would abort as a wild pointer's.
        if self.is_unassigned(f) {
            return Err(FaultError::new(
                page,
                FaultKind::Dangling,
                format!("frame {f} is not assigned to a page: page {page} lies inside another block"),
            ));
        }
        Ok(())
    }

    pub(crate) fn state(&self, f: FrameNo) -> u32 {
        self.table.state(f)
    }

    pub(crate) fn is_unassigned(&self, f: FrameNo) -> bool {
        self.table.state(f) == UNASSIGNED
    }
}

/// Where a reservation goes: at `home` if it is not 0 and nothing is
/// mapped there, else aligned to `align` near `hint`.
#[derive(Clone, Copy)]
struct Placement {
    align: usize,
    hint: usize,
    home: usize,
}

impl Placement {
    fn reserve(self, len: usize, prot: libc::c_int, fd: Option<libc::c_int>) -> std::io::Result<Mapping> {
        if self.home != 0
            && self.home.is_multiple_of(self.align)
            && let Some(m) = Mapping::reserve_at(len, prot, fd, self.home)?
        {
            return Ok(m);
        }
        Mapping::reserve(len, prot, fd, self.align, self.hint)
    }
}

fn new_uffd(len: usize, track: bool, place: Placement) -> Result<(Imp, Mapping), String> {
    let uffd = Uffd::open(uffd::UFFD_FEATURE_WP_ASYNC | uffd::UFFD_FEATURE_THREAD_ID)?;
    let pagemap = PageMap::open().map_err(|e| format!("PAGEMAP_SCAN unavailable: {e}"))?;
    let main = place
        .reserve(len, libc::PROT_READ | libc::PROT_WRITE, None)
        .map_err(|e| format!("reserving {len} bytes: {e}"))?;
    advise_reservation(&main);
    let mode = uffd::UFFDIO_REGISTER_MODE_MISSING
        | if track {
            uffd::UFFDIO_REGISTER_MODE_WP
        } else {
            0
        };
    uffd.register(main.addr(), len, mode)
        .map_err(|e| format!("UFFDIO_REGISTER: {e}"))?;
    Ok((
        Imp::Uffd(UffdState {
            uffd: Arc::new(uffd),
            pagemap,
            thread: Mutex::new(None),
            suspect: Mutex::new((0, 0, 0)),
        }),
        main,
    ))
}

/// The backend `Auto` chooses: userfaultfd where it has what it needs,
/// else SIGSEGV; and why.
fn auto(
    len: usize,
    nframes: u32,
    cfg: &VmConfig,
    place: Placement,
) -> Result<(Imp, Mapping, Backend, String), VmError> {
    match new_uffd(len, cfg.track_writes, place) {
        Ok((imp, main)) => Ok((
            imp,
            main,
            Backend::Uffd,
            "auto: userfaultfd opened with WP_ASYNC and PAGEMAP_SCAN".into(),
        )),
        Err(why) => {
            let (imp, main) = new_sigsegv(len, nframes, place, cfg.service_spin)?;
            Ok((
                imp,
                main,
                Backend::Sigsegv,
                format!("auto: userfaultfd unusable ({why}); using SIGSEGV"),
            ))
        }
    }
}

/// The mapped backend's reservation: at the home or not at all, the file
/// over its start (`mapped.rs`).
fn new_mapped(
    len: usize,
    place: Placement,
    file: MappedFile,
    checks: Option<std::time::Duration>,
) -> Result<(Imp, Mapping), String> {
    if place.home == 0 {
        return Err("the database has no home".into());
    }
    let main = Mapping::reserve_at(len, libc::PROT_READ | libc::PROT_WRITE, None, place.home)
        .map_err(|e| format!("reserving {len} bytes at its home: {e}"))?
        .ok_or_else(|| format!("its home {:#x} is taken", place.home))?;
    let _ = sys::madvise(main.addr(), main.len(), libc::MADV_DONTFORK);
    let st = mapped::new(&main, file, place.align, checks)?;
    Ok((Imp::Mapped(st), main))
}

fn new_sigsegv(
    len: usize,
    nframes: u32,
    place: Placement,
    wait_poll: std::time::Duration,
) -> Result<(Imp, Mapping), VmError> {
    // SAFETY: memfd_create takes a C string and flags, returns a new fd or -1.
    let fd = unsafe { libc::memfd_create(c"amber-frames".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(VmError::Os {
            op: "memfd_create",
            err: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: fd is fresh and owned by nobody else.
    let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own memfd; a sparse size costs nothing.
    if unsafe { libc::ftruncate(memfd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(VmError::Os {
            op: "ftruncate(memfd)",
            err: std::io::Error::last_os_error(),
        });
    }
    let os = |op| move |e| VmError::Os { op, err: e };
    let main = place
        .reserve(len, libc::PROT_NONE, Some(memfd.as_raw_fd()))
        .map_err(os("mmap reservation"))?;
    let staging = Mapping::shared_fd(len, libc::PROT_READ | libc::PROT_WRITE, memfd.as_raw_fd())
        .map_err(os("mmap staging view"))?;
    advise_reservation(&main);
    advise_reservation(&staging);
    let written = Mapping::anon(
        nframes as usize * std::mem::size_of::<FrameNo>(),
        libc::PROT_READ | libc::PROT_WRITE,
    )
    .map_err(os("mmap written list"))?;
    let st = SigState {
        memfd,
        staging,
        written,
        wlen: UnsafeCell::new(0),
        requests: Requests::new(wait_poll).into(),
        service: Mutex::new(None),
    };
    Ok((Imp::Sigsegv(st), main))
}

/// Not inherited by a forked child (it would lose its fault handling and see
/// zero pages), and no transparent huge pages (frames are managed one by one).
fn advise_reservation(m: &Mapping) {
    let _ = sys::madvise(m.addr(), m.len(), libc::MADV_DONTFORK);
    let _ = sys::madvise(m.addr(), m.len(), libc::MADV_NOHUGEPAGE);
}

impl Drop for FrameSpace {
    fn drop(&mut self) {
        self.dropping.store(true, Ordering::SeqCst);
        // First the handler (a fault in flight may still be waiting for the
        // service thread), then the thread serving faults, joined here
        // before any field is freed (it holds a raw pointer to self).
        sigsegv::unregister(self.sig_slot.load(Ordering::Acquire));
        match &self.imp {
            Imp::Uffd(u) => drop(u.thread.lock().unwrap_or_else(|p| p.into_inner()).take()),
            Imp::Sigsegv(s) => drop(s.service.lock().unwrap_or_else(|p| p.into_inner()).take()),
            Imp::Mapped(m) => {
                if let Some(c) = &m.checks {
                    c.stop();
                }
            }
        }
        if let Some(m) = self.main.take() {
            m.into_tombstone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_choice_honours_environment_only_for_auto() {
        assert_eq!(
            choose(BackendChoice::Auto, Some("uffd")).map(|c| c.0).ok(),
            Some(BackendChoice::Uffd)
        );
        assert_eq!(
            choose(BackendChoice::Auto, Some("sigsegv"))
                .map(|c| c.0)
                .ok(),
            Some(BackendChoice::Sigsegv)
        );
        assert_eq!(
            choose(BackendChoice::Auto, None).map(|c| c.0).ok(),
            Some(BackendChoice::Auto)
        );
        assert_eq!(
            choose(BackendChoice::Sigsegv, Some("uffd"))
                .map(|c| c.0)
                .ok(),
            Some(BackendChoice::Sigsegv)
        );
        assert!(choose(BackendChoice::Auto, Some("mmap")).is_err());
    }
}
