//! Writes through the server: a connection's transaction, validated
//! against the commits made since its snapshot and committed through the
//! database's one writer store (docs/design.md §11).
//!
//! The server opens each database for writing once, at start ([`Writer`]);
//! every connection still reads at its own snapshot through its read-only
//! store. A transaction is optimistic: `Begin` moves the snapshot to the
//! latest commit, `Alloc` reserves blocks in the writer's free space, and
//! `Commit` brings everything else — the log generator's records, the
//! frees, the roots, the pages the transaction read. The commit is
//! validated (`validator.rs`) against the pages it read and writes (those
//! written must be among the pages the connection was sent, its *shipped
//! set*): a commit outside its snapshot that wrote one of them makes it a
//! `Conflict`. Validated, it is committed by the database's committer
//! (`committer.rs`), outside the validator's lock, with every other commit
//! queued meanwhile under one sync of the log (its group commit), while
//! the session awaits the answer without holding a runtime worker.

use crate::committer::{Committer, Done, Job};
use crate::serve_read::{Served, error, refuse};
use crate::validator::{Conflict, Pages, ROOT_PAGE, Validator};
use amber::Scheme;
use amber::internals::format::page::BlockKind;
use amber::internals::schema::desc::StoredType;
use amber::internals::store::Store;
use amber::internals::wire::{Change, ErrorCode, Response, WireRecord};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// A database the server writes: its writer store, and what its
/// connections' commits are validated against.
#[derive(Debug)]
pub struct Writer {
    /// The store, opened for writing (the database's exclusive lock).
    pub store: Store,
    /// The recent commits.
    pub validator: Validator,
    /// Held while a type is looked up and defined, so that two clients
    /// defining the same type get one id.
    types: Mutex<()>,
    /// A checkpoint for the memory budget is running (`budget::relieve`).
    pub checkpointing: AtomicBool,
    /// The thread that commits what the connections validated.
    committer: Committer,
    /// The database's recovery scheme, told to its clients (§11.7).
    pub scheme: Option<Scheme>,
}

impl Writer {
    /// Wraps an opened writer store and starts its committer thread.
    pub fn new(store: Store, scheme: Option<Scheme>) -> std::io::Result<Writer> {
        Ok(Writer {
            store,
            validator: Validator::default(),
            types: Mutex::new(()),
            checkpointing: AtomicBool::new(false),
            committer: Committer::start()?,
            scheme,
        })
    }
}

/// A validated commit the committer has: what its answer needs.
pub(crate) struct Pending {
    tx: OpenTx,
    seq: u64,
    /// The pages it writes.
    own: Pages,
}

/// A connection's open transaction. Dropping it aborts it (an abort, a
/// failed commit, a new `Begin`, the connection's end): its reservations
/// join the connection's [`Kept`] blocks.
#[derive(Debug)]
pub struct OpenTx {
    conn: u64,
    writer: Arc<Writer>,
    /// The snapshot it began at.
    snapshot: u64,
    /// The blocks reserved for it: head, pages, kind.
    reserved: Vec<(u64, u32, BlockKind)>,
    /// Where its reservations go if it does not commit.
    kept: Arc<Kept>,
}

impl Drop for OpenTx {
    fn drop(&mut self) {
        let mut kept = self.kept.heads.lock().unwrap_or_else(|e| e.into_inner());
        kept.extend(self.reserved.iter().map(|&(head, _, _)| head));
        drop(kept);
        self.writer.validator.end(self.conn);
    }
}

/// The blocks reserved for a connection's transactions that did not
/// commit, kept reserved until the connection ends. Its client keeps them
/// as dead space, frames shaped as those blocks, for as long as it is
/// connected (a `PRef` into one is refused, `db/dead.rs`): were they given
/// to another client's commit, this client would take that client's
/// committed blocks for dead ones, or meet them in another shape than its
/// frames have. A local writer keeps its dead space for its session the
/// same way.
#[derive(Debug)]
pub struct Kept {
    writer: Arc<Writer>,
    heads: Mutex<Vec<u64>>,
}

impl Kept {
    pub(crate) fn new(writer: Arc<Writer>) -> Kept {
        Kept {
            writer,
            heads: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        let heads = self.heads.get_mut().unwrap_or_else(|e| e.into_inner());
        for &head in heads.iter() {
            self.writer.store.unreserve(head);
        }
    }
}

/// Numbers the connections, for the validator.
pub fn next_conn() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn no_transaction(what: &str) -> Response {
    refuse(
        ErrorCode::NoTransaction,
        format!("{what} with no transaction open: send Begin first"),
    )
}

impl Served {
    /// The writer, or the refusal of a server that serves read-only.
    fn writer(&self) -> Result<Arc<Writer>, Response> {
        self.writer.clone().ok_or_else(|| {
            refuse(
                ErrorCode::Invalid,
                "this server serves the database read-only (--read-only): it takes no writes",
            )
        })
    }

    /// `Begin`: aborts an open transaction, moves the snapshot to the
    /// latest commit and opens a transaction there.
    pub(crate) fn begin(&mut self) -> Response {
        let writer = match self.writer() {
            Ok(w) => w,
            Err(r) => return r,
        };
        self.tx = None;
        // Registered at the old snapshot first: no commit the refresh may
        // miss is pruned from the validator meanwhile.
        writer.validator.begin(self.conn, self.store.snapshot_lsn());
        let (page_count, change) = match self.moved() {
            Ok(m) => m,
            Err(e) => {
                writer.validator.end(self.conn);
                return error(&e);
            }
        };
        let snapshot = self.store.snapshot_lsn();
        writer.validator.begin(self.conn, snapshot);
        let kept = (self.kept)
            .get_or_insert_with(|| Arc::new(Kept::new(writer.clone())))
            .clone();
        self.tx = Some(OpenTx {
            conn: self.conn,
            writer,
            snapshot,
            reserved: Vec::new(),
            kept,
        });
        Response::Begun { page_count, change }
    }

    /// `Alloc`: a block reserved for the open transaction.
    pub(crate) fn alloc(&mut self, pages: u32, kind: u8) -> Response {
        let Some(tx) = &mut self.tx else {
            return no_transaction("Alloc");
        };
        let Some(k) = BlockKind::from_u8(kind) else {
            return refuse(
                ErrorCode::Invalid,
                format!("allocation of unknown block kind {kind}"),
            );
        };
        match tx.writer.store.reserve(pages, kind) {
            Ok(head) => {
                tx.reserved.push((head, pages, k));
                Response::Allocated { head }
            }
            Err(e) => error(&e),
        }
    }

    /// `Abort`: the open transaction dropped.
    pub(crate) fn abort(&mut self) -> Response {
        match self.tx.take() {
            Some(_) => Response::Aborted,
            None => no_transaction("Abort"),
        }
    }

    /// `DefineType`: the id of an identical stored descriptor, or of one
    /// stored now by a commit of its own. A descriptor that does not
    /// decode is refused.
    pub(crate) fn define_type(&mut self, desc: &[u8]) -> Response {
        let writer = match self.writer() {
            Ok(w) => w,
            Err(r) => return r,
        };
        // Every client that opens the database decodes the catalog: what
        // does not decode would break them all.
        if let Err(why) = StoredType::decode(desc) {
            return refuse(ErrorCode::Invalid, format!("not a type descriptor: {why}"));
        }
        let _one_at_a_time = writer.types.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((id, _)) = (writer.store.types().into_iter()).find(|(_, d)| d == desc) {
            return Response::TypeDefined { id };
        }
        let defined = writer.store.begin().and_then(|mut stx| {
            let id = stx.define_type(desc)?;
            stx.commit()?;
            Ok(id)
        });
        match defined {
            Ok(id) => Response::TypeDefined { id },
            Err(e) => error(&e),
        }
    }

    /// `Commit`, its first half on the session: the writes checked and the
    /// transaction validated, then committed by the database's committer
    /// (on this worker when `in_place` and no other transaction is open).
    /// Either the answer already (a refusal, a conflict) or what
    /// [`finish_commit`](Self::finish_commit) needs and where the
    /// committer's outcome will come.
    pub(crate) fn start_commit(
        &mut self,
        records: Vec<WireRecord>,
        frees: Vec<u64>,
        roots: Vec<(String, u64, u32)>,
        reads: &[u64],
        in_place: bool,
    ) -> Result<(Pending, oneshot::Receiver<Done>), Response> {
        let Some(mut tx) = self.tx.take() else {
            return Err(no_transaction("Commit"));
        };
        let writer = tx.writer.clone();
        let own = self.written(&tx, &records, &frees, &roots)?;
        let read: Pages = reads.iter().copied().collect();
        let seq = match (writer.validator).validate(tx.snapshot, &read, own.clone()) {
            Ok(seq) => seq,
            Err(c) => {
                drop(tx);
                return Err(self.conflict(c));
            }
        };
        let (done, answer) = oneshot::channel();
        let job = Job {
            writer: writer.clone(),
            seq,
            reserved: std::mem::take(&mut tx.reserved),
            records,
            frees,
            roots,
            done,
        };
        let alone = writer.validator.open_transactions() <= 1;
        if let Err(unsent) = writer.committer.commit(job, in_place && alone) {
            writer.validator.failed(seq);
            tx.reserved = unsent.reserved;
            return Err(refuse(
                ErrorCode::Internal,
                "the database's committer has stopped",
            ));
        }
        // The transaction stays open (registered with the validator at its
        // snapshot) until the answer is made: the entries of the commits
        // since its snapshot are kept for `own_kept` meanwhile.
        Ok((Pending { tx, seq, own }, answer))
    }

    /// `Commit`, its second half: the committer's outcome made the answer.
    /// `None`: the committer dropped the job without an answer (it has
    /// stopped), and nothing was committed.
    pub(crate) fn finish_commit(&mut self, p: Pending, done: Option<Done>) -> Response {
        let Pending { mut tx, seq, own } = p;
        let writer = tx.writer.clone();
        let Some(done) = done else {
            writer.validator.failed(seq);
            return refuse(ErrorCode::Internal, "the database's committer has stopped");
        };
        tx.reserved = done.reserved;
        // The committer has recorded the outcome in the validator.
        let lsn = match done.result {
            Ok(info) => info.commit_lsn,
            Err(e) => return error(&e),
        };
        let answer = match self.moved() {
            Ok((page_count, change)) => Response::Committed {
                lsn,
                page_count,
                change: self.own_kept(
                    change,
                    &own,
                    &writer.validator.written_since(seq, tx.snapshot),
                ),
            },
            Err(e) => error(&e),
        };
        drop(tx);
        answer
    }

    /// `change` without the pages this commit wrote that no other commit
    /// since the snapshot wrote: the client holds them as they are now
    /// committed, and need not fetch them again (they go back into the
    /// shipped set). Every other commit since the snapshot has its entry in
    /// the validator (`others`), kept while this transaction is open.
    fn own_kept(&mut self, change: Change, own: &Pages, others: &Pages) -> Change {
        let Change::Pages {
            lsn,
            pages,
            catalog,
        } = change
        else {
            return change;
        };
        let (kept, pages): (Vec<u64>, Vec<u64>) = pages
            .into_iter()
            .partition(|p| own.contains(p) && !others.contains(p));
        self.shipped.extend(kept);
        Change::Pages {
            lsn,
            pages,
            catalog,
        }
    }

    /// The pages a commit writes: those its records touch (each in the
    /// shipped set or in a block reserved for it: a client cannot write
    /// what it has not read), the blocks it allocates and frees, and the
    /// root directory if it sets a root.
    fn written(
        &self,
        tx: &OpenTx,
        records: &[WireRecord],
        frees: &[u64],
        roots: &[(String, u64, u32)],
    ) -> Result<Pages, Response> {
        let ps = self.store.page_size() as u64;
        let mut written: Pages = (tx.reserved.iter())
            .flat_map(|&(head, pages, _)| head..head + u64::from(pages))
            .collect();
        let invalid = |m: String| Err(refuse(ErrorCode::Invalid, m));
        let mut touched = HashSet::new();
        let mut ranged = HashSet::new();
        let mut cached = HashSet::new();
        for r in records {
            let (first, last) = match r {
                WireRecord::Range { addr, data } => {
                    let end = addr.checked_add(data.len().max(1) as u64 - 1);
                    match end {
                        Some(end) => (addr / ps, end / ps),
                        None => {
                            return invalid(format!("a write at {addr} runs past every address"));
                        }
                    }
                }
                WireRecord::Page { page, .. } => (*page, *page),
                WireRecord::Cached { page, image } => {
                    if image.len() != ps as usize || !cached.insert(*page) {
                        return invalid(format!(
                            "the cached image of page {page} is not one page of {ps} bytes, or \
                             is shipped twice"
                        ));
                    }
                    continue;
                }
            };
            if let WireRecord::Range { .. } = r {
                ranged.extend(first..=last);
            }
            touched.extend(first..=last);
        }
        // An ESM commit's dirty pages stand in for the range records on
        // them, which recovery replays: each must be a page those records
        // change (so it is one the connection was sent or reserved).
        if let Some(p) = cached.iter().find(|p| !ranged.contains(p)) {
            return invalid(format!(
                "the commit ships page {p} to cache, but no range record of it changes that page"
            ));
        }
        let store = &tx.writer.store;
        let metadata = |p: u64| store.block_of(p).is_some_and(|(h, _)| store.is_metadata(h));
        for &p in &touched {
            if !self.shipped.contains(&p) && !written.contains(&p) {
                return invalid(format!(
                    "the transaction writes page {p}, which this connection was not sent at \
                     its snapshot and did not allocate: a client writes only what it has read"
                ));
            }
            if metadata(p) {
                return invalid(format!("page {p} is the store's own metadata"));
            }
        }
        written.extend(touched);
        let mut freed = HashSet::new();
        for &head in frees {
            if !freed.insert(head) {
                return invalid(format!("page {head} freed twice"));
            }
            let own = tx.reserved.iter().any(|&(h, _, _)| h == head);
            match store.block_of(head) {
                Some((h, _)) if h == head && store.is_metadata(h) => {
                    return invalid(format!("page {head} is the store's own metadata"));
                }
                // Another transaction's reservation: its free would fail
                // only when applied, after the commit is logged.
                Some((h, _)) if h == head && !own && store.is_reserved(h) => {
                    return invalid(format!(
                        "free of page {head}, whose block no commit has allocated"
                    ));
                }
                Some((h, n)) if h == head => {
                    if let Some(p) = (h..h + u64::from(n)).find(|p| cached.contains(p)) {
                        return invalid(format!(
                            "the commit ships page {p} to cache and frees its block"
                        ));
                    }
                    written.extend(h..h + u64::from(n))
                }
                _ => return invalid(format!("free of page {head}, which starts no block")),
            }
        }
        if !roots.is_empty() {
            written.insert(ROOT_PAGE);
        }
        Ok(written)
    }

    /// The answer to a commit that lost: the snapshot moved to the latest
    /// commit, and what the client must drop.
    fn conflict(&mut self, c: Conflict) -> Response {
        let what = match c.page {
            ROOT_PAGE => "the root directory".to_string(),
            p => format!("page {p}"),
        };
        let by = match c.lsn {
            Some(lsn) => format!("the commit at log position {lsn}"),
            None => "a commit still being logged".to_string(),
        };
        let message = format!(
            "{what}, which this transaction may have read, was changed by {by}, after its \
             snapshot: nothing of it was committed; retry it"
        );
        match self.moved() {
            Ok((page_count, change)) => Response::Conflict {
                page_count,
                change,
                message,
            },
            Err(e) => error(&e),
        }
    }
}
