//! A read-only store beside a writer: its snapshot and how it moves
//! forward.
//!
//! A reader opened at LSN `E` holds the committed state of `E` (the
//! checkpoint's state and the log replayed up to `E`). Refreshing reads
//! the log from `E` to the end the writer published (`readers.rs`) and
//! replays it into that state, carrying over the records of transactions
//! that had not committed by `E`; the pages those records change are
//! returned, so that the object layer drops them from memory. The writer
//! cannot have checkpointed past `E` meanwhile unless nothing was committed
//! after `E` (a checkpoint waits for every reader's snapshot to reach the
//! end it installs), so the records after `E` are all still in the log —
//! but once a checkpoint has run, the log was recycled and the page file
//! holds a newer checkpoint: then the refresh loads that checkpoint, as an
//! open does (under the table's lock, so that no checkpoint runs
//! meanwhile), and everything in memory is to be dropped.

use super::readers::{Locked, Table};
use super::recovery::{self, LogSource, OpenTxs};
use super::state::{State, load_state};
use super::{Core, open};
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::io::{IoFile, OpenMode};
use std::sync::Mutex;

/// A reader's place in the table and what its next refresh goes on from.
#[derive(Debug)]
pub(crate) struct Reader {
    slot: u32,
    inner: Mutex<Snapshot>,
}

#[derive(Debug)]
struct Snapshot {
    /// The LSN of the reader's state.
    lsn: u64,
    /// Transactions with records before `lsn` and no commit record yet.
    open: OpenTxs,
    /// The log, opened at the first refresh and kept: a refresh of a
    /// served connection follows every commit, and opening the file each
    /// time costs as much as reading the few records it brings. The writer
    /// recycles the log in place (`LogWriter::recycle`), so the handle stays
    /// the log's; a reload opens it again all the same.
    log: Option<Box<dyn IoFile>>,
}

impl Reader {
    pub(crate) fn new(slot: u32, lsn: u64, open: OpenTxs) -> Reader {
        Reader {
            slot,
            inner: Mutex::new(Snapshot {
                lsn,
                open,
                log: None,
            }),
        }
    }
}

/// What a refresh changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// Nothing was committed since the snapshot.
    Unchanged,
    /// The snapshot moved to `lsn`; these pages changed (sorted, no
    /// duplicates).
    Pages {
        /// The new snapshot's LSN.
        lsn: u64,
        /// The pages changed.
        pages: Vec<PageNo>,
    },
    /// The snapshot moved to `lsn` past a checkpoint: any page may have
    /// changed.
    Everything {
        /// The new snapshot's LSN.
        lsn: u64,
    },
}

impl Core {
    /// The reader table, for a read-only store that has a slot in it.
    pub(crate) fn reader_table(&self) -> Option<&Table> {
        self.reader.as_ref().and(self.readers.as_ref())
    }

    /// The LSN of a read-only store's snapshot (for a writable one, the
    /// end of its log).
    pub fn snapshot_lsn(&self) -> u64 {
        match &self.reader {
            Some(r) => r.inner.lock().unwrap_or_else(|e| e.into_inner()).lsn,
            None => self.stats().end_lsn,
        }
    }

    /// Moves a read-only store's snapshot to the latest commit (see the
    /// module docs). A writable store, or a reader without a reader table,
    /// has nothing to refresh: `Unchanged`.
    pub fn refresh(&self) -> Result<Refreshed> {
        let (Some(r), Some(t)) = (&self.reader, &self.readers) else {
            return Ok(Refreshed::Unchanged);
        };
        let mut snap = r.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut end = t.published_end()?;
        // Without a writer the log is read to its last valid record; the
        // table's lock keeps a writer from starting (and appending) meanwhile.
        let no_writer = match end {
            Some(_) => None,
            None => {
                let g = t.lock()?;
                end = t.published_end()?;
                Some(g)
            }
        };
        if end.is_some_and(|e| e <= snap.lsn) {
            return Ok(Refreshed::Unchanged);
        }
        let (sb, _) = open::read_superblock(&*self.file, &self.path)?;
        let logf = match snap.log.take() {
            Some(f) => f,
            None => self.open_log()?,
        };
        let (lh, _, _) = open::read_log_header(&*logf, &self.wal_path, &sb)?;
        // The state is replayed in place, the lock held (nothing reads a
        // state halfway); it is never held while frame memory is touched.
        let mut st = self.lock();
        if sb.generation != st.sb.generation || lh.base_lsn > snap.lsn {
            drop(st);
            return self.reload(t, t.lock_unless(no_writer)?, r.slot, &mut snap);
        }
        let mut pages = Vec::new();
        let source = LogSource {
            file: Some(&*logf),
            path: &self.wal_path,
            base_lsn: lh.base_lsn,
            end,
        };
        let placeholder = State::placeholder(st.sb, self.page_size);
        let taken = std::mem::replace(&mut *st, placeholder);
        let open = std::mem::take(&mut snap.open);
        let replayed = recovery::replay(
            snap.lsn,
            Ok(taken),
            open,
            source,
            &*self.file,
            &self.path,
            Some(&mut pages),
        );
        let (new, report, open) = match replayed {
            Ok(x) => x,
            Err(e) => {
                // The state went into the replay and is lost: reloading
                // from the checkpoint gets it back.
                drop(st);
                self.reload(t, t.lock_unless(no_writer)?, r.slot, &mut snap)?;
                return Err(e);
            }
        };
        *st = new;
        drop(st);
        snap.open = open;
        snap.log = Some(logf);
        if report.end_lsn == snap.lsn {
            return Ok(Refreshed::Unchanged);
        }
        snap.lsn = report.end_lsn;
        t.set_snapshot(r.slot, snap.lsn)?;
        pages.sort_unstable();
        pages.dedup();
        Ok(Refreshed::Pages {
            lsn: snap.lsn,
            pages,
        })
    }

    fn open_log(&self) -> Result<Box<dyn IoFile>> {
        (self.vfs)
            .open(&self.wal_path, OpenMode::ReadOnly)
            .map_err(|e| Error::io("open log", &self.wal_path, e))
    }

    /// Loads the newest checkpoint and the log up to the published end, as
    /// an open does, holding the table's lock `g`.
    fn reload(&self, t: &Table, g: Locked<'_>, slot: u32, snap: &mut Snapshot) -> Result<Refreshed> {
        let (sb, sb_slot) = open::read_superblock(&*self.file, &self.path)?;
        let logf = self.open_log()?;
        let (lh, _, _) = open::read_log_header(&*logf, &self.wal_path, &sb)?;
        let source = LogSource {
            file: Some(&*logf),
            path: &self.wal_path,
            base_lsn: lh.base_lsn,
            end: t.published_end()?,
        };
        let loaded = load_state(&*self.file, &self.path, sb, sb_slot);
        let (st, report, open) = recovery::replay(
            sb.checkpoint_lsn,
            loaded,
            OpenTxs::default(),
            source,
            &*self.file,
            &self.path,
            None,
        )?;
        *self.lock() = st;
        snap.lsn = report.end_lsn;
        snap.open = open;
        snap.log = Some(logf);
        t.set_snapshot(slot, snap.lsn)?;
        drop(g);
        Ok(Refreshed::Everything { lsn: snap.lsn })
    }

    /// A writer: the log is durable up to `lsn`, for readers to see. A
    /// failure to say so loses nothing (readers see the commit at the next
    /// one said) and is only logged.
    pub(crate) fn publish_end(&self, lsn: u64) {
        if self.log.is_some()
            && let Some(t) = &self.readers
            && let Err(e) = t.publish(lsn)
        {
            log::warn!("{}: publishing the log's end: {e}", self.path.display());
        }
    }

    /// Gives the reader's slot back (a read-only store closing).
    pub(crate) fn leave_reader_table(&self) {
        if let Some(r) = &self.reader
            && let Some(t) = &self.readers
            && let Err(e) = t.release(r.slot)
        {
            log::warn!("{}: leaving the reader table: {e}", self.path.display());
        }
    }
}
