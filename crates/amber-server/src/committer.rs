//! A database's committer: one thread that commits what the connections
//! validated, every commit queued at once with one sync of the log
//! (`StoreTx::commit_all`).
//!
//! Why a thread of its own: a commit waits for the log's sync. Waited for
//! on a runtime worker (`block_in_place`), each commit handed the worker's
//! place to another thread, parked in the log writer until a leader's
//! sync, parked again for its turn to apply, and took a worker back: under
//! 16 clients the server spent more of its time switching threads than
//! committing (docs/design.md §11.5). So while a commit is in flight, a
//! session sends its validated commit here and awaits the answer as any
//! other future; this thread wakes once per batch.
//!
//! Why not always: handing a lone commit to another thread and back costs
//! two wake-ups, a fifth of a commit's time on an idle server. A commit
//! that finds no other transaction open, and no commit in flight, is made
//! on the session's own worker, as before ([`Committer::commit`]). Where
//! other transactions are open, more commits are likely to follow soon:
//! it is queued, so that they share the batch. (Making in place every
//! commit that found none in flight halved the batches under 16 clients:
//! 11,700 commits a second against 14,000 with every commit queued.)

use crate::serve_write::Writer;
use amber::Error;
use amber::internals::format::page::BlockKind;
use amber::internals::store::{CommitInfo, Store, StoreTx};
use amber::internals::wire::WireRecord;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// A validated commit for the committer.
pub(crate) struct Job {
    /// Its database's writer: kept alive until the job is answered.
    pub(crate) writer: Arc<Writer>,
    /// Its entry in the validator, given its LSN (or dropped) here, before
    /// the answer: the commit's entry is right whatever becomes of the
    /// session that awaits it.
    pub(crate) seq: u64,
    /// The blocks reserved for the transaction: head, pages, kind.
    pub(crate) reserved: Vec<(u64, u32, BlockKind)>,
    pub(crate) records: Vec<WireRecord>,
    pub(crate) frees: Vec<u64>,
    pub(crate) roots: Vec<(String, u64, u32)>,
    pub(crate) done: oneshot::Sender<Done>,
}

/// A job's outcome.
pub(crate) struct Done {
    pub(crate) result: Result<CommitInfo, Error>,
    /// The reservations the store transaction did not adopt (it failed
    /// first): still the connection's.
    pub(crate) reserved: Vec<(u64, u32, BlockKind)>,
}

/// The sending side, kept by the database's [`Writer`]; dropping it (with
/// the writer) ends the thread.
#[derive(Debug)]
pub(crate) struct Committer {
    jobs: Mutex<Sender<Job>>,
    /// Commits queued or being made, here or inline.
    in_flight: Arc<AtomicUsize>,
}

impl Committer {
    /// Starts the thread.
    pub(crate) fn start() -> std::io::Result<Committer> {
        let (tx, rx) = channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let counted = in_flight.clone();
        std::thread::Builder::new()
            .name("amber-committer".into())
            .spawn(move || run(&rx, &counted))?;
        Ok(Committer {
            jobs: Mutex::new(tx),
            in_flight,
        })
    }

    /// Commits `job` now, on this runtime worker (`block_in_place`), if
    /// `in_place` (the runtime has several workers and no other
    /// transaction is open) and no other commit is in flight; else queues
    /// it for the thread. Either way its answer comes through `job.done`.
    /// The job back if it was to be queued and the thread is gone.
    pub(crate) fn commit(&self, job: Job, in_place: bool) -> Result<(), Job> {
        let claim = || {
            (self.in_flight)
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        };
        if in_place && claim() {
            tokio::task::block_in_place(|| commit_batch(vec![job]));
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.send(job).map_err(|unsent| {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            unsent.0
        })
    }
}

fn run(rx: &Receiver<Job>, in_flight: &AtomicUsize) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        jobs.extend(rx.try_iter());
        let n = jobs.len();
        commit_batch(jobs);
        in_flight.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Commits `jobs` (all of one writer, as one committer serves one) with
/// one sync, and answers each.
fn commit_batch(jobs: Vec<Job>) {
    let Some(writer) = jobs.first().map(|j| j.writer.clone()) else {
        return;
    };
    let mut staged = Vec::with_capacity(jobs.len());
    let mut txs = Vec::with_capacity(jobs.len());
    for mut job in jobs {
        match stage(&writer.store, &mut job) {
            Ok(stx) => {
                txs.push(stx);
                staged.push(job);
            }
            Err(e) => answer(job, Err(e)),
        }
    }
    let results = StoreTx::commit_all(txs);
    for (job, result) in staged.into_iter().zip(results) {
        answer(job, result);
    }
}

fn answer(mut job: Job, result: Result<CommitInfo, Error>) {
    let validator = &job.writer.validator;
    match &result {
        Ok(info) if info.commit_lsn > 0 => validator.logged(job.seq, info.commit_lsn),
        _ => validator.failed(job.seq),
    }
    let reserved = std::mem::take(&mut job.reserved);
    // The session may be gone (its connection ended): nothing to tell.
    let _ = job.done.send(Done { result, reserved });
}

/// A job's store transaction: its reservations made allocations, then its
/// records, frees and roots. On an error nothing is committed; the
/// reservations it adopted are given back by the store transaction, the
/// rest stay in the job.
fn stage<'s>(store: &'s Store, job: &mut Job) -> Result<StoreTx<'s>, Error> {
    let mut stx = store.begin()?;
    while let Some(&(head, pages, kind)) = job.reserved.last() {
        stx.alloc_reserved(head, pages, kind)?;
        job.reserved.pop();
    }
    for r in &job.records {
        match r {
            WireRecord::Range { addr, data } => stx.write(*addr, data)?,
            WireRecord::Page { page, image } => stx.write_page(*page, image)?,
            WireRecord::Cached { page, image } => stx.cache_page(*page, image)?,
        }
    }
    for &head in &job.frees {
        stx.free(head)?;
    }
    for (name, addr, type_id) in &job.roots {
        stx.set_root(name, *addr, *type_id)?;
    }
    Ok(stx)
}
