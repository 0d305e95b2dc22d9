//! Options for opening a database.

use crate::source::remote::RemoteOptions;
use crate::store::StoreOptions;
use super::strategy::Strategy;
use crate::vm::BackendChoice;

/// How to open (or create) a database.
#[derive(Debug, Clone)]
pub struct Options {
    /// Page size of a new database (ignored when opening).
    pub page_size: usize,
    /// Fault backend: automatic (userfaultfd when available), or forced. The
    /// environment variable
    /// `AMBER_FAULT_BACKEND=uffd|sigsegv|mapped|mapped-unverified` overrides
    /// `Auto`.
    pub backend: BackendChoice,
    /// Cache budget in bytes: resident pages beyond it are evicted (clean
    /// ones; they fault back in on the next touch). `None`: no limit. The
    /// committed changes kept in memory until a checkpoint installs them
    /// are held to half of it (at least 1 MiB; see
    /// [`StoreOptions::checkpoint_pending_bytes`]): a commit that leaves
    /// more asks the store's checkpointer thread for a checkpoint.
    pub cache_bytes: Option<u64>,
    /// The largest fetch window, in pages: a fault fetches the blocks that
    /// start in an aligned window of at most this many pages holding the
    /// faulting block (Texas's data-fetching granularity). Frames are laid
    /// out a window at a time, so a window is installed with one call.
    /// Under a cache budget a fault fetches no more than the room left:
    /// prefetching never evicts.
    ///
    /// With [`fetch_adaptive`](Self::fetch_adaptive) (the default) the
    /// window adapts to the faults, between 1 page and this; without it,
    /// every fault fetches this many pages (the fixed windows of Texas's
    /// experiments: set `fetch_adaptive: false` to measure a granularity).
    ///
    /// Default 64 (256 KiB). A fault costs its mechanism (7–8 µs here, a
    /// signal or a thread round trip) plus about 3 µs per block read,
    /// checked, swizzled and installed, so fetching a neighbour pays as soon
    /// as the program goes on to touch a third of them (docs/design.md,
    /// 4.3). `1` fetches one block per fault, whatever the policy.
    pub fetch_cluster: u32,
    /// Whether the fetch window adapts to the access pattern, as an
    /// operating system's readahead does: the first fault of a session
    /// fetches one page; a fault that comes back where recent faults were
    /// (a traversal walking a neighbourhood) grows the window fourfold up
    /// to `fetch_cluster`; a fault far from them (random accesses to a
    /// database much larger than what they touch, the first steps of a
    /// lookup through an index) shrinks it fourfold. A small file (at most
    /// 32 × `fetch_cluster` pages when opened) is read with the largest
    /// window from the first fault, as an operating system reads a small
    /// file whole (docs/design.md, 4.3). Default `true`; `false`: every
    /// fault fetches `fetch_cluster` pages.
    pub fetch_adaptive: bool,
    /// Address space reserved for frames. A session can touch at most this
    /// much of the database. The pages the file has when it is opened take
    /// the frames of their own numbers (the identity region, up to half the
    /// reservation: docs/design.md, 4.3); pages beyond them share the rest,
    /// so a session on a database larger than half the reservation can
    /// touch at most half of it beyond that.
    pub reserve_bytes: u64,
    /// Pages of QuickStore's recovery buffer (SIGSEGV backend): clean copies
    /// taken at first write; beyond it, pages are logged early.
    pub recovery_buffer_pages: usize,
    /// How transactions detect their updates unless [`Db::begin_with`]
    /// says otherwise: page protection by default (docs/design.md, the
    /// strategies section, compares the schemes).
    ///
    /// [`Db::begin_with`]: crate::Db::begin_with
    pub strategy: Strategy,
    /// Storage options (checkpoint thresholds).
    pub store: StoreOptions,
    /// How [`Db::connect`](crate::Db::connect) reaches a server: the
    /// token, the timeout, the largest answer accepted.
    pub remote: RemoteOptions,
}

impl Options {
    /// The storage options this database opens with: `store`, with the
    /// pending changes held to half the cache budget when there is one.
    /// Each block changed since the checkpoint keeps a block-sized image of
    /// its changes (`store/pending.rs`), so sparse updates grow that memory
    /// about sixty times faster than the log: ten OO1 update traversals of
    /// the 200,000-part database (1,500 blocks each) held 38 MiB of it
    /// under an 18 MiB budget, far past the log-size trigger's reach.
    pub(crate) fn store_options(&self) -> StoreOptions {
        let mut so = self.store.clone();
        if let Some(budget) = self.cache_bytes {
            let half = usize::try_from(budget / 2).unwrap_or(usize::MAX);
            so.checkpoint_pending_bytes = so.checkpoint_pending_bytes.min(half.max(1 << 20));
        }
        so
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: crate::format::DEFAULT_PAGE_SIZE,
            backend: BackendChoice::Auto,
            cache_bytes: None,
            fetch_cluster: 64,
            fetch_adaptive: true,
            reserve_bytes: 64 << 30,
            recovery_buffer_pages: 1024,
            strategy: Strategy::default(),
            store: StoreOptions::default(),
            remote: RemoteOptions::default(),
        }
    }
}
