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
    /// The base LSN of `log`'s header when it was last read: where its
    /// records lie, until a checkpoint recycles it.
    base_lsn: Option<u64>,
}

impl Reader {
    pub(crate) fn new(slot: u32, lsn: u64, open: OpenTxs) -> Reader {
        Reader {
            slot,
            inner: Mutex::new(Snapshot {
                lsn,
                open,
                log: None,
                base_lsn: None,
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
    ///
    /// When the writer published the superblock generation this state was
    /// loaded at, the log is read on from the handle and the LSN mapping of
    /// the last refresh, without reading the superblock and the log header
    /// again: a served connection refreshes at every commit, and those
    /// reads were most of its cost. A checkpoint publishes its generation
    /// before any later commit publishes an end, and the log's records are
    /// checksummed with their LSNs, so a log recycled meanwhile yields no
    /// record at the old positions: a replay that falls short of the
    /// published end goes on by the full path, which finds the checkpoint.
    pub fn refresh(&self) -> Result<Refreshed> {
        let (Some(r), Some(t)) = (&self.reader, &self.readers) else {
            return Ok(Refreshed::Unchanged);
        };
        let mut snap = r.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut published = t.published()?;
        // Without a writer the log is read to its last valid record; the
        // table's lock keeps a writer from starting (and appending) meanwhile.
        let no_writer = match published {
            Some(_) => None,
            None => {
                let g = t.lock()?;
                published = t.published()?;
                Some(g)
            }
        };
        let end = published.map(|(end, _)| end);
        if end.is_some_and(|e| e <= snap.lsn) {
            return Ok(Refreshed::Unchanged);
        }
        let from = snap.lsn;
        let mut pages = Vec::new();
        if let Some((end, Some(generation))) = published
            && let Some(base) = snap.base_lsn
            && generation == self.lock().sb.generation
            && let Some(logf) = snap.log.take()
        {
            let replayed = self.replay_into(&mut snap, &*logf, base, Some(end), &mut pages);
            snap.log = Some(logf);
            match replayed {
                Ok(()) if snap.lsn >= end => return self.moved(t, r.slot, &mut snap, from, pages),
                Ok(()) => {}
                // The state went into the replay and is lost: reloading from
                // the checkpoint gets it back (and meets any damage again).
                Err(_) => return self.reload(t, t.lock_unless(no_writer)?, r.slot, &mut snap),
            }
        }
        let (sb, _) = open::read_superblock(&*self.file, &self.path)?;
        let logf = match snap.log.take() {
            Some(f) => f,
            None => self.open_log()?,
        };
        let (lh, _) = open::read_log_header(&*logf, &self.wal_path, &sb)?;
        if sb.generation != self.lock().sb.generation || lh.base_lsn > snap.lsn {
            return self.reload(t, t.lock_unless(no_writer)?, r.slot, &mut snap);
        }
        let replayed = self.replay_into(&mut snap, &*logf, lh.base_lsn, end, &mut pages);
        snap.log = Some(logf);
        snap.base_lsn = Some(lh.base_lsn);
        if let Err(e) = replayed {
            // As above; the error is the log's, and is reported.
            self.reload(t, t.lock_unless(no_writer)?, r.slot, &mut snap)?;
            return Err(e);
        }
        self.moved(t, r.slot, &mut snap, from, pages)
    }

    /// Replays the log in `logf` (records at LSN `base` from byte 8192) from
    /// the snapshot's LSN to `end` (to its last valid record when `None`)
    /// into the state, in place, the state's lock held (nothing reads a
    /// state halfway; it is never held while frame memory is touched).
    /// The pages the records change are added to `pages`. On an error the
    /// state is lost (a placeholder stands in): the caller reloads.
    fn replay_into(
        &self,
        snap: &mut Snapshot,
        logf: &dyn IoFile,
        base: u64,
        end: Option<u64>,
        pages: &mut Vec<PageNo>,
    ) -> Result<()> {
        let mut st = self.lock();
        let source = LogSource {
            file: Some(logf),
            path: &self.wal_path,
            base_lsn: base,
            end,
        };
        let placeholder = State::placeholder(st.sb, self.page_size);
        let taken = std::mem::replace(&mut *st, placeholder);
        let open = std::mem::take(&mut snap.open);
        let (new, report, open) = recovery::replay(
            snap.lsn,
            Ok(taken),
            open,
            source,
            &*self.file,
            &self.path,
            Some(pages),
        )?;
        *st = new;
        snap.open = open;
        snap.lsn = report.end_lsn;
        Ok(())
    }

    /// The snapshot moved from `from` to `snap.lsn` (or did not): says so in
    /// the table and to the caller.
    fn moved(
        &self,
        t: &Table,
        slot: u32,
        snap: &mut Snapshot,
        from: u64,
        mut pages: Vec<PageNo>,
    ) -> Result<Refreshed> {
        if snap.lsn == from {
            return Ok(Refreshed::Unchanged);
        }
        t.set_snapshot(slot, snap.lsn)?;
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
        let (lh, _) = open::read_log_header(&*logf, &self.wal_path, &sb)?;
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
        snap.base_lsn = Some(lh.base_lsn);
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

    /// A writer: a checkpoint switched the page file to `generation`, for
    /// readers to see. A failure to say so loses nothing (their refreshes
    /// then find the checkpoint by the full path) and is only logged.
    pub(crate) fn publish_generation(&self, generation: u64) {
        if self.log.is_some()
            && let Some(t) = &self.readers
            && let Err(e) = t.publish_generation(generation)
        {
            log::warn!("{}: publishing the superblock generation: {e}", self.path.display());
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
