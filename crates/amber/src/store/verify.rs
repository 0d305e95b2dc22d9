//! `verify`: every superblock copy, log header copy, log record and allocated
//! block checked, every problem named. Runs on a read-only open, so it never
//! changes the files.

use super::open::read_superblock_slots;
use super::{Store, StoreOptions, corrupt, wal_path};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::objects;
use crate::format::page::{BlockKind, PageHeader};
use crate::io::{OpenMode, Vfs};
use crate::wal::header::{LogHeader, SLOT_OFFSETS as LOG_SLOTS, SLOT_SIZE};
use crate::wal::scan::Tail;
use std::path::Path;
use std::sync::Arc;

/// What `verify` found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Damage found; empty when the database is sound.
    pub problems: Vec<Error>,
    /// Facts worth knowing that are not damage (a torn log tail).
    pub notes: Vec<String>,
    /// Blocks checked.
    pub blocks: u64,
    /// Log records checked.
    pub records: u64,
}

impl VerifyReport {
    /// Whether nothing is damaged.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the database at `path` without changing it. `Err` only when the
/// check could not run at all (no such file, not a database, I/O failure).
pub fn verify(vfs: Arc<dyn Vfs>, path: &Path) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    // Beside a running writer, the copies read raw are read while no
    // checkpoint rewrites them (`readers.rs`); the lock is let go before
    // the read-only open below, which takes it itself.
    let table = super::readers::Table::open(&*vfs, path)?;
    let held = table.as_ref().map(|t| t.lock()).transpose()?;
    let file = vfs
        .open(path, OpenMode::ReadOnly)
        .map_err(|e| Error::io("open database", path, e))?;
    let slots = read_superblock_slots(&*file, path)?;
    let any_valid = slots.iter().any(|s| s.is_ok());
    for (i, s) in slots.iter().enumerate() {
        if let Err(e) = s
            && any_valid
        {
            report.problems.push(corrupt(
                    path,
                    FileKind::PageFile,
                    Location::Superblock(i as u8),
                    format!("{e} (the other copy is intact; a crash during a checkpoint can also leave this, and the next writable open rewrites it)"),
                ));
        }
    }
    drop(file);
    let wal = wal_path(path);
    if let Ok(lf) = vfs.open(&wal, OpenMode::ReadOnly) {
        for (i, off) in LOG_SLOTS.iter().enumerate() {
            let mut b = [0u8; SLOT_SIZE];
            crate::io::read_at_most(&*lf, &mut b, *off)
                .map_err(|e| Error::io("read log header", &wal, e))?;
            // A version-1 copy is not damage: the open below says whether
            // this build reads the log (docs/design.md §1.2).
            if let Err(e) = LogHeader::decode_versioned(&b) {
                report.problems.push(corrupt(
                    &wal,
                    FileKind::Log,
                    Location::LogHeader(i as u8),
                    e,
                ));
            }
        }
    }
    drop(held);
    let opts = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    let store = match Store::open(vfs.clone(), path, opts) {
        Ok(s) => s,
        Err(e @ (Error::Corrupt { .. } | Error::NotADatabase { .. })) => {
            report.problems.push(e);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let rec = store.recovery_report();
    report.records = rec.records;
    if let Tail::Torn { at, what, bytes } = &rec.tail {
        // (After a clean close the log is not read at all, so bytes after
        // the end here are a batch cut short by a crash, or older records.)
        report.notes.push(format!(
            "log: torn tail at LSN {at} ({what}; {bytes} bytes after the last valid record): \
             a batch cut short by a crash, or older records left when the log was recycled; \
             recovery discards them"
        ));
    }
    if rec.uncommitted > 0 {
        report.notes.push(format!(
            "log: {} transaction(s) without a commit record; recovery ignores them",
            rec.uncommitted
        ));
    }
    for (head, _) in store.blocks() {
        report.blocks += 1;
        match store.read_block(head) {
            Err(e) => report.problems.push(e),
            Ok(block) => {
                if let Some(h) = PageHeader::read(&block)
                    && h.kind == BlockKind::Data as u8
                {
                    for e in objects::walk(&block, h.used as usize) {
                        if let Err(e) = e {
                            report.problems.push(corrupt(
                                path,
                                FileKind::PageFile,
                                Location::Page(head),
                                e.to_string(),
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(report)
}
