//! The wire protocol of the storage server (`amber serve`): the messages a
//! client and the server exchange, and their byte layout. A pure codec —
//! no sockets, no runtime — so that the server (tokio, `amber-server`), the
//! client (blocking, in the core library) and the fuzzer share one decoder.
//!
//! A connection is a sequence of *frames*: a little-endian `u32` body
//! length `N` (1 ≤ N ≤ the receiver's limit), then `N` bytes of body. A body
//! is a kind byte, then the message's fields, little-endian. The client
//! sends [`Request`]s, the first of which is always [`Request::Hello`]; the
//! server answers each with one [`Response`]. docs/design.md §10 gives
//! every message byte by byte.
//!
//! Decoding is for bytes from a peer that may be hostile: it never panics,
//! never allocates more than the body's own length implies (a count is
//! checked against the bytes left before anything is reserved for it), and
//! refuses a body with bytes left over, so that every accepted body has
//! exactly one meaning.

mod codec;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io::Read;

/// The protocol version this build speaks. A peer of another version is
/// refused with [`ErrorCode::Version`], whose frame (and the start of
/// `Hello` that carries the version) every version lays out the same.
pub const VERSION: u16 = 5;

/// The root directory as a page of its own, in a commit's read set and
/// in the server's validation: every `Catalog` reads it, every commit that
/// sets or removes a root writes it.
pub const ROOT_PAGE: u64 = u64::MAX;

/// The four bytes after `Hello`'s kind: what tells an Amber client from
/// anything else that connects.
pub const MAGIC: [u8; 4] = *b"AMBR";

/// Largest frame body either side accepts unless configured otherwise.
pub const DEFAULT_MAX_FRAME: u32 = 64 << 20;

/// The longest token a `Hello` may carry, in bytes.
pub const MAX_TOKEN: usize = 4096;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// First frame of every connection; nothing else is read before it.
    Hello {
        /// The protocol version the client speaks.
        version: u16,
        /// The served database's name.
        database: String,
        /// The shared secret (empty when the server needs none); at most
        /// [`MAX_TOKEN`] bytes.
        token: Vec<u8>,
    },
    /// The allocated blocks starting in pages `from..from + pages`
    /// (`Store::blocks_starting_in`).
    Blocks {
        /// First page.
        from: u64,
        /// Pages.
        pages: u64,
    },
    /// One block's committed image at the connection's snapshot
    /// (`Store::read_block`).
    ReadBlock {
        /// The block's first page.
        head: u64,
    },
    /// A fetch cluster (`Store::read_cluster`).
    ReadCluster {
        /// First page.
        from: u64,
        /// Pages.
        pages: u64,
    },
    /// The schema catalog and the root directory at the snapshot.
    Catalog,
    /// Move the snapshot to the latest commit (`Store::refresh`).
    Refresh,
    /// Numbers about the served store at the snapshot.
    Stats,
    /// The client is leaving.
    Bye,
    /// Starts a transaction: moves the snapshot to the latest commit (as
    /// `Refresh`) and opens a transaction for the connection (aborting one
    /// left open).
    Begin,
    /// Reserves a block of `pages` pages of kind `kind` for the open
    /// transaction (made real by its commit, released by its abort).
    Alloc {
        /// Pages.
        pages: u32,
        /// The block kind (`format::page::BlockKind` as a byte).
        kind: u8,
    },
    /// Stores a type descriptor in the catalog at once (outside the
    /// transaction); answers its id.
    DefineType {
        /// The descriptor's bytes.
        desc: Vec<u8>,
    },
    /// Commits the open transaction: its records, the blocks it frees and
    /// the roots it sets (address 0 removes a root).
    Commit {
        /// The log generator's records, in persistent form.
        records: Vec<WireRecord>,
        /// First pages of the blocks freed.
        frees: Vec<u64>,
        /// Root name, address and type id.
        roots: Vec<(String, u64, u32)>,
        /// The pages the transaction read, ascending ([`ROOT_PAGE`] for
        /// the root directory): what the server validates it against.
        reads: Vec<u64>,
    },
    /// Abandons the open transaction.
    Abort,
    /// The server's state: its databases, connections and resources
    /// (answered with a [`Response::Report`]).
    Status,
    /// Pins the database's latest committed state for an online backup
    /// (a read-only store of its own, whose snapshot the writer's
    /// checkpoints wait for), until `BackupEnd` or the connection's end.
    BackupBegin,
    /// Bytes of the pinned state's files.
    BackupRead {
        /// Which file: [`BACKUP_DATA`] or [`BACKUP_LOG`].
        file: u8,
        /// Byte offset.
        offset: u64,
        /// Bytes wanted.
        len: u32,
    },
    /// Checks that the copy is of one state (no checkpoint rewrote the
    /// files while they were read) and lets the pin go.
    BackupEnd,
    /// Verifies the database on the server (`amber verify`), on a
    /// read-only store of the latest commit; answered with a
    /// [`Response::Report`].
    Verify {
        /// Also check every pointer (`amber verify --deep`).
        deep: bool,
    },
    /// Checkpoints the database's writer store on the server (`amber
    /// checkpoint`); answered with a [`Response::Report`].
    Checkpoint,
    /// The report of `amber inspect` on the database the server serves;
    /// answered with a [`Response::Report`].
    Inspect(crate::inspect::Show),
}

/// [`Request::BackupRead`]'s file: the page file.
pub const BACKUP_DATA: u8 = 0;
/// [`Request::BackupRead`]'s file: the log.
pub const BACKUP_LOG: u8 = 1;

/// A change a transaction ships: the log generator's record on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireRecord {
    /// New bytes at a persistent address.
    Range {
        /// The address.
        addr: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A page's whole after-image (whole-page logging).
    Page {
        /// The page.
        page: u64,
        /// Its image.
        image: Vec<u8>,
    },
    /// A dirty page's after-image shipped beside the records that changed
    /// it (QuickStore's ESM schemes): the server caches it in place of
    /// redoing those records, and logs the records, not the page.
    Cached {
        /// The page.
        page: u64,
        /// Its image.
        image: Vec<u8>,
    },
}

/// What the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The answer to a `Hello` that was accepted: the database's geometry
    /// and the connection's snapshot.
    Welcome {
        /// The protocol version the server speaks.
        version: u16,
        /// The database's page size.
        page_size: u32,
        /// Its first data page.
        first_data_page: u64,
        /// One past its highest page at the snapshot.
        page_count: u64,
        /// The snapshot's LSN.
        snapshot_lsn: u64,
        /// The database's home (`format/home.rs`): how its swizzled
        /// pointers are stored; 0 for a database without one.
        home: u64,
        /// The database's recovery scheme (`source::Scheme::code`); 0: none
        /// (each client's own strategy, its records redone at the server).
        scheme: u8,
    },
    /// A request failed (the connection stays open) or the connection is
    /// refused or closed (the server closes it after this frame).
    Error {
        /// What kind of failure.
        code: ErrorCode,
        /// What is wrong, in words (at most 65535 bytes).
        message: String,
    },
    /// The answer to [`Request::Blocks`]: `(head, pages)`, ascending.
    Blocks(Vec<(u64, u32)>),
    /// The answer to [`Request::ReadBlock`]: the block's image.
    Block(Vec<u8>),
    /// The answer to [`Request::ReadCluster`]: each block, and the images
    /// of those that are good in `data`, each at its block's `at`.
    Cluster {
        /// The blocks, ascending.
        blocks: Vec<WireBlock>,
        /// Their images.
        data: Vec<u8>,
    },
    /// The answer to [`Request::Catalog`].
    Catalog {
        /// Type id and descriptor bytes.
        types: Vec<(u32, Vec<u8>)>,
        /// Root name, address and type id.
        roots: Vec<(String, u64, u32)>,
    },
    /// The answer to [`Request::Refresh`].
    Refreshed {
        /// One past the highest page at the new snapshot.
        page_count: u64,
        /// What changed.
        change: Change,
    },
    /// The answer to [`Request::Stats`].
    Stats {
        /// The connection's snapshot.
        snapshot_lsn: u64,
        /// The end of the log as the served store last read it.
        end_lsn: u64,
        /// The LSN of the last checkpoint.
        checkpoint_lsn: u64,
        /// Pages below the high-water mark.
        page_count: u64,
        /// Free pages below it.
        free_pages: u64,
        /// Allocated blocks.
        blocks: u64,
        /// Pages whose latest committed image is in the log.
        logged_pages: u64,
    },
    /// The answer to [`Request::Begin`]: the snapshot moved.
    Begun {
        /// One past the highest page at the new snapshot.
        page_count: u64,
        /// What changed.
        change: Change,
    },
    /// The answer to [`Request::Alloc`].
    Allocated {
        /// The reserved block's first page.
        head: u64,
    },
    /// The answer to [`Request::DefineType`].
    TypeDefined {
        /// The type id.
        id: u32,
    },
    /// The answer to [`Request::Commit`] that committed: durable, and the
    /// snapshot moved to the latest commit (this one included).
    Committed {
        /// The commit record's LSN.
        lsn: u64,
        /// One past the highest page at the new snapshot.
        page_count: u64,
        /// What changed since the old snapshot.
        change: Change,
    },
    /// The answer to [`Request::Commit`] that lost to a concurrent commit:
    /// nothing of it was committed, and the snapshot moved to the latest
    /// commit.
    Conflict {
        /// One past the highest page at the new snapshot.
        page_count: u64,
        /// What changed since the old snapshot.
        change: Change,
        /// Which page, and which commit changed it.
        message: String,
    },
    /// The answer to [`Request::Abort`].
    Aborted,
    /// The answer to [`Request::Status`], [`Request::Verify`],
    /// [`Request::Checkpoint`] and [`Request::Inspect`]: a JSON document (docs/design.md §10.10
    /// lists its keys), so that a field added later needs no new version.
    Report(String),
    /// The answer to [`Request::BackupBegin`]: what was pinned.
    BackupPinned {
        /// The pinned snapshot's LSN: the backup holds exactly the commits
        /// up to it.
        snapshot_lsn: u64,
        /// The database's page size.
        page_size: u32,
        /// Bytes of the page file to copy.
        data_len: u64,
        /// Bytes of the log to copy (its headers, then its records up to
        /// the snapshot's end).
        log_len: u64,
        /// The most bytes one `BackupRead` may ask for (the connection's
        /// share of the server's memory).
        max_read: u32,
    },
    /// The answer to [`Request::BackupRead`].
    BackupBytes(Vec<u8>),
    /// The answer to [`Request::BackupEnd`]: the bytes read are of the
    /// pinned state.
    BackupDone,
}

/// One block of a [`Response::Cluster`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireBlock {
    /// Its first page.
    pub head: u64,
    /// Its pages.
    pub pages: u32,
    /// Where its image starts in the cluster's data.
    pub at: u64,
    /// `None` when the image is its committed image; otherwise what is
    /// wrong with it (its bytes in the data are then meaningless).
    pub error: Option<(ErrorCode, String)>,
}

/// What a refresh changed (`store::Refreshed`, on the wire).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing was committed since the snapshot.
    Unchanged,
    /// The snapshot moved to `lsn`; these pages changed.
    Pages {
        /// The new snapshot's LSN.
        lsn: u64,
        /// The pages changed, ascending.
        pages: Vec<u64>,
        /// Whether a type was defined or a root set too: only then does
        /// the client fetch the catalog again (a round trip that would
        /// otherwise follow every commit).
        catalog: bool,
    },
    /// The snapshot moved to `lsn` past a checkpoint: any page may have
    /// changed.
    Everything {
        /// The new snapshot's LSN.
        lsn: u64,
    },
}

/// The kind of failure an [`Response::Error`] reports.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The peer speaks another protocol version.
    Version = 1,
    /// No token, or a wrong one.
    Auth,
    /// The server serves no database of that name.
    NoSuchDatabase,
    /// A frame that does not decode, or a request out of turn.
    Malformed,
    /// A frame or an answer larger than the limit.
    TooLarge,
    /// The server has as many connections as it takes.
    Busy,
    /// The database's bytes are damaged.
    Corrupt,
    /// The server could not read the database.
    Io,
    /// A request the store refuses (a page that starts no block, …).
    Invalid,
    /// A bug in the server.
    Internal,
    /// The connection was idle too long.
    Timeout,
    /// The server is stopping.
    ShuttingDown,
    /// A transaction's request (`Alloc`, `Commit`, `Abort`) with no
    /// transaction open.
    NoTransaction,
}

impl ErrorCode {
    /// Every code, in the order of their values.
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::Version,
        ErrorCode::Auth,
        ErrorCode::NoSuchDatabase,
        ErrorCode::Malformed,
        ErrorCode::TooLarge,
        ErrorCode::Busy,
        ErrorCode::Corrupt,
        ErrorCode::Io,
        ErrorCode::Invalid,
        ErrorCode::Internal,
        ErrorCode::Timeout,
        ErrorCode::ShuttingDown,
        ErrorCode::NoTransaction,
    ];

    /// The code of byte `b`, if it is one.
    pub fn from_u8(b: u8) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|&c| c as u8 == b)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorCode::Version => "protocol version mismatch",
            ErrorCode::Auth => "authentication failed",
            ErrorCode::NoSuchDatabase => "no such database",
            ErrorCode::Malformed => "malformed message",
            ErrorCode::TooLarge => "message too large",
            ErrorCode::Busy => "server busy",
            ErrorCode::Corrupt => "database corrupt",
            ErrorCode::Io => "I/O error on the server",
            ErrorCode::Invalid => "invalid request",
            ErrorCode::Internal => "internal error in the server",
            ErrorCode::Timeout => "timed out",
            ErrorCode::ShuttingDown => "server shutting down",
            ErrorCode::NoTransaction => "no transaction open",
        })
    }
}

/// A frame that could not be read or decoded.
#[derive(Debug)]
pub enum WireError {
    /// Reading the frame failed (an unexpected end of stream included).
    Io(std::io::Error),
    /// The length prefix says more than the limit.
    TooLarge {
        /// The length it says.
        len: u64,
        /// The limit.
        max: u32,
    },
    /// The body does not decode: what is wrong with it.
    Malformed(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Io(e) => write!(f, "reading a frame: {e}"),
            WireError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max}")
            }
            WireError::Malformed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for WireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WireError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> Self {
        WireError::Io(e)
    }
}

/// The body length a frame's 4-byte prefix announces: refused when zero
/// (every body has its kind byte) or larger than `max`.
pub fn body_len(prefix: [u8; 4], max: u32) -> Result<usize, WireError> {
    match u32::from_le_bytes(prefix) {
        0 => Err(WireError::Malformed(
            "empty frame: a body has at least its kind byte".into(),
        )),
        n if n > max => Err(WireError::TooLarge {
            len: n.into(),
            max,
        }),
        n => Ok(n as usize),
    }
}

/// Reads one frame from `r` and returns its body (at most `max` bytes, so
/// that a length prefix cannot make the reader allocate more).
pub fn read_frame(r: &mut impl Read, max: u32) -> Result<Vec<u8>, WireError> {
    let mut body = Vec::new();
    read_frame_into(r, max, &mut body)?;
    Ok(body)
}

/// [`read_frame`] into `body`, whose memory is reused: a client reading
/// clusters of images into the buffer it keeps between faults touches no
/// fresh memory for each.
pub fn read_frame_into(r: &mut impl Read, max: u32, body: &mut Vec<u8>) -> Result<(), WireError> {
    body.clear();
    read_frame_after(r, max, body).map(|_| ())
}

/// [`read_frame_into`], the body appended to what `body` holds: where it
/// is in `body` (a fault's cluster asked for in pieces, read into one
/// buffer).
pub fn read_frame_after(
    r: &mut impl Read,
    max: u32,
    body: &mut Vec<u8>,
) -> Result<std::ops::Range<usize>, WireError> {
    let mut prefix = [0u8; 4];
    r.read_exact(&mut prefix)?;
    let n = body_len(prefix, max)?;
    let start = body.len();
    body.resize(start + n, 0);
    r.read_exact(&mut body[start..])?;
    Ok(start..start + n)
}

/// The version a `Hello` body announces, read before the rest of it: the
/// first 7 bytes of a `Hello` (kind, magic, version) keep their place in
/// every version, so that a server can tell a client of another version
/// apart from a malformed one and answer [`ErrorCode::Version`]. `None`
/// when the body does not start like a `Hello`.
pub fn hello_version(body: &[u8]) -> Option<u16> {
    match body {
        [codec::HELLO, m0, m1, m2, m3, v0, v1, ..] if [*m0, *m1, *m2, *m3] == MAGIC => {
            Some(u16::from_le_bytes([*v0, *v1]))
        }
        _ => None,
    }
}
