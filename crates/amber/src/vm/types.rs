//! The vocabulary shared by the module's users: configuration, the service
//! trait the layer above implements, and errors.

use std::fmt;
use std::io;
use std::time::Duration;

use super::held::HeldSet;
use super::space::Installer;

/// Index of a frame in a [`super::FrameSpace`]; 32 bits cover 16 TiB of 4 KiB frames.
pub type FrameNo = u32;

/// The fault backend in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// userfaultfd: missing pages served by a handler thread, writes
    /// tracked by asynchronous write-protect and `PAGEMAP_SCAN` (Linux 6.7+).
    Uffd,
    /// SIGSEGV: `PROT_NONE` frames, a signal handler, `mprotect` per page
    /// (any Linux; limited by `vm.max_map_count`).
    Sigsegv,
    /// The page file mapped copy-on-write at the database's home, its
    /// pages served by the kernel's own faults and *not verified* when
    /// first read (`mapped.rs`; Linux 6.7+ for `PAGEMAP_SCAN`).
    MappedUnverified,
    /// The same mapping, its pages *verified* before the program can read
    /// them: a window is inaccessible until its first touch, whose fault
    /// checks every block of it as a fetch does and only then opens it
    /// (`mapped_checks.rs`).
    Mapped,
}

impl Backend {
    /// Whether the page file is mapped at the home (either mapped backend).
    pub fn is_mapped(self) -> bool {
        matches!(self, Backend::MappedUnverified | Backend::Mapped)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Uffd => "uffd",
            Backend::Sigsegv => "sigsegv",
            Backend::MappedUnverified => "mapped-unverified",
            Backend::Mapped => "mapped",
        })
    }
}

/// Which backend to use. `Auto` takes userfaultfd when it can be opened with
/// everything it needs (missing faults, `WP_ASYNC`, `PAGEMAP_SCAN`) and
/// SIGSEGV otherwise; the environment variable
/// `AMBER_FAULT_BACKEND=uffd|sigsegv|mapped|mapped-unverified` overrides `Auto`
/// (and only `Auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// userfaultfd where it has what Amber needs, else SIGSEGV.
    #[default]
    Auto,
    /// userfaultfd, or fail to open.
    Uffd,
    /// SIGSEGV.
    Sigsegv,
    /// The page file mapped at the database's home, pages not verified
    /// when first read, where the database can be served so (its home
    /// free, a page file of this process's store, no cache budget: see
    /// `Db::backend_reason`); `Auto`'s choice where it cannot.
    MappedUnverified,
    /// The page file mapped at the database's home, each window of pages
    /// verified at its first touch, where the database can be served so (as
    /// for `MappedUnverified`); `Auto`'s choice where it cannot.
    Mapped,
}

#[derive(Clone, Debug)]
pub struct VmConfig {
    pub backend: BackendChoice,
    /// Bytes per frame (= database page size): a power of two, at least the
    /// host page size, at most 1 MiB.
    pub frame_size: usize,
    /// Address space to reserve; rounded down to whole frames, at most
    /// 2^32 frames.
    pub reserve_bytes: u64,
    /// Install frames write-protected and report written ones through
    /// `take_written`. Off: frames are installed writable.
    pub track_writes: bool,
    /// How long the thread serving faults (the userfaultfd handler thread,
    /// the SIGSEGV backend's service thread) keeps polling for the next one
    /// after serving a fault before it sleeps (see `uffd.rs`); with SIGSEGV
    /// also how long a faulting thread polls for its answer before it
    /// sleeps (see `service.rs`).
    pub service_spin: Duration,
    /// Pages `0..direct_pages` have frames `0..direct_pages`, one to one,
    /// without being assigned (the identity region, at most half the
    /// reservation; see `frame_table.rs`). A database passes the pages its
    /// file has when it is opened. 0: every page gets its frame lazily.
    pub direct_pages: u64,
    /// Where to try to put the reservation (rounded up to a multiple of
    /// `frame_size`); 0: where the kernel likes. Elsewhere if taken.
    pub address_hint: usize,
    /// Where the reservation should start exactly (a database's home,
    /// `format/home.rs`: frame `p` is then at the address the database
    /// stores for page `p`), if nothing is mapped anywhere in its range;
    /// else it goes where `address_hint` says. 0: no home.
    pub home: usize,
    /// The page file to map at the home (the mapped backend only), or why
    /// the database cannot be served so.
    pub file: Result<super::MappedFile, String>,
    /// Whether threads may hold mutable references into frames from the
    /// start. While they may, userfaultfd's eviction write-protects a
    /// victim before checking that it is unwritten (see
    /// [`FrameSpace::set_writers`](super::FrameSpace::set_writers)).
    pub writers: bool,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            backend: BackendChoice::Auto,
            frame_size: 4096,
            reserve_bytes: 64 << 30,
            track_writes: true,
            service_spin: Duration::from_micros(200),
            direct_pages: 0,
            address_hint: 0,
            home: 0,
            file: Err("no page file given".into()),
            writers: true,
        }
    }
}

/// How a frame is installed when writes are tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallAs {
    /// Content as stored: write-protected, the first write is noticed.
    Clean,
    /// Content the store does not have yet (a brand-new page): writable at once
    /// and reported by the next `take_written`.
    Dirty,
}

/// Implemented by the layer above: it fetches a page, verifies its checksum and
/// swizzles it.
///
/// `missing` runs on the thread that serves the space's faults (the
/// userfaultfd handler thread, or the SIGSEGV backend's service thread), or
/// in a thread calling `ensure_resident` or a locked copy; it must not touch
/// frame memory through a pointer. `first_write` runs inside the SIGSEGV
/// handler of the writing thread.
pub trait FaultService: Send + Sync + 'static {
    /// The program touched `frame`, which is assigned to a page but not
    /// resident. Must make at least the block containing `frame` resident
    /// through `inst.install(..)`; it may install neighbours too (a fetch
    /// cluster).
    fn missing(&self, frame: super::FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError>;

    /// `Sigsegv` backend with write tracking only: the first write to a
    /// resident, write-protected frame, called before write access is enabled;
    /// `clean` is the frame's current content (to copy into a recovery
    /// buffer). Runs in a signal handler, so it must be async-signal-safe:
    /// no allocation, no std lock (a [`SpinLock`](super::SpinLock) is fine).
    fn first_write(&self, frame: super::FrameNo, clean: &[u8]);
}

/// Why a page could not be made resident, so that the layer above can
/// report it as the right kind of error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The page's bytes are damaged (checksum, object map, a null in a
    /// non-null field).
    Corrupt,
    /// Reading the page failed.
    Io,
    /// The pointer that led here is stale: nothing allocated is there.
    Dangling,
    /// A virtual-memory operation failed (`mprotect`, `UFFDIO_COPY`, a
    /// machine limit such as `vm.max_map_count`).
    Vm,
    /// A broken invariant of Amber itself.
    Internal,
}

/// A page could not be made resident. `page` is `u64::MAX` when the frame has
/// no page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultError {
    pub page: u64,
    pub kind: FaultKind,
    pub message: String,
}

impl FaultError {
    /// A fault error of `kind` about `page`.
    pub fn new(page: u64, kind: FaultKind, message: impl Into<String>) -> FaultError {
        FaultError {
            page,
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}: {}", self.page, self.message)
    }
}

impl std::error::Error for FaultError {}

#[derive(Debug)]
#[non_exhaustive]
pub enum VmError {
    InvalidConfig(String),
    InvalidArgument(&'static str),
    /// The requested backend cannot run here; the reason says why.
    BackendUnavailable {
        backend: Backend,
        reason: String,
    },
    /// The reservation has no room for `requested` more frames.
    Exhausted {
        requested: u32,
        free: u32,
        frames: u32,
    },
    /// `assign(page, run_len)` overlaps pages already assigned differently.
    RunConflict {
        page: u64,
        run_len: u32,
    },
    /// The page number is out of range (`u64::MAX` is reserved).
    BadPage {
        page: u64,
    },
    /// The frame is not assigned (or beyond the reservation).
    BadFrame {
        frame: FrameNo,
    },
    /// A copy reaches past the last assigned frame.
    OutOfBounds {
        frame: FrameNo,
        offset: usize,
        len: usize,
    },
    /// `mprotect` failed with ENOMEM: too many distinct protection ranges for
    /// `vm.max_map_count`.
    MapCount {
        frame: FrameNo,
    },
    /// A thread holding Amber locks asked for a frame to be made resident:
    /// the service might need those locks (a bug in Amber).
    LockHeld {
        frame: FrameNo,
        held: HeldSet,
    },
    /// More live FrameSpaces than the SIGSEGV handler's registry holds.
    TooManySpaces,
    /// `take_written` or a write-protect call without `track_writes`.
    NotTracking,
    Fault(FaultError),
    Os {
        op: &'static str,
        err: io::Error,
    },
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::InvalidConfig(m) => write!(f, "invalid vm configuration: {m}"),
            VmError::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            VmError::BackendUnavailable { backend, reason } => {
                write!(f, "fault backend {backend} unavailable: {reason}")
            }
            VmError::Exhausted {
                requested,
                free,
                frames,
            } => write!(
                f,
                "address reservation exhausted: {requested} frames requested, {free} of {frames} free \
                 (raise VmConfig::reserve_bytes)"
            ),
            VmError::RunConflict { page, run_len } => {
                write!(
                    f,
                    "pages {page}..{} overlap pages already assigned differently",
                    page.saturating_add(u64::from(*run_len))
                )
            }
            VmError::BadPage { page } => write!(f, "page number {page} is out of range"),
            VmError::BadFrame { frame } => write!(f, "frame {frame} is not assigned"),
            VmError::OutOfBounds { frame, offset, len } => {
                write!(
                    f,
                    "{len} bytes at offset {offset} of frame {frame} reach past the assigned frames"
                )
            }
            VmError::MapCount { frame } => write!(f, "mprotect of frame {frame}: {MAP_COUNT_REMEDY}"),
            VmError::LockHeld { frame, held } => write!(
                f,
                "frame {frame} was to be made resident by a thread holding {held} \
                 (a bug in Amber: the fault path takes those locks)"
            ),
            VmError::TooManySpaces => write!(
                f,
                "too many live frame spaces (limit {})",
                super::sigsegv::SLOTS
            ),
            VmError::NotTracking => write!(f, "write tracking is off for this FrameSpace"),
            VmError::Fault(e) => write!(f, "{e}"),
            VmError::Os { op, err } => write!(f, "{op} failed: {err}"),
        }
    }
}

impl std::error::Error for VmError {}

/// What an ENOMEM from `mprotect` means, and what to do about it.
pub(crate) const MAP_COUNT_REMEDY: &str = "ENOMEM: more separately protected ranges than \
    vm.max_map_count allows (the SIGSEGV backend protects pages one by one); raise the \
    limit (sysctl -w vm.max_map_count=1048576) or use the userfaultfd backend";

impl VmError {
    /// This error as an [`Error`](crate::Error), `doing` saying what failed
    /// (`"listing written pages"`): a fault as the error of its kind
    /// (a damaged page, an I/O error, ...), a misuse of the frame space as
    /// an internal error, anything else as [`Error::Vm`](crate::Error::Vm)
    /// with the remedy, if there is one, in its text. The one conversion
    /// every caller uses.
    pub(crate) fn into_error(self, path: &std::path::Path, doing: &str) -> crate::Error {
        match self {
            VmError::Fault(e) => crate::db::fault_error(path, e),
            VmError::InvalidConfig(m) => crate::Error::invalid(format!("{doing}: {m}")),
            VmError::Os { op, err } => crate::Error::Vm {
                what: format!("{doing}: {op} failed"),
                source: Some(err),
            },
            e @ (VmError::InvalidArgument(_)
            | VmError::RunConflict { .. }
            | VmError::BadPage { .. }
            | VmError::BadFrame { .. }
            | VmError::OutOfBounds { .. }
            | VmError::NotTracking
            | VmError::LockHeld { .. }) => crate::Error::internal(format!("{doing}: {e}")),
            e => crate::Error::Vm {
                what: format!("{doing}: {e}"),
                source: None,
            },
        }
    }
}

impl From<FaultError> for VmError {
    fn from(e: FaultError) -> Self {
        VmError::Fault(e)
    }
}
