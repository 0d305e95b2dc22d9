//! The recovery pass: rebuilds the committed state from the last checkpoint
//! and the log.
//!
//! Redo-only: the page file holds exactly the state as of the checkpoint LSN
//! (nothing uncommitted is ever written to it), so recovery replays every
//! record after the checkpoint that belongs to a transaction whose commit
//! record made it to the log, and nothing else. Replaying physical
//! after-images is idempotent, so a crash during recovery (or during the
//! checkpoint that installs its work, which a writable open's checkpointer
//! thread runs after the open returned) is recovered by running it again.
//!
//! One pass, as the log streams by: a transaction's records are replayed when
//! its commit record is reached, in commit order, which is the order in which
//! the running store applied them (a commit applies its records once its
//! commit record is durable). A transaction's records usually sit just before
//! its commit record, in the same chunk of the log, and are replayed from
//! there; records that are not (logged early, or cut from their commit by a
//! chunk boundary) are copied aside until their commit record comes, and
//! dropped at the end if it never does.
//!
//! A crash during a checkpoint can leave blocks half-written. Every block the
//! checkpoint writes is listed, with the checksum it will have, in an intent
//! record made durable before the first block write. At that record the
//! replay has rebuilt each listed block as of the checkpoint; its checksum
//! must equal the intent's. A torn block therefore comes back whole (each of
//! its sectors was either the old image, which the replayed records turn into
//! the new one, or already the new one), and a block that does not match is
//! reported as damaged rather than trusted.

use super::corrupt;
use super::pending::Base;
use super::read::read_block_raw;
use super::restart::{self, WplTable};
use super::wpl;
use super::state::State;
use crate::error::{Error, FileKind, Location, Result};
use crate::fasthash::IntMap;
use crate::format::page;
use crate::io::IoFile;
use crate::wal::header::RECORDS_START;
use crate::wal::record::{BadRecord, RANGE_AFTER, intent_entries, is_page_record, record_len};
use crate::wal::scan::{self, ScanEnd, Tail};
use crate::wal::{Record, TxId, ranges};
use std::ops::ControlFlow;
use std::path::Path;

/// What the recovery pass found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// LSN the scan started from (the checkpoint LSN).
    pub from_lsn: u64,
    /// LSN just past the last valid record.
    pub end_lsn: u64,
    /// Valid records found.
    pub records: u64,
    /// Transactions with a commit record.
    pub committed: u64,
    /// Transactions without one (ignored).
    pub uncommitted: u64,
    /// Records replayed (a ranges record counts once per range).
    pub redone: u64,
    /// Committed records not replayed because later page images of all
    /// the pages they change supersede them (whole-page logging; a range of
    /// a ranges record counts as a record).
    pub superseded: u64,
    /// Records the backward scan of a writer's restart read (0: it did not
    /// run, the log holding no page records).
    pub backward_records: u64,
    /// Entries of the WPL table rebuilt: pages whose latest committed
    /// image stays in the log.
    pub logged_pages: u64,
    /// Where the first pass stopped replaying (the first run of records
    /// holding a page record) and the redo resumed after the backward scan.
    pub resumed_at: Option<u64>,
    /// Blocks found torn by an interrupted checkpoint and rebuilt.
    pub repaired: Vec<u64>,
    /// How the log ended.
    pub tail: Tail,
}

impl Default for RecoveryReport {
    fn default() -> Self {
        RecoveryReport {
            from_lsn: 0,
            end_lsn: 0,
            records: 0,
            committed: 0,
            uncommitted: 0,
            redone: 0,
            superseded: 0,
            backward_records: 0,
            logged_pages: 0,
            resumed_at: None,
            repaired: Vec::new(),
            tail: Tail::Clean,
        }
    }
}

/// Where recovery reads the log from.
pub(crate) struct LogSource<'a> {
    /// The log file; `None` when a clean close vouched that the epoch since
    /// the checkpoint is empty (nothing to read).
    pub file: Option<&'a dyn IoFile>,
    /// Its path, for errors.
    pub path: &'a Path,
    /// LSN of the record at the start of the file's record area.
    pub base_lsn: u64,
    /// Where the log ends, when a live writer said so (the end it
    /// published, `readers.rs`): records after it may be half written and
    /// are not read. `None`: where the valid records end.
    pub end: Option<u64>,
}

/// Records of transactions whose commit record has not come yet: what a
/// reader's refresh carries from one replay to the next.
pub(crate) type OpenTxs = IntMap<TxId, Vec<u8>>;

/// Rebuilds the committed state: `loaded` (the state as of LSN `from`: the
/// checkpoint's, or why it could not be loaded) with the log replayed into
/// it from `from`, a record boundary. `open` holds the records of
/// transactions set aside by an earlier replay (a reader's refresh goes on
/// from its snapshot; an open starts with none). Also returns the
/// transactions still open at the end, and collects into `touched` the
/// pages the replayed records changed.
///
/// Errors come in the order a reader of the log would find them: the log
/// cannot be read, then the log is damaged, then the checkpoint's state
/// could not be loaded, then a record could not be replayed.
pub(crate) fn replay(
    from: u64,
    loaded: Result<State>,
    open: OpenTxs,
    log: LogSource<'_>,
    file: &dyn IoFile,
    path: &Path,
    touched: Option<&mut Vec<u64>>,
) -> Result<(State, RecoveryReport, OpenTxs)> {
    let mut redo = loaded.map(|st| {
        let mut r = Redo::new(st, file, path);
        r.open = open;
        r.touched = touched;
        r
    });
    let ps = redo.as_ref().map_or(crate::format::DEFAULT_PAGE_SIZE, |r| r.st.page_size);
    let end = match log.file {
        None => ScanEnd {
            records: 0,
            end_lsn: from,
            tail: Tail::Clean,
        },
        Some(f) => {
            let limit = log
                .end
                // Saturating: the end comes from the reader table, which
                // no checksum covers (a damaged one may say `u64::MAX`).
                .map(|e| RECORDS_START.saturating_add(e.saturating_sub(log.base_lsn)));
            let bounded = crate::io::Prefix::new(f, limit);
            if let Ok(r) = &mut redo {
                r.log = Some((f, log.base_lsn, log.path));
                // A writer's restart stops replaying at the first run of
                // records holding a page record (`restart.rs`).
                r.stop_at_page_records = r.st.images_in_log;
            }
            let end = scan::scan(&bounded, log.base_lsn, from, ps, &mut |lsn, run| match &mut redo {
                Ok(r) => r.run(lsn, run),
                Err(_) => ControlFlow::Break(()),
            })
            .map_err(|e| Error::io("read log", log.path, e))?;
            let resume = redo.as_ref().ok().and_then(|r| r.stopped_at);
            if let (Ok(r), Some(resume)) = (&mut redo, resume)
                && !matches!(end.tail, Tail::Corrupt { .. })
            {
                // The backward scan from the end the first pass verified
                // to where it stopped replaying (no record before that is
                // a page record), then the rest of the redo up to that end.
                r.wpl = restart::backward(f, &log, resume, end.end_lsn, ps)?;
                r.stop_at_page_records = false;
                let to_end = crate::io::Prefix::new(f, Some(RECORDS_START + (end.end_lsn - log.base_lsn)));
                scan::scan(&to_end, log.base_lsn, resume, ps, &mut |lsn, run| r.run(lsn, run))
                    .map_err(|e| Error::io("read log", log.path, e))?;
            }
            end
        }
    };
    if let Tail::Corrupt { at, what, evidence } = end.tail {
        return Err(corrupt(
            log.path,
            FileKind::Log,
            Location::Lsn(at),
            format!(
                "{what}, but the commit record at LSN {evidence} shows the log was durable past it: \
                 refusing to discard committed transactions (`amber recover --salvage` cuts the \
                 log there and lists the transactions lost)"
            ),
        ));
    }
    let (mut st, done, open) = redo?.finish()?;
    st.next_txid = st.next_txid.max(u64::from(done.max_txid) + 1);
    let report = RecoveryReport {
        from_lsn: from,
        end_lsn: end.end_lsn,
        records: end.records,
        committed: done.committed,
        uncommitted: done.uncommitted,
        redone: done.redone,
        superseded: done.superseded,
        backward_records: done.backward_records,
        logged_pages: st.pending.values().map(|p| p.logged.len() as u64).sum(),
        resumed_at: done.resumed_at,
        repaired: done.repaired,
        tail: end.tail,
    };
    Ok((st, report, open))
}

/// What the replay counted.
struct Replayed {
    committed: u64,
    uncommitted: u64,
    redone: u64,
    superseded: u64,
    backward_records: u64,
    resumed_at: Option<u64>,
    max_txid: TxId,
    repaired: Vec<u64>,
}

/// The replay, fed runs of checked records by the scan.
struct Redo<'a> {
    st: State,
    file: &'a dyn IoFile,
    path: &'a Path,
    /// Records of transactions whose commit record has not come yet, copied
    /// out of the log's buffers: pieces of (LSN, length, records).
    open: IntMap<TxId, Vec<u8>>,
    counts: Replayed,
    /// Committed records of the current chunk waiting to be written, and
    /// the records of its last transaction, whose commit may follow.
    queue: Vec<Queued>,
    /// The first error; the replay stops there.
    failed: Option<Error>,
    /// Where to note the pages the replay changes (a reader's refresh).
    touched: Option<&'a mut Vec<u64>>,
    /// A writer's restart: the WPL table of the backward scan, which says
    /// which records later page images supersede (empty: none).
    wpl: WplTable,
    /// The log (file, base LSN, path), where the images of the WPL table's
    /// entries are read from when an interrupted checkpoint's blocks are
    /// rebuilt.
    log: Option<(&'a dyn IoFile, u64, &'a Path)>,
    /// Stop replaying at the first run that holds a page record (a writer's
    /// restart, which builds the WPL table before it replays them).
    stop_at_page_records: bool,
    /// The LSN of the run it stopped at.
    stopped_at: Option<u64>,
}

/// A record of the chunk being replayed (or one range of a ranges
/// record), queued to be written once its transaction's commit record is
/// reached.
#[derive(Debug, Clone, Copy)]
struct Queued {
    /// Offset of the record in the chunk.
    rec: usize,
    /// A range: offset of its after-image in the chunk.
    at: usize,
    /// A range: length of its after-image.
    len: usize,
    /// A range record: the address written; any other: [`NOT_RANGE`].
    addr: u64,
    /// LSN of its transaction's commit record, once reached.
    lsn: u64,
}

/// `Queued::addr` of a record that is not a range: it is decoded again when
/// written (such records are few).
const NOT_RANGE: u64 = u64::MAX;

impl<'a> Redo<'a> {
    fn new(st: State, file: &'a dyn IoFile, path: &'a Path) -> Self {
        Redo {
            st,
            file,
            path,
            open: IntMap::default(),
            counts: Replayed {
                committed: 0,
                uncommitted: 0,
                redone: 0,
                superseded: 0,
                backward_records: 0,
                resumed_at: None,
                max_txid: 0,
                repaired: Vec::new(),
            },
            queue: Vec::new(),
            failed: None,
            touched: None,
            wpl: WplTable::default(),
            log: None,
            stop_at_page_records: false,
            stopped_at: None,
        }
    }

    fn finish(self) -> Result<(State, Replayed, OpenTxs)> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut counts = self.counts;
        counts.uncommitted = self.open.len() as u64;
        counts.backward_records = self.wpl.records;
        counts.resumed_at = self.stopped_at;
        Ok((self.st, counts, self.open))
    }

    /// Notes the pages record `r` changes, for a refresh that must drop
    /// them from memory.
    fn touch(&mut self, r: &Record<'_>) {
        let Some(t) = self.touched.as_deref_mut() else {
            return;
        };
        let ps = self.st.page_size as u64;
        match *r {
            Record::Range { addr, after, .. } => t.extend(pages_of(addr, after.len(), ps)),
            Record::Ranges {
                addr, before, body, ..
            } => {
                for r in ranges::iter(addr, before, body) {
                    t.extend(pages_of(r.addr, r.after.len(), ps));
                }
            }
            Record::Page { page, .. } => t.push(page),
            Record::Alloc { page, count, .. } | Record::Free { page, count, .. } => {
                t.extend(page..page.saturating_add(u64::from(count)))
            }
            _ => {}
        }
    }

    /// Takes a run of records starting at `lsn` from the scan.
    fn run(&mut self, lsn: u64, bytes: &[u8]) -> ControlFlow<()> {
        if self.stop_at_page_records && holds_page_record(bytes, self.st.page_size) {
            self.stopped_at = Some(lsn);
            return ControlFlow::Break(());
        }
        match self.replay(lsn, bytes) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.failed = Some(e);
                ControlFlow::Break(())
            }
        }
    }

    /// Replays the committed transactions of `bytes` (records from `lsn0`),
    /// setting aside records whose commit record is not in it.
    ///
    /// Committed records are queued and written in one tight loop per chunk
    /// rather than as each commit record is reached: their writes land at
    /// random places in the pending changes, and a loop that does little
    /// else between them keeps many of those cache misses in flight at once.
    fn replay(&mut self, lsn0: u64, bytes: &[u8]) -> Result<()> {
        let ps = self.st.page_size;
        self.queue.clear();
        // The records since byte `.1` (queued from `.2` on) belong to
        // transaction `.0`, whose commit record has not come yet; everything
        // queued before them is committed.
        let mut pending: Option<(TxId, usize, usize)> = None;
        for rec in scan::records(lsn0, bytes, ps) {
            let (lsn, r) = rec.map_err(|e| self.undecodable(lsn0, e))?;
            let at = (lsn - lsn0) as usize;
            let Some(txid) = r.txid() else {
                if let Some((t, from, q)) = pending.take() {
                    self.set_aside(t, lsn0 + from as u64, &bytes[from..at], q);
                }
                self.write_queued(lsn0, bytes)?;
                if let Record::Intent { entries } = r {
                    check_intent(
                        &mut self.st,
                        entries,
                        (self.file, self.path),
                        self.log,
                        lsn,
                        &mut self.counts.repaired,
                    )?;
                }
                continue;
            };
            self.counts.max_txid = self.counts.max_txid.max(txid);
            match pending {
                Some((t, _, _)) if t == txid => {}
                Some((t, from, q)) => {
                    self.set_aside(t, lsn0 + from as u64, &bytes[from..at], q);
                    pending = Some((txid, at, q));
                }
                None => pending = Some((txid, at, self.queue.len())),
            }
            match r {
                Record::Commit { .. } => {
                    let Some((_, _, mut q)) = pending.take() else {
                        continue;
                    };
                    if let Some(aside) = self.open.remove(&txid) {
                        // Its earlier records go first: write what is queued
                        // before this run, then them.
                        let run: Vec<Queued> = self.queue.drain(q..).collect();
                        self.write_queued(lsn0, bytes)?;
                        let mut rest = aside.as_slice();
                        while let Some((l, n)) = piece_header(rest) {
                            self.apply(l, &rest[16..16 + n], lsn)?;
                            rest = &rest[16 + n..];
                        }
                        self.queue = run;
                        q = 0;
                    }
                    for e in &mut self.queue[q..] {
                        e.lsn = lsn;
                    }
                    self.counts.committed += 1;
                }
                Record::Range { addr, after, .. } => self.queue.push(Queued {
                    rec: at,
                    at: at + RANGE_AFTER,
                    len: after.len(),
                    addr,
                    lsn: 0,
                }),
                Record::Ranges {
                    addr, before, body, ..
                } => self.queue.extend(ranges::iter(addr, before, body).map(|r| Queued {
                    rec: at,
                    at: at + RANGE_AFTER + r.at,
                    len: r.after.len(),
                    addr: r.addr,
                    lsn: 0,
                })),
                _ => self.queue.push(Queued {
                    rec: at,
                    at,
                    len: 0,
                    addr: NOT_RANGE,
                    lsn: 0,
                }),
            }
        }
        if let Some((t, from, q)) = pending {
            self.set_aside(t, lsn0 + from as u64, &bytes[from..], q);
        }
        self.write_queued(lsn0, bytes)
    }

    /// Replays the queued records (all committed) of `bytes`, a run of
    /// records from `lsn0`, and empties the queue.
    fn write_queued(&mut self, lsn0: u64, bytes: &[u8]) -> Result<()> {
        let ps = self.st.page_size;
        for i in 0..self.queue.len() {
            let Queued {
                rec,
                at,
                len,
                addr,
                lsn,
            } = self.queue[i];
            if addr != NOT_RANGE {
                let rec_lsn = lsn0 + rec as u64;
                if !self.write_range(addr, &bytes[at..at + len], rec_lsn, lsn)? {
                    self.counts.superseded += 1;
                    continue;
                }
            } else {
                let rec = scan::records(lsn0 + at as u64, &bytes[at..], ps).next();
                let Some(Ok((rec_lsn, r))) = rec else {
                    return Err(self.undecodable(lsn0 + at as u64, BadRecord::Truncated));
                };
                if self.superseded(&r, rec_lsn, lsn) {
                    self.counts.superseded += 1;
                    continue;
                }
                self.touch(&r);
                self.st.apply(&r, rec_lsn, lsn, true).map_err(|what| {
                    corrupt(self.path, FileKind::Log, Location::Lsn(rec_lsn), what)
                })?;
            }
            self.counts.redone += 1;
        }
        self.queue.clear();
        Ok(())
    }

    /// Copies records of transaction `txid` at `lsn` out of the scan's buffer
    /// until its commit record comes, dropping them from the queue from `q`.
    fn set_aside(&mut self, txid: TxId, lsn: u64, bytes: &[u8], q: usize) {
        self.queue.truncate(q);
        let v = self.open.entry(txid).or_default();
        v.extend_from_slice(&lsn.to_le_bytes());
        v.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        v.extend_from_slice(bytes);
    }

    /// Writes the range `data` at `addr`, of the record at `rec_lsn` of a
    /// transaction that committed at `commit_lsn` (what `State::apply`
    /// does for a range), unless later page images supersede it: then
    /// returns false.
    fn write_range(&mut self, addr: u64, data: &[u8], rec_lsn: u64, commit_lsn: u64) -> Result<bool> {
        let ps = self.st.page_size as u64;
        let pages = pages_of(addr, data.len(), ps);
        if !self.wpl.latest.is_empty()
            && self
                .wpl
                .supersedes(*pages.start(), *pages.end(), (commit_lsn, rec_lsn))
        {
            return Ok(false);
        }
        if let Some(t) = self.touched.as_deref_mut() {
            t.extend(pages);
        }
        self.st
            .write_range(addr, data, commit_lsn)
            .map_err(|what| corrupt(self.path, FileKind::Log, Location::Lsn(rec_lsn), what))?;
        Ok(true)
    }

    /// Replays the records in `bytes` (starting at `lsn`) of a transaction
    /// that committed at `commit_lsn`.
    fn apply(&mut self, lsn: u64, bytes: &[u8], commit_lsn: u64) -> Result<()> {
        for rec in scan::records(lsn, bytes, self.st.page_size) {
            let (lsn, r) = rec.map_err(|e| self.undecodable(lsn, e))?;
            if let Record::Ranges {
                addr, before, body, ..
            } = r
            {
                for g in ranges::iter(addr, before, body) {
                    match self.write_range(g.addr, g.after, lsn, commit_lsn)? {
                        true => self.counts.redone += 1,
                        false => self.counts.superseded += 1,
                    }
                }
                continue;
            }
            if self.superseded(&r, lsn, commit_lsn) {
                self.counts.superseded += 1;
                continue;
            }
            self.touch(&r);
            self.st
                .apply(&r, lsn, commit_lsn, true)
                .map_err(|what| corrupt(self.path, FileKind::Log, Location::Lsn(lsn), what))?;
            self.counts.redone += 1;
        }
        Ok(())
    }

    /// Whether later page images supersede record `r`, logged at `lsn` by a
    /// transaction that committed at `commit_lsn` (`restart.rs`): a page
    /// record that is not its page's latest, or a range record wholly on
    /// pages whose latest image took effect after it.
    fn superseded(&self, r: &Record<'_>, lsn: u64, commit_lsn: u64) -> bool {
        if self.wpl.latest.is_empty() {
            return false;
        }
        let ps = self.st.page_size as u64;
        match *r {
            Record::Page { page, .. } => !self.wpl.is_latest(page, (commit_lsn, lsn)),
            Record::Range { addr, after, .. } => {
                let pages = pages_of(addr, after.len(), ps);
                self.wpl.supersedes(*pages.start(), *pages.end(), (commit_lsn, lsn))
            }
            _ => false,
        }
    }

    /// Checked records that do not decode: a bug, reported as such.
    fn undecodable(&self, lsn: u64, e: BadRecord) -> Error {
        corrupt(
            self.path,
            FileKind::Log,
            Location::Lsn(lsn),
            format!("a record the scan accepted does not decode ({e})"),
        )
    }
}

/// The pages `len` bytes at `addr` lie on (`page_size`-byte pages). A
/// range of a kind-1 record may claim to end past 2^64 (a checksum does
/// not make its fields sane): it is taken to end there.
fn pages_of(addr: u64, len: usize, page_size: u64) -> std::ops::RangeInclusive<u64> {
    addr / page_size..=addr.saturating_add(len.max(1) as u64 - 1) / page_size
}

/// Whether the run of checked records `bytes` holds a page record.
fn holds_page_record(bytes: &[u8], page_size: usize) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        if is_page_record(&bytes[at..]) {
            return true;
        }
        at += record_len(&bytes[at..], page_size).unwrap_or(bytes.len());
    }
    false
}

/// The LSN and length at the start of a piece set aside, if any.
fn piece_header(b: &[u8]) -> Option<(u64, usize)> {
    let lsn = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let n = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?) as usize;
    (b.len() >= 16 + n).then_some((lsn, n))
}

/// At an interrupted checkpoint's intent record: rebuild each listed block
/// from its page-file image (`file`), its logged pages (read from `log`)
/// and the replayed changes, and check it against the checksum the
/// checkpoint was about to write.
fn check_intent(
    st: &mut State,
    entries: &[u8],
    (file, path): (&dyn IoFile, &Path),
    log: Option<(&dyn IoFile, u64, &Path)>,
    lsn: u64,
    repaired: &mut Vec<u64>,
) -> Result<()> {
    let ps = st.page_size;
    for (head, want) in intent_entries(entries) {
        // Blocks without pending changes are metadata blobs of the
        // interrupted checkpoint, which the old superblock does not use.
        let Some(patch) = st.pending.get_mut(&head) else {
            continue;
        };
        if let Base::File = patch.base {
            let mut img = vec![0u8; patch.run_len as usize * ps].into_boxed_slice();
            read_block_raw(file, path, head, ps, &mut img)?;
            let torn = page::verify(&img, head, patch.run_len).is_err();
            for l in &patch.logged {
                let (log, base_lsn, log_path) = log.ok_or_else(|| {
                    Error::Internal(format!("block {head} has logged pages but no log to read"))
                })?;
                wpl::lay_from_file(log, log_path, base_lsn, head, l, &mut img, ps)?;
            }
            patch.materialize(img);
            if torn {
                repaired.push(head);
            }
        }
        let Base::Image(img) = &patch.base else {
            continue;
        };
        let got = page::checksum_with_lsn(img, patch.lsn);
        if got != want {
            return Err(corrupt(
                path,
                FileKind::PageFile,
                Location::Page(head),
                format!(
                    "rebuilt from the log it does not match what the checkpoint at LSN {lsn} wrote \
                     (checksum {got:#010x}, expected {want:#010x}): the page is damaged"
                ),
            ));
        }
    }
    Ok(())
}
