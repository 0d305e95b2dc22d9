//! The answers to a connection's requests, from its own read-only store.
//!
//! Each connection opens the database read-only (`StoreOptions { read_only:
//! true }`), as `Db::open_read_only` does: the store keeps the connection's
//! snapshot, takes a slot in the reader table so that a writer's
//! checkpoints wait for it, and moves only on `Refresh`. A store per
//! connection, not one per database shared by all, because the snapshot is
//! the store's: two clients that refresh at different times see different
//! commits.
//!
//! The same `Served` answers the write requests when the server writes
//! the database (`serve_write.rs`); for them it records the pages it
//! sends the connection, its *shipped set*: a commit writes only those.
//!
//! Store calls block (`pread`, and a refresh reads the log): the session
//! runs [`Served::answer`] on tokio's blocking pool. Every answer is
//! bounded before anything is read: a range is cut at the snapshot's last
//! page (the store walks a range page by page), and a request whose images
//! would exceed the connection's share of memory is refused `TooLarge`.
//!
//! A fetch cluster already read at the connection's snapshot is answered
//! from the database's buffer pool (`image_cache.rs`) without a read; one
//! read is offered to the pool once it has been sent.

use crate::image_cache::{ClusterKey, Framed, ImageCache};
use crate::serve_write::{Kept, OpenTx, Writer, next_conn};
use crate::validator::{Pages, ROOT_PAGE};
use amber::internals::io::Vfs;
use amber::internals::store::backup::Pinned;
use amber::internals::store::{Refreshed, Store};
use amber::internals::wire::{Change, ErrorCode, Request, Response, VERSION, WireBlock};
use amber::{Error, StoreOptions};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One connection's view of a database.
#[derive(Debug)]
pub struct Served {
    pub(crate) store: Store,
    /// The file system `store` is on (a backup pins its files there too).
    pub(crate) vfs: Arc<dyn Vfs>,
    /// The database's writer, unless it is served read-only.
    pub(crate) writer: Option<Arc<Writer>>,
    /// The connection's number, for the validator.
    pub(crate) conn: u64,
    /// Every page sent to the connection and not since dropped by a
    /// `Change` it was told ([`ROOT_PAGE`] for the root directory): a
    /// superset of what its client's transaction writes.
    pub(crate) shipped: Pages,
    /// Its open transaction.
    pub(crate) tx: Option<OpenTx>,
    /// The blocks of its transactions that did not commit, reserved until
    /// it ends (dropped after `tx`, which adds to them).
    pub(crate) kept: Option<Arc<Kept>>,
    /// The state an online backup is copying (`admin.rs`).
    pub(crate) backup: Option<Pinned>,
    /// The most bytes of images one answer may carry.
    limit: usize,
    /// The fetch-cluster buffer, kept from one `ReadCluster` to the next.
    buf: ClusterBuf,
    /// Whether the last `ReadCluster` took no longer than a read from the
    /// page cache does ([`CACHED_READ`]).
    cached_reads: bool,
    /// The database's buffer pool.
    cache: Arc<ImageCache>,
    /// The cluster the answer being sent read, and the snapshot it read
    /// it at, when every block of it was read whole: for the pool.
    to_keep: Option<(ClusterKey, u64)>,
}

/// A connection's fetch-cluster buffer, handed on to a later connection
/// when this one ends: a fresh buffer's pages are faulted in by the first
/// answers' reads, which made a new connection's first fetches much
/// slower than the next ones (docs/design.md §10.8).
#[derive(Debug)]
struct ClusterBuf(Vec<u8>);

/// The buffers of connections that ended, for the next ones.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

impl ClusterBuf {
    /// How many ended connections' buffers are kept, and the largest kept:
    /// at most 8 MiB.
    const KEPT: usize = 8;
    const LARGEST: usize = 1 << 20;

    fn new() -> ClusterBuf {
        let mut buf =
            (SPARE.lock().unwrap_or_else(PoisonError::into_inner).pop()).unwrap_or_default();
        // Emptied, so that no byte another connection read (perhaps of
        // another database) can reach this one's answers.
        buf.clear();
        ClusterBuf(buf)
    }
}

impl Drop for ClusterBuf {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        if (1..=Self::LARGEST).contains(&buf.capacity()) {
            let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
            if spare.len() < Self::KEPT {
                spare.push(buf);
            }
        }
    }
}

/// The longest a fetch cluster's read may take to count as one from the
/// page cache: a few times what a window's read from the page cache takes,
/// less than one from an SSD (docs/design.md §10.8).
const CACHED_READ: Duration = Duration::from_micros(300);

/// The wire's code for a store error.
pub fn code_of(e: &Error) -> ErrorCode {
    match e {
        Error::Io { .. } => ErrorCode::Io,
        Error::Corrupt { .. } | Error::NotADatabase { .. } => ErrorCode::Corrupt,
        Error::Locked { .. } => ErrorCode::Busy,
        Error::Invalid(_) | Error::Dangling { .. } | Error::SchemaMismatch { .. } => {
            ErrorCode::Invalid
        }
        _ => ErrorCode::Internal,
    }
}

/// An error answer for a store error.
pub(crate) fn error(e: &Error) -> Response {
    refuse(code_of(e), e.to_string())
}

/// A refusal of the request: its code and why.
pub(crate) fn refuse(code: ErrorCode, message: impl Into<String>) -> Response {
    Response::Error {
        code,
        message: message.into(),
    }
}

impl Served {
    /// Opens `path` on `vfs` read-only at its last commit. `limit` bounds
    /// the image bytes of one answer; `writer` is the database's writer,
    /// when the server writes it; `cache` its buffer pool.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        path: &Path,
        limit: usize,
        writer: Option<Arc<Writer>>,
        cache: Arc<ImageCache>,
    ) -> Result<Served, Error> {
        let store = Store::open(vfs.clone(), path, read_only())?;
        Ok(Served {
            store,
            vfs,
            writer,
            conn: next_conn(),
            shipped: Pages::new(),
            tx: None,
            kept: None,
            backup: None,
            limit,
            buf: ClusterBuf::new(),
            cached_reads: false,
            cache,
            to_keep: None,
        })
    }

    /// The answer to an accepted `Hello`.
    pub fn welcome(&self) -> Response {
        Response::Welcome {
            version: VERSION,
            page_size: self.store.page_size() as u32,
            first_data_page: self.store.first_data_page(),
            page_count: self.store.page_count(),
            snapshot_lsn: self.store.snapshot_lsn(),
            home: self.store.home().addr(),
            scheme: (self.writer.as_ref())
                .and_then(|w| w.scheme)
                .map_or(0, |s| s.code()),
        }
    }

    /// The answer to a request after the handshake (`Hello` and `Bye` are
    /// the session's).
    pub fn answer(&mut self, req: &Request) -> Response {
        match *req {
            Request::Blocks { from, pages } => {
                let pages = self.clamp(from, pages);
                let blocks = self.store.blocks_starting_in(from, pages);
                let bytes = blocks.len().saturating_mul(12);
                if bytes > self.limit {
                    return self.too_large("the block list", bytes);
                }
                Response::Blocks(blocks)
            }
            Request::ReadBlock { head } => match self.store.block_of(head) {
                Some((h, n)) if h == head => {
                    let bytes = n as usize * self.store.page_size();
                    if bytes > self.limit {
                        return self.too_large(&format!("block {head}"), bytes);
                    }
                    match self.store.read_block(head) {
                        Ok(image) => {
                            self.shipped.extend(head..head + u64::from(n));
                            Response::Block(image)
                        }
                        Err(e) => error(&e),
                    }
                }
                _ => refuse(
                    ErrorCode::Invalid,
                    format!("page {head} does not start an allocated block"),
                ),
            },
            Request::ReadCluster { from, pages } => self.cluster(from, pages),
            Request::Catalog => {
                self.shipped.insert(ROOT_PAGE);
                Response::Catalog {
                    types: self.store.types(),
                    roots: (self.store.roots().into_iter())
                        .map(|r| (r.name, r.addr, r.type_id))
                        .collect(),
                }
            }
            // The open transaction's reads are of its snapshot, where its
            // validation starts: moving it would let the transaction read
            // commits its validation then counts as unseen, or drop
            // pages it may still write from the shipped set.
            Request::Refresh if self.tx.is_some() => refuse(
                ErrorCode::Invalid,
                "Refresh with a transaction open: commit or abort it first",
            ),
            Request::Refresh => match self.moved() {
                Ok((page_count, change)) => Response::Refreshed { page_count, change },
                Err(e) => error(&e),
            },
            Request::Stats => {
                let s = self.store.stats();
                Response::Stats {
                    snapshot_lsn: self.store.snapshot_lsn(),
                    end_lsn: s.end_lsn,
                    checkpoint_lsn: s.checkpoint_lsn,
                    page_count: s.page_count,
                    free_pages: s.free_pages,
                    blocks: s.blocks,
                    logged_pages: s.logged_pages,
                }
            }
            Request::Begin => self.begin(),
            Request::Alloc { pages, kind } => self.alloc(pages, kind),
            Request::DefineType { ref desc } => self.define_type(desc),
            // Answered by the session, which awaits the committer
            // (`start_commit`, `finish_commit`).
            Request::Commit { .. } => refuse(
                ErrorCode::Internal,
                "a Commit is answered through the committer, not here",
            ),
            Request::Abort => self.abort(),
            Request::BackupBegin => self.backup_begin(),
            Request::BackupRead { file, offset, len } => self.backup_read(file, offset, len),
            Request::BackupEnd => self.backup_end(),
            Request::Verify { deep } => self.verify(deep),
            Request::Checkpoint => self.checkpoint(),
            Request::Inspect(ref show) => self.inspect(show),
            Request::Hello { .. } | Request::Bye | Request::Status => refuse(
                ErrorCode::Internal,
                "the session answers Hello, Bye and Status itself",
            ),
        }
    }

    /// Whether `req` is a `ReadCluster` that may be answered on the
    /// runtime's worker: the connection's last one was read from the page
    /// cache, so this one most likely is too. A read that meets the disk
    /// holds up the worker once, and the next ones are handed off
    /// (`block_in_place`) until a read is quick again.
    pub(crate) fn reads_from_memory(&self, req: &Request) -> bool {
        matches!(req, Request::ReadCluster { .. }) && self.cached_reads
    }

    /// The answer to `req` if it is a `ReadCluster` the buffer pool holds
    /// right at the connection's snapshot, with the blocks where the
    /// connection's block map has them; the answer's pages join the
    /// shipped set as a read's would.
    pub(crate) fn cached(&mut self, req: &Request) -> Option<Arc<Framed>> {
        let Request::ReadCluster { from, pages } = *req else {
            return None;
        };
        let pages = self.clamp(from, pages);
        let store = &self.store;
        let framed = self.cache.get((from, pages), store.snapshot_lsn(), |f| {
            store.blocks_starting_in(from, pages) == f.blocks
        })?;
        for &(head, n) in &framed.blocks {
            self.shipped.extend(head..head + u64::from(n));
        }
        Some(framed)
    }

    /// A fetch cluster: the blocks starting in the range, read with one
    /// `pread` spanning them.
    fn cluster(&mut self, from: u64, pages: u64) -> Response {
        let pages = self.clamp(from, pages);
        let ps = self.store.page_size();
        let blocks = self.store.blocks_starting_in(from, pages);
        if let (Some(&(first, _)), Some(&(last, n))) = (blocks.first(), blocks.last()) {
            let bytes = (last + u64::from(n) - first).saturating_mul(ps as u64);
            if bytes > self.limit as u64 {
                return self.too_large(&format!("the cluster of pages {from}.."), bytes as usize);
            }
        }
        let started = Instant::now();
        let read = self.store.read_cluster(from, pages, &mut self.buf.0);
        self.cached_reads = started.elapsed() <= CACHED_READ;
        self.to_keep = (self.cache.capacity() > 0 && read.iter().all(|b| b.image.is_ok()))
            .then(|| ((from, pages), self.store.snapshot_lsn()));
        for b in &read {
            self.shipped.extend(b.head..b.head + u64::from(b.pages));
        }
        let span = read
            .last()
            .map_or(0, |b| b.at + b.pages as usize * ps)
            .min(self.buf.0.len());
        let blocks = read
            .into_iter()
            .map(|b| WireBlock {
                head: b.head,
                pages: b.pages,
                at: b.at as u64,
                error: b.image.err().map(|e| (code_of(&e), e.to_string())),
            })
            .collect();
        // The answer takes the buffer, which the session gives back once
        // the answer is sent (`Served::sent`): the images are not copied.
        let mut data = std::mem::take(&mut self.buf.0);
        data.truncate(span);
        Response::Cluster { blocks, data }
    }

    /// Takes back the fetch-cluster buffer a sent answer carried (taken
    /// by `cluster`, which left the connection's empty), once the buffer
    /// pool has a copy of the frame (`head`, then the images) if the
    /// cluster was read whole. The copy is made after the answer has
    /// gone, while the client installs its pages.
    pub(crate) fn sent(&mut self, resp: Response, head: Vec<u8>) {
        let keep = self.to_keep.take();
        if let Response::Cluster { data, blocks } = resp {
            if let Some((key, snapshot)) = keep {
                let framed = Framed {
                    head,
                    tail: data.clone(),
                    blocks: blocks.iter().map(|b| (b.head, b.pages)).collect(),
                };
                self.cache.put(key, snapshot, framed);
            }
            self.buf.0 = data;
        }
    }

    /// Moves the snapshot to the latest commit: the new page count, and
    /// what the client must drop, which leaves the shipped set too.
    pub(crate) fn moved(&mut self) -> Result<(u64, Change), Error> {
        let catalog_before = self.store.catalog_changes();
        let snapshot_before = self.store.snapshot_lsn();
        let refreshed = self.store.refresh()?;
        if let Refreshed::Pages { lsn, pages } = &refreshed {
            self.cache.moved(snapshot_before, *lsn, pages);
        }
        let change = match refreshed {
            Refreshed::Unchanged => Change::Unchanged,
            // The snapshot has moved: an answer refused as too large would
            // leave the client holding pages that changed. A list over the
            // limit is sent as what it implies at most: everything may
            // have changed.
            Refreshed::Pages { lsn, pages } if pages.len() * 8 > self.limit => {
                Change::Everything { lsn }
            }
            Refreshed::Pages { lsn, pages } => Change::Pages {
                lsn,
                pages,
                catalog: self.store.catalog_changes() != catalog_before,
            },
            Refreshed::Everything { lsn } => Change::Everything { lsn },
        };
        match &change {
            Change::Unchanged => {}
            Change::Pages { pages, .. } => {
                for p in pages {
                    self.shipped.remove(p);
                }
            }
            Change::Everything { .. } => self.shipped.clear(),
        }
        Ok((self.store.page_count(), change))
    }

    /// Whether the server writes this database: a commit's frame may then
    /// be as large as any frame.
    pub fn writable(&self) -> bool {
        self.writer.is_some()
    }

    /// `pages` cut at the snapshot's last page: the store walks a range
    /// page by page, so a range past the file would cost time for nothing.
    fn clamp(&self, from: u64, pages: u64) -> u64 {
        pages.min(self.store.page_count().saturating_sub(from))
    }

    /// The most bytes of images one answer may carry.
    pub(crate) fn answer_limit(&self) -> usize {
        self.limit
    }

    fn too_large(&self, what: &str, bytes: usize) -> Response {
        refuse(
            ErrorCode::TooLarge,
            format!(
                "{what} is {bytes} bytes, more than the {} one answer may carry: ask for fewer pages",
                self.limit
            ),
        )
    }
}

/// How the server opens a database: read-only, at its last commit.
pub fn read_only() -> StoreOptions {
    StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test of this binary that opens connections' buffers, so
    /// that the spare it drops is the one it takes back.
    #[test]
    fn a_buffer_handed_on_keeps_its_memory_not_its_bytes() {
        let mut a = ClusterBuf::new();
        a.0.extend_from_slice(&[0xAB; 8192]);
        let at = a.0.as_ptr();
        drop(a);
        let b = ClusterBuf::new();
        assert!(b.0.is_empty(), "another connection's bytes were handed on");
        assert_eq!(b.0.as_ptr(), at, "the buffer was not handed on");
        assert!(b.0.capacity() >= 8192);
        drop(b);
        // One larger than kept is let go.
        let mut big = ClusterBuf::new();
        big.0.reserve(ClusterBuf::LARGEST + 1);
        drop(big);
        assert!(
            SPARE
                .lock()
                .unwrap()
                .iter()
                .all(|s| s.capacity() <= ClusterBuf::LARGEST)
        );
    }
}
