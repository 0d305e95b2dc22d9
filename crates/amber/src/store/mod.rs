//! The store: the page file and the write-ahead log together.
//!
//! Committed transactions are durable in the log; the page file changes only
//! at a checkpoint, which installs committed changes and then recycles the
//! log. Between checkpoints the committed state of a block is its page-file
//! image with the pending changes of the log laid over it ([`pending`]).
//! Opening a database runs the recovery pass ([`recovery`]).
//!
//! This is the storage-level API the object runtime builds on: write byte
//! ranges and whole pages, allocate and free blocks, name roots, register
//! types, commit or abort ([`tx::StoreTx`]).

pub mod alloc;
pub mod apply;
pub mod checkpoint;
pub mod pending;
pub mod recovery;
pub mod tx;
pub mod verify;

use crate::error::{Error, FileKind, Location, Result};
use crate::fasthash::IntMap;
use crate::format::meta::{self, FsmImage, MetaKind, RootEntry};
use crate::format::page::{self, BlockKind, PageHeader};
use crate::format::superblock::{self, SLOT_OFFSETS, SLOT_SIZE, SlotError, Superblock};
use crate::format::{PAddr, PageNo, first_data_page};
use crate::io::{IoFile, OpenMode, Vfs};
use crate::wal::header::{self as log_header, LogHeader, RECORDS_START};
use crate::wal::scan::Tail;
use crate::wal::writer::LogWriter;
use alloc::FreeSpace;
use pending::{Base, Patch};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

pub use recovery::RecoveryReport;

/// One block of a fetch cluster read by [`Store::read_cluster`].
#[derive(Debug)]
pub struct ClusterBlock {
    /// Its first page.
    pub head: PageNo,
    /// Its pages.
    pub pages: u32,
    /// Where its image starts in the cluster buffer.
    pub at: usize,
    /// Whether the image there is its committed image, or what is wrong.
    pub image: Result<()>,
}
pub use tx::{CommitInfo, StoreTx};

/// Options for creating or opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Page size of a new database (ignored when opening).
    pub page_size: usize,
    /// Open without writing anything (inspection, verification).
    pub read_only: bool,
    /// Checkpoint automatically once the log since the last checkpoint is
    /// larger than this.
    pub checkpoint_log_bytes: u64,
    /// ... or once pending changes hold more memory than this.
    pub checkpoint_pending_bytes: usize,
    /// Checkpoint on [`Store::close`].
    pub checkpoint_on_close: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            page_size: crate::format::DEFAULT_PAGE_SIZE,
            read_only: false,
            checkpoint_log_bytes: 64 << 20,
            checkpoint_pending_bytes: 256 << 20,
            checkpoint_on_close: true,
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
    /// LSN of the last checkpoint.
    pub checkpoint_lsn: u64,
    /// LSN at the end of the log.
    pub end_lsn: u64,
    /// `fdatasync` calls on the log so far.
    pub log_syncs: u64,
    /// Superblock generation.
    pub generation: u64,
}

/// Mutable state behind the store's lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) sb: Superblock,
    pub(crate) sb_slot: u8,
    pub(crate) fsm: FreeSpace,
    pub(crate) roots: BTreeMap<String, RootEntry>,
    pub(crate) catalog: BTreeMap<u32, Vec<u8>>,
    pub(crate) next_type_id: u32,
    pub(crate) pending: IntMap<PageNo, Patch>,
    pub(crate) pending_bytes: usize,
    pub(crate) next_txid: u64,
    /// Active transactions that have records in the log already.
    pub(crate) early: HashSet<u32>,
    pub(crate) poisoned: Option<String>,
    pub(crate) page_size: usize,
}

/// An open database: page file plus log.
#[derive(Debug)]
pub struct Store {
    vfs: Arc<dyn Vfs>,
    path: PathBuf,
    wal_path: PathBuf,
    page_size: usize,
    file: Box<dyn IoFile>,
    log: Option<LogWriter>,
    opts: StoreOptions,
    /// Commits hold it shared from log append to applying their changes;
    /// a checkpoint holds it exclusively.
    gate: RwLock<()>,
    state: Mutex<State>,
    recovery: RecoveryReport,
    /// What the checkpoint run by a writable open installed.
    open_checkpoint: Option<checkpoint::CheckpointReport>,
}

fn corrupt(path: &Path, file: FileKind, at: Location, what: impl Into<String>) -> Error {
    Error::Corrupt {
        file,
        path: path.to_path_buf(),
        at,
        what: what.into(),
    }
}

/// A random identity for a new database (it need only differ between
/// databases, so the standard library's randomly keyed hasher is enough).
fn new_db_id() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut id = [0u8; 16];
    for (i, chunk) in id.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    id
}

impl State {
    pub(crate) fn shift(&self) -> u32 {
        self.page_size.trailing_zeros()
    }

    fn drop_patch(&mut self, head: PageNo) {
        if let Some(p) = self.pending.remove(&head) {
            self.pending_bytes = self.pending_bytes.saturating_sub(p.bytes());
        }
    }

    /// Whether the block at `head` is one of the store's own metadata blobs,
    /// which transactions may not touch.
    pub(crate) fn is_meta(&self, head: PageNo) -> bool {
        [self.sb.fsm_page, self.sb.roots_page, self.sb.catalog_page].contains(&head)
    }

    /// The block containing persistent address `addr`, and the offset in it.
    pub(crate) fn locate(&self, addr: PAddr) -> Option<(PageNo, u32, u32)> {
        let page = addr >> self.shift();
        // Fast path: the first page of a block with changes pending (most
        // records of a busy log land on such blocks).
        if let Some(p) = self.pending.get(&page) {
            return Some((page, p.run_len, (addr - (page << self.shift())) as u32));
        }
        let (head, len) = self.fsm.block_of(page)?;
        let off = addr - (head << self.shift());
        Some((head, len, u32::try_from(off).ok()?))
    }
}

impl Store {
    /// Creates a new, empty database at `path` (and its log at `path-wal`).
    pub fn create(vfs: Arc<dyn Vfs>, path: &Path, opts: StoreOptions) -> Result<Store> {
        if opts.read_only {
            return Err(Error::invalid("cannot create a database read-only"));
        }
        crate::format::check_page_size(opts.page_size).map_err(Error::Invalid)?;
        let ps = opts.page_size;
        let wal = wal_path(path);
        if vfs.exists(path) {
            return Err(Error::invalid(format!(
                "{}: already exists",
                path.display()
            )));
        }
        if vfs.exists(&wal) {
            return Err(Error::invalid(format!(
                "{}: a log file exists without its database; remove it first",
                wal.display()
            )));
        }
        let db_id = new_db_id();
        // The log first, the superblock last: a database whose superblock is
        // valid has everything else.
        let logf = vfs
            .open(&wal, OpenMode::CreateNew)
            .map_err(|e| Error::io("create log", &wal, e))?;
        let log = LogWriter::create(logf, wal.clone(), ps as u32, db_id, 1)?;
        let file = vfs
            .open(path, OpenMode::CreateNew)
            .map_err(|e| Error::io("create database", path, e))?;
        if !file
            .try_lock_exclusive()
            .map_err(|e| Error::io("lock database", path, e))?
        {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        let first = first_data_page(ps);
        let mut fsm = FreeSpace::new(first);
        let mut st = State {
            sb: Superblock {
                page_size: ps as u32,
                generation: 0,
                checkpoint_lsn: 1,
                fsm_page: 0,
                roots_page: 0,
                catalog_page: 0,
                db_id,
                next_txid: 1,
            },
            sb_slot: 1,
            fsm: FreeSpace::new(first),
            roots: BTreeMap::new(),
            catalog: BTreeMap::new(),
            next_type_id: 1,
            pending: IntMap::default(),
            pending_bytes: 0,
            next_txid: 1,
            early: HashSet::new(),
            poisoned: None,
            page_size: ps,
        };
        // Reserve pages below the first data page in the file.
        file.set_len(first * ps as u64)
            .map_err(|e| Error::io("size database", path, e))?;
        let (blobs, images) = checkpoint::build_meta_blobs(&mut fsm, &st, ps, &[], 1)?;
        checkpoint::write_blocks(&*file, path, ps, &images)?;
        st.fsm = fsm;
        file.sync_data()
            .map_err(|e| Error::io("sync database", path, e))?;
        st.sb.fsm_page = blobs[0];
        st.sb.roots_page = blobs[1];
        st.sb.catalog_page = blobs[2];
        // Slot 1 holds an older copy so that both are valid from the start.
        st.sb.generation = 1;
        file.write_all_at(&st.sb.encode(), SLOT_OFFSETS[0])
            .map_err(|e| Error::io("write superblock", path, e))?;
        let mut older = st.sb;
        older.generation = 0;
        file.write_all_at(&older.encode(), SLOT_OFFSETS[1])
            .map_err(|e| Error::io("write superblock", path, e))?;
        file.sync_data()
            .map_err(|e| Error::io("sync database", path, e))?;
        st.sb_slot = 0;
        Ok(Store {
            vfs,
            path: path.to_path_buf(),
            wal_path: wal,
            page_size: ps,
            file,
            log: Some(log),
            opts,
            gate: RwLock::new(()),
            state: Mutex::new(st),
            recovery: RecoveryReport::default(),
            open_checkpoint: None,
        })
    }

    /// Opens an existing database, running recovery. A writable open installs
    /// what recovery found with a checkpoint before returning.
    pub fn open(vfs: Arc<dyn Vfs>, path: &Path, opts: StoreOptions) -> Result<Store> {
        let wal = wal_path(path);
        let mode = if opts.read_only {
            OpenMode::ReadOnly
        } else {
            OpenMode::ReadWrite
        };
        let file = vfs.open(path, mode).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::NotADatabase {
                    path: path.to_path_buf(),
                    what: "no such file".into(),
                }
            } else {
                Error::io("open database", path, e)
            }
        })?;
        if !file
            .try_lock_exclusive()
            .map_err(|e| Error::io("lock database", path, e))?
        {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        let (sb, sb_slot) = read_superblock(&*file, path)?;
        let damaged_copy = read_superblock_slots(&*file, path)?
            .iter()
            .any(|s| s.is_err());
        let ps = sb.page_size as usize;
        let logf = vfs.open(&wal, mode).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                corrupt(&wal, FileKind::Log, Location::File, "log file is missing")
            } else {
                Error::io("open log", &wal, e)
            }
        })?;
        let (lh, log_copy_damaged) = read_log_header(&*logf, &wal, &sb)?;
        // A clean close vouches that the epoch is empty: nothing to read, so
        // opening costs the same whatever the log file's size.
        let vouched_empty = lh.closed && lh.base_lsn == sb.checkpoint_lsn;
        let log_source = recovery::LogSource {
            file: (!vouched_empty).then_some(&*logf),
            path: &wal,
            base_lsn: lh.base_lsn,
        };
        let loaded = load_state(&*file, path, sb, sb_slot);
        let (st, report) = recovery::recover(&sb, loaded, log_source, &*file, path)?;
        let end_lsn = report.end_lsn;
        let log = if opts.read_only {
            None
        } else {
            // Bytes after the end of the log that a clean close did not vouch
            // for may be a batch of this epoch cut short by a crash: records
            // at the very LSNs new ones would get, which a later scan could
            // take for them. They go before anything is appended.
            if matches!(report.tail, Tail::Torn { .. }) && !lh.closed {
                let end_off = RECORDS_START + (end_lsn - lh.base_lsn);
                logf.set_len(end_off)
                    .and_then(|()| logf.sync_data())
                    .map_err(|e| Error::io("truncate log", &wal, e))?;
            }
            Some(LogWriter::resume(logf, wal.clone(), lh, end_lsn))
        };
        let mut store = Store {
            vfs,
            path: path.to_path_buf(),
            wal_path: wal,
            page_size: ps,
            file,
            log,
            opts,
            gate: RwLock::new(()),
            state: Mutex::new(st),
            recovery: report,
            open_checkpoint: None,
        };
        // Install what recovery rebuilt, and rewrite a damaged superblock or
        // log header copy (the checkpoint writes the copy that is not current).
        if store.log.is_some() && (end_lsn > sb.checkpoint_lsn || damaged_copy || log_copy_damaged)
        {
            store.open_checkpoint = Some(store.checkpoint_forced()?);
        }
        Ok(store)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

    /// What the checkpoint that a writable open runs to install recovery's
    /// work (or to rewrite a damaged superblock or log header copy) did;
    /// `None` when the open ran none.
    pub fn open_checkpoint(&self) -> Option<checkpoint::CheckpointReport> {
        self.open_checkpoint
    }

    /// The current superblock.
    pub fn superblock(&self) -> Superblock {
        self.lock().sb
    }

    /// Numbers for inspection.
    pub fn stats(&self) -> StoreStats {
        let st = self.lock();
        StoreStats {
            page_size: self.page_size,
            page_count: st.fsm.page_count(),
            free_pages: st.fsm.free_pages(),
            blocks: st.fsm.blocks().count() as u64,
            pending_blocks: st.pending.len() as u64,
            checkpoint_lsn: st.sb.checkpoint_lsn,
            end_lsn: self
                .log
                .as_ref()
                .map_or(self.recovery.end_lsn, LogWriter::end_lsn),
            log_syncs: self.log.as_ref().map_or(0, LogWriter::syncs),
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

    /// The schema catalog: type id and descriptor bytes.
    pub fn types(&self) -> Vec<(u32, Vec<u8>)> {
        self.lock()
            .catalog
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// The committed image of the block whose first page is `head`.
    pub fn read_block(&self, head: PageNo) -> Result<Vec<u8>> {
        let st = self.lock();
        let (h, len) = st
            .fsm
            .block_of(head)
            .filter(|&(h, _)| h == head)
            .ok_or_else(|| {
                Error::invalid(format!("page {head} does not start an allocated block"))
            })?;
        let mut buf = vec![0u8; len as usize * self.page_size];
        self.read_committed(&st, h, len, &mut buf)?;
        Ok(buf)
    }

    /// The allocated blocks `(head, pages)` that start in pages
    /// `from..from + pages`, ascending.
    pub fn blocks_starting_in(&self, from: PageNo, pages: u64) -> Vec<(PageNo, u32)> {
        heads_in(&self.lock(), from, pages)
    }

    /// The committed images of the blocks that start in pages
    /// `from..from + pages`, read from the page file with one `pread` into
    /// `buf` (a fetch cluster; the caller keeps the buffer for the next one,
    /// so that a fault allocates nothing). Each block says where its image
    /// starts in `buf` and whether it is good; the images are verified and
    /// carry the changes committed since the last checkpoint.
    pub fn read_cluster(&self, from: PageNo, pages: u64, buf: &mut Vec<u8>) -> Vec<ClusterBlock> {
        let st = self.lock();
        let ps = self.page_size;
        let blocks = heads_in(&st, from, pages);
        let (Some(&(first, _)), Some(&(last, last_n))) = (blocks.first(), blocks.last()) else {
            return Vec::new();
        };
        let span = (last + u64::from(last_n) - first) as usize * ps;
        if buf.len() < span {
            buf.resize(span, 0);
        }
        let raw = &mut buf[..span];
        let read = read_block_raw(&*self.file, &self.path, first, ps, raw);
        blocks
            .into_iter()
            .map(|(head, pages)| {
                let at = (head - first) as usize * ps;
                let img = &mut raw[at..at + pages as usize * ps];
                let image = match &read {
                    Err(e) => Err(Error::invalid(format!("reading pages {first}..: {e}"))),
                    Ok(()) => self.committed_in_place(&st, head, pages, img),
                };
                ClusterBlock {
                    head,
                    pages,
                    at,
                    image,
                }
            })
            .collect()
    }

    /// Turns the page-file image of block `head` in `img` into its committed
    /// image (verified, with the changes logged since the checkpoint).
    fn committed_in_place(&self, st: &State, head: PageNo, len: u32, img: &mut [u8]) -> Result<()> {
        match st.pending.get(&head).map(|p| &p.base) {
            Some(Base::Image(pending)) if pending.len() == img.len() => {
                img.copy_from_slice(pending);
            }
            Some(Base::Image(_)) => {
                return Err(Error::invalid(format!(
                    "block {head}: its pending image is not {len} pages"
                )));
            }
            _ => {
                page::verify(img, head, len).map_err(|e| {
                    corrupt(
                        &self.path,
                        FileKind::PageFile,
                        Location::Page(head),
                        e.to_string(),
                    )
                })?;
            }
        }
        if let Some(p) = st.pending.get(&head) {
            p.apply(img);
        }
        Ok(())
    }

    /// Reads the committed image of block `head` (of `len` pages) into `buf`.
    fn read_committed(&self, st: &State, head: PageNo, len: u32, buf: &mut [u8]) -> Result<()> {
        match st.pending.get(&head) {
            Some(p) => {
                match &p.base {
                    Base::Image(img) => buf.copy_from_slice(img),
                    Base::File => self.read_file_block(head, len, buf)?,
                }
                p.apply(buf);
                Ok(())
            }
            None => self.read_file_block(head, len, buf),
        }
    }

    /// Reads a block from the page file and verifies it.
    pub(crate) fn read_file_block(&self, head: PageNo, len: u32, buf: &mut [u8]) -> Result<()> {
        read_block_raw(&*self.file, &self.path, head, self.page_size, buf)?;
        page::verify(buf, head, len).map_err(|e| {
            corrupt(
                &self.path,
                FileKind::PageFile,
                Location::Page(head),
                e.to_string(),
            )
        })?;
        Ok(())
    }

    /// Starts a storage-level transaction.
    pub fn begin(&self) -> Result<StoreTx<'_>> {
        if self.log.is_none() {
            return Err(Error::invalid("database is open read-only"));
        }
        let mut st = self.lock();
        if let Some(cause) = &st.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let txid = st.next_txid as u32;
        st.next_txid += 1;
        Ok(StoreTx::new(self, txid))
    }

    pub(crate) fn log(&self) -> Result<&LogWriter> {
        self.log
            .as_ref()
            .ok_or_else(|| Error::invalid("database is open read-only"))
    }

    /// Closes the store, checkpointing first if the options say so.
    pub fn close(self) -> Result<()> {
        if self.log.is_some() && self.opts.checkpoint_on_close {
            self.checkpoint_closing()?;
        }
        Ok(())
    }
}

/// Reads `buf.len()` bytes of block `head` from the page file without
/// verifying them. Bytes past the end of the file read as zero (a block
/// allocated but never installed).
/// The allocated blocks that start in pages `from..from + pages`.
fn heads_in(st: &State, from: PageNo, pages: u64) -> Vec<(PageNo, u32)> {
    let mut blocks = Vec::new();
    let mut page = from;
    while page < from.saturating_add(pages) {
        match st.fsm.block_of(page) {
            Some((h, n)) if h == page => {
                blocks.push((h, n));
                page += u64::from(n);
            }
            Some((h, n)) => page = h + u64::from(n),
            None => page += 1,
        }
    }
    blocks
}

pub(crate) fn read_block_raw(
    file: &dyn IoFile,
    path: &Path,
    head: PageNo,
    page_size: usize,
    buf: &mut [u8],
) -> Result<()> {
    let off = head
        .checked_mul(page_size as u64)
        .ok_or_else(|| Error::invalid(format!("page {head} is beyond any file")))?;
    crate::io::read_at_most(file, buf, off).map_err(|e| Error::io("read page", path, e))?;
    Ok(())
}

/// Reads both superblock copies and picks the newest valid one.
pub(crate) fn read_superblock(file: &dyn IoFile, path: &Path) -> Result<(Superblock, u8)> {
    let slots = read_superblock_slots(file, path)?;
    let [a, b] = slots;
    match superblock::choose(a, b) {
        Ok(x) => Ok(x),
        Err([Some(SlotError::BadMagic), Some(SlotError::BadMagic)]) => Err(Error::NotADatabase {
            path: path.to_path_buf(),
            what: "no Amber superblock (bad magic in both copies)".into(),
        }),
        Err([Some(SlotError::Version(v)), _]) | Err([_, Some(SlotError::Version(v))]) => {
            Err(Error::NotADatabase {
                path: path.to_path_buf(),
                what: format!(
                    "format version {v}; this build reads version {}",
                    superblock::VERSION
                ),
            })
        }
        Err([e0, e1]) => Err(corrupt(
            path,
            FileKind::PageFile,
            Location::Superblock(0),
            format!(
                "both superblock copies are damaged (copy 0: {}; copy 1: {})",
                e0.map(|e| e.to_string()).unwrap_or_default(),
                e1.map(|e| e.to_string()).unwrap_or_default()
            ),
        )),
    }
}

/// Each superblock copy, decoded or with what is wrong with it.
pub(crate) fn read_superblock_slots(
    file: &dyn IoFile,
    path: &Path,
) -> Result<[std::result::Result<Superblock, SlotError>; 2]> {
    let mut out = [Err(SlotError::BadMagic), Err(SlotError::BadMagic)];
    for (i, off) in SLOT_OFFSETS.iter().enumerate() {
        let mut b = [0u8; SLOT_SIZE];
        crate::io::read_at_most(file, &mut b, *off)
            .map_err(|e| Error::io("read superblock", path, e))?;
        out[i] = Superblock::decode(&b);
    }
    Ok(out)
}

/// Reads the log header copies and picks the newest valid one matching the
/// database.
/// Also says whether one copy was damaged.
pub(crate) fn read_log_header(
    file: &dyn IoFile,
    path: &Path,
    sb: &Superblock,
) -> Result<(LogHeader, bool)> {
    let mut best: Option<LogHeader> = None;
    let mut problems = Vec::new();
    for (i, off) in log_header::SLOT_OFFSETS.iter().enumerate() {
        let mut b = [0u8; log_header::SLOT_SIZE];
        crate::io::read_at_most(file, &mut b, *off)
            .map_err(|e| Error::io("read log header", path, e))?;
        match LogHeader::decode(&b) {
            Ok(h) if best.is_none_or(|x| h.generation > x.generation) => best = Some(h),
            Ok(_) => {}
            Err(e) => problems.push(format!("copy {i}: {e}")),
        }
    }
    let h = best.ok_or_else(|| {
        corrupt(
            path,
            FileKind::Log,
            Location::LogHeader(0),
            format!("no valid log header ({})", problems.join("; ")),
        )
    })?;
    if h.db_id != sb.db_id {
        return Err(corrupt(
            path,
            FileKind::Log,
            Location::LogHeader(0),
            "this log belongs to another database",
        ));
    }
    if h.page_size != sb.page_size {
        return Err(corrupt(
            path,
            FileKind::Log,
            Location::LogHeader(0),
            format!(
                "log page size {} differs from the database's {}",
                h.page_size, sb.page_size
            ),
        ));
    }
    if h.base_lsn > sb.checkpoint_lsn {
        return Err(corrupt(
            path,
            FileKind::Log,
            Location::LogHeader(0),
            format!(
                "log starts at LSN {} after the checkpoint LSN {}: records are missing",
                h.base_lsn, sb.checkpoint_lsn
            ),
        ));
    }
    Ok((h, !problems.is_empty()))
}

/// Reads a metadata blob whose block starts at `head`.
pub(crate) fn read_meta_blob(
    file: &dyn IoFile,
    path: &Path,
    head: PageNo,
    page_size: usize,
    kind: MetaKind,
) -> Result<(Vec<u8>, u32)> {
    let at = Location::Meta(kind.name());
    let mut first = vec![0u8; page_size];
    read_block_raw(file, path, head, page_size, &mut first)?;
    let h = PageHeader::read(&first)
        .ok_or_else(|| corrupt(path, FileKind::PageFile, at.clone(), "truncated header"))?;
    if h.run_len == 0 || h.run_len > (1 << 20) {
        return Err(corrupt(
            path,
            FileKind::PageFile,
            at,
            format!("page {head}: impossible run length {}", h.run_len),
        ));
    }
    let mut block = vec![0u8; h.run_len as usize * page_size];
    read_block_raw(file, path, head, page_size, &mut block)?;
    page::verify(&block, head, h.run_len).map_err(|e| {
        corrupt(
            path,
            FileKind::PageFile,
            at.clone(),
            format!("page {head}: {e}"),
        )
    })?;
    if h.kind != BlockKind::Meta as u8 {
        return Err(corrupt(
            path,
            FileKind::PageFile,
            at,
            format!("page {head} is not a metadata block"),
        ));
    }
    let payload = meta::read_blob(&block, kind)
        .map_err(|e| corrupt(path, FileKind::PageFile, at, format!("page {head}: {e}")))?
        .to_vec();
    Ok((payload, h.run_len))
}

/// Builds the in-memory state as of the superblock's checkpoint.
fn load_state(file: &dyn IoFile, path: &Path, sb: Superblock, sb_slot: u8) -> Result<State> {
    let ps = sb.page_size as usize;
    let first = first_data_page(ps);
    let (fsm_bytes, _) = read_meta_blob(file, path, sb.fsm_page, ps, MetaKind::FreeSpace)?;
    let bad = |what: String| {
        corrupt(
            path,
            FileKind::PageFile,
            Location::Meta("free-space map"),
            what,
        )
    };
    let img = FsmImage::decode(&fsm_bytes).map_err(|_| bad("truncated".into()))?;
    let fsm = FreeSpace::from_image(&img, first).map_err(bad)?;
    for (name, p) in [
        ("free-space map", sb.fsm_page),
        ("root directory", sb.roots_page),
        ("schema catalog", sb.catalog_page),
    ] {
        if fsm.block_of(p).is_none_or(|(h, _)| h != p) {
            return Err(corrupt(
                path,
                FileKind::PageFile,
                Location::Meta(name),
                format!("its block at page {p} is not allocated in the free-space map"),
            ));
        }
    }
    let (roots_bytes, _) = read_meta_blob(file, path, sb.roots_page, ps, MetaKind::Roots)?;
    let roots = meta::decode_roots(&roots_bytes).map_err(|e| {
        corrupt(
            path,
            FileKind::PageFile,
            Location::Meta("root directory"),
            e,
        )
    })?;
    let (cat_bytes, _) = read_meta_blob(file, path, sb.catalog_page, ps, MetaKind::Catalog)?;
    let catalog = meta::decode_catalog(&cat_bytes).map_err(|e| {
        corrupt(
            path,
            FileKind::PageFile,
            Location::Meta("schema catalog"),
            e,
        )
    })?;
    let next_type_id = catalog.iter().map(|(id, _)| *id + 1).max().unwrap_or(1);
    Ok(State {
        sb,
        sb_slot,
        fsm,
        roots: roots.into_iter().map(|r| (r.name.clone(), r)).collect(),
        catalog: catalog.into_iter().collect(),
        next_type_id,
        pending: IntMap::default(),
        pending_bytes: 0,
        next_txid: sb.next_txid,
        early: HashSet::new(),
        poisoned: None,
        page_size: ps,
    })
}
