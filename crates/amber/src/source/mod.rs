//! Where an open database's pages come from: the *source* (DESIGN.md's
//! layer between the object layer and the store).
//!
//! The object layer — the fault handler, the reads of roots and types, a
//! read-only handle's refresh — asks a [`Source`] and nothing else for
//! committed state, so the same pointers, faults and swizzling run over
//! either implementation:
//!
//! - [`Store`] itself (`local.rs`): the page file and its log, in this
//!   process;
//! - [`remote::Remote`]: a storage server (`amber serve`) over TCP, the
//!   pages shipped whole as ESM and ObjectStore ship them (`papers/002_*`
//!   §3.1), at the connection's snapshot, which moves only on refresh.
//!
//! Writing (transactions, checkpoints, collection) still needs the local
//! store: a [`Db`](crate::Db) keeps it beside its source when it has one,
//! and a database without one says so.

pub(crate) mod local;
pub mod remote;

use crate::error::Result;
use crate::format::PageNo;
use crate::format::meta::RootEntry;
use crate::store::{ClusterBlock, Refreshed, StoreStats};
use std::fmt;
use std::path::Path;

/// Committed pages, roots and types at the database's snapshot.
pub trait Source: Send + Sync + fmt::Debug {
    /// What errors name as the database: its page file's path, or the
    /// server's URL.
    fn name(&self) -> &Path;

    /// Page size in bytes.
    fn page_size(&self) -> usize;

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

    /// Whether the database is read-only here (writes are refused).
    fn read_only(&self) -> bool;
}
