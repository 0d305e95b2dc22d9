//! Appending to the log, with group commit.
//!
//! Records are encoded into an in-memory buffer at their final LSN (the
//! checksum depends on it). A committer then waits until the log is durable
//! up to its commit record: the first waiter becomes the leader, writes
//! everything buffered so far in one `pwrite`, calls `fdatasync` once, and
//! wakes the others — so commits that arrive together share one sync.
//!
//! A waiter parks its thread, and the leader wakes exactly the waiters its
//! sync covered, and one more to lead the next sync if any wait beyond it.
//! (A condition variable notified by the leader would wake them all at once
//! onto the log's mutex, each then sleeping on it again: three context
//! switches per waiter instead of two, which a server's group commit of
//! sixteen committers paid on every sync.)
//!
//! After a failed write or sync nothing is known about what reached the disk
//! (a failed `fdatasync` may have dropped dirty pages), so the writer refuses
//! everything from then on; reopening the database recovers from what is
//! durable.

use super::header::{LogHeader, RECORDS_START, SLOT_OFFSETS, VERSION};
use super::record::{Record, TxId};
use crate::error::{Error, FileKind, Location, Result, corrupt};
use crate::io::IoFile;
use std::path::PathBuf;
use crate::vm::{AmberLock, Held, held};
use std::sync::{Mutex, MutexGuard};
use std::thread::Thread;

/// The log's append side.
#[derive(Debug)]
pub struct LogWriter {
    file: Box<dyn IoFile>,
    path: PathBuf,
    page_size: u32,
    db_id: [u8; 16],
    state: Mutex<WState>,
}

#[derive(Debug)]
struct WState {
    header_gen: u64,
    base_lsn: u64,
    /// Next LSN to assign.
    end_lsn: u64,
    /// Encoded records `[written_lsn, end_lsn)` not yet handed to a leader.
    buf: Vec<u8>,
    /// LSN where `buf` begins.
    buf_lsn: u64,
    /// End of what has been written (not necessarily synced).
    written_lsn: u64,
    /// End of what is durable.
    durable_lsn: u64,
    /// A leader is writing.
    leader: bool,
    /// The threads waiting for a leader, with the LSN each waits for.
    waiting: Vec<(u64, Thread)>,
    failed: Option<String>,
    /// Syncs performed (for the group-commit statistics).
    syncs: u64,
    /// The header on disk says "closed cleanly", or is of an older format
    /// version: it must be rewritten before the first record is appended.
    stale_header: bool,
    prev_base_lsn: u64,
    /// Commit records appended by this writer so far: the next one's
    /// sequence number (the order in which commits must apply).
    commits: u64,
    /// Lengths of the last epochs this writer ended (`recycle`), newest
    /// last: the log's usual size, which a checkpoint cuts the file back to
    /// when it grew far past it.
    epochs: Vec<u64>,
}

/// Epochs remembered for the log's usual size.
const EPOCHS_KEPT: usize = 4;

/// Where [`LogWriter::append_commit`] put a transaction's commit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The LSN just past the commit record: what to
    /// [`sync_to`](LogWriter::sync_to).
    pub end: u64,
    /// The commit record's LSN.
    pub commit_lsn: u64,
    /// How many commit records this writer appended before it: commits
    /// numbered 0, 1, 2, … in the order of their commit records, which is
    /// the order recovery replays them in, so the order the running store
    /// must apply them in too.
    pub seq: u64,
}

/// What a leader does with the buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    WriteOnly,
    WriteAndSync,
}

impl LogWriter {
    /// Writes a fresh log header (both copies) at `base_lsn` and syncs.
    pub fn create(
        file: Box<dyn IoFile>,
        path: PathBuf,
        page_size: u32,
        db_id: [u8; 16],
        base_lsn: u64,
    ) -> Result<LogWriter> {
        let h = LogHeader {
            page_size,
            generation: 1,
            base_lsn,
            db_id,
            prev_base_lsn: 0,
            closed: false,
        };
        for off in SLOT_OFFSETS {
            file.write_all_at(&h.encode(), off)
                .map_err(|e| Error::io("write log header", &path, e))?;
        }
        file.set_len(RECORDS_START)
            .map_err(|e| Error::io("truncate log", &path, e))?;
        file.sync_data()
            .map_err(|e| Error::io("sync log", &path, e))?;
        Ok(Self::resume(file, path, h, VERSION, base_lsn))
    }

    /// Continues a log whose header is `h`, of format `version`, and whose
    /// valid records end at `end_lsn` (the caller has truncated anything
    /// after it).
    pub fn resume(file: Box<dyn IoFile>, path: PathBuf, h: LogHeader, version: u32, end_lsn: u64) -> LogWriter {
        LogWriter {
            file,
            path,
            page_size: h.page_size,
            db_id: h.db_id,
            state: Mutex::new(WState {
                header_gen: h.generation,
                base_lsn: h.base_lsn,
                end_lsn,
                buf: Vec::new(),
                buf_lsn: end_lsn,
                written_lsn: end_lsn,
                durable_lsn: end_lsn,
                leader: false,
                waiting: Vec::new(),
                failed: None,
                syncs: 0,
                stale_header: h.closed || version != VERSION,
                prev_base_lsn: h.prev_base_lsn,
                commits: 0,
                epochs: Vec::new(),
            }),
        }
    }

    /// The log file's length in bytes.
    pub fn file_len(&self) -> Result<u64> {
        self.file
            .size()
            .map_err(|e| Error::io("size log", &self.path, e))
    }

    fn lock(&self) -> Held<MutexGuard<'_, WState>> {
        held(AmberLock::LogWriter, self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads `buf.len()` bytes of the log from `lsn`: a durable record of
    /// the current epoch (a page image that the whole-page-logging table
    /// points at). Bytes outside them are refused: an entry older than the
    /// epoch points at recycled space.
    pub fn read_at(&self, lsn: u64, buf: &mut [u8]) -> Result<()> {
        let (base, durable) = {
            let s = self.lock();
            (s.base_lsn, s.durable_lsn)
        };
        let end = lsn.saturating_add(buf.len() as u64);
        if lsn < base || end > durable {
            return Err(Error::Internal(format!(
                "log bytes [{lsn}, {end}) are not durable records of the current epoch \
                 [{base}, {durable})"
            )));
        }
        self.file
            .read_exact_at(buf, RECORDS_START + (lsn - base))
            .map_err(|e| Error::io("read log", &self.path, e))
    }

    /// The next LSN to be assigned.
    pub fn end_lsn(&self) -> u64 {
        self.lock().end_lsn
    }

    /// The end of the durable log.
    pub fn durable_lsn(&self) -> u64 {
        self.lock().durable_lsn
    }

    /// The LSN of the first record slot.
    pub fn base_lsn(&self) -> u64 {
        self.lock().base_lsn
    }

    /// `fdatasync` calls made so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// The failure that stopped the writer, if any.
    pub fn failure(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    fn check(&self, s: &WState) -> Result<()> {
        match &s.failed {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Writes both header copies, one after the other, each synced: while
    /// one is being written the other is intact, and afterwards a damaged
    /// copy always has an identical twin.
    fn write_header(&self, s: &mut WState, h: &LogHeader) -> Result<()> {
        let first = (h.generation % 2) as usize;
        let res = [first, 1 - first].iter().try_for_each(|&i| {
            self.file
                .write_all_at(&h.encode(), SLOT_OFFSETS[i])
                .and_then(|()| self.file.sync_data())
                .map_err(|e| Error::io("write log header", &self.path, e))
        });
        match &res {
            Ok(()) => s.header_gen = h.generation,
            Err(e) => s.failed = Some(e.to_string()),
        }
        res
    }

    /// The generation of the next log header written.
    fn next_generation(&self, s: &WState) -> Result<u64> {
        crate::format::slot::next_generation(s.header_gen)
            .map_err(|what| corrupt(&self.path, FileKind::Log, Location::File, what))
    }

    /// Clears the "closed cleanly" mark before the first append of a
    /// session: from now on bytes after the end may be this epoch's. A
    /// header of an older format version is rewritten as this one's (its
    /// records are this version's too, `header.rs`), so that no build
    /// that reads only older versions takes the records appended now.
    fn reopen_epoch(&self, s: &mut WState) -> Result<()> {
        if !s.stale_header {
            return Ok(());
        }
        let h = LogHeader {
            page_size: self.page_size,
            generation: self.next_generation(s)?,
            base_lsn: s.base_lsn,
            db_id: self.db_id,
            prev_base_lsn: s.prev_base_lsn,
            closed: false,
        };
        self.write_header(s, &h)?;
        s.stale_header = false;
        Ok(())
    }

    /// Encodes `records` at the end of the log; returns the LSN of the first.
    pub fn append(&self, records: &[Record<'_>]) -> Result<u64> {
        let mut s = self.lock();
        self.check(&s)?;
        self.reopen_epoch(&mut s)?;
        let first = s.end_lsn;
        for r in records {
            let lsn = s.end_lsn;
            r.encode(lsn, &mut s.buf);
            s.end_lsn += r.encoded_len() as u64;
        }
        Ok(first)
    }

    /// Encodes `records` followed by `txid`'s commit record; says where the
    /// commit record went and its sequence number.
    pub fn append_commit(&self, records: &[Record<'_>], txid: TxId) -> Result<Appended> {
        let mut s = self.lock();
        self.check(&s)?;
        self.reopen_epoch(&mut s)?;
        for r in records {
            let lsn = s.end_lsn;
            r.encode(lsn, &mut s.buf);
            s.end_lsn += r.encoded_len() as u64;
        }
        let lsn = s.end_lsn;
        let synced_delta = u32::try_from(lsn - s.durable_lsn).unwrap_or(u32::MAX);
        let c = Record::Commit { txid, synced_delta };
        c.encode(lsn, &mut s.buf);
        s.end_lsn += c.encoded_len() as u64;
        let seq = s.commits;
        s.commits += 1;
        Ok(Appended {
            end: s.end_lsn,
            commit_lsn: lsn,
            seq,
        })
    }

    /// Writes everything appended so far to the file without syncing (records
    /// logged early, before their transaction commits).
    pub fn write_out(&self) -> Result<()> {
        let target = self.end_lsn();
        self.flush_to(target, Flush::WriteOnly)
    }

    /// Returns once the log is durable up to `lsn`, sharing syncs with other
    /// committers (group commit).
    pub fn sync_to(&self, lsn: u64) -> Result<()> {
        self.flush_to(lsn, Flush::WriteAndSync)
    }

    fn flush_to(&self, target: u64, mode: Flush) -> Result<()> {
        let mut s = self.lock();
        loop {
            self.check(&s)?;
            let done = match mode {
                Flush::WriteOnly => s.written_lsn >= target,
                Flush::WriteAndSync => s.durable_lsn >= target,
            };
            if done {
                return Ok(());
            }
            if s.leader {
                let me = std::thread::current();
                let id = me.id();
                s.waiting.push((target, me));
                drop(s);
                // An unpark that came first makes this return at once.
                std::thread::park();
                s = self.lock();
                s.waiting.retain(|(_, t)| t.id() != id);
                continue;
            }
            // Become the leader for everything buffered so far.
            s.leader = true;
            let data = std::mem::take(&mut s.buf);
            let from = s.buf_lsn;
            let upto = s.end_lsn;
            s.buf_lsn = upto;
            let off = RECORDS_START + (from - s.base_lsn);
            drop(s);
            let mut res = Ok(());
            if !data.is_empty() {
                res = self
                    .file
                    .write_all_at(&data, off)
                    .map_err(|e| Error::io("append to log", &self.path, e));
            }
            if res.is_ok() && mode == Flush::WriteAndSync {
                res = self
                    .file
                    .sync_data()
                    .map_err(|e| Error::io("sync log", &self.path, e));
            }
            s = self.lock();
            s.leader = false;
            match &res {
                Ok(()) => {
                    s.written_lsn = upto;
                    if mode == Flush::WriteAndSync {
                        s.durable_lsn = upto;
                        s.syncs += 1;
                    }
                }
                Err(e) => s.failed = Some(e.to_string()),
            }
            // The waiters this flush covered (all of them after a failure,
            // which they report), and the first of the rest, which leads
            // the next one.
            let covered = |t: u64| t <= upto || res.is_err();
            let mut wake: Vec<Thread> = (s.waiting.iter())
                .filter(|(t, _)| covered(*t))
                .map(|(_, th)| th.clone())
                .collect();
            s.waiting.retain(|(t, _)| !covered(*t));
            wake.extend(s.waiting.first().map(|(_, th)| th.clone()));
            drop(s);
            wake.iter().for_each(Thread::unpark);
            res?;
            s = self.lock();
        }
    }

    /// Starts a new epoch: the next record goes to the start of the file with
    /// LSN `end_lsn`. Requires everything appended to be durable and
    /// installed (the caller's checkpoint has made the page file hold it).
    /// `closing` marks the epoch empty-by-a-clean-close (see the header).
    ///
    /// Then the file is cut back to its usual size when it grew far past it
    /// (`keep_bytes`: see [`StoreOptions::log_keep_bytes`](crate::store::StoreOptions::log_keep_bytes)).
    /// Safe at any moment after the new header is durable: every byte past
    /// the header belongs to ended epochs, whose records are installed and
    /// never verify at the new epoch's LSNs; a crash leaves the file at
    /// either length. Nothing is appended meanwhile (this lock, and the
    /// caller's gate).
    pub fn recycle(&self, closing: bool, keep_bytes: u64) -> Result<()> {
        let mut s = self.lock();
        self.check(&s)?;
        if s.durable_lsn != s.end_lsn || s.leader {
            return Err(Error::invalid(
                "log recycle with records not yet durable (a transaction is logging)",
            ));
        }
        let h = LogHeader {
            page_size: self.page_size,
            generation: self.next_generation(&s)?,
            base_lsn: s.end_lsn,
            db_id: self.db_id,
            prev_base_lsn: if s.end_lsn == s.base_lsn {
                s.prev_base_lsn
            } else {
                s.base_lsn
            },
            closed: closing,
        };
        self.write_header(&mut s, &h)?;
        if h.base_lsn != s.base_lsn {
            s.prev_base_lsn = s.base_lsn;
        }
        let ended = s.end_lsn - s.base_lsn;
        s.base_lsn = h.base_lsn;
        s.buf_lsn = h.base_lsn;
        s.stale_header = closing;
        self.shrink(&mut s, ended, keep_bytes)
    }

    /// The rule of [`recycle`](Self::recycle): an epoch of `ended` bytes
    /// just ended; the usual size is the larger of `keep_bytes` and the
    /// longest of the epochs before it; a file more than twice that (past
    /// its header) is cut to it and synced.
    fn shrink(&self, s: &mut WState, ended: u64, keep_bytes: u64) -> Result<()> {
        let usual = s.epochs.iter().copied().fold(keep_bytes, u64::max);
        if s.epochs.len() == EPOCHS_KEPT {
            s.epochs.remove(0);
        }
        s.epochs.push(ended);
        let len = self.file_len()?;
        if len.saturating_sub(RECORDS_START) / 2 <= usual {
            return Ok(());
        }
        let res = self
            .file
            .set_len(RECORDS_START + usual)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| Error::io("shrink log", &self.path, e));
        if let Err(e) = &res {
            s.failed = Some(e.to_string());
        }
        res
    }
}
