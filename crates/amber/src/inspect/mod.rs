//! Read-only inspection of a database, and the administrative operations
//! that go through the store's own code paths: what the `amber` command's
//! `create`, `inspect`, `verify`, `checkpoint` and `recover` are built on.
//!
//! Nothing here writes bytes of the caller's choosing or goes around the
//! object layer: the views are copies (superblock and log header copies,
//! free extents, blocks, log records decoded into plain structs, the schema
//! catalog, roots, a block's objects with their fields decoded by the
//! catalog), the checks only read, and the operations that change files
//! ([`create`], [`checkpoint`], [`recover`], and the salvage operations
//! [`salvage`] and [`new_log`], which give up committed work only when
//! asked and say exactly what) are the store's own.
//!
//! - The files as they are, even when the store cannot be opened (damage):
//!   [`read_superblocks`], [`read_log`].
//! - The committed state, through a read-only open that runs recovery in
//!   memory and writes nothing: [`Inspector`] (free space, blocks, catalog,
//!   roots, one block or one object, decoded).
//! - The report `amber inspect` prints, as text: [`report`] (a server
//!   makes it of a database it serves, `amber inspect amber://…`).
//! - Checks: [`verify`] (checksums and structure of every copy, record and
//!   block), [`verify_deep`] / [`Inspector::verify_deep`] /
//!   [`Db::verify_deep`](crate::Db::verify_deep) (every pointer of every
//!   object, against the objects that exist and the field's declared type).
//!
//! Addresses are persistent addresses: page number times page size plus the
//! offset in the page (`amber inspect` prints them as `PAGE:OFFSET`).

mod admin;
mod blocks;
pub(crate) mod deep;
mod files;
mod report;

pub use crate::format::home::Home;
pub use crate::format::meta::RootEntry;
pub use crate::format::page::{BlockKind, HEADER_SIZE as BLOCK_HEADER_SIZE, PageHeader};
pub use crate::format::superblock::Superblock;
pub use crate::schema::desc::{
    Nullability, Prim, Shape, StoredField, StoredKind, StoredType, kind_name,
};
pub use crate::store::RecoveryReport;
pub use crate::store::salvage::CutLog;
pub use crate::store::verify::VerifyReport;
pub use crate::store::wal_path;
pub use crate::wal::header::LogHeader;
pub use crate::wal::record::BadRecord;
pub use crate::wal::scan::Tail;
pub use admin::{
    CheckpointOutcome, Installed, NewLogOutcome, RecoveryOutcome, SalvageOutcome, checkpoint,
    create, new_log, recover, salvage, verify,
};
pub use blocks::{BlockView, FieldValue, FileCopy, ObjectValue, ObjectView, Scalar, Value};
pub(crate) use deep::census;
pub use deep::{DeepReport, Finding, FindingClass, Place, verify_deep};
pub use files::{
    LogHeaderCopy, LogRecord, LogRecords, LogView, RecordKind, SuperblockCopy, Superblocks,
    read_log, read_superblocks,
};
pub use report::{Show, report, tail_line};

use crate::error::Result;
use crate::io::real::RealVfs;
use crate::store::{Store, StoreOptions, StoreStats};
use std::path::Path;
use std::sync::Arc;

/// A run of pages: a block (`start` is its first page) or a free extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First page.
    pub start: u64,
    /// Pages in the run.
    pub pages: u64,
}

/// One entry of the schema catalog: the descriptor bytes, and the type
/// they describe when the object layer wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// The type id objects carry in their headers.
    pub id: u32,
    /// The stored descriptor.
    pub descriptor: Vec<u8>,
    /// The descriptor decoded, or why it does not decode (a storage-level
    /// user's bytes, or damage).
    pub decoded: std::result::Result<StoredType, String>,
}

/// A database opened read-only: its committed state (the page file with the
/// changes committed in the log laid over it, as recovery rebuilt it in
/// memory), read without changing either file. Holds the database's lock
/// while it lives, like any open.
#[derive(Debug)]
pub struct Inspector {
    store: Store,
}

impl Inspector {
    /// Opens the database at `path` read-only. Fails like any open on a
    /// missing, foreign, locked or damaged database.
    pub fn open(path: impl AsRef<Path>) -> Result<Inspector> {
        let opts = StoreOptions {
            read_only: true,
            ..StoreOptions::default()
        };
        let store = Store::open(Arc::new(RealVfs), path.as_ref(), opts)?;
        Ok(Inspector { store })
    }

    /// An inspector of a store opened read-only elsewhere (the fuzz
    /// targets open one on an in-memory file system).
    #[cfg(feature = "internals")]
    pub(crate) fn of(store: Store) -> Inspector {
        Inspector { store }
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.store.page_size()
    }

    /// The first page that can hold a block (pages below it hold the
    /// superblocks).
    pub fn first_data_page(&self) -> u64 {
        self.store.first_data_page()
    }

    /// The store's numbers (pages, free pages, blocks, pending blocks, LSNs).
    pub fn stats(&self) -> StoreStats {
        self.store.stats()
    }

    /// The superblock in charge.
    pub fn superblock(&self) -> Superblock {
        self.store.superblock()
    }

    /// What recovery found when this inspector opened the database (in
    /// memory: a read-only open installs nothing).
    pub fn recovery(&self) -> &RecoveryReport {
        self.store.recovery_report()
    }

    /// The free extents, ascending.
    pub fn free_extents(&self) -> Vec<Extent> {
        self.store
            .free_extents()
            .into_iter()
            .map(|(start, pages)| Extent { start, pages })
            .collect()
    }

    /// Every allocated block, ascending.
    pub fn blocks(&self) -> Vec<Extent> {
        self.store.blocks().into_iter().map(extent).collect()
    }

    /// The allocated block holding `page`, if any.
    pub fn block_of(&self, page: u64) -> Option<Extent> {
        self.store.block_of(page).map(extent)
    }

    /// The schema catalog, by type id.
    pub fn catalog(&self) -> Vec<CatalogEntry> {
        self.store
            .types()
            .into_iter()
            .map(|(id, descriptor)| CatalogEntry {
                id,
                decoded: StoredType::decode(&descriptor),
                descriptor,
            })
            .collect()
    }

    /// The named roots, by name.
    pub fn roots(&self) -> Vec<RootEntry> {
        self.store.roots()
    }
}

fn extent((start, pages): (u64, u32)) -> Extent {
    Extent {
        start,
        pages: u64::from(pages),
    }
}
