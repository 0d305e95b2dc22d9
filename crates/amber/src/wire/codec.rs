//! Encoding and decoding of the messages (the layout is docs/design.md
//! §10's). Encoding writes the whole frame — length prefix, then body — so
//! that a sender makes one write per message. Decoding reads a body through
//! [`Fields`], which names the message and the field that is short or
//! wrong in every error.

use super::{
    Change, ErrorCode, MAGIC, MAX_TOKEN, Request, Response, WireBlock, WireError, WireRecord,
};
use crate::format::bytes::Cursor;
use crate::inspect::Show;

pub(super) const HELLO: u8 = 0x01;
const BLOCKS: u8 = 0x02;
const READ_BLOCK: u8 = 0x03;
const READ_CLUSTER: u8 = 0x04;
const CATALOG: u8 = 0x05;
const REFRESH: u8 = 0x06;
const STATS: u8 = 0x07;
const BYE: u8 = 0x08;
const BEGIN: u8 = 0x09;
const ALLOC: u8 = 0x0A;
const DEFINE_TYPE: u8 = 0x0B;
const COMMIT: u8 = 0x0C;
const ABORT: u8 = 0x0D;
const STATUS: u8 = 0x0E;
const BACKUP_BEGIN: u8 = 0x0F;
const BACKUP_READ: u8 = 0x10;
const BACKUP_END: u8 = 0x11;
const VERIFY: u8 = 0x12;
const CHECKPOINT: u8 = 0x13;
const INSPECT: u8 = 0x14;

const WELCOME: u8 = 0x81;
const BLOCKS_OF: u8 = 0x82;
const BLOCK: u8 = 0x83;
const CLUSTER: u8 = 0x84;
const CATALOG_OF: u8 = 0x85;
const REFRESHED: u8 = 0x86;
const STATS_OF: u8 = 0x87;
const BEGUN: u8 = 0x88;
const ALLOCATED: u8 = 0x89;
const TYPE_DEFINED: u8 = 0x8A;
const COMMITTED: u8 = 0x8B;
const CONFLICT: u8 = 0x8C;
const ABORTED: u8 = 0x8D;
const REPORT: u8 = 0x8E;
const BACKUP_PINNED: u8 = 0x8F;
const BACKUP_BYTES: u8 = 0x90;
const BACKUP_DONE: u8 = 0x91;
/// The error frame's kind: the same in every version.
const ERROR: u8 = 0xFF;

/// `Change`'s tags.
const UNCHANGED: u8 = 0;
const PAGES: u8 = 1;
const EVERYTHING: u8 = 2;
const PAGES_AND_CATALOG: u8 = 3;

/// The fewest bytes one element of each vector takes: what a count is
/// checked against before anything is reserved for it.
const BLOCK_ENTRY: usize = 8 + 4;
const CLUSTER_ENTRY: usize = 8 + 4 + 8 + 1;
const TYPE_ENTRY: usize = 4 + 4;
const ROOT_ENTRY: usize = 2 + 8 + 4;
const PAGE_ENTRY: usize = 8;
const RECORD_ENTRY: usize = 1 + 8 + 4;

/// `WireRecord`'s tags.
const RANGE: u8 = 1;
const PAGE: u8 = 2;
const CACHED: u8 = 3;

impl Request {
    /// The whole frame of this request: length prefix, then body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Frame::new();
        match self {
            Request::Hello {
                version,
                database,
                token,
            } => {
                w.u8(HELLO);
                w.raw(&MAGIC);
                w.u16(*version);
                w.str(database);
                w.bytes(token);
            }
            Request::Blocks { from, pages } => {
                w.u8(BLOCKS);
                w.u64(*from);
                w.u64(*pages);
            }
            Request::ReadBlock { head } => {
                w.u8(READ_BLOCK);
                w.u64(*head);
            }
            Request::ReadCluster { from, pages } => {
                w.u8(READ_CLUSTER);
                w.u64(*from);
                w.u64(*pages);
            }
            Request::Catalog => w.u8(CATALOG),
            Request::Refresh => w.u8(REFRESH),
            Request::Stats => w.u8(STATS),
            Request::Bye => w.u8(BYE),
            Request::Begin => w.u8(BEGIN),
            Request::Alloc { pages, kind } => {
                w.u8(ALLOC);
                w.u32(*pages);
                w.u8(*kind);
            }
            Request::DefineType { desc } => {
                w.u8(DEFINE_TYPE);
                w.bytes(desc);
            }
            Request::Commit {
                records,
                frees,
                roots,
                reads,
            } => {
                w.u8(COMMIT);
                w.count(records.len());
                for r in records {
                    match r {
                        WireRecord::Range { addr, data } => {
                            w.u8(RANGE);
                            w.u64(*addr);
                            w.bytes(data);
                        }
                        WireRecord::Page { page, image } => {
                            w.u8(PAGE);
                            w.u64(*page);
                            w.bytes(image);
                        }
                        WireRecord::Cached { page, image } => {
                            w.u8(CACHED);
                            w.u64(*page);
                            w.bytes(image);
                        }
                    }
                }
                w.pages(frees);
                w.roots(roots);
                w.pages(reads);
            }
            Request::Abort => w.u8(ABORT),
            Request::Status => w.u8(STATUS),
            Request::BackupBegin => w.u8(BACKUP_BEGIN),
            Request::BackupRead { file, offset, len } => {
                w.u8(BACKUP_READ);
                w.u8(*file);
                w.u64(*offset);
                w.u32(*len);
            }
            Request::BackupEnd => w.u8(BACKUP_END),
            Request::Verify { deep } => {
                w.u8(VERIFY);
                w.u8(u8::from(*deep));
            }
            Request::Checkpoint => w.u8(CHECKPOINT),
            Request::Inspect(show) => {
                w.u8(INSPECT);
                match show {
                    Show::Summary => w.u8(0),
                    Show::Page(p) => {
                        w.u8(1);
                        w.u64(*p);
                    }
                    Show::Object(spec) => {
                        w.u8(2);
                        w.str(spec);
                    }
                }
            }
        }
        w.finish()
    }

    /// Decodes a request body (without its length prefix).
    pub fn decode(body: &[u8]) -> Result<Request, WireError> {
        let (kind, rest) = body
            .split_first()
            .ok_or_else(|| WireError::Malformed("empty message: no kind byte".into()))?;
        let fixed = |name, n| Fields::fixed(name, rest, n);
        let req = match *kind {
            HELLO => {
                let mut f = Fields::new("Hello", rest);
                let magic = f.array::<4>("magic")?;
                if magic != MAGIC {
                    return Err(WireError::Malformed(format!(
                        "Hello's magic is {magic:02x?}, not {MAGIC:02x?} (\"AMBR\"): \
                         the peer is not an Amber client"
                    )));
                }
                let version = f.u16("version")?;
                let database = f.str("database")?;
                let token = f.bytes("token", MAX_TOKEN)?;
                f.end(Request::Hello {
                    version,
                    database,
                    token,
                })?
            }
            BLOCKS => {
                let mut f = fixed("Blocks", 16)?;
                let v = Request::Blocks {
                    from: f.u64("from")?,
                    pages: f.u64("pages")?,
                };
                f.end(v)?
            }
            READ_BLOCK => {
                let mut f = fixed("ReadBlock", 8)?;
                let v = Request::ReadBlock {
                    head: f.u64("head")?,
                };
                f.end(v)?
            }
            READ_CLUSTER => {
                let mut f = fixed("ReadCluster", 16)?;
                let v = Request::ReadCluster {
                    from: f.u64("from")?,
                    pages: f.u64("pages")?,
                };
                f.end(v)?
            }
            CATALOG => fixed("Catalog", 0)?.end(Request::Catalog)?,
            REFRESH => fixed("Refresh", 0)?.end(Request::Refresh)?,
            STATS => fixed("Stats", 0)?.end(Request::Stats)?,
            BYE => fixed("Bye", 0)?.end(Request::Bye)?,
            BEGIN => fixed("Begin", 0)?.end(Request::Begin)?,
            ALLOC => {
                let mut f = fixed("Alloc", 5)?;
                let v = Request::Alloc {
                    pages: f.u32("pages")?,
                    kind: f.u8("kind")?,
                };
                f.end(v)?
            }
            DEFINE_TYPE => {
                let mut f = Fields::new("DefineType", rest);
                let desc = f.bytes("descriptor", usize::MAX)?;
                f.end(Request::DefineType { desc })?
            }
            COMMIT => {
                let mut f = Fields::new("Commit", rest);
                let n = f.count("records", RECORD_ENTRY)?;
                let mut records = Vec::with_capacity(n);
                for _ in 0..n {
                    records.push(match f.u8("record tag")? {
                        RANGE => WireRecord::Range {
                            addr: f.u64("address")?,
                            data: f.bytes("data", usize::MAX)?,
                        },
                        PAGE => WireRecord::Page {
                            page: f.u64("page")?,
                            image: f.bytes("image", usize::MAX)?,
                        },
                        CACHED => WireRecord::Cached {
                            page: f.u64("page")?,
                            image: f.bytes("image", usize::MAX)?,
                        },
                        t => {
                            return Err(WireError::Malformed(format!(
                                "Commit's record tag {t} is unknown (1, 2 or 3)"
                            )));
                        }
                    });
                }
                let frees = f.pages("frees", "freed page")?;
                let roots = f.roots()?;
                let reads = f.pages("reads", "page read")?;
                f.end(Request::Commit {
                    records,
                    frees,
                    roots,
                    reads,
                })?
            }
            ABORT => fixed("Abort", 0)?.end(Request::Abort)?,
            STATUS => fixed("Status", 0)?.end(Request::Status)?,
            BACKUP_BEGIN => fixed("BackupBegin", 0)?.end(Request::BackupBegin)?,
            BACKUP_READ => {
                let mut f = fixed("BackupRead", 13)?;
                let v = Request::BackupRead {
                    file: f.u8("file")?,
                    offset: f.u64("offset")?,
                    len: f.u32("len")?,
                };
                f.end(v)?
            }
            BACKUP_END => fixed("BackupEnd", 0)?.end(Request::BackupEnd)?,
            VERIFY => {
                let mut f = fixed("Verify", 1)?;
                let deep = match f.u8("deep")? {
                    0 => false,
                    1 => true,
                    b => {
                        return Err(WireError::Malformed(format!(
                            "Verify's deep is {b}, not 0 or 1"
                        )));
                    }
                };
                f.end(Request::Verify { deep })?
            }
            CHECKPOINT => fixed("Checkpoint", 0)?.end(Request::Checkpoint)?,
            INSPECT => {
                let mut f = Fields::new("Inspect", rest);
                let show = match f.u8("what")? {
                    0 => Show::Summary,
                    1 => Show::Page(f.u64("page")?),
                    2 => Show::Object(f.str("object")?),
                    t => {
                        return Err(WireError::Malformed(format!(
                            "Inspect's what is {t}, not 0, 1 or 2"
                        )));
                    }
                };
                f.end(Request::Inspect(show))?
            }
            k => return Err(unknown_kind("request", k)),
        };
        Ok(req)
    }
}

impl Response {
    /// The whole frame of this response: length prefix, then body.
    pub fn encode(&self) -> Vec<u8> {
        let (mut head, tail) = self.encode_split();
        head.extend_from_slice(tail);
        head
    }

    /// The frame of this response in two parts, to be sent one after the
    /// other: everything but the images a `Block` or `Cluster` ends with,
    /// then those images, not copied (the server sends a fetch cluster
    /// from the buffer it read it into). The length prefix counts both.
    pub fn encode_split(&self) -> (Vec<u8>, &[u8]) {
        let mut w = Frame::new();
        let mut tail: &[u8] = &[];
        match self {
            Response::Welcome {
                version,
                page_size,
                first_data_page,
                page_count,
                snapshot_lsn,
                home,
                scheme,
            } => {
                w.u8(WELCOME);
                w.u16(*version);
                w.u32(*page_size);
                w.u64(*first_data_page);
                w.u64(*page_count);
                w.u64(*snapshot_lsn);
                w.u64(*home);
                w.u8(*scheme);
            }
            Response::Error { code, message } => {
                w.u8(ERROR);
                w.u8(*code as u8);
                w.str(message);
            }
            Response::Blocks(blocks) => {
                w.u8(BLOCKS_OF);
                w.count(blocks.len());
                for &(head, pages) in blocks {
                    w.u64(head);
                    w.u32(pages);
                }
            }
            Response::Block(image) => {
                w.u8(BLOCK);
                w.count(image.len());
                tail = image;
            }
            Response::Cluster { blocks, data } => {
                w.u8(CLUSTER);
                w.count(blocks.len());
                for b in blocks {
                    w.u64(b.head);
                    w.u32(b.pages);
                    w.u64(b.at);
                    match &b.error {
                        None => w.u8(0),
                        Some((code, message)) => {
                            w.u8(*code as u8);
                            w.str(message);
                        }
                    }
                }
                w.count(data.len());
                tail = data;
            }
            Response::Catalog { types, roots } => {
                w.u8(CATALOG_OF);
                w.count(types.len());
                for (id, desc) in types {
                    w.u32(*id);
                    w.bytes(desc);
                }
                w.roots(roots);
            }
            Response::Refreshed { page_count, change } => {
                w.u8(REFRESHED);
                w.u64(*page_count);
                w.change(change);
            }
            Response::Stats {
                snapshot_lsn,
                end_lsn,
                checkpoint_lsn,
                page_count,
                free_pages,
                blocks,
                logged_pages,
            } => {
                w.u8(STATS_OF);
                for v in [
                    snapshot_lsn,
                    end_lsn,
                    checkpoint_lsn,
                    page_count,
                    free_pages,
                    blocks,
                    logged_pages,
                ] {
                    w.u64(*v);
                }
            }
            Response::Begun { page_count, change } => {
                w.u8(BEGUN);
                w.u64(*page_count);
                w.change(change);
            }
            Response::Allocated { head } => {
                w.u8(ALLOCATED);
                w.u64(*head);
            }
            Response::TypeDefined { id } => {
                w.u8(TYPE_DEFINED);
                w.u32(*id);
            }
            Response::Committed {
                lsn,
                page_count,
                change,
            } => {
                w.u8(COMMITTED);
                w.u64(*lsn);
                w.u64(*page_count);
                w.change(change);
            }
            Response::Conflict {
                page_count,
                change,
                message,
            } => {
                w.u8(CONFLICT);
                w.u64(*page_count);
                w.change(change);
                w.str(message);
            }
            Response::Aborted => w.u8(ABORTED),
            Response::Report(json) => {
                w.u8(REPORT);
                w.bytes(json.as_bytes());
            }
            Response::BackupPinned {
                snapshot_lsn,
                page_size,
                data_len,
                log_len,
                max_read,
            } => {
                w.u8(BACKUP_PINNED);
                w.u64(*snapshot_lsn);
                w.u32(*page_size);
                w.u64(*data_len);
                w.u64(*log_len);
                w.u32(*max_read);
            }
            Response::BackupBytes(b) => {
                w.u8(BACKUP_BYTES);
                w.count(b.len());
                tail = b;
            }
            Response::BackupDone => w.u8(BACKUP_DONE),
        }
        (w.finish_after(tail.len()), tail)
    }

    /// Decodes a response body (without its length prefix).
    pub fn decode(body: &[u8]) -> Result<Response, WireError> {
        let (kind, rest) = body
            .split_first()
            .ok_or_else(|| WireError::Malformed("empty message: no kind byte".into()))?;
        let resp = match *kind {
            WELCOME => {
                let mut f = Fields::fixed("Welcome", rest, 2 + 4 + 8 + 8 + 8 + 8 + 1)?;
                let v = Response::Welcome {
                    version: f.u16("version")?,
                    page_size: f.u32("page_size")?,
                    first_data_page: f.u64("first_data_page")?,
                    page_count: f.u64("page_count")?,
                    snapshot_lsn: f.u64("snapshot_lsn")?,
                    home: f.u64("home")?,
                    scheme: f.u8("scheme")?,
                };
                f.end(v)?
            }
            ERROR => {
                let mut f = Fields::new("Error", rest);
                let code = f.code("code")?;
                let message = f.str("message")?;
                f.end(Response::Error { code, message })?
            }
            BLOCKS_OF => {
                let mut f = Fields::new("Blocks", rest);
                let n = f.count("blocks", BLOCK_ENTRY)?;
                let mut blocks = Vec::with_capacity(n);
                for _ in 0..n {
                    blocks.push((f.u64("head")?, f.u32("pages")?));
                }
                f.end(Response::Blocks(blocks))?
            }
            BLOCK => {
                let mut f = Fields::new("Block", rest);
                let image = f.bytes("image", usize::MAX)?;
                f.end(Response::Block(image))?
            }
            CLUSTER => {
                let (blocks, data) = cluster_parts(rest)?;
                Response::Cluster {
                    blocks,
                    data: rest[data].to_vec(),
                }
            }
            CATALOG_OF => {
                let mut f = Fields::new("Catalog", rest);
                let n = f.count("types", TYPE_ENTRY)?;
                let mut types = Vec::with_capacity(n);
                for _ in 0..n {
                    types.push((f.u32("type id")?, f.bytes("descriptor", usize::MAX)?));
                }
                let roots = f.roots()?;
                f.end(Response::Catalog { types, roots })?
            }
            REFRESHED => {
                let mut f = Fields::new("Refreshed", rest);
                let page_count = f.u64("page_count")?;
                let change = f.change()?;
                f.end(Response::Refreshed { page_count, change })?
            }
            STATS_OF => {
                let mut f = Fields::fixed("Stats", rest, 7 * 8)?;
                let v = Response::Stats {
                    snapshot_lsn: f.u64("snapshot_lsn")?,
                    end_lsn: f.u64("end_lsn")?,
                    checkpoint_lsn: f.u64("checkpoint_lsn")?,
                    page_count: f.u64("page_count")?,
                    free_pages: f.u64("free_pages")?,
                    blocks: f.u64("blocks")?,
                    logged_pages: f.u64("logged_pages")?,
                };
                f.end(v)?
            }
            BEGUN => {
                let mut f = Fields::new("Begun", rest);
                let page_count = f.u64("page_count")?;
                let change = f.change()?;
                f.end(Response::Begun { page_count, change })?
            }
            ALLOCATED => {
                let mut f = Fields::fixed("Allocated", rest, 8)?;
                let v = Response::Allocated {
                    head: f.u64("head")?,
                };
                f.end(v)?
            }
            TYPE_DEFINED => {
                let mut f = Fields::fixed("TypeDefined", rest, 4)?;
                let v = Response::TypeDefined { id: f.u32("id")? };
                f.end(v)?
            }
            COMMITTED => {
                let mut f = Fields::new("Committed", rest);
                let lsn = f.u64("lsn")?;
                let page_count = f.u64("page_count")?;
                let change = f.change()?;
                f.end(Response::Committed {
                    lsn,
                    page_count,
                    change,
                })?
            }
            CONFLICT => {
                let mut f = Fields::new("Conflict", rest);
                let page_count = f.u64("page_count")?;
                let change = f.change()?;
                let message = f.str("message")?;
                f.end(Response::Conflict {
                    page_count,
                    change,
                    message,
                })?
            }
            ABORTED => Fields::fixed("Aborted", rest, 0)?.end(Response::Aborted)?,
            REPORT => {
                let mut f = Fields::new("Report", rest);
                let json = f.bytes("document", usize::MAX)?;
                let json = String::from_utf8(json).map_err(|e| {
                    WireError::Malformed(format!("Report's document is not UTF-8 ({e})"))
                })?;
                f.end(Response::Report(json))?
            }
            BACKUP_PINNED => {
                let mut f = Fields::fixed("BackupPinned", rest, 8 + 4 + 8 + 8 + 4)?;
                let v = Response::BackupPinned {
                    snapshot_lsn: f.u64("snapshot_lsn")?,
                    page_size: f.u32("page_size")?,
                    data_len: f.u64("data_len")?,
                    log_len: f.u64("log_len")?,
                    max_read: f.u32("max_read")?,
                };
                f.end(v)?
            }
            BACKUP_BYTES => {
                let mut f = Fields::new("BackupBytes", rest);
                let b = f.bytes("bytes", usize::MAX)?;
                f.end(Response::BackupBytes(b))?
            }
            BACKUP_DONE => Fields::fixed("BackupDone", rest, 0)?.end(Response::BackupDone)?,
            k => return Err(unknown_kind("response", k)),
        };
        Ok(resp)
    }
}

/// A cluster's blocks, and where their images lie in its body.
pub type ClusterParts = (Vec<WireBlock>, std::ops::Range<usize>);

/// A `Cluster` body's blocks, and where its data lies in the body (after
/// the kind byte, the caller adds one).
fn cluster_parts(rest: &[u8]) -> Result<ClusterParts, WireError> {
    let mut f = Fields::new("Cluster", rest);
    let n = f.count("blocks", CLUSTER_ENTRY)?;
    let mut blocks = Vec::with_capacity(n);
    for _ in 0..n {
        let head = f.u64("head")?;
        let pages = f.u32("pages")?;
        let at = f.u64("at")?;
        let error = match f.u8("status")? {
            0 => None,
            c => Some((code_of(c)?, f.str("message")?)),
        };
        blocks.push(WireBlock {
            head,
            pages,
            at,
            error,
        });
    }
    let len = f.u32("data")? as usize;
    let start = f.c.pos();
    f.take("data", len)?;
    f.end((blocks, start..start + len))
}

impl Response {
    /// A `Cluster` body decoded without copying its images: its blocks and
    /// where the images lie in `body` (so that a client reads the frame
    /// into the buffer it installs from). `None`: the body is another
    /// message, for [`Response::decode`].
    pub fn decode_cluster(
        body: &[u8],
    ) -> Option<Result<ClusterParts, WireError>> {
        match body.split_first() {
            Some((&CLUSTER, rest)) => Some(
                cluster_parts(rest).map(|(blocks, data)| (blocks, data.start + 1..data.end + 1)),
            ),
            _ => None,
        }
    }
}

fn unknown_kind(side: &str, k: u8) -> WireError {
    WireError::Malformed(format!("{side} kind 0x{k:02x} is unknown"))
}

fn code_of(b: u8) -> Result<ErrorCode, WireError> {
    ErrorCode::from_u8(b)
        .ok_or_else(|| {
            WireError::Malformed(format!("error code {b} is unknown (1..={})", ErrorCode::ALL.len()))
        })
}

/// A frame being written: the length prefix is filled in by `finish`.
struct Frame(Vec<u8>);

impl Frame {
    fn new() -> Frame {
        Frame(vec![0; 4])
    }

    fn finish(self) -> Vec<u8> {
        self.finish_after(0)
    }

    /// The frame's bytes so far, with a prefix that counts `tail` more
    /// bytes to be sent after them.
    fn finish_after(mut self, tail: usize) -> Vec<u8> {
        // A body over 4 GiB cannot be framed; the prefix then says more
        // than any receiver's limit, which refuses the frame.
        let n = (self.0.len() - 4)
            .checked_add(tail)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(u32::MAX);
        self.0[..4].copy_from_slice(&n.to_le_bytes());
        self.0
    }

    fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }

    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn u16(&mut self, v: u16) {
        self.raw(&v.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.raw(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.raw(&v.to_le_bytes());
    }

    /// A vector's element count.
    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// A byte string: u32 length, then the bytes.
    fn bytes(&mut self, b: &[u8]) {
        self.count(b.len());
        self.raw(b);
    }

    /// A list of pages: count, then each.
    fn pages(&mut self, pages: &[u64]) {
        self.count(pages.len());
        pages.iter().for_each(|&p| self.u64(p));
    }

    /// A root directory: count, then name, address, type id each.
    fn roots(&mut self, roots: &[(String, u64, u32)]) {
        self.count(roots.len());
        for (name, addr, type_id) in roots {
            self.str(name);
            self.u64(*addr);
            self.u32(*type_id);
        }
    }

    /// What a move of the snapshot changed: a tag, then its fields.
    fn change(&mut self, change: &Change) {
        match change {
            Change::Unchanged => self.u8(UNCHANGED),
            Change::Pages {
                lsn,
                pages,
                catalog,
            } => {
                self.u8(if *catalog { PAGES_AND_CATALOG } else { PAGES });
                self.u64(*lsn);
                self.pages(pages);
            }
            Change::Everything { lsn } => {
                self.u8(EVERYTHING);
                self.u64(*lsn);
            }
        }
    }

    /// A string: u16 length, then UTF-8. A longer string (only an error
    /// message can be) is cut at the last character boundary that fits.
    fn str(&mut self, s: &str) {
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16);
        self.raw(&s.as_bytes()[..end]);
    }
}

/// A body's fields after the kind byte, read in order; every error names
/// the message, the field and where it is.
struct Fields<'a> {
    msg: &'static str,
    c: Cursor<'a>,
}

impl<'a> Fields<'a> {
    fn new(msg: &'static str, rest: &'a [u8]) -> Fields<'a> {
        Fields {
            msg,
            c: Cursor::new(rest),
        }
    }

    /// The fields of a message of fixed size `n`.
    fn fixed(msg: &'static str, rest: &'a [u8], n: usize) -> Result<Fields<'a>, WireError> {
        if rest.len() < n {
            return Err(WireError::Malformed(format!(
                "truncated: {msg} needs {n} bytes after its kind, got {}",
                rest.len()
            )));
        }
        Ok(Fields::new(msg, rest))
    }

    /// `value`, if no byte is left over.
    fn end<T>(&self, value: T) -> Result<T, WireError> {
        match self.c.remaining() {
            0 => Ok(value),
            n => Err(WireError::Malformed(format!(
                "{} has {n} trailing bytes after its last field",
                self.msg
            ))),
        }
    }

    fn take(&mut self, field: &str, n: usize) -> Result<&'a [u8], WireError> {
        let at = self.c.pos() + 1;
        let left = self.c.remaining();
        self.c.bytes(n).map_err(|_| {
            WireError::Malformed(format!(
                "truncated: {}'s {field} needs {n} bytes at byte {at}, got {left}",
                self.msg
            ))
        })
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(field, N)?);
        Ok(a)
    }

    fn u8(&mut self, field: &str) -> Result<u8, WireError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &str) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &str) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn code(&mut self, field: &str) -> Result<ErrorCode, WireError> {
        code_of(self.u8(field)?)
    }

    /// A vector's count, refused unless the bytes left could hold that
    /// many elements of at least `min` bytes: what makes the reservation
    /// that follows no larger than the body.
    fn count(&mut self, field: &str, min: usize) -> Result<usize, WireError> {
        let n = self.u32(field)? as usize;
        let left = self.c.remaining();
        if n.saturating_mul(min) > left {
            return Err(WireError::Malformed(format!(
                "{}'s {field} count {n} needs at least {} bytes, {left} left",
                self.msg,
                n.saturating_mul(min)
            )));
        }
        Ok(n)
    }

    /// A byte string of at most `max` bytes.
    fn bytes(&mut self, field: &str, max: usize) -> Result<Vec<u8>, WireError> {
        let n = self.u32(field)? as usize;
        if n > max {
            return Err(WireError::Malformed(format!(
                "{}'s {field} of {n} bytes exceeds the limit of {max}",
                self.msg
            )));
        }
        Ok(self.take(field, n)?.to_vec())
    }

    /// A list of pages (`list`, each an `item`).
    fn pages(&mut self, list: &'static str, item: &'static str) -> Result<Vec<u64>, WireError> {
        let n = self.count(list, PAGE_ENTRY)?;
        let mut pages = Vec::with_capacity(n);
        for _ in 0..n {
            pages.push(self.u64(item)?);
        }
        Ok(pages)
    }

    /// A root directory.
    fn roots(&mut self) -> Result<Vec<(String, u64, u32)>, WireError> {
        let n = self.count("roots", ROOT_ENTRY)?;
        let mut roots = Vec::with_capacity(n);
        for _ in 0..n {
            roots.push((self.str("root name")?, self.u64("address")?, self.u32("type id")?));
        }
        Ok(roots)
    }

    /// What a move of the snapshot changed.
    fn change(&mut self) -> Result<Change, WireError> {
        Ok(match self.u8("change")? {
            UNCHANGED => Change::Unchanged,
            tag @ (PAGES | PAGES_AND_CATALOG) => {
                let lsn = self.u64("lsn")?;
                let pages = self.pages("pages", "page")?;
                Change::Pages {
                    lsn,
                    pages,
                    catalog: tag == PAGES_AND_CATALOG,
                }
            }
            EVERYTHING => Change::Everything {
                lsn: self.u64("lsn")?,
            },
            t => {
                return Err(WireError::Malformed(format!(
                    "{}'s change tag {t} is unknown (0 to 3)",
                    self.msg
                )));
            }
        })
    }

    /// A UTF-8 string.
    fn str(&mut self, field: &str) -> Result<String, WireError> {
        let n = self.u16(field)? as usize;
        let b = self.take(field, n)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(WireError::Malformed(format!(
                "{}'s {field} is not UTF-8 ({e})",
                self.msg
            ))),
        }
    }
}
