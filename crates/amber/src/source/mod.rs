//! Where an open database's pages come from: the *source* (DESIGN.md's
//! layer between the object layer and the store).
//!
//! The object layer — the fault handler, the reads of roots and types, a
//! read-only handle's refresh — asks a [`Source`] and nothing else for
//! committed state, so the same pointers, faults and swizzling run over
//! either implementation:
//!
//! - [`Store`](crate::store::Store) itself (`local.rs`): the page file and its log, in this
//!   process;
//! - [`remote::Remote`]: a storage server (`amber serve`) over TCP or
//!   TLS ([`tls`]), the
//!   pages shipped whole as ESM and ObjectStore ship them (`papers/002_*`
//!   §3.1), at the connection's snapshot, which moves only on refresh.
//!
//! A transaction's changes go through the second half of the seam,
//! [`SourceTx`]: the store's own transaction, which logs them, or one
//! shipped to the server at commit. Checkpoints, collection, migration and
//! deep verification need the local store itself: a [`Db`](crate::Db)
//! keeps it beside its source when it has one, and a database without one
//! says so.

mod clean;
pub(crate) mod local;
pub mod remote;
mod remote_tx;
mod scheme;
pub mod tls;

pub use scheme::Scheme;

use crate::format::home::Home;
use crate::error::Result;
use crate::format::meta::RootEntry;
use crate::format::page::BlockKind;
use crate::format::{PAddr, PageNo};
use crate::store::{ClusterBlock, CommitInfo, Refreshed, StoreStats};
use crate::wal::TxId;
use std::fmt;
use std::path::Path;

/// Committed pages, roots and types at the database's snapshot.
pub trait Source: Send + Sync + fmt::Debug {
    /// What errors name as the database: its page file's path, or the
    /// server's URL.
    fn name(&self) -> &Path;

    /// Page size in bytes.
    fn page_size(&self) -> usize;

    /// How the database stores its swizzled pointers (`format/home.rs`).
    fn home(&self) -> Home;

    /// Pages the database spans (allocated or free).
    fn page_count(&self) -> PageNo;

    /// The allocated blocks `(head, pages)` that start in pages
    /// `from..from + pages`, ascending.
    fn blocks_starting_in(&self, from: PageNo, pages: u64) -> Result<Vec<(PageNo, u32)>>;

    /// The committed image of the block whose first page is `head`.
    fn read_block(&self, head: PageNo) -> Result<Vec<u8>>;

    /// The committed images of the blocks that start in pages
    /// `from..from + pages`, into `buf` (see `Store::read_cluster`); a
    /// block whose image is bad says so in its entry, and the whole call
    /// fails only when nothing could be read (a lost connection).
    fn read_cluster(&self, from: PageNo, pages: u64, buf: &mut Vec<u8>)
    -> Result<Vec<ClusterBlock>>;

    /// The `mapped` backend's check of the blocks starting in pages
    /// `from..from + pages` where the page file lies in memory (`view`),
    /// without copying them (see `Store::check_in_view`); false where it
    /// cannot be made so, and the caller reads the cluster. A source with
    /// no page file of its own (a server's) never can.
    fn check_in_view<'v>(
        &self,
        _from: PageNo,
        _pages: u64,
        _view: &dyn Fn(PageNo, u64) -> Option<&'v [u8]>,
        _check: &mut dyn FnMut(&[ClusterBlock], &[u8]),
    ) -> bool {
        false
    }

    /// The schema catalog at the snapshot: type id and descriptor bytes
    /// (a server's is fetched at connect and at each refresh, so that this
    /// and the roots never wait on the network).
    fn types(&self) -> Vec<(u32, Vec<u8>)>;

    /// The root directory.
    fn roots(&self) -> Vec<RootEntry>;

    /// One named root.
    fn root(&self, name: &str) -> Option<RootEntry>;

    /// Moves the snapshot of a read-only database to the latest commit.
    fn refresh(&self) -> Result<Refreshed>;

    /// Numbers about the store under the source.
    fn stats(&self) -> StoreStats;

    /// Whether the database is read at a snapshot that only a refresh (or,
    /// on a server, a `begin`) moves: a read-only handle's, or a server's
    /// database. A local writer always reads its own last commit.
    fn at_snapshot(&self) -> bool;

    /// Starts a transaction. For a server's database this also moves the
    /// snapshot to the latest commit: what changed since is then in
    /// [`take_changed`](Self::take_changed).
    fn begin(&self) -> Result<Box<dyn SourceTx + '_>>;

    /// What changed since the snapshot the memory holds, when a `begin`
    /// or a commit moved the snapshot (a server's database; the local
    /// store's snapshot is always its own last commit): the object layer
    /// drops those blocks before anything reads them.
    fn take_changed(&self) -> Option<Refreshed>;

    /// Forgets what transaction `txid` left behind (its records logged
    /// early): it was dropped with `mem::forget`.
    fn forget_tx(&self, txid: TxId);
}

/// A transaction's changes on their way to the committed state.
pub trait SourceTx: Send + fmt::Debug {
    /// The transaction id.
    fn id(&self) -> TxId;

    /// Records new bytes at `addr`.
    fn write(&mut self, addr: PAddr, data: &[u8]) -> Result<()>;

    /// Records new bytes at `addr` with what they replace (for a record
    /// logged early, which recovery may have to ignore).
    fn write_with_before(&mut self, addr: PAddr, before: &[u8], after: &[u8]) -> Result<()>;

    /// Records a whole page's after-image (whole-page logging).
    fn write_page(&mut self, page: PageNo, image: &[u8]) -> Result<()>;

    /// Whether the commit ships the dirty pages beside the records (an
    /// ESM scheme on a server's database): the commit then hands each
    /// page its records change to [`ship_page`](Self::ship_page).
    fn ships_pages(&self) -> bool {
        false
    }

    /// Ships a dirty page's after-image, in persistent form, beside the
    /// records that change it (see [`ships_pages`](Self::ships_pages)).
    fn ship_page(&mut self, page: PageNo, _image: &[u8]) -> Result<()> {
        Err(crate::error::Error::invalid(format!(
            "page {page}: this transaction ships no dirty pages (no ESM scheme)"
        )))
    }

    /// Allocates a block of `pages` pages.
    fn alloc(&mut self, pages: u32, kind: BlockKind) -> Result<PageNo>;

    /// Frees the block whose first page is `page`.
    fn free(&mut self, page: PageNo) -> Result<()>;

    /// Names `addr` (of type `type_id`) `name`; address 0 removes the name.
    fn set_root(&mut self, name: &str, addr: PAddr, type_id: u32) -> Result<()>;

    /// The roots as this transaction sees them (its own changes included).
    fn roots(&self) -> Vec<RootEntry>;

    /// One root as this transaction sees it.
    fn root(&self, name: &str) -> Option<RootEntry>;

    /// Stores a type descriptor in the catalog; its type id.
    fn define_type(&mut self, desc: &[u8]) -> Result<u32>;

    /// Moves the records made so far out of memory, where the source can
    /// (the local store appends them to the log, uncommitted).
    fn log_early(&mut self) -> Result<()>;

    /// Whether the commit is validated against what the transaction read
    /// (a server's): the object layer then records its reads and hands
    /// them over with [`set_reads`](Self::set_reads) before the commit.
    fn wants_reads(&self) -> bool {
        false
    }

    /// The pages the transaction read, ascending.
    fn set_reads(&mut self, _pages: Vec<PageNo>) {}

    /// Commits: returns once the transaction is durable.
    fn commit(self: Box<Self>) -> Result<CommitInfo>;

    /// Abandons the transaction, keeping the blocks it allocated reserved
    /// for the rest of the session (stale pointers of the session may lead
    /// there).
    fn abandon(self: Box<Self>);
}
