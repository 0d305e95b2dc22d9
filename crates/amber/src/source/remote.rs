//! The remote source: a database served by `amber serve`, read through one
//! connection (the wire protocol is `wire/`, docs/design.md §10).
//!
//! The connection has a *snapshot*: the server answers every read with the
//! committed state as of the connection's start or its last refresh (it
//! keeps that state for the connection as a local read-only handle keeps
//! its own), so that pages fetched at different times agree, and a
//! program's references never see bytes change under them. The catalog
//! and roots are fetched with the snapshot and kept here, so that reading
//! a root never waits on the network; the block map is fetched a region
//! at a time, when the fault path first asks for it.
//!
//! Requests are made one at a time (the connection is behind a lock: the
//! fault service thread and the program's thread may both ask). A request
//! that fails on the connection itself (a timeout, a reset) leaves the
//! connection unusable, as the stream may be cut in the middle of a frame:
//! every later request fails with the first failure, and the program opens
//! the database again. A page met through a plain pointer load then aborts
//! the process with that message, as a damaged page does; `try_get` returns
//! it.

mod cluster;

use crate::format::home::Home;
use super::clean::CleanImages;
use super::Scheme;
use super::remote_tx::RemoteTx;
use super::tls::{TlsFailure, TlsOptions};
use super::{Source, SourceTx};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::PageNo;
use crate::format::meta::RootEntry;
use crate::store::{ClusterBlock, Refreshed, StoreStats};
use crate::wire::{self, Change, ErrorCode, Request, Response, WireError};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Pages of one region of the block map, fetched whole.
const REGION: u64 = 4096;

/// How a program connects to a server ([`Options::remote`](crate::Options)).
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// The server's shared token (`amber serve --token-file`), sent before
    /// anything else; `None` for a server started with
    /// `--insecure-no-auth`.
    pub token: Option<Vec<u8>>,
    /// TLS to the server (`amber serve --tls-cert`): the CA trusted for
    /// its certificate, and the client certificate it may require;
    /// `None`: plain TCP.
    pub tls: Option<TlsOptions>,
    /// How long one request may wait for its answer before the connection
    /// is given up.
    pub timeout: Duration,
    /// The largest answer accepted, in bytes (a bound on what a broken or
    /// hostile server can make the program allocate).
    pub max_frame: u32,
    /// A connection that has made no request for this long sends one that
    /// reads nothing, so that the server's idle timeout (`amber serve
    /// --idle-timeout`) does not close it under a program that works on
    /// resident pages for a while; `None`: never.
    pub keepalive: Option<Duration>,
    /// Bytes of committed block images the program keeps, in persistent
    /// form, so that a commit diffs a written block against its clean
    /// version without asking the server for it (`source/clean.rs`); 0
    /// keeps none (each commit then reads its blocks' images back).
    pub clean_images: usize,
    /// This session's recovery scheme (docs/design.md §11.7): the
    /// strategy its transactions run under and whether its commits ship
    /// their dirty pages. `None`: the database's (`amber serve --scheme`),
    /// else the program's own [`Options::strategy`](crate::Options::strategy),
    /// its records redone at the server.
    pub scheme: Option<Scheme>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            token: None,
            tls: None,
            timeout: Duration::from_secs(30),
            max_frame: wire::DEFAULT_MAX_FRAME,
            keepalive: Some(Duration::from_secs(60)),
            clean_images: 64 << 20,
            scheme: None,
        }
    }
}

impl RemoteOptions {
    /// Reads the token from `path`, as `amber serve --token-file` does:
    /// the file's bytes without a trailing newline.
    pub fn with_token_file(mut self, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let mut token = std::fs::read(path).map_err(|e| Error::io("read token file", path, e))?;
        while token.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
            token.pop();
        }
        if token.is_empty() {
            return Err(Error::invalid(format!("{}: the token file is empty", path.display())));
        }
        self.token = Some(token);
        Ok(self)
    }
}

/// A byte stream to a server: a TCP connection, a TLS one, or what a test puts in its
/// place (a stream that fails or cuts frames on cue).
pub trait Stream: Read + Write + Send + std::fmt::Debug {}

impl<T: Read + Write + Send + std::fmt::Debug> Stream for T {}

/// A database read through a server.
#[derive(Debug)]
pub struct Remote {
    /// The URL, as errors name it.
    url: PathBuf,
    page_size: usize,
    /// How the database stores swizzled pointers (from the `Welcome`).
    home: Home,
    conn: Arc<Mutex<Conn>>,
    snap: RwLock<Snapshot>,
    max_frame: u32,
    /// The thread that keeps an idle connection open, and what stops it.
    keepalive: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    /// What changed when the snapshot last moved, until the object layer
    /// takes it.
    changed: Mutex<Option<Refreshed>>,
    /// Transaction ids, for the object layer's bookkeeping (the server
    /// numbers the transactions it logs).
    next_txid: AtomicU32,
    /// Committed images of blocks read whole, for commits to diff against.
    pub(crate) clean: CleanImages,
    /// The most pages a fault's window asks for at once: halved at each
    /// `TooLarge` (`remote/cluster.rs`), so that a server with small
    /// answers is asked for what it can send.
    window_cap: AtomicU64,
    /// The session's recovery scheme: its own, else the database's.
    scheme: Option<Scheme>,
}

#[derive(Debug)]
struct Conn {
    stream: Box<dyn Stream>,
    /// Why the connection can no longer be used.
    broken: Option<String>,
    /// When the last request was made.
    last: Instant,
}

/// What the client keeps of the connection's snapshot.
#[derive(Debug, Default)]
struct Snapshot {
    lsn: u64,
    page_count: u64,
    types: Vec<(u32, Vec<u8>)>,
    roots: Vec<RootEntry>,
    /// Block map regions fetched so far: region number → blocks starting
    /// in it.
    regions: HashMap<u64, Vec<(PageNo, u32)>>,
}

/// A parsed `amber://host:port/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub(crate) host: String,
    pub(crate) name: String,
}

impl Url {
    pub(crate) fn parse(url: &str) -> Result<Url> {
        let bad = |why: &str| Error::invalid(format!("{url:?} is not an Amber URL: {why}"));
        let rest = url
            .strip_prefix("amber://")
            .ok_or_else(|| bad("it must start with amber://"))?;
        let (host, name) = rest
            .split_once('/')
            .ok_or_else(|| bad("it must name a database: amber://host:port/name"))?;
        if host.is_empty() || !host.contains(':') {
            return Err(bad("the server must be host:port"));
        }
        if name.is_empty() || name.contains('/') {
            return Err(bad("the database name must be one path segment"));
        }
        Ok(Url {
            host: host.to_string(),
            name: name.to_string(),
        })
    }
}

impl Remote {
    /// Connects to the server of `url` over TCP, or TLS if `opts.tls`
    /// says so, and opens its database.
    pub fn connect(url: &str, opts: &RemoteOptions) -> Result<Remote> {
        let parsed = Url::parse(url)?;
        let io_err = |op, e| Error::io(op, url, e);
        let addrs: Vec<_> = parsed
            .host
            .to_socket_addrs()
            .map_err(|e| io_err("resolve the server's address", e))?
            .collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, opts.timeout) {
                Ok(s) => {
                    s.set_read_timeout(Some(opts.timeout))
                        .and_then(|_| s.set_write_timeout(Some(opts.timeout)))
                        .and_then(|_| s.set_nodelay(true))
                        .map_err(|e| io_err("set up the connection", e))?;
                    let stream: Box<dyn Stream> = match &opts.tls {
                        Some(tls) => Box::new(super::tls::connect(tls, s, &parsed.host, url)?),
                        None => Box::new(s),
                    };
                    return Remote::over(stream, url, &parsed.name, opts);
                }
                Err(e) => last = e,
            }
        }
        Err(io_err("connect to the server", last))
    }

    /// Opens database `name` over `stream`: the greeting, then the catalog.
    pub fn over(
        stream: Box<dyn Stream>,
        url: &str,
        name: &str,
        opts: &RemoteOptions,
    ) -> Result<Remote> {
        let mut conn = Conn {
            stream,
            broken: None,
            last: Instant::now(),
        };
        let hello = Request::Hello {
            version: wire::VERSION,
            database: name.to_string(),
            token: opts.token.clone().unwrap_or_default(),
        };
        let url_path = PathBuf::from(url);
        let welcome = conn.call(&url_path, opts.max_frame, &hello)?;
        let Response::Welcome {
            version,
            page_size,
            page_count,
            snapshot_lsn,
            home,
            scheme,
            ..
        } = welcome
        else {
            return Err(unexpected(&url_path, "Hello", &welcome));
        };
        if version != wire::VERSION {
            return Err(remote(
                &url_path,
                format!(
                    "the server speaks wire version {version}, this program {}",
                    wire::VERSION
                ),
            ));
        }
        let page_size = usize::try_from(page_size)
            .ok()
            .filter(|p| p.is_power_of_two() && *p >= 512)
            .ok_or_else(|| remote(&url_path, format!("page size {page_size} is not one Amber uses")))?;
        let home = Home::new(home)
            .map_err(|e| remote(&url_path, format!("the server's database has {e}")))?;
        let scheme = match opts.scheme {
            Some(s) => Some(s),
            None => Scheme::from_code(scheme)
                .map_err(|e| remote(&url_path, format!("the server's database has {e}")))?,
        };
        let conn = Arc::new(Mutex::new(conn));
        let keepalive = match opts.keepalive {
            Some(every) => Some(keep_alive(&conn, url_path.clone(), opts.max_frame, every)?),
            None => None,
        };
        let r = Remote {
            url: url_path,
            page_size,
            home,
            conn,
            snap: RwLock::new(Snapshot {
                lsn: snapshot_lsn,
                page_count,
                ..Snapshot::default()
            }),
            max_frame: opts.max_frame,
            keepalive,
            changed: Mutex::new(None),
            next_txid: AtomicU32::new(1),
            clean: CleanImages::new(page_size, opts.clean_images),
            window_cap: AtomicU64::new(u64::MAX),
            scheme,
        };
        r.load_catalog()?;
        Ok(r)
    }

    /// The session's recovery scheme ([`RemoteOptions::scheme`], else the
    /// database's); `None`: the program's own strategy, records only.
    pub fn scheme(&self) -> Option<Scheme> {
        self.scheme
    }

    /// One request and its answer; an `Error` answer becomes the error it
    /// names. The object layer's requests, and those of Amber's own tools
    /// (`amber status`, `amber backup`, `amber verify` through the server).
    pub fn request(&self, req: &Request) -> Result<Response> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        conn.call(&self.url, self.max_frame, req)
    }

    /// Fetches the catalog and roots of the snapshot.
    fn load_catalog(&self) -> Result<()> {
        match self.request(&Request::Catalog)? {
            Response::Catalog { types, roots } => {
                let mut snap = self.snap();
                snap.types = types;
                snap.roots = roots
                    .into_iter()
                    .map(|(name, addr, type_id)| RootEntry {
                        name,
                        addr,
                        type_id,
                    })
                    .collect();
                Ok(())
            }
            other => Err(unexpected(&self.url, "Catalog", &other)),
        }
    }

    /// The error for an answer that does not fit the request.
    pub fn unexpected(&self, asked: &str, got: &Response) -> Error {
        unexpected(&self.url, asked, got)
    }

    /// The roots of the snapshot.
    pub(crate) fn committed_roots(&self) -> Vec<RootEntry> {
        self.snap_read().roots.clone()
    }

    /// One root of the snapshot.
    pub(crate) fn committed_root(&self, name: &str) -> Option<RootEntry> {
        self.snap_read().roots.iter().find(|r| r.name == name).cloned()
    }

    /// The server moved the connection's snapshot (a refresh, a begin, a
    /// commit or its refusal): what the client keeps of the old one goes,
    /// the catalog is fetched again if types or roots changed, and what
    /// changed waits for the object layer (`take_changed`).
    pub(crate) fn moved(&self, page_count: u64, change: Change) -> Result<Refreshed> {
        let (refreshed, catalog) = match change {
            Change::Unchanged => return Ok(Refreshed::Unchanged),
            Change::Pages {
                lsn,
                pages,
                catalog,
            } => (Refreshed::Pages { lsn, pages }, catalog),
            Change::Everything { lsn } => (Refreshed::Everything { lsn }, true),
        };
        match &refreshed {
            Refreshed::Pages { pages, .. } => self.clean.changed(pages),
            _ => self.clean.clear(),
        }
        {
            let mut snap = self.snap();
            snap.page_count = page_count;
            snap.regions.clear();
            if let Refreshed::Pages { lsn, .. } | Refreshed::Everything { lsn } = &refreshed {
                snap.lsn = *lsn;
            }
        }
        if catalog {
            self.load_catalog()?;
        }
        *self.changed.lock().unwrap_or_else(|e| e.into_inner()) = Some(refreshed.clone());
        Ok(refreshed)
    }

    fn snap(&self) -> std::sync::RwLockWriteGuard<'_, Snapshot> {
        self.snap.write().unwrap_or_else(|e| e.into_inner())
    }

    fn snap_read(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        self.snap.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Region `region` of the block map, fetched if it is not here yet.
    fn region(&self, region: u64) -> Result<Vec<(PageNo, u32)>> {
        if let Some(r) = self.snap_read().regions.get(&region) {
            return Ok(r.clone());
        }
        let from = region * REGION;
        let blocks = match self.request(&Request::Blocks {
            from,
            pages: REGION,
        })? {
            Response::Blocks(b) => b,
            other => return Err(unexpected(&self.url, "Blocks", &other)),
        };
        let in_region = |&(h, n): &(u64, u32)| h >= from && h < from + REGION && n > 0;
        if !blocks.iter().all(in_region) || !blocks.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err(remote(&self.url, "the block map it sent is out of order or out of range"));
        }
        self.snap().regions.insert(region, blocks.clone());
        Ok(blocks)
    }
}

/// Starts the thread that sends `Stats` on a connection idle for `every`.
fn keep_alive(
    conn: &Arc<Mutex<Conn>>,
    url: PathBuf,
    max_frame: u32,
    every: Duration,
) -> Result<(mpsc::Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = mpsc::channel::<()>();
    let conn = Arc::clone(conn);
    let name = url.clone();
    let thread = std::thread::Builder::new()
        .name("amber-keepalive".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
                if c.broken.is_some() {
                    return;
                }
                if c.last.elapsed() >= every {
                    // A failure marks the connection broken: the next
                    // request reports it.
                    let _ = c.call(&url, max_frame, &Request::Stats);
                }
            }
        })
        .map_err(|e| Error::io("start the keepalive thread", name, e))?;
    Ok((stop, thread))
}

impl Conn {
    fn call(&mut self, url: &Path, max_frame: u32, req: &Request) -> Result<Response> {
        let mut body = Vec::new();
        self.exchange(url, max_frame, req, &mut body)?;
        match Response::decode(&body) {
            Ok(Response::Error { code, message }) => Err(server_error(url, code, message)),
            Ok(r) => Ok(r),
            Err(e) => Err(self.broken_by(url, e)),
        }
    }

    /// Sends `req` and reads the answer's body into `body`.
    fn exchange(&mut self, url: &Path, max_frame: u32, req: &Request, body: &mut Vec<u8>) -> Result<()> {
        body.clear();
        self.exchange_after(url, max_frame, req, body).map(|_| ())
    }

    /// Sends `req` and appends the answer's body to `body`: where it is.
    fn exchange_after(
        &mut self,
        url: &Path,
        max_frame: u32,
        req: &Request,
        body: &mut Vec<u8>,
    ) -> Result<Range<usize>> {
        self.last = Instant::now();
        if let Some(why) = &self.broken {
            return Err(Error::io(
                "use the server connection",
                url,
                io::Error::new(io::ErrorKind::NotConnected, why.clone()),
            ));
        }
        let sent = self
            .stream
            .write_all(&req.encode())
            .and_then(|_| self.stream.flush())
            .map_err(WireError::Io)
            .and_then(|_| wire::read_frame_after(&mut self.stream, max_frame, body));
        sent.map_err(|e| self.broken_by(url, e))
    }

    /// The error for a frame that could not be sent, read or decoded; the
    /// connection is not used again (the stream may be cut inside a frame).
    fn broken_by(&mut self, url: &Path, e: WireError) -> Error {
        self.broken = Some(format!("an earlier request failed: {e}"));
        match e {
            WireError::Io(e) => match e.get_ref().and_then(|i| i.downcast_ref::<TlsFailure>()) {
                Some(tls) => remote(url, tls.0.clone()),
                None => Error::io("talk to the server", url, e),
            },
            other => remote(url, format!("its answer is not the protocol: {other}")),
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.keepalive.take() {
            drop(stop);
            let _ = thread.join();
        }
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if conn.broken.is_none() {
            // Best effort: the server notices a closed connection anyway.
            let _ = conn.stream.write_all(&Request::Bye.encode());
        }
    }
}

fn remote(url: &Path, what: impl Into<String>) -> Error {
    Error::Remote {
        url: url.display().to_string(),
        what: what.into(),
    }
}

fn unexpected(url: &Path, asked: &str, got: &Response) -> Error {
    let kind = format!("{got:?}");
    let kind = kind.split([' ', '(', '{']).next().unwrap_or("?");
    remote(url, format!("it answered {asked} with {kind}"))
}

/// The error a server's `Error` answer stands for.
fn server_error(url: &Path, code: ErrorCode, message: String) -> Error {
    match code {
        ErrorCode::Corrupt => Error::Corrupt {
            file: FileKind::PageFile,
            path: url.to_path_buf(),
            at: Location::File,
            what: format!("on the server: {message}"),
        },
        ErrorCode::Io => Error::io("serve a read", url, io::Error::other(message)),
        ErrorCode::Invalid => Error::invalid(format!("{}: {message}", url.display())),
        code => remote(url, format!("the server refused: {code}: {message}")),
    }
}

impl Source for Remote {
    fn name(&self) -> &Path {
        &self.url
    }

    fn page_size(&self) -> usize {
        self.page_size
    }

    fn home(&self) -> Home {
        self.home
    }

    fn page_count(&self) -> PageNo {
        self.snap_read().page_count
    }

    fn blocks_starting_in(&self, from: PageNo, pages: u64) -> Result<Vec<(PageNo, u32)>> {
        let end = from.saturating_add(pages);
        let mut out = Vec::new();
        let mut region = from / REGION;
        while region * REGION < end {
            out.extend(
                self.region(region)?
                    .into_iter()
                    .filter(|&(h, _)| h >= from && h < end),
            );
            region += 1;
        }
        Ok(out)
    }

    fn read_block(&self, head: PageNo) -> Result<Vec<u8>> {
        if let Some(img) = self.clean.get(head) {
            return Ok(img);
        }
        match self.request(&Request::ReadBlock { head })? {
            Response::Block(img) if !img.is_empty() && img.len() % self.page_size == 0 => {
                self.clean.put(head, &img);
                Ok(img)
            }
            Response::Block(img) => Err(remote(
                &self.url,
                format!("block {head}: an image of {} bytes is not whole pages", img.len()),
            )),
            other => Err(unexpected(&self.url, "ReadBlock", &other)),
        }
    }

    fn read_cluster(
        &self,
        from: PageNo,
        pages: u64,
        buf: &mut Vec<u8>,
    ) -> Result<Vec<ClusterBlock>> {
        // The answer is read into `buf` (the fault path's buffer, kept
        // between faults) and its images are installed from there: no copy
        // of them, and no fresh memory, on the client.
        buf.clear();
        let mut out = Vec::new();
        self.cluster_after(from, pages, buf, &mut out)?;
        Ok(out)
    }

    fn types(&self) -> Vec<(u32, Vec<u8>)> {
        self.snap_read().types.clone()
    }

    fn roots(&self) -> Vec<RootEntry> {
        self.snap_read().roots.clone()
    }

    fn root(&self, name: &str) -> Option<RootEntry> {
        self.committed_root(name)
    }

    fn refresh(&self) -> Result<Refreshed> {
        let (page_count, change) = match self.request(&Request::Refresh)? {
            Response::Refreshed { page_count, change } => (page_count, change),
            other => return Err(unexpected(&self.url, "Refresh", &other)),
        };
        // The caller drops what changed itself.
        let refreshed = self.moved(page_count, change)?;
        self.take_changed();
        Ok(refreshed)
    }

    fn stats(&self) -> StoreStats {
        let snap = self.snap_read();
        StoreStats {
            page_size: self.page_size,
            page_count: snap.page_count,
            free_pages: 0,
            blocks: 0,
            pending_blocks: 0,
            logged_pages: 0,
            wpl_installed_pages: 0,
            wpl_installed_log_bytes: 0,
            checkpoint_lsn: 0,
            end_lsn: snap.lsn,
            log_syncs: 0,
            generation: 0,
        }
    }

    fn at_snapshot(&self) -> bool {
        true
    }

    fn begin(&self) -> Result<Box<dyn SourceTx + '_>> {
        match self.request(&Request::Begin)? {
            Response::Begun { page_count, change } => {
                self.moved(page_count, change)?;
            }
            other => return Err(unexpected(&self.url, "Begin", &other)),
        }
        let txid = self.next_txid.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(RemoteTx::new(self, txid)))
    }

    fn take_changed(&self) -> Option<Refreshed> {
        self.changed.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// A forgotten transaction's buffer was leaked with it; the server
    /// aborts its side at the next `Begin`.
    fn forget_tx(&self, _: crate::wal::TxId) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_is_wrong() {
        let u = Url::parse("amber://127.0.0.1:7878/parts").unwrap();
        assert_eq!((u.host.as_str(), u.name.as_str()), ("127.0.0.1:7878", "parts"));
        for bad in [
            "http://x:1/a",
            "amber://x:1",
            "amber://x/a",
            "amber://x:1/",
            "amber://x:1/a/b",
        ] {
            let e = Url::parse(bad).unwrap_err().to_string();
            assert!(e.contains("not an Amber URL"), "{bad}: {e}");
        }
    }
}
