//! Salvage: bringing back a database that recovery refuses, saying exactly
//! what is given up.
//!
//! Two situations have a way out that recovery must not take on its own,
//! because it loses committed work a person may still want:
//!
//! - **A damaged log record with durable commits after it.** Recovery
//!   refuses (`Tail::Corrupt`): dropping the damaged record and everything
//!   after it would silently discard committed transactions. Salvage does
//!   exactly that, on request: the log is cut at the damaged record, so the
//!   database opens at the last commit before it. The bytes cut off are
//!   first copied, durably, to a file beside the log, and the commits among
//!   them (LSN and transaction id, found by their checksummed commit
//!   records) are listed.
//! - **A missing log.** The page file holds everything up to its last
//!   checkpoint. After a clean close that is every commit (closing
//!   checkpoints), so a new, empty log starting at the checkpoint's LSN
//!   loses nothing; after a crash, commits that were only in the missing
//!   log are gone, and the page file alone cannot tell which case it is, so
//!   the new log is made only on request. A log whose header copies are
//!   both unreadable is treated as missing (a new-log run cut short leaves
//!   one); a log with a valid header is never replaced, nor one whose
//!   header is sound but of a later format version than this build reads.

use super::open::{lock_database, newest_log_header, read_log_header, read_superblock};
use super::wal_path;
use crate::error::{Error, Result};
use crate::format::superblock::Superblock;
use crate::io::{IoFile, OpenMode, Vfs};
use crate::wal::header::RECORDS_START;
use crate::wal::record::{K_COMMIT, Record, decode};
use crate::wal::scan::{self, Tail};
use crate::wal::writer::LogWriter;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// What cutting a damaged log gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutLog {
    /// LSN of the damaged record, where the log now ends.
    pub damaged_lsn: u64,
    /// What was wrong with it.
    pub what: String,
    /// Bytes removed from the log (the damaged record and all after it).
    pub discarded_bytes: u64,
    /// The commits among them, as (LSN of the commit record, transaction
    /// id): the transactions lost.
    pub lost_commits: Vec<(u64, u64)>,
    /// Where the removed bytes were saved.
    pub saved_to: PathBuf,
}

/// The page file, opened writable and locked, and its superblock.
fn locked(vfs: &dyn Vfs, path: &Path) -> Result<(Box<dyn IoFile>, Superblock)> {
    let file = vfs
        .open(path, OpenMode::ReadWrite)
        .map_err(|e| Error::io("open database", path, e))?;
    lock_database(&*file, path)?;
    let (sb, _) = read_superblock(&*file, path)?;
    Ok((file, sb))
}

/// Cuts the log of the database at `path` at its first damaged record when
/// durable commits follow it (what recovery refuses); `None` when the log
/// has no such damage (recovery then opens it as it is).
pub fn cut_damaged_log(vfs: &dyn Vfs, path: &Path) -> Result<Option<CutLog>> {
    let (_file, sb) = locked(vfs, path)?;
    let wal = wal_path(path);
    let log = vfs
        .open(&wal, OpenMode::ReadWrite)
        .map_err(|e| Error::io("open log", &wal, e))?;
    let (lh, _, _) = read_log_header(&*log, &wal, &sb)?;
    let ps = sb.page_size as usize;
    let end = scan::scan(&*log, lh.base_lsn, sb.checkpoint_lsn, ps, &mut |_, _| {
        ControlFlow::Continue(())
    })
    .map_err(|e| Error::io("read log", &wal, e))?;
    let Tail::Corrupt { at, what, .. } = end.tail else {
        return Ok(None);
    };
    let from = RECORDS_START + (at - lh.base_lsn);
    let size = log.size().map_err(|e| Error::io("read log", &wal, e))?;
    let mut cut = vec![0u8; (size - from) as usize];
    log.read_exact_at(&mut cut, from)
        .map_err(|e| Error::io("read log", &wal, e))?;
    let saved_to = PathBuf::from(format!("{}.salvaged-{at}", wal.display()));
    // A salvage cut short leaves the copy and an uncut log: the next one
    // writes the same copy again.
    let save = || {
        let out = match vfs.open(&saved_to, OpenMode::CreateNew) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let out = vfs.open(&saved_to, OpenMode::ReadWrite)?;
                out.set_len(0)?;
                out
            }
            other => other?,
        };
        out.write_all_at(&cut, 0)?;
        out.sync_data()
    };
    save().map_err(|e| Error::io("save the log's damaged tail", &saved_to, e))?;
    // Only once the tail is safe elsewhere is it cut.
    log.set_len(from)
        .and_then(|()| log.sync_data())
        .map_err(|e| Error::io("cut the log", &wal, e))?;
    Ok(Some(CutLog {
        damaged_lsn: at,
        what: what.to_string(),
        discarded_bytes: cut.len() as u64,
        lost_commits: commits_in(&cut, at, ps),
        saved_to,
    }))
}

/// The valid commit records in `buf`, whose first byte is at `lsn`: (LSN,
/// transaction id). A record's checksum covers its LSN, so a match is a
/// record written there, not a coincidence of bytes.
fn commits_in(buf: &[u8], lsn: u64, page_size: usize) -> Vec<(u64, u64)> {
    (0..buf.len())
        .filter(|&o| buf.get(o + 4) == Some(&K_COMMIT))
        .filter_map(|o| match decode(&buf[o..], lsn + o as u64, page_size) {
            Ok((Record::Commit { txid, .. }, _)) => Some((lsn + o as u64, u64::from(txid))),
            _ => None,
        })
        .collect()
}

/// Makes a new, empty log for the database at `path`, whose log is
/// missing or has no valid header copy (a new-log run cut short leaves one
/// such), starting at the LSN of its last checkpoint; returns that LSN.
/// Refuses if a log with a valid header exists: that log may hold commits.
pub fn new_log(vfs: &dyn Vfs, path: &Path) -> Result<u64> {
    let (_file, sb) = locked(vfs, path)?;
    let wal = wal_path(path);
    let log = if vfs.exists(&wal) {
        let log = vfs
            .open(&wal, OpenMode::ReadWrite)
            .map_err(|e| Error::io("open log", &wal, e))?;
        let headers = newest_log_header(&*log, &wal)?;
        if headers.best.is_some() {
            return Err(Error::invalid(format!(
                "{}: the log exists and has a valid header; a new log is made only for a \
                 database whose log is missing or unreadable",
                wal.display()
            )));
        }
        if let Some(v) = headers.newer {
            return Err(Error::invalid(format!(
                "{}: the log's header is sound but of format version {v}, which a newer build \
                 wrote; its records may hold commits: recover it with that build",
                wal.display()
            )));
        }
        log
    } else {
        vfs.open(&wal, OpenMode::CreateNew)
            .map_err(|e| Error::io("create log", &wal, e))?
    };
    LogWriter::create(log, wal, sb.page_size, sb.db_id, sb.checkpoint_lsn)?;
    Ok(sb.checkpoint_lsn)
}
