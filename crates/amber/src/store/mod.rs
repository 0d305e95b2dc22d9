//! The store: the page file and the write-ahead log together.
//!
//! Committed transactions are durable in the log; the page file changes only
//! at a checkpoint, which installs committed changes and then recycles the
//! log. Between checkpoints the committed state of a block is its page-file
//! image with the pending changes of the log laid over it ([`pending`]);
//! pages whose latest image is a whole page in the log are read from there
//! (the WPL table, `wpl.rs`; its restart, `restart.rs`).
//! Opening a database runs the recovery pass ([`recovery`]).
//!
//! This is the storage-level API the object runtime builds on: write byte
//! ranges and whole pages, allocate and free blocks, name roots, register
//! types, commit or abort ([`tx::StoreTx`]).
//!
//! Creating and opening a database is in `open.rs`, the state behind the
//! store's lock and how it is loaded from a checkpoint in `state.rs`,
//! reading committed blocks in `read.rs`, the order in which concurrent
//! commits apply in `order.rs`, and the thread that runs the automatic
//! checkpoints in `checkpointer.rs`; this module holds the [`Store`]
//! itself, its options and its accessors.

pub mod alloc;
pub mod apply;
mod batch;
pub mod backup;
pub mod checkpoint;
mod checkpointer;
mod early;
mod logged;
pub(crate) mod open;
mod order;
pub mod pending;
mod read;
pub mod readers;
pub mod recovery;
mod refresh;
mod restart;
pub mod salvage;
mod state;
pub mod tx;
pub mod verify;
mod wpl;

use crate::error::{Error, Result, corrupt};
use crate::format::home::Home;
use crate::format::meta::RootEntry;
use crate::format::superblock::Superblock;
use crate::format::{PageNo, first_data_page};
use crate::io::{IoFile, Vfs};
use crate::wal::writer::LogWriter;
use checkpointer::{Checkpointer, Requests};
use order::ApplyOrder;
use state::State;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use crate::vm::{AmberLock, Held, held};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

pub use read::ClusterBlock;
pub use recovery::RecoveryReport;
pub use refresh::Refreshed;
pub use tx::{CommitInfo, StoreTx};

/// Options for creating or opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Page size of a new database (ignored when opening).
    pub page_size: usize,
    /// Open without writing anything (inspection, verification).
    pub read_only: bool,
    /// Checkpoint automatically once the log since the last checkpoint is
    /// larger than this (on the store's checkpointer thread, which the
    /// commit that finds it due asks and does not wait for).
    pub checkpoint_log_bytes: u64,
    /// ... or once pending changes hold more memory than this.
    pub checkpoint_pending_bytes: usize,
    /// Checkpoint when the database is closed.
    pub checkpoint_on_close: bool,
    /// The home of a new database (ignored when opening): where its
    /// reservation of address space goes if it can, and how its pointers
    /// are stored (docs/design.md §1.1). `None` picks one at random among
    /// 1,024 slots from 16 TiB; `Some(0)` creates a database without a
    /// home (superblock version 1, pointers stored as persistent addresses,
    /// as in databases created before homes); otherwise a multiple of
    /// 1 GiB.
    pub home: Option<u64>,
    /// The least log-file length (past its header) kept after a checkpoint
    /// empties the log. A checkpoint cuts the log file back to its usual
    /// size — the larger of this and the longest of the last four epochs
    /// before it — when the file is more than twice that (a bulk load's
    /// log does not stay beside the database forever; a steady workload's
    /// log is not cut and regrown every time). Default 4 MiB; `u64::MAX`
    /// never cuts.
    pub log_keep_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            page_size: crate::format::DEFAULT_PAGE_SIZE,
            read_only: false,
            checkpoint_log_bytes: 64 << 20,
            checkpoint_pending_bytes: 256 << 20,
            checkpoint_on_close: true,
            log_keep_bytes: 4 << 20,
            home: None,
        }
    }
}

/// The log file of the database at `path`.
pub fn wal_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// Numbers describing a store, for `amber inspect` and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStats {
    /// Page size.
    pub page_size: usize,
    /// Pages below the high-water mark.
    pub page_count: u64,
    /// Free pages below it.
    pub free_pages: u64,
    /// Allocated blocks.
    pub blocks: u64,
    /// Blocks with changes not yet installed.
    pub pending_blocks: u64,
    /// Entries of the WPL table: pages whose latest committed image is a
    /// page record in the log, not yet installed.
    pub logged_pages: u64,
    /// Pages checkpoints installed from their image in the log, so far.
    pub wpl_installed_pages: u64,
    /// Log bytes those installations read (whole page records).
    pub wpl_installed_log_bytes: u64,
    /// LSN of the last checkpoint.
    pub checkpoint_lsn: u64,
    /// LSN at the end of the log.
    pub end_lsn: u64,
    /// `fdatasync` calls on the log so far.
    pub log_syncs: u64,
    /// Superblock generation.
    pub generation: u64,
}

/// An open database: page file plus log, and (when writable) the thread
/// that runs its automatic checkpoints.
///
/// Everything but that thread is in [`Core`], which the thread shares; a
/// `Store` dereferences to it, so its readers, accessors and
/// [`checkpoint`](Core::checkpoint) are called on the store.
#[derive(Debug)]
pub struct Store {
    /// Stopped and joined when the store is closed or dropped (first: the
    /// thread holds the core).
    checkpointer: Option<Checkpointer>,
    core: Arc<Core>,
}

/// The open database's files and state, shared by the [`Store`] handle and
/// its checkpointer thread.
#[derive(Debug)]
pub struct Core {
    vfs: Arc<dyn Vfs>,
    path: PathBuf,
    wal_path: PathBuf,
    page_size: usize,
    /// From the superblock; never changes.
    home: Home,
    file: Box<dyn IoFile>,
    log: Option<LogWriter>,
    opts: StoreOptions,
    /// Whatever appends records holds it shared — a commit from its append
    /// until its changes are applied, `log_early` while it appends; a
    /// checkpoint holds it exclusively, so that no record is appended
    /// between its cut and the log's recycling. No fault takes it.
    gate: RwLock<()>,
    state: Mutex<State>,
    /// Commits apply in the order of their commit records.
    order: ApplyOrder,
    /// Requests for the checkpointer thread.
    requests: Requests,
    recovery: RecoveryReport,
    /// What the installation of a writable open's recovered work did, once
    /// the checkpointer thread has run it.
    open_checkpoint: std::sync::OnceLock<checkpoint::CheckpointReport>,
    /// The reader table (`readers.rs`), where this process's writer
    /// publishes the log's durable end and checkpoints check readers'
    /// snapshots; `None` where it cannot be written.
    readers: Option<readers::Table>,
    /// A read-only store's slot in the table and snapshot (`refresh.rs`).
    reader: Option<refresh::Reader>,
}

impl Drop for Core {
    fn drop(&mut self) {
        self.leave_reader_table();
        if self.log.is_some()
            && let Some(t) = &self.readers
            && let Err(e) = t.unregister_writer()
        {
            log::warn!("{}: leaving the reader table: {e}", self.path.display());
        }
    }
}

impl Deref for Store {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Core {
    pub(crate) fn lock(&self) -> Held<MutexGuard<'_, State>> {
        held(
            AmberLock::StoreState,
            self.state.lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's path.
    pub fn wal_path(&self) -> &Path {
        &self.wal_path
    }

    /// The file system it lives on.
    pub fn vfs(&self) -> &Arc<dyn Vfs> {
        &self.vfs
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// How the database stores its swizzled pointers (`format/home.rs`):
    /// fixed at creation.
    pub fn home(&self) -> Home {
        self.home
    }

    /// The page file's descriptor and length, for mapping it (`None` when
    /// it is a model, not a file of the operating system).
    pub(crate) fn page_file(&self) -> Option<(std::os::fd::RawFd, u64)> {
        let fd = self.file.raw_fd()?;
        Some((fd, self.file.size().ok()?))
    }

    /// How many times checkpoints have moved committed bytes so far
    /// (`State::installs`).
    pub(crate) fn installs(&self) -> u64 {
        self.lock().installs
    }

    /// The heads of the blocks whose committed image is not all in the page
    /// file (changes pending or being installed), and [`installs`](Self::installs).
    pub(crate) fn unsettled(&self) -> (std::collections::HashSet<PageNo>, u64) {
        let st = self.lock();
        let mut heads: std::collections::HashSet<PageNo> = st.pending.keys().copied().collect();
        if let Some(c) = st.installing.as_deref() {
            heads.extend(c.keys().copied());
        }
        (heads, st.installs)
    }

    /// The first page number that can hold a block.
    pub fn first_data_page(&self) -> PageNo {
        first_data_page(self.page_size)
    }

    /// The options it was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    /// What recovery found when the store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// What the checkpoint that installs a writable open's recovered work
    /// (or rewrites a damaged superblock or log header copy) did; `None`
    /// when the open asked for none, or it did not run (a transaction had
    /// records in the log, readers were behind, or it failed and poisoned
    /// the store). The open returns before it runs, on the checkpointer
    /// thread: this waits until that thread is idle.
    pub fn open_checkpoint(&self) -> Option<checkpoint::CheckpointReport> {
        self.requests.wait_idle();
        self.open_checkpoint.get().copied()
    }

    /// The current superblock.
    pub fn superblock(&self) -> Superblock {
        self.lock().sb
    }

    /// Log bytes appended since the last checkpoint: what a checkpoint
    /// would install. Cheap enough for every commit, unlike
    /// [`stats`](Self::stats), which counts the blocks.
    pub fn log_since_checkpoint(&self) -> u64 {
        let end_lsn = self
            .log
            .as_ref()
            .map_or(self.recovery.end_lsn, LogWriter::end_lsn);
        end_lsn.saturating_sub(self.lock().sb.checkpoint_lsn)
    }

    /// Numbers for inspection.
    pub fn stats(&self) -> StoreStats {
        // The log's numbers first: nothing holding the state lock waits for
        // the log writer's lock (a log header write holds it across syncs).
        let end_lsn = self
            .log
            .as_ref()
            .map_or(self.recovery.end_lsn, LogWriter::end_lsn);
        let log_syncs = self.log.as_ref().map_or(0, LogWriter::syncs);
        let st = self.lock();
        StoreStats {
            page_size: self.page_size,
            page_count: st.fsm.page_count(),
            free_pages: st.fsm.free_pages(),
            blocks: st.fsm.blocks().count() as u64,
            pending_blocks: (st.pending.len() + st.installing.as_ref().map_or(0, |c| c.len()))
                as u64,
            logged_pages: (st.pending.values())
                .chain(st.installing.iter().flat_map(|c| c.values()))
                .map(|p| p.logged.len() as u64)
                .sum(),
            wpl_installed_pages: st.wpl_installed.0,
            wpl_installed_log_bytes: st.wpl_installed.1,
            checkpoint_lsn: st.sb.checkpoint_lsn,
            // A checkpoint that ended meanwhile moved the log's end too.
            end_lsn: end_lsn.max(st.sb.checkpoint_lsn),
            log_syncs,
            generation: st.sb.generation,
        }
    }

    /// One past the highest page of the file.
    pub fn page_count(&self) -> PageNo {
        self.lock().fsm.page_count()
    }

    /// Free extents `(start, len)`.
    pub fn free_extents(&self) -> Vec<(PageNo, u64)> {
        self.lock().fsm.free_extents().collect()
    }

    /// Every allocated block `(head, pages)`.
    pub fn blocks(&self) -> Vec<(PageNo, u32)> {
        self.lock().fsm.blocks().collect()
    }

    /// Every committed block `(head, pages)`: the allocated ones but those
    /// reserved by transactions that have not committed (on an open
    /// database, also the dead space of those that did not: the object
    /// layer keeps it reserved for the session).
    pub fn committed_blocks(&self) -> Vec<(PageNo, u32)> {
        let st = self.lock();
        st.fsm.blocks().filter(|&(h, _)| !st.fsm.is_reserved(h)).collect()
    }

    /// The allocated block `(head, pages)` containing `page`.
    pub fn block_of(&self, page: PageNo) -> Option<(PageNo, u32)> {
        self.lock().fsm.block_of(page)
    }

    /// The named roots.
    pub fn roots(&self) -> Vec<RootEntry> {
        self.lock().roots.values().cloned().collect()
    }

    /// One named root.
    pub fn root(&self, name: &str) -> Option<RootEntry> {
        self.lock().roots.get(name).cloned()
    }

    /// A count that moves whenever a root is set or a type defined in this
    /// store's state: equal before and after a refresh, the catalog and
    /// roots did not change.
    pub fn catalog_changes(&self) -> u64 {
        self.lock().catalog_changes
    }

    /// The schema catalog: type id and descriptor bytes.
    pub fn types(&self) -> Vec<(u32, Vec<u8>)> {
        self.lock()
            .catalog
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    pub(crate) fn log(&self) -> Result<&LogWriter> {
        self.log
            .as_ref()
            .ok_or_else(|| Error::invalid("database is open read-only"))
    }

    /// The gate, shared (see its field).
    fn gate_shared(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err` when the store is poisoned.
    fn check_poisoned(st: &State) -> Result<()> {
        match &st.poisoned {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Poisons the store with `cause` unless it is poisoned already.
    fn poison(&self, cause: impl Into<String>) {
        let mut st = self.lock();
        if st.poisoned.is_none() {
            st.poisoned = Some(cause.into());
        }
    }
}

impl Store {
    /// Wraps an opened core; a writable one gets its checkpointer thread.
    fn start(core: Core) -> Result<Store> {
        let core = Arc::new(core);
        let checkpointer = match core.log {
            Some(_) => Some(Checkpointer::start(core.clone())?),
            None => None,
        };
        Ok(Store { checkpointer, core })
    }

    /// Starts a storage-level transaction.
    pub fn begin(&self) -> Result<StoreTx<'_>> {
        let Some(log) = &self.log else {
            return Err(Error::invalid("database is open read-only"));
        };
        let mut st = self.lock();
        Core::check_poisoned(&st)?;
        // A log write or sync that failed poisons the writer: nothing can
        // commit, so nothing begins.
        if let Some(cause) = log.failure() {
            return Err(Error::Poisoned { cause });
        }
        let txid = st.next_txid as u32;
        st.next_txid += 1;
        Ok(StoreTx::new(self, txid))
    }

    /// Returns the reserved block at `head` to the free space: the object
    /// layer's dead space at the end of a session, when no pointer to it
    /// can be followed any more; a storage server's reservation for a
    /// client transaction that aborted ([`reserve`](Self::reserve)).
    pub fn unreserve(&self, head: PageNo) {
        self.lock().fsm.unreserve(head);
    }

    /// Whether the block at `head` is one of the store's own metadata
    /// blobs (free-space map, roots, catalog), which no transaction's
    /// record or free may touch: a storage server refuses a client's that
    /// does.
    pub fn is_metadata(&self, head: PageNo) -> bool {
        self.lock().is_meta(head)
    }

    /// Whether the block at `head` is reserved: allocated by a
    /// transaction that has not committed.
    pub fn is_reserved(&self, head: PageNo) -> bool {
        self.lock().fsm.is_reserved(head)
    }

    /// Reserves a block of `pages` pages (of `kind`) for a transaction
    /// that is not begun yet: a storage server's client allocates its
    /// blocks one request at a time and commits them all at once, through
    /// [`StoreTx::alloc_reserved`]; until then no other allocation takes
    /// them, and [`unreserve`](Self::unreserve) gives them back. Refuses
    /// what a commit's allocation record could not hold (no pages, a run
    /// longer than a block, an unknown kind), which would otherwise fail
    /// only when applied, after the commit is logged.
    pub fn reserve(&self, pages: u32, kind: u8) -> Result<PageNo> {
        if crate::format::page::BlockKind::from_u8(kind).is_none() {
            return Err(Error::invalid(format!("allocation of unknown block kind {kind}")));
        }
        let max = crate::format::page::max_run_len(self.page_size);
        if pages == 0 || pages > max {
            return Err(Error::invalid(format!(
                "allocation of {pages} pages: a block has 1 to {max}"
            )));
        }
        self.lock().fsm.reserve(pages).map_err(Error::Invalid)
    }

    /// Forgets transaction `txid`, whose `StoreTx` was leaked without
    /// committing or aborting (`mem::forget` of the object layer's
    /// transaction): its records logged early stay in the log without a
    /// commit record (recovery ignores them) and no longer hold back
    /// checkpoints; its allocations stay reserved, as after
    /// [`StoreTx::abandon`].
    pub fn forget_tx(&self, txid: u32) {
        self.lock().early.remove(&txid);
    }

    /// Returns once the checkpointer thread has no checkpoint requested and
    /// none running (tests that need the automatic checkpoint to have run,
    /// or their I/O calls in a fixed order).
    pub fn wait_for_checkpointer(&self) {
        self.requests.wait_idle();
    }

    /// Ends the store's life as a writer but keeps its files open and the
    /// page file locked: stops the checkpointer thread and runs the
    /// checkpoint of a clean close, so the page file holds every committed
    /// change and the log header says the epoch is empty. What the collector
    /// needs before it builds the compacted page file beside this one: no
    /// one else can open the database meanwhile, and nothing is written to
    /// these files again (the store is then dropped).
    pub(crate) fn close_keeping_lock(&mut self) -> Result<()> {
        drop(self.checkpointer.take());
        self.log()?;
        self.checkpoint_for_collection()?;
        Core::check_poisoned(&self.lock())
    }

    /// Keeps readers out (`readers.rs`) while the guard lives: refused if
    /// one has the database open. A collection replaces the page file,
    /// which a reader open meanwhile would go on reading.
    pub(crate) fn exclude_readers(&self) -> Result<Option<readers::Locked<'_>>> {
        let Some(t) = &self.readers else {
            return Ok(None);
        };
        let g = t.lock()?;
        match t.readers_behind(&g, u64::MAX)? {
            0 => Ok(Some(g)),
            n => Err(Error::invalid(format!(
                "{}: {n} reader(s) have the database open; a collection replaces the page file \
                 under them: close them first",
                self.path.display()
            ))),
        }
    }

    /// Lengths of the page file and of the log file, in bytes.
    pub(crate) fn file_lengths(&self) -> Result<(u64, u64)> {
        let page_file = self
            .file
            .size()
            .map_err(|e| Error::io("size database", &self.path, e))?;
        let log = match &self.log {
            Some(l) => l.file_len()?,
            None => 0,
        };
        Ok((page_file, log))
    }

    /// Closes the store: stops the checkpointer thread (a checkpoint it is
    /// running finishes first), then checkpoints if the options say so. A
    /// poisoned store (a failed background checkpoint included) reports it.
    pub fn close(mut self) -> Result<()> {
        drop(self.checkpointer.take());
        if self.log.is_some() && self.opts.checkpoint_on_close {
            self.checkpoint_closing()?;
        }
        Core::check_poisoned(&self.lock())
    }
}
