//! Creating and opening a database: the order of writes that makes a new
//! database valid only once it is whole, and the open path (superblock and
//! log header copies chosen, the checkpoint's state loaded, the recovery
//! pass run, and its work handed to the checkpointer thread to install).

use super::alloc::FreeSpace;
use super::checkpointer::Requests;
use super::order::ApplyOrder;
use super::state::{State, load_state};
use super::readers::Table;
use super::recovery::OpenTxs;
use super::refresh::Reader;
use super::{Core, RecoveryReport, Store, StoreOptions, checkpoint, corrupt, recovery, wal_path};
use crate::error::{Error, FileKind, Location, Result};
use crate::fasthash::IntMap;
use crate::format::first_data_page;
use crate::format::home::Home;
use crate::format::superblock::{self, SLOT_OFFSETS, SLOT_SIZE, SlotError, Superblock};
use crate::io::{IoFile, OpenMode, Vfs};
use crate::wal::header::{self as log_header, LogHeader, RECORDS_START};
use crate::wal::scan::Tail;
use crate::wal::writer::LogWriter;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

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
        let home = match opts.home {
            None => {
                let mut r = [0u8; 8];
                r.copy_from_slice(&db_id[..8]);
                Home::pick(u64::from_le_bytes(r))
            }
            Some(addr) => Home::new(addr).map_err(Error::Invalid)?,
        };
        // The log first, the superblock last: a database whose superblock is
        // valid has everything else.
        let logf = vfs
            .open(&wal, OpenMode::CreateNew)
            .map_err(|e| Error::io("create log", &wal, e))?;
        let log = LogWriter::create(logf, wal.clone(), ps as u32, db_id, 1)?;
        let file = vfs
            .open(path, OpenMode::CreateNew)
            .map_err(|e| Error::io("create database", path, e))?;
        lock_database(&*file, path)?;
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
                home,
            },
            sb_slot: 1,
            fsm: FreeSpace::new(first),
            roots: BTreeMap::new(),
            catalog: BTreeMap::new(),
            next_type_id: 1,
            catalog_changes: 0,
            pending: IntMap::default(),
            pending_bytes: 0,
            installing: None,
            new_meta: None,
            installs: 0,
            next_txid: 1,
            early: HashSet::new(),
            poisoned: None,
            page_size: ps,
            images_in_log: true,
            wpl_installed: (0, 0),
        };
        // Reserve pages below the first data page in the file.
        file.set_len(first * ps as u64)
            .map_err(|e| Error::io("size database", path, e))?;
        let (blobs, images) =
            checkpoint::build_meta_blobs(&mut fsm, &st.roots, &st.catalog, ps, &[], 1)?;
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
        let end = log.end_lsn();
        let readers = Table::open(&*vfs, path)?;
        if let Some(t) = &readers {
            t.register_writer(&t.lock()?, end, st.sb.generation)?;
        }
        Store::start(Core {
            vfs,
            path: path.to_path_buf(),
            wal_path: wal,
            page_size: ps,
            home: st.sb.home,
            file,
            log: Some(log),
            opts,
            gate: RwLock::new(()),
            state: Mutex::new(st),
            order: ApplyOrder::default(),
            requests: Requests::default(),
            recovery: RecoveryReport::default(),
            open_checkpoint: std::sync::OnceLock::new(),
            readers,
            reader: None,
        })
    }

    /// Opens an existing database, running recovery. A writable open returns
    /// once the log is replayed into memory; the checkpointer thread then
    /// installs what recovery rebuilt ([`Core::open_checkpoint`] waits for
    /// it).
    pub fn open(vfs: Arc<dyn Vfs>, path: &Path, opts: StoreOptions) -> Result<Store> {
        let wal = wal_path(path);
        let mode = if opts.read_only {
            OpenMode::ReadOnly
        } else {
            OpenMode::ReadWrite
        };
        // A missing file is the operating system's "no such file", an I/O
        // error: nothing says that what is not there is not a database.
        let file = vfs
            .open(path, mode)
            .map_err(|e| Error::io("open database", path, e))?;
        // One writer: it holds the page file's lock. Readers take the
        // reader table's while they load the checkpoint (no checkpoint
        // installs meanwhile), and without a table (a place this process
        // cannot write) fall back to the page file's lock.
        let readers = Table::open(&*vfs, path)?;
        let table_lock = match (&readers, opts.read_only) {
            (Some(t), true) => Some(t.lock()?),
            _ => {
                lock_database(&*file, path)?;
                None
            }
        };
        let (sb, sb_slot) = read_superblock(&*file, path)?;
        let damaged_copy = read_superblock_slots(&*file, path)?
            .iter()
            .any(|s| s.is_err());
        let ps = sb.page_size as usize;
        let logf = vfs.open(&wal, mode).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                corrupt(
                    &wal,
                    FileKind::Log,
                    Location::File,
                    "log file is missing (after a clean close, `amber recover --new-log` makes a \
                     new one and loses nothing)",
                )
            } else {
                Error::io("open log", &wal, e)
            }
        })?;
        let (lh, log_version, log_copy_damaged) = read_log_header(&*logf, &wal, &sb)?;
        // A reader beside a live writer reads the log up to the end the
        // writer published: what lies after it may be half written.
        let published = match (&readers, opts.read_only) {
            (Some(t), true) => t.published_end()?,
            _ => None,
        };
        // A clean close vouches that the epoch is empty: nothing to read, so
        // opening costs the same whatever the log file's size.
        let vouched_empty = lh.closed
            && lh.base_lsn == sb.checkpoint_lsn
            && published.is_none_or(|e| e <= sb.checkpoint_lsn);
        let log_source = recovery::LogSource {
            file: (!vouched_empty).then_some(&*logf),
            path: &wal,
            base_lsn: lh.base_lsn,
            end: published,
        };
        let loaded = load_state(&*file, path, sb, sb_slot).map(|mut st| {
            st.images_in_log = !opts.read_only;
            st
        });
        let (st, report, open_txs) =
            recovery::replay(sb.checkpoint_lsn, loaded, OpenTxs::default(), log_source, &*file, path, None)?;
        let end_lsn = report.end_lsn;
        // A writable open that recovered something asks the checkpointer
        // thread to install it (below); one that could not is refused here.
        let install =
            !opts.read_only && (end_lsn > sb.checkpoint_lsn || damaged_copy || log_copy_damaged);
        if install {
            checkpoint::next_generation(path, &st)?;
        }
        let reader = match (&readers, table_lock) {
            (Some(t), Some(g)) => Some(Reader::new(t.claim(&g, end_lsn)?, end_lsn, open_txs)),
            _ => None,
        };
        let log = if opts.read_only {
            None
        } else {
            // A reader with no writer to ask reads the log to its last valid
            // record, holding the reader table's lock: the torn tail is cut,
            // and this writer registered, under it (`readers.rs`).
            let registering = readers.as_ref().map(|t| t.lock()).transpose()?;
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
            if let (Some(t), Some(g)) = (&readers, &registering) {
                t.register_writer(g, end_lsn, st.sb.generation)?;
            }
            drop(registering);
            Some(LogWriter::resume(logf, wal.clone(), lh, log_version, end_lsn))
        };
        let core = Core {
            vfs,
            path: path.to_path_buf(),
            wal_path: wal,
            page_size: ps,
            home: sb.home,
            file,
            log,
            opts,
            gate: RwLock::new(()),
            state: Mutex::new(st),
            order: ApplyOrder::default(),
            requests: Requests::default(),
            recovery: report,
            open_checkpoint: std::sync::OnceLock::new(),
            readers,
            reader,
        };
        // What recovery rebuilt is installed, and a damaged superblock or log
        // header copy rewritten (the checkpoint writes the copy that is not
        // current), by the checkpointer thread once the store is open: the
        // log holds all of it until that checkpoint ends (docs/design.md
        // §3.1).
        let store = Store::start(core)?;
        if install {
            store.requests.request_install();
        }
        Ok(store)
    }
}

/// How long opening waits for a lock that someone else holds before it
/// refuses with [`Error::Locked`].
///
/// The lock is a `flock`, which belongs to the open file: a child process
/// that any thread is spawning holds a copy of every descriptor from `fork`
/// until its `exec` closes them (`O_CLOEXEC`), so a database closed by this
/// process can stay locked for that moment — milliseconds on a loaded
/// machine. Waiting a little tells that apart from a real second user.
const LOCK_PATIENCE: Duration = Duration::from_millis(200);

/// Takes the page file's exclusive lock, so that one process or handle at a
/// time has the database open.
pub(super) fn lock_database(file: &dyn IoFile, path: &Path) -> Result<()> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    while !file
        .try_lock_exclusive()
        .map_err(|e| Error::io("lock database", path, e))?
    {
        if start.elapsed() >= LOCK_PATIENCE {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    Ok(())
}

/// Reads both superblock copies and picks the newest valid one.
pub(super) fn read_superblock(file: &dyn IoFile, path: &Path) -> Result<(Superblock, u8)> {
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
/// database; returns it with its format version, and whether one copy was
/// damaged.
pub(crate) fn read_log_header(
    file: &dyn IoFile,
    path: &Path,
    sb: &Superblock,
) -> Result<(LogHeader, u32, bool)> {
    let LogHeaders {
        best,
        problems,
        newer,
    } = newest_log_header(file, path)?;
    if let (None, Some(v)) = (best, newer) {
        return Err(Error::NotADatabase {
            path: path.to_path_buf(),
            what: format!(
                "log format version {v}, written by a newer build; this build reads versions \
                 up to {}: open the database with the build that wrote it",
                log_header::VERSION
            ),
        });
    }
    let (h, version) = best.ok_or_else(|| {
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
    // A version-2 log is read as it is (its records are version 3's), and
    // the writer rewrites its header as version 3 before its first record.
    // A version-1 log (records without the length trailer) is read only
    // when a clean close vouched that its epoch is empty: there is nothing
    // to read in either framing. One with records to recover is refused:
    // the build that wrote it recovers them.
    if version == log_header::VERSION_NO_TRAILER && !(h.closed && h.base_lsn == sb.checkpoint_lsn) {
        return Err(Error::NotADatabase {
            path: path.to_path_buf(),
            what: format!(
                "log format version {version} (records without a length trailer) holding records \
                 not yet installed; this build reads version {}: open the database with the \
                 build that wrote it and close it cleanly (its checkpoint installs the records), \
                 then open it with this one",
                log_header::VERSION
            ),
        });
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
    Ok((h, version, !problems.is_empty()))
}

/// A log header copy and its format version.
pub(super) type VersionedHeader = (LogHeader, u32);

/// What the two copies of a log header hold.
pub(super) struct LogHeaders {
    /// The newest valid copy, if any, with its format version (this
    /// build's, [`log_header::VERSION_SINGLE_RANGES`] or
    /// [`log_header::VERSION_NO_TRAILER`]).
    pub(super) best: Option<VersionedHeader>,
    /// What is wrong with each copy that is not valid.
    pub(super) problems: Vec<String>,
    /// A sound copy of a format version later than this build's.
    pub(super) newer: Option<u32>,
}

/// Reads both copies of the log header of `file`.
pub(super) fn newest_log_header(file: &dyn IoFile, path: &Path) -> Result<LogHeaders> {
    let mut out = LogHeaders {
        best: None,
        problems: Vec::new(),
        newer: None,
    };
    for (i, off) in log_header::SLOT_OFFSETS.iter().enumerate() {
        let mut b = [0u8; log_header::SLOT_SIZE];
        crate::io::read_at_most(file, &mut b, *off)
            .map_err(|e| Error::io("read log header", path, e))?;
        match LogHeader::decode_versioned(&b) {
            Ok((h, v)) if out.best.is_none_or(|(x, _)| h.generation > x.generation) => {
                out.best = Some((h, v))
            }
            Ok(_) => {}
            Err(e) => {
                out.newer = out.newer.or(log_header::newer_version(&b));
                out.problems.push(format!("copy {i}: {e}"));
            }
        }
    }
    Ok(out)
}
