//! Online backup: one committed state of a database copied into a new
//! database while its writer keeps committing (`amber backup`,
//! docs/design.md §10.11).
//!
//! A [`Pinned`] state is a read-only store's snapshot `S` (its slot in the
//! reader table) and the two files as they are on disk: the page file as
//! of the last checkpoint `C ≤ S`, and the log up to `S`'s end. The page
//! file changes only at a checkpoint, and a checkpoint runs only while it
//! holds the reader table's lock and every reader's snapshot reaches the
//! log's end (`readers.rs`). So the copy is taken without holding anything
//! but the slot — a long copy delays no commit, no reader — and checked
//! afterwards: the superblock generation read under the table's lock
//! before and after the copy is the same only if no checkpoint wrote the
//! files meanwhile. With the slot held, a checkpoint can only run while
//! nothing has been committed past `S` (it then installs exactly `S`): a
//! copy it spoiled is taken again ([`MAX_TRIES`]) and the second try does
//! not meet one unless nothing at all is committed in between.
//!
//! The log is copied up to the byte where `S` ends, so that the backup's
//! recovery replays exactly the snapshot's commits, however many the
//! writer made since. The copy goes to temporary files beside the
//! destination ([`partial_path`]) whose superblock area is written last:
//! until the end they are not a database, and a copy cut short (the
//! backup killed) is never taken for one. Finished, both are synced and
//! renamed into place (the log first), then opened once: recovery
//! installs the copied log, and the close checkpoints it, so the backup is
//! a clean database on its own.

use super::open::{newest_log_header, read_superblock};
use super::{Store, StoreOptions, wal_path};
use crate::error::{Error, Result};
use crate::format::first_data_page;
use crate::io::{IoFile, OpenMode, Vfs};
use crate::wal::header::RECORDS_START;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How many times a copy spoiled by a checkpoint is taken again.
pub const MAX_TRIES: u32 = 4;

/// Which file of a pinned state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The page file.
    Data,
    /// The log.
    Log,
}

/// What a pinned state is: enough for the destination to be laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinInfo {
    /// The snapshot's LSN: the backup holds exactly the commits up to it.
    pub snapshot_lsn: u64,
    /// The database's page size.
    pub page_size: usize,
    /// Bytes of the page file to copy.
    pub data_len: u64,
    /// Bytes of the log to copy.
    pub log_len: u64,
    /// The most bytes the source gives in one read.
    pub max_read: usize,
}

/// A committed state of a database, pinned for copying.
#[derive(Debug)]
pub struct Pinned {
    /// The read-only store whose reader slot holds the snapshot.
    store: Store,
    data: Box<dyn IoFile>,
    log: Box<dyn IoFile>,
    info: PinInfo,
    /// The superblock generation when the files were measured.
    generation: u64,
}

impl Pinned {
    /// Pins the latest committed state of the database at `path`.
    pub fn open(vfs: Arc<dyn Vfs>, path: &Path) -> Result<Pinned> {
        let opts = StoreOptions {
            read_only: true,
            ..StoreOptions::default()
        };
        let store = Store::open(vfs.clone(), path, opts)?;
        let data = vfs
            .open(path, OpenMode::ReadOnly)
            .map_err(|e| Error::io("open database", path, e))?;
        let wal = wal_path(path);
        let log = vfs
            .open(&wal, OpenMode::ReadOnly)
            .map_err(|e| Error::io("open log", &wal, e))?;
        let snapshot_lsn = store.snapshot_lsn();
        let (generation, data_len, base_lsn) = {
            let _held = store.reader_table().map(|t| t.lock()).transpose()?;
            let generation = generation(&*data, path)?;
            let data_len = data.size().map_err(|e| Error::io("size database", path, e))?;
            (generation, data_len, current_base_lsn(&*log, &wal)?)
        };
        // The slot keeps every checkpoint at or before the snapshot.
        if base_lsn > snapshot_lsn {
            return Err(Error::Internal(format!(
                "{}: the log starts at LSN {base_lsn}, past the pinned snapshot {snapshot_lsn}",
                path.display()
            )));
        }
        let info = PinInfo {
            snapshot_lsn,
            page_size: store.page_size(),
            data_len,
            log_len: RECORDS_START + (snapshot_lsn - base_lsn),
            max_read: usize::MAX,
        };
        Ok(Pinned {
            store,
            data,
            log,
            info,
            generation,
        })
    }

    /// What is pinned.
    pub fn info(&self) -> PinInfo {
        self.info
    }

    /// Fills `buf` with the bytes of `part` at `offset`; refused past the
    /// pinned length.
    pub fn read(&self, part: Part, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (file, len, name) = match part {
            Part::Data => (&self.data, self.info.data_len, self.store.path().to_path_buf()),
            Part::Log => (&self.log, self.info.log_len, wal_path(self.store.path())),
        };
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > len) {
            return Err(Error::invalid(format!(
                "backup read of {} bytes at {offset} of {}: the pinned copy is {len} bytes",
                buf.len(),
                name.display()
            )));
        }
        file.read_exact_at(buf, offset)
            .map_err(|e| Error::io("read for a backup", &name, e))
    }

    /// Whether the bytes read are of the pinned state: no checkpoint wrote
    /// the files since they were measured. Lets the pin go.
    pub fn finish(self) -> Result<()> {
        let path = self.store.path().to_path_buf();
        let now = {
            let _held = self.store.reader_table().map(|t| t.lock()).transpose()?;
            generation(&*self.data, &path)?
        };
        if now != self.generation {
            return Err(Error::invalid(format!(
                "{}: a checkpoint rewrote the database during the copy (superblock \
                 generation {} → {now}): the copy is discarded; take it again",
                path.display(),
                self.generation
            )));
        }
        self.store.close()
    }
}

/// The generation of the superblock in charge.
fn generation(file: &dyn IoFile, path: &Path) -> Result<u64> {
    read_superblock(file, path).map(|(sb, _)| sb.generation)
}

/// The base LSN of the log's newest valid header copy.
fn current_base_lsn(log: &dyn IoFile, wal: &Path) -> Result<u64> {
    let headers = newest_log_header(log, wal)?;
    match headers.best {
        Some((h, _)) => Ok(h.base_lsn),
        None => Err(Error::invalid(format!(
            "{}: no valid log header copy ({})",
            wal.display(),
            headers.problems.join("; ")
        ))),
    }
}

/// Where a backup to `dest` is written until it is whole: `DEST` with
/// `.amber-backup-partial` appended (its log beside it, `-wal` appended).
pub fn partial_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".amber-backup-partial");
    PathBuf::from(s)
}

/// A backup being written.
#[derive(Debug)]
pub struct Dest {
    vfs: Arc<dyn Vfs>,
    dest: PathBuf,
    partial: PathBuf,
    data: Box<dyn IoFile>,
    log: Box<dyn IoFile>,
    /// The page file's superblock area, written last.
    head: Vec<u8>,
}

impl Dest {
    /// Starts a backup at `dest` of a state laid out as `info`: refused if
    /// `dest` or its log exists. Leftovers of a backup cut short are
    /// replaced (they never were a database).
    pub fn create(vfs: Arc<dyn Vfs>, dest: &Path, info: &PinInfo) -> Result<Dest> {
        for p in [dest.to_path_buf(), wal_path(dest)] {
            if vfs.exists(&p) {
                return Err(Error::invalid(format!(
                    "{}: exists; a backup makes a new database and overwrites nothing",
                    p.display()
                )));
            }
        }
        let partial = partial_path(dest);
        let mut files = Vec::new();
        for p in [partial.clone(), wal_path(&partial)] {
            if vfs.exists(&p) {
                vfs.remove(&p)
                    .map_err(|e| Error::io("remove an unfinished backup", &p, e))?;
            }
            files.push(
                vfs.open(&p, OpenMode::CreateNew)
                    .map_err(|e| Error::io("create backup file", &p, e))?,
            );
        }
        let log = files.pop().expect("two files");
        let data = files.pop().expect("two files");
        let head = first_data_page(info.page_size) as usize * info.page_size;
        Ok(Dest {
            vfs,
            dest: dest.to_path_buf(),
            partial,
            data,
            log,
            head: vec![0; head.min(info.data_len as usize)],
        })
    }

    /// Writes `bytes` of `part` at `offset`.
    pub fn write(&mut self, part: Part, offset: u64, bytes: &[u8]) -> Result<()> {
        let (file, path) = match part {
            Part::Data => (&self.data, self.partial.clone()),
            Part::Log => (&self.log, wal_path(&self.partial)),
        };
        let mut bytes = bytes;
        let mut offset = offset;
        if part == Part::Data && offset < self.head.len() as u64 {
            let n = (self.head.len() - offset as usize).min(bytes.len());
            self.head[offset as usize..offset as usize + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            offset += n as u64;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        file.write_all_at(bytes, offset)
            .map_err(|e| Error::io("write backup", &path, e))
    }

    /// Makes the copy the database `dest`: the superblock area written,
    /// both files synced and renamed into place (the log first, so that
    /// `dest` never exists without its log), then opened once — recovery
    /// installs the copied log up to the snapshot, and the close
    /// checkpoints. Returns the backup's numbers.
    pub fn finish(self, info: &PinInfo) -> Result<super::StoreStats> {
        let wal = wal_path(&self.partial);
        self.data
            .write_all_at(&self.head, 0)
            .map_err(|e| Error::io("write backup", &self.partial, e))?;
        self.data
            .sync_data()
            .map_err(|e| Error::io("sync backup", &self.partial, e))?;
        self.log
            .sync_data()
            .map_err(|e| Error::io("sync backup", &wal, e))?;
        drop((self.data, self.log));
        let dest_wal = wal_path(&self.dest);
        self.vfs
            .rename(&wal, &dest_wal)
            .map_err(|e| Error::io("rename backup log", &wal, e))?;
        self.vfs
            .rename(&self.partial, &self.dest)
            .map_err(|e| Error::io("rename backup", &self.partial, e))?;
        let store = Store::open(self.vfs.clone(), &self.dest, StoreOptions::default())?;
        // Recovery read the copied log to its end: exactly the snapshot.
        let recovered = store.recovery_report().end_lsn;
        if recovered != info.snapshot_lsn {
            return Err(Error::Internal(format!(
                "{}: the backup's log ends at LSN {recovered}, the snapshot copied at {}",
                self.dest.display(),
                info.snapshot_lsn
            )));
        }
        let stats = store.stats();
        store.close()?;
        Ok(stats)
    }
}

/// Where a backup's bytes come from: a state pinned here, or through a
/// server.
pub trait BackupSource {
    /// Pins the latest committed state.
    fn pin(&mut self) -> Result<PinInfo>;
    /// `len` bytes of `part` at `offset` of the pinned state.
    fn read(&mut self, part: Part, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// Checks that the bytes read are of the pinned state, and lets it go
    /// (see [`Pinned::finish`]).
    fn finish(&mut self) -> Result<()>;
}

/// A local database as a backup's source.
#[derive(Debug)]
pub struct LocalSource {
    vfs: Arc<dyn Vfs>,
    path: PathBuf,
    pinned: Option<Pinned>,
}

impl LocalSource {
    /// The database at `path`.
    pub fn new(vfs: Arc<dyn Vfs>, path: &Path) -> LocalSource {
        LocalSource {
            vfs,
            path: path.to_path_buf(),
            pinned: None,
        }
    }
}

impl BackupSource for LocalSource {
    fn pin(&mut self) -> Result<PinInfo> {
        let p = Pinned::open(self.vfs.clone(), &self.path)?;
        let info = p.info();
        self.pinned = Some(p);
        Ok(info)
    }

    fn read(&mut self, part: Part, offset: u64, len: usize) -> Result<Vec<u8>> {
        let p = self
            .pinned
            .as_ref()
            .ok_or_else(|| Error::invalid("backup read with nothing pinned"))?;
        let mut buf = vec![0; len];
        p.read(part, offset, &mut buf)?;
        Ok(buf)
    }

    fn finish(&mut self) -> Result<()> {
        match self.pinned.take() {
            Some(p) => p.finish(),
            None => Err(Error::invalid("backup finished with nothing pinned")),
        }
    }
}

/// What [`backup`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The snapshot copied: the backup holds exactly the commits up to it.
    pub snapshot_lsn: u64,
    /// Bytes copied (page file and log).
    pub bytes: u64,
    /// Copies taken again because a checkpoint spoiled them.
    pub retries: u32,
    /// The backup's numbers once opened.
    pub stats: super::StoreStats,
}

/// Copies one committed state of `src` into the new database `dest`, in
/// reads of at most `chunk` bytes. A copy a checkpoint spoiled is taken
/// again, up to [`MAX_TRIES`] times; any failure leaves no database at
/// `dest` (only the partial files, which are not one).
pub fn backup(
    src: &mut dyn BackupSource,
    vfs: Arc<dyn Vfs>,
    dest: &Path,
    chunk: usize,
) -> Result<BackupReport> {
    let mut retries = 0;
    loop {
        let info = src.pin()?;
        let chunk = chunk.min(info.max_read).max(1);
        let mut out = Dest::create(vfs.clone(), dest, &info)?;
        let mut bytes = 0;
        for (part, len) in [(Part::Data, info.data_len), (Part::Log, info.log_len)] {
            let mut at = 0;
            while at < len {
                let n = (len - at).min(chunk as u64) as usize;
                let b = src.read(part, at, n)?;
                if b.len() != n {
                    return Err(Error::invalid(format!(
                        "backup source sent {} bytes for a read of {n}",
                        b.len()
                    )));
                }
                out.write(part, at, &b)?;
                at += n as u64;
                bytes += n as u64;
            }
        }
        match src.finish() {
            Ok(()) => {
                let stats = out.finish(&info)?;
                return Ok(BackupReport {
                    snapshot_lsn: info.snapshot_lsn,
                    bytes,
                    retries,
                    stats,
                });
            }
            Err(e @ Error::Invalid(_)) if retries + 1 < MAX_TRIES => {
                log::info!("backup of {}: {e}", dest.display());
                retries += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
