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
    /// granularity). Under a cache budget a fault fetches no more than the
    /// room left: prefetching never evicts. Frames are laid out a window at a
    /// time, so a cluster is installed with one call.
    ///
    /// Default 64 (256 KiB). A fault costs its mechanism (7–8 µs here, a
    /// signal or a thread round trip) plus about 3 µs per block read,
    /// checked, swizzled and installed, so fetching a neighbour pays as soon
    /// as the program goes on to touch a third of them. OO1's operations on
    /// its 20,000-part database touch 40–70% of its 1,034 pages: a cold
    /// traversal takes a third less time with 64 pages per fault than with
    /// one, a cold batch of lookups three fifths less (docs/design.md, 4.3).
    /// Programs that touch a few scattered objects of a database much larger
    /// than that (random lookups on OO1's 200,000 parts touch a tenth of it,
    /// an insert a few dozen pages) are faster with 1.
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
            fetch_cluster: 64,
            reserve_bytes: 64 << 30,
            recovery_buffer_pages: 1024,
            store: StoreOptions::default(),
        }
    }
}
