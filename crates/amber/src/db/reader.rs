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
        let store = Store::open(Arc::new(RealVfs), path.as_ref(), opts.store_options())?;
        Self::start(store, &opts)
    }

    /// Moves a read-only database's snapshot to the writer's last commit;
    /// returns whether anything changed. Costs a read of the log written
    /// since the snapshot; the blocks that changed are fetched again when
    /// touched (after a checkpoint of the writer's: every block). For a
    /// writable database, [`Error::Invalid`]: it always sees its own
    /// commits.
    pub fn refresh(&mut self) -> Result<bool> {
        if !self.store.options().read_only {
            return Err(Error::invalid(
                "refresh: the database is open for writing, and sees its own commits",
            ));
        }
        let refreshed = self.store.refresh()?;
        self.registry.extend(&self.store.types())?;
        let parts = Parts {
            store: &self.store,
            fs: &self.fs,
            pager: &self.pager,
            registry: &self.registry,
        };
        let dropped = match refreshed {
            Refreshed::Unchanged => return Ok(false),
            Refreshed::Pages { pages, .. } => {
                let frames: Vec<_> = pages.iter().filter_map(|&p| self.fs.lookup(p)).collect();
                parts
                    .blocks_of(&frames)
                    .into_values()
                    .try_for_each(|(frame, run)| parts.drop_block(frame, run))
            }
            Refreshed::Everything { .. } => parts.drop_all(),
        };
        dropped.map_err(|e| e.into_error(self.store.path(), "dropping blocks a refresh changed"))?;
        Ok(true)
    }
}
