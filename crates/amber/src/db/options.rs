//! Options for opening a database.

use crate::store::StoreOptions;
use crate::vm::BackendChoice;

/// How to open (or create) a database.
#[derive(Debug, Clone)]
pub struct Options {
    /// Page size of a new database (ignored when opening).
    pub page_size: usize,
    /// Fault backend: automatic (userfaultfd when available), or forced. The
    /// environment variable `AMBER_FAULT_BACKEND=uffd|sigsegv` overrides
    /// `Auto`.
    pub backend: BackendChoice,
    /// Cache budget in bytes: resident pages beyond it are evicted (clean
    /// ones; they fault back in on the next touch). `None`: no limit.
    pub cache_bytes: Option<u64>,
    /// Pages fetched per fault: the blocks that start in the aligned window
    /// of this many pages holding the faulting block (Texas's data-fetching
    /// granularity), at most half the cache budget. Frames are laid out a
    /// window at a time, so a cluster is installed with one call.
    pub fetch_cluster: u32,
    /// Address space reserved for frames. A session can touch at most this
    /// much of the database.
    pub reserve_bytes: u64,
    /// Pages of QuickStore's recovery buffer (SIGSEGV backend): clean copies
    /// taken at first write; beyond it, pages are logged early.
    pub recovery_buffer_pages: usize,
    /// Storage options (checkpoint thresholds).
    pub store: StoreOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: crate::format::DEFAULT_PAGE_SIZE,
            backend: BackendChoice::Auto,
            cache_bytes: None,
            fetch_cluster: 1,
            reserve_bytes: 64 << 30,
            recovery_buffer_pages: 1024,
            store: StoreOptions::default(),
        }
    }
}
