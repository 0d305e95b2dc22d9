//! The files as they are: both superblock copies, both log header copies and
//! the log's records since the checkpoint, read directly, so that they can
//! be shown even when the store refuses to open (a damaged copy, a corrupt
//! log). Nothing here takes the database's lock: a caller that wants a
//! stable picture opens an [`Inspector`](super::Inspector) first, which
//! holds it.

use crate::error::{Error, Result};
use crate::format::superblock::{self, SLOT_OFFSETS, SLOT_SIZE, SlotError, Superblock};
use crate::io::real::RealVfs;
use crate::io::{IoFile, OpenMode, Vfs, read_at_most};
use crate::store::wal_path;
use crate::wal::header::{self as log_header, LogHeader};
use crate::wal::scan::{self, Tail};
use crate::wal::{Record, ranges};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// One superblock copy as the file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuperblockCopy {
    /// A valid copy.
    Valid(Superblock),
    /// The copy starts with the superblock magic but fails a check
    /// (checksum, version, an impossible field): what is wrong.
    Damaged(String),
    /// No superblock magic: never written, or not an Amber file.
    NoMagic,
}

/// Both superblock copies of a page file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblocks {
    /// The page file's size in bytes.
    pub file_size: u64,
    /// Copy 0 (at byte 0) and copy 1 (at byte 4096).
    pub copies: [SuperblockCopy; 2],
    /// The copy in charge: the valid one with the higher generation.
    pub current: Option<usize>,
}

impl Superblocks {
    /// The superblock in charge, if either copy is valid.
    pub fn current(&self) -> Option<&Superblock> {
        match &self.copies[self.current?] {
            SuperblockCopy::Valid(sb) => Some(sb),
            _ => None,
        }
    }

    /// Whether either copy carries the superblock magic: the file claims to
    /// be an Amber database (damaged or not).
    pub fn has_magic(&self) -> bool {
        self.copies
            .iter()
            .any(|c| !matches!(c, SuperblockCopy::NoMagic))
    }
}

fn open_read(path: &Path) -> Result<Box<dyn IoFile>> {
    RealVfs
        .open(path, OpenMode::ReadOnly)
        .map_err(|e| Error::io("open", path, e))
}

/// Reads both superblock copies of the page file at `path`.
pub fn read_superblocks(path: &Path) -> Result<Superblocks> {
    let f = open_read(path)?;
    let file_size = f.size().map_err(|e| Error::io("stat", path, e))?;
    let mut slots = Vec::with_capacity(2);
    for off in SLOT_OFFSETS {
        let mut b = [0u8; SLOT_SIZE];
        read_at_most(&*f, &mut b, off).map_err(|e| Error::io("read superblock", path, e))?;
        slots.push(Superblock::decode(&b));
    }
    let current = superblock::choose(slots[0].clone(), slots[1].clone())
        .ok()
        .map(|(_, slot)| usize::from(slot));
    let copy = |s: &std::result::Result<Superblock, SlotError>| match s {
        Ok(sb) => SuperblockCopy::Valid(*sb),
        Err(SlotError::BadMagic) => SuperblockCopy::NoMagic,
        Err(e) => SuperblockCopy::Damaged(e.to_string()),
    };
    Ok(Superblocks {
        file_size,
        copies: [copy(&slots[0]), copy(&slots[1])],
        current,
    })
}

/// One log header copy as the file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogHeaderCopy {
    /// A valid copy; `belongs` is false when its database identity is not
    /// the current superblock's (a log of another database).
    Valid {
        /// The header.
        header: LogHeader,
        /// Its format version (2 or 3: `wal/header.rs`).
        version: u32,
        /// Whether it carries the database's identity.
        belongs: bool,
    },
    /// What is wrong with it.
    Damaged(String),
}

/// The log's records since the checkpoint, or why they were not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecords {
    /// No valid superblock, or no valid log header of this database.
    NoPair,
    /// The log's first record comes after the checkpoint: records the
    /// database needs are missing.
    StartsAfterCheckpoint {
        /// The log's base LSN.
        base_lsn: u64,
        /// The superblock's checkpoint LSN.
        checkpoint_lsn: u64,
    },
    /// Scanned from the checkpoint to the end.
    Scanned {
        /// The checkpoint LSN the scan started at.
        from_lsn: u64,
        /// Valid records.
        records: u64,
        /// LSN just past the last valid record.
        end_lsn: u64,
        /// How the log ended.
        tail: Tail,
    },
}

/// The log file of a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogView {
    /// Its path (`PATH-wal`).
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Header copy 0 and copy 1.
    pub headers: [LogHeaderCopy; 2],
    /// Whether the newest valid header was written by a clean close: then
    /// bytes after the end of its (empty) epoch are older records left by a
    /// recycling checkpoint, not a batch torn by a crash.
    pub closed_cleanly: bool,
    /// The records since the checkpoint.
    pub records: LogRecords,
}

/// A log record, decoded (payloads are described, not copied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Its log sequence number.
    pub lsn: u64,
    /// The transaction it belongs to (none for a checkpoint's intent).
    pub txid: Option<u32>,
    /// What it records.
    pub kind: RecordKind,
}

/// What a log record records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKind {
    /// New bytes for a range of a block.
    Range {
        /// Persistent address of the first byte.
        addr: u64,
        /// Bytes.
        len: usize,
        /// Whether the old bytes are logged too (records logged before
        /// commit).
        before_image: bool,
    },
    /// New bytes for several ranges (log format 3's ranges record).
    Ranges {
        /// Each range: the persistent address of its first byte, and its
        /// length.
        ranges: Vec<(u64, usize)>,
        /// Whether the old bytes are logged too (records logged before
        /// commit).
        before_image: bool,
    },
    /// A whole page image.
    Page {
        /// The page.
        page: u64,
    },
    /// A block allocated and formatted.
    Alloc {
        /// First page.
        page: u64,
        /// Pages.
        pages: u32,
        /// Block kind byte ([`BlockKind`](super::BlockKind)).
        kind: u8,
    },
    /// A block freed.
    Free {
        /// First page.
        page: u64,
        /// Pages.
        pages: u32,
    },
    /// The transaction committed.
    Commit,
    /// A named root set (address 0 removes it).
    Root {
        /// The name (lossily decoded if not UTF-8).
        name: String,
        /// Persistent address.
        addr: u64,
        /// Type id.
        type_id: u32,
    },
    /// A type added to the schema catalog.
    Type {
        /// Its id.
        type_id: u32,
        /// Bytes of its descriptor.
        descriptor_len: usize,
    },
    /// A checkpoint's intent to install blocks.
    Intent {
        /// Blocks named.
        blocks: usize,
    },
}

impl RecordKind {
    fn of(r: &Record<'_>) -> RecordKind {
        match *r {
            Record::Range {
                addr,
                after,
                before,
                ..
            } => RecordKind::Range {
                addr,
                len: after.len(),
                before_image: before.is_some(),
            },
            Record::Ranges {
                addr, before, body, ..
            } => RecordKind::Ranges {
                ranges: ranges::iter(addr, before, body)
                    .map(|r| (r.addr, r.after.len()))
                    .collect(),
                before_image: before,
            },
            Record::Page { page, .. } => RecordKind::Page { page },
            Record::Alloc {
                page, count, kind, ..
            } => RecordKind::Alloc {
                page,
                pages: count,
                kind,
            },
            Record::Free { page, count, .. } => RecordKind::Free { page, pages: count },
            Record::Commit { .. } => RecordKind::Commit,
            Record::Root {
                name,
                addr,
                type_id,
                ..
            } => RecordKind::Root {
                name: String::from_utf8_lossy(name).into_owned(),
                addr,
                type_id,
            },
            Record::Type { type_id, desc, .. } => RecordKind::Type {
                type_id,
                descriptor_len: desc.len(),
            },
            Record::Intent { entries } => RecordKind::Intent {
                blocks: entries.len() / 12,
            },
        }
    }
}

/// Reads the log of the database at `path`: its header copies, and (when
/// the current superblock and a header of the same database say where)
/// every record from the checkpoint to the end, each passed to `visit` in
/// log order.
pub fn read_log(path: &Path, visit: &mut dyn FnMut(&LogRecord)) -> Result<LogView> {
    let sbs = read_superblocks(path)?;
    let sb = sbs.current();
    let wal = wal_path(path);
    let f = open_read(&wal)?;
    let size = f.size().map_err(|e| Error::io("stat", &wal, e))?;
    let decoded = header_copies(&*f, &wal)?;
    let mut best: Option<LogHeader> = None;
    for (h, _) in decoded.iter().flatten() {
        if sb.is_none_or(|sb| sb.db_id == h.db_id)
            && best.is_none_or(|b| h.generation > b.generation)
        {
            best = Some(*h);
        }
    }
    let copy = |d: &std::result::Result<(LogHeader, u32), String>| match d {
        Ok((h, version)) => LogHeaderCopy::Valid {
            header: *h,
            version: *version,
            belongs: sb.is_none_or(|sb| sb.db_id == h.db_id),
        },
        Err(e) => LogHeaderCopy::Damaged(e.clone()),
    };
    let records = match (sb, best) {
        (Some(sb), Some(h)) if h.base_lsn > sb.checkpoint_lsn => {
            LogRecords::StartsAfterCheckpoint {
                base_lsn: h.base_lsn,
                checkpoint_lsn: sb.checkpoint_lsn,
            }
        }
        (Some(sb), Some(h)) => scan_records(&*f, &wal, sb, &h, visit)?,
        _ => LogRecords::NoPair,
    };
    Ok(LogView {
        headers: [copy(&decoded[0]), copy(&decoded[1])],
        closed_cleanly: newest_closed(&decoded),
        path: wal,
        size,
        records,
    })
}

fn scan_records(
    f: &dyn IoFile,
    wal: &Path,
    sb: &Superblock,
    h: &LogHeader,
    visit: &mut dyn FnMut(&LogRecord),
) -> Result<LogRecords> {
    let ps = sb.page_size as usize;
    let mut undecodable = None;
    let end = scan::scan(f, h.base_lsn, sb.checkpoint_lsn, ps, &mut |lsn, run| {
        for rec in scan::records(lsn, run, ps) {
            match rec {
                Ok((lsn, r)) => visit(&LogRecord {
                    lsn,
                    txid: r.txid(),
                    kind: RecordKind::of(&r),
                }),
                Err(e) => {
                    undecodable = Some(e);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    })
    .map_err(|e| Error::io("read log", wal, e))?;
    if let Some(e) = undecodable {
        return Err(Error::internal(format!(
            "{}: a record the log scan accepted does not decode ({e})",
            wal.display()
        )));
    }
    Ok(LogRecords::Scanned {
        from_lsn: sb.checkpoint_lsn,
        records: end.records,
        end_lsn: end.end_lsn,
        tail: end.tail,
    })
}

/// Both log header copies of the log file `f` at `wal`, decoded.
fn header_copies(
    f: &dyn IoFile,
    wal: &Path,
) -> Result<[std::result::Result<(LogHeader, u32), String>; 2]> {
    let read = |off| -> Result<_> {
        let mut b = [0u8; log_header::SLOT_SIZE];
        read_at_most(f, &mut b, off).map_err(|e| Error::io("read log header", wal, e))?;
        Ok(match LogHeader::decode_versioned(&b) {
            Ok((_, v)) if v == log_header::VERSION_NO_TRAILER => Err(format!(
                "format version {v} (records without a length trailer), which this build \
                 does not read"
            )),
            other => other,
        })
    };
    Ok([
        read(log_header::SLOT_OFFSETS[0])?,
        read(log_header::SLOT_OFFSETS[1])?,
    ])
}

/// Whether the newest valid header copy was written by a clean close.
fn newest_closed(copies: &[std::result::Result<(LogHeader, u32), String>; 2]) -> bool {
    copies
        .iter()
        .flatten()
        .map(|(h, _)| h)
        .max_by_key(|h| h.generation)
        .is_some_and(|h| h.closed)
}

/// Whether the newest valid header of the log at `wal` was written by a
/// clean close (see [`LogView::closed_cleanly`]); false if it cannot be
/// read.
pub(crate) fn log_closed_cleanly(wal: &Path) -> bool {
    open_read(wal)
        .and_then(|f| header_copies(&*f, wal))
        .is_ok_and(|c| newest_closed(&c))
}
