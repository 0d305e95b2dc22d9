//! Read-only handles: a database read beside its writer, in this process
//! or another, at a committed snapshot that moves forward on request.
//!
//! The store keeps the snapshot (`store/refresh.rs`, and the reader table
//! that holds back the writer's checkpoints, `store/readers.rs`). Here, a
//! refresh drops from memory the blocks whose committed image changed, so
//! that the next touch fetches them at the new snapshot. Frames stay where
//! they are (a block's frames are never reassigned while the database is
//! open), so pointers held across a refresh stay valid for objects that
//! still exist, and a pointer to an object the writer freed is refused at
//! its next dereference as any stale pointer is. A refresh borrows the
//! database exclusively: no reference into an object can be held across
//! it, so no reference ever sees its bytes change.

use super::Db;
use super::session::Parts;
use crate::error::{Error, Result};
use crate::io::real::RealVfs;
use crate::source::remote::Remote;
use crate::store::{Refreshed, Store};
use std::path::Path;
use std::sync::Arc;

impl Db {
    /// Opens the database at `path` read-only, beside a writer in this or
    /// another process, or none. It reads the last committed state as of
    /// the open (a *snapshot*), whatever the writer commits meanwhile,
    /// until [`refresh`](Self::refresh). `begin` is refused.
    ///
    /// While a reader's snapshot is older than the writer's last commit,
    /// the writer's checkpoints wait (its log grows): refresh or close
    /// readers that live long. A database in a directory this process
    /// cannot write has no reader table; a reader then takes the
    /// database's lock, and no writer can open it meanwhile.
    pub fn open_read_only(path: impl AsRef<Path>, mut opts: crate::Options) -> Result<Db> {
        opts.store.read_only = true;
        let store = Arc::new(Store::open(Arc::new(RealVfs), path.as_ref(), opts.store_options())?);
        Self::start(store.clone(), Some(store), &opts)
    }

    /// Opens a database served by `amber serve` at
    /// `url` = `amber://host:port/name`, authenticating with
    /// `opts.remote.token`. Pointers, `get`, indexes and
    /// [`refresh`](Self::refresh) work as on a database opened with
    /// [`open_read_only`](Self::open_read_only): pages are fetched from the
    /// server on first touch (a fetch cluster per fault, as from a file) and
    /// kept across refreshes unless they changed, at a snapshot that moves
    /// only on `refresh` (and `begin`). Transactions commit through the
    /// server, which validates them against concurrent ones: a lost commit
    /// is [`Error::Conflict`](crate::Error::Conflict), which
    /// [`transact`](Self::transact) retries.
    ///
    /// The session's recovery scheme (`opts.remote.scheme`, else the one
    /// the server gives the database) sets the strategy its transactions
    /// run under, in place of `opts.strategy` (docs/design.md §11.7).
    ///
    /// A lost connection makes every later fetch fail: a page first touched
    /// through a plain pointer load then aborts the process with the reason
    /// (as a damaged page does), and [`try_get`](Self::try_get) returns it.
    pub fn connect(url: &str, opts: crate::Options) -> Result<Db> {
        let remote = Remote::connect(url, &opts.remote)?;
        // The session's recovery scheme decides how its transactions log.
        let opts = match remote.scheme() {
            Some(s) => crate::Options {
                strategy: s.strategy(),
                ..opts
            },
            None => opts,
        };
        Self::start(Arc::new(remote), None, &opts)
    }

    /// Moves a read-only database's snapshot to the writer's last commit;
    /// returns whether anything changed. Costs a read of the log written
    /// since the snapshot; the blocks that changed are fetched again when
    /// touched (after a checkpoint of the writer's: every block). For a
    /// writable database, [`Error::Invalid`]: it always sees its own
    /// commits.
    pub fn refresh(&mut self) -> Result<bool> {
        if !self.source.at_snapshot() {
            return Err(Error::invalid(
                "refresh: the database is open for writing, and sees its own commits",
            ));
        }
        let refreshed = self.source.refresh()?;
        let parts = Parts {
            source: &*self.source,
            fs: &self.fs,
            pager: &self.pager,
            registry: &self.registry,
        };
        apply_changed(&parts, Some(refreshed))
    }
}

/// Drops from memory the blocks a move of the snapshot changed, and learns
/// the types it defined; whether anything changed. Nothing may be written
/// meanwhile, nor any reference into the database held: the callers borrow
/// it exclusively (`refresh`, `begin`, and a transaction's commit).
pub(crate) fn apply_changed(parts: &Parts<'_>, changed: Option<Refreshed>) -> Result<bool> {
    let dropped = match changed {
        None | Some(Refreshed::Unchanged) => return Ok(false),
        Some(Refreshed::Pages { pages, .. }) => {
            let frames: Vec<_> = pages.iter().filter_map(|&p| parts.fs.lookup(p)).collect();
            parts
                .blocks_of(&frames)
                .into_values()
                .try_for_each(|(frame, run)| parts.drop_block(frame, run))
        }
        Some(Refreshed::Everything { .. }) => parts.drop_all(),
    };
    parts.registry.extend(&parts.source.types())?;
    dropped.map_err(|e| e.into_error(parts.source.name(), "dropping blocks the snapshot's move changed"))?;
    Ok(true)
}
