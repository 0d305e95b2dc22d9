//! The compacted page file: written beside the database as `PATH-gc`, made
//! durable, then renamed over `PATH` — the one atomic step that switches
//! the database from the old page file to the new one (SQLite's `VACUUM
//! INTO` and ZODB's pack take the same road).
//!
//! The new file keeps the database's identity (`db_id`) and the checkpoint
//! LSN at which the old store's last checkpoint left the log empty and
//! closed, so it pairs with the log as it is: whichever page file a crash
//! leaves at `PATH`, the log beside it says there is nothing to replay and
//! opening finds a whole database. The argument is in docs/design.md
//! ("Collection").

use crate::error::{Error, FileKind, Location, Result, corrupt};
use crate::format::PageNo;
use crate::format::meta::RootEntry;
use crate::format::superblock::{SLOT_OFFSETS, Superblock};
use crate::io::{IoFile, OpenMode, Vfs};
use crate::store::alloc::FreeSpace;
use crate::store::checkpoint::{build_meta_blobs, write_blocks};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the compacted page file of the database at `path` is built.
pub(super) fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-gc");
    PathBuf::from(s)
}

/// The compacted page file being written.
#[derive(Debug)]
pub(super) struct NewFile {
    file: Box<dyn IoFile>,
    path: PathBuf,
    page_size: usize,
}

impl NewFile {
    /// Creates `PATH-gc`, removing what a collection that died before its
    /// rename left there (the database's lock, which the caller holds,
    /// says no other collection is running).
    pub fn create(vfs: &dyn Vfs, db: &Path, page_size: usize) -> Result<NewFile> {
        let path = tmp_path(db);
        if vfs.exists(&path) {
            vfs.remove(&path)
                .map_err(|e| Error::io("remove a dead collection's file", &path, e))?;
        }
        let file = vfs
            .open(&path, OpenMode::CreateNew)
            .map_err(|e| Error::io("create compacted file", &path, e))?;
        Ok(NewFile {
            file,
            path,
            page_size,
        })
    }

    /// Writes sealed block images.
    pub fn write(&self, blocks: &[(PageNo, Vec<u8>)]) -> Result<()> {
        write_blocks(&*self.file, &self.path, self.page_size, blocks).map(|_| ())
    }

    /// Completes the file and puts it in the database's place: the metadata
    /// blobs (the free-space map `fsm` of the data blocks written, `roots`,
    /// `catalog`) after the data blocks, the file cut to its last page, a
    /// sync, both superblock copies (`sb` with the blobs' pages), a sync;
    /// then the file is locked and renamed over `db`. Returns the file,
    /// still locked (the caller lets it go once the old store is gone), and
    /// its length.
    pub fn finish(
        self,
        vfs: &dyn Vfs,
        db: &Path,
        mut fsm: FreeSpace,
        roots: &BTreeMap<String, RootEntry>,
        catalog: &BTreeMap<u32, Vec<u8>>,
        mut sb: Superblock,
    ) -> Result<(Box<dyn IoFile>, u64)> {
        let io = |op: &'static str| {
            let path = self.path.clone();
            move |e| Error::io(op, &path, e)
        };
        let generation = crate::format::slot::next_generation(sb.generation)
            .map_err(|what| corrupt(db, FileKind::PageFile, Location::Superblock(0), what))?;
        let ps = self.page_size;
        let (heads, images) =
            build_meta_blobs(&mut fsm, roots, catalog, ps, &[], sb.checkpoint_lsn)?;
        self.write(&images)?;
        let len = fsm.page_count() * ps as u64;
        self.file.set_len(len).map_err(io("size compacted file"))?;
        self.file.sync_data().map_err(io("sync compacted file"))?;
        [sb.fsm_page, sb.roots_page, sb.catalog_page] = heads;
        sb.generation = generation;
        for off in SLOT_OFFSETS {
            self.file
                .write_all_at(&sb.encode(), off)
                .map_err(io("write superblock"))?;
        }
        self.file.sync_data().map_err(io("sync compacted file"))?;
        // Locked before it takes the database's name, so that no one opens
        // it between the rename and the caller's reopening.
        if !self
            .file
            .try_lock_exclusive()
            .map_err(io("lock compacted file"))?
        {
            return Err(Error::Locked { path: self.path });
        }
        vfs.rename(&self.path, db)
            .map_err(|e| Error::io("rename compacted file over the database", db, e))?;
        Ok((self.file, len))
    }
}
