//! One connection, from its `Hello` to its close.
//!
//! The handshake comes before anything else. On a TLS server, the TLS
//! handshake first (a client that does not start one is told in a
//! plaintext `Error` frame that the server requires TLS; with a client CA,
//! a client without a certificate that CA signed fails the handshake,
//! which is logged); on a plaintext server, a client that starts a TLS
//! handshake is refused as such. Then, over TLS or not, the first frame
//! must arrive — all of it within the hello timeout of the connection's
//! accept — and be a `Hello` of this protocol version
//! (read before the rest of it, so that a client of another version is
//! told so), with the server's token (compared in constant time) and the
//! name of a served database. Only then is the database opened for the
//! connection and its snapshot described in the `Welcome`.
//!
//! Then requests are answered one at a time, in order, until the client
//! says `Bye` or closes, sends nothing for the idle timeout (`Timeout`),
//! sends a frame that does not decode or is over the limit (`Malformed`,
//! `TooLarge`), or the server shuts down (`ShuttingDown`, sent between
//! requests: one in flight is answered first). Each of those is logged
//! with the peer's address, answered with an `Error` frame when the
//! socket still takes one, and closes this connection only.

use crate::listener::Shared;
use crate::serve_read::{Served, code_of};
use crate::{Blocking, ServeOptions, status, tls};
use amber::internals::wire::{
    self, ErrorCode, MAX_TOKEN, Request, Response, VERSION, WireError, body_len,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::{Instant, timeout, timeout_at};
use tokio_rustls::TlsAcceptor;

/// The largest request body before the handshake, and after it on a
/// database served read-only: a `Hello` with a database name and a token
/// of the longest lengths allowed. Every other read request is at most 17
/// bytes but an `Inspect` of an object, whose address fits well within
/// this, so such a client's frame never makes the server hold more. On a
/// database the server writes, a `Commit` may be as large as any frame
/// (`max_frame`).
pub(crate) const MAX_REQUEST: u32 = 1 + 4 + 2 + (2 + u16::MAX as u32) + (4 + MAX_TOKEN as u32);

/// Why a connection ends.
enum End {
    /// The client said `Bye`, or closed between frames.
    Left,
    /// Tell the client, log, close.
    Refuse(ErrorCode, String),
    /// The socket failed, or closed inside a frame: log and close.
    Lost(String),
}

/// Serves one connection; `permit` is its place under the connection
/// limit, given back when the session ends.
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) {
    let opts = &shared.opts;
    let hello_by = Instant::now() + opts.hello_timeout;
    // A shutdown does not wait for a client that has sent nothing yet.
    let looked = tokio::select! {
        t = tls::starts_with_tls(&stream, opts.hello_timeout) => Some(t),
        _ = shutdown.wait_for(|&s| s) => None,
    };
    let Some(config) = &shared.tls else {
        let start = match looked {
            None => Err(shutting_down()),
            Some(Some(true)) => Err(End::Refuse(
                ErrorCode::Malformed,
                "the client began a TLS handshake, but this server is not serving TLS \
                 (started without --tls-cert)"
                    .into(),
            )),
            _ => Ok(hello_by),
        };
        return session(stream, peer, &shared, shutdown, permit, start).await;
    };
    let Some(starts_with_tls) = looked else {
        // It cannot read a plaintext `ShuttingDown`.
        log::info!("{peer}: closed before its TLS handshake: the server is shutting down");
        return;
    };
    if starts_with_tls == Some(false) {
        let refused = End::Refuse(
            ErrorCode::Auth,
            "this server requires TLS: connect with TLS options (the CA to trust, and a \
             client certificate if the server asks for one)"
                .into(),
        );
        return session(stream, peer, &shared, shutdown, permit, Err(refused)).await;
    }
    let accept = TlsAcceptor::from(config.clone()).accept(stream);
    let accepted = tokio::select! {
        a = timeout_at(hello_by, accept.into_fallible()) => a,
        _ = shutdown.wait_for(|&s| s) => {
            log::info!("{peer}: closed during its TLS handshake: the server is shutting down");
            return;
        }
    };
    match accepted {
        Ok(Ok(stream)) => session(stream, peer, &shared, shutdown, permit, Ok(hello_by)).await,
        Ok(Err((e, mut stream))) => {
            drop(permit);
            log::info!("{peer}: refused: the TLS handshake failed: {e}");
            // The alert rustls sent says why; unread bytes left at the
            // close would reset the connection and could destroy it.
            close(&mut stream, close_wait(opts)).await;
        }
        Err(_) => log::info!(
            "{peer}: closed: no TLS handshake within the hello timeout of {} s",
            opts.hello_timeout.as_secs_f64()
        ),
    }
}

/// The wire protocol on `stream` (plain TCP, or TLS once its handshake
/// is done): the `Hello` by `start`, or the refusal `start` holds, then
/// requests.
async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    peer: SocketAddr,
    shared: &Shared,
    mut shutdown: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
    start: Result<Instant, End>,
) {
    let opts = &shared.opts;
    let limit = opts.max_frame.min(MAX_REQUEST);
    let end = match start {
        Err(end) => end,
        Ok(by) => match handshake(&mut stream, peer, shared, &mut shutdown, by, limit).await {
            Err(end) => end,
            Ok((served, database)) => {
                let db = database.as_str();
                requests(&mut stream, peer, shared, &mut shutdown, served, db, limit).await
            }
        },
    };
    // The place under the limit is given back before the close, which may
    // wait for a slow peer.
    drop(permit);
    match end {
        End::Left => log::debug!("{peer}: closed"),
        End::Lost(why) => log::info!("{peer}: connection lost: {why}"),
        End::Refuse(code, message) => {
            log::info!("{peer}: closing: {code}: {message}");
            let frame = Response::Error { code, message }.encode();
            let wait = close_wait(opts);
            if let Ok(Ok(())) = timeout(wait, write_flushed(&mut stream, &frame, &[])).await {
                // Only a frame refused unread (a plaintext `Hello` to a
                // TLS server is refused as `Auth`), or a client that
                // sends before it reads, leaves bytes to drain.
                let unread = matches!(
                    code,
                    ErrorCode::Malformed | ErrorCode::TooLarge | ErrorCode::Auth
                );
                close(&mut stream, if unread { wait } else { Duration::ZERO }).await;
            }
        }
    }
}

/// How long a closing connection may take to take its last frame.
fn close_wait(opts: &ServeOptions) -> Duration {
    opts.idle_timeout.min(Duration::from_secs(5))
}

/// Closes a connection: the write side first, then whatever the peer
/// still sends is read and dropped, until it closes too or for `linger` at
/// most — closing a socket with unread bytes resets it, and a reset may
/// destroy the error frame before the peer reads it.
async fn close<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, linger: Duration) {
    let _ = timeout(Duration::from_secs(1), stream.shutdown()).await;
    let _ = timeout(linger, async {
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    })
    .await;
}

/// Answers a connection over the limit with `Busy`, and closes it; on a
/// TLS server (`tls`), inside TLS once its handshake is done, so that the
/// client can read it (a client certificate is checked as for any
/// connection).
pub async fn refuse_busy(
    stream: TcpStream,
    peer: SocketAddr,
    max: usize,
    wait: Duration,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let wait = wait.min(Duration::from_secs(5));
    log::warn!("{peer}: refused: already serving {max} connections");
    let frame = Response::Error {
        code: ErrorCode::Busy,
        message: format!("the server is serving its limit of {max} connections: try later"),
    }
    .encode();
    async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
        mut stream: S,
        frame: &[u8],
        wait: Duration,
    ) {
        let _ = timeout(wait, write_flushed(&mut stream, frame, &[])).await;
        close(&mut stream, wait).await;
    }
    match tls {
        None => answer(stream, &frame, wait).await,
        Some(config) => {
            if let Ok(Ok(stream)) = timeout(wait, TlsAcceptor::from(config).accept(stream)).await {
                answer(stream, &frame, wait).await;
            }
        }
    }
}

/// The first frame, checked (whole by `by`); the database opened for the
/// connection, and the `Welcome` sent. Returns the connection's view and
/// the database's name.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    peer: SocketAddr,
    shared: &Shared,
    shutdown: &mut watch::Receiver<bool>,
    by: Instant,
    limit: u32,
) -> Result<(Served, String), End> {
    let opts = &shared.opts;
    let what = format!(
        "Hello within the hello timeout of {} s",
        opts.hello_timeout.as_secs_f64()
    );
    let body = next_frame(stream, shutdown, by, limit, &what).await?;
    match wire::hello_version(&body) {
        Some(VERSION) => {}
        Some(v) => {
            return Err(End::Refuse(
                ErrorCode::Version,
                format!("the client speaks wire protocol version {v}, this server {VERSION}"),
            ));
        }
        None => {}
    }
    let (database, token) = match Request::decode(&body) {
        Ok(Request::Hello {
            database, token, ..
        }) => (database, token),
        Ok(other) => {
            return Err(End::Refuse(
                ErrorCode::Malformed,
                format!("the first message must be Hello, not {}", name(&other)),
            ));
        }
        Err(e) => return Err(End::Refuse(ErrorCode::Malformed, e.to_string())),
    };
    if let Some(expected) = &opts.token
        && !same_token(expected, &token)
    {
        let why = if token.is_empty() {
            "no token given: this server requires one"
        } else {
            "wrong token"
        };
        return Err(End::Refuse(ErrorCode::Auth, why.into()));
    }
    let Some(served_db) = shared.databases.get(&database) else {
        return Err(End::Refuse(
            ErrorCode::NoSuchDatabase,
            format!("no database named {database:?} is served here"),
        ));
    };
    let cap = answer_limit(opts.max_frame, opts.max_buffered);
    let writer = shared.writers.get(&database).cloned();
    let (path, cache) = (served_db.path.clone(), served_db.cache.clone());
    let vfs = opts.vfs.clone();
    let opened =
        tokio::task::spawn_blocking(move || Served::open(vfs, &path, cap, writer, cache)).await;
    let served = match opened {
        Ok(Ok(s)) => s,
        // A read-only open refuses misuse only when the reader table is
        // full (126 readers of the database, all processes together):
        // the client may try later, as when the server is full.
        Ok(Err(e @ amber::Error::Invalid(_))) => {
            return Err(End::Refuse(ErrorCode::Busy, e.to_string()));
        }
        Ok(Err(e)) => return Err(End::Refuse(code_of(&e), e.to_string())),
        Err(e) => return Err(End::Refuse(ErrorCode::Internal, e.to_string())),
    };
    send(stream, &served.welcome(), opts, shutdown).await?;
    let doing = if served.writable() {
        "writing"
    } else {
        "reading"
    };
    log::info!("{peer}: {doing} {database:?}");
    Ok((served, database))
}

/// Requests until the connection ends.
async fn requests<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    peer: SocketAddr,
    shared: &Shared,
    shutdown: &mut watch::Receiver<bool>,
    mut served: Served,
    database: &str,
    limit: u32,
) -> End {
    let opts = &shared.opts;
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    let in_place =
        opts.blocking == Blocking::InPlace && flavor == tokio::runtime::RuntimeFlavor::MultiThread;
    let limit = if served.writable() {
        limit.max(opts.max_frame)
    } else {
        limit
    };
    let registered = shared.status.register(peer, database, &served);
    let what = format!(
        "request within the idle timeout of {} s",
        opts.idle_timeout.as_secs_f64()
    );
    loop {
        let until = Instant::now() + opts.idle_timeout;
        let body = match next_frame(stream, shutdown, until, limit, &what).await {
            Ok(b) => b,
            Err(end) => return end,
        };
        registered.received(4 + body.len());
        let req = match Request::decode(&body) {
            Ok(Request::Bye) => return End::Left,
            Ok(Request::Hello { .. }) => {
                return End::Refuse(ErrorCode::Malformed, "a second Hello".into());
            }
            Ok(r) => r,
            Err(e) => return End::Refuse(ErrorCode::Malformed, e.to_string()),
        };
        // A commit's records are held once more by its store transaction:
        // the frame's bytes go first.
        drop(body);
        log::trace!("{peer}: {}", name(&req));
        if req == Request::Status {
            match send(stream, &status::report(shared), opts, shutdown).await {
                Ok(n) => registered.sent(n),
                Err(end) => return end,
            }
            continue;
        }
        // Held by the buffer pool: sent as it was framed, on the worker.
        if let Some(framed) = served.cached(&req) {
            registered.answered_cached(&framed, &served);
            match send_frame(stream, &framed.head, &framed.tail, opts, shutdown).await {
                Ok(n) => registered.sent(n),
                Err(end) => return end,
            }
            continue;
        }
        let resp = if let Request::Commit {
            records,
            frees,
            roots,
            reads,
        } = req
        {
            match served.start_commit(records, frees, roots, &reads, in_place) {
                Ok((pending, done)) => served.finish_commit(pending, done.await.ok()),
                Err(refused) => refused,
            }
        } else if in_place && (quick(&req) || served.reads_from_memory(&req)) {
            served.answer(&req)
        } else if in_place {
            tokio::task::block_in_place(|| served.answer(&req))
        } else {
            let answered = tokio::task::spawn_blocking(move || {
                let resp = served.answer(&req);
                (served, resp)
            })
            .await;
            let resp;
            (served, resp) = match answered {
                Ok(r) => r,
                Err(e) => return End::Refuse(ErrorCode::Internal, format!("answering: {e}")),
            };
            resp
        };
        if let Response::Error { code, message } = &resp {
            log::debug!("{peer}: request refused: {code}: {message}");
        }
        registered.answered(&resp, &served);
        let (head, tail) = resp.encode_split();
        match send_frame(stream, &head, tail, opts, shutdown).await {
            Ok(n) => registered.sent(n),
            Err(end) => return end,
        }
        let committed = matches!(resp, Response::Committed { .. });
        served.sent(resp, head);
        if committed {
            crate::budget::relieve(shared, database).await;
        }
    }
}

/// Whether a request is answered from memory, or by reads of files the
/// writer has just written (a refresh's read of the log's tail, which the
/// page cache holds): on the runtime's worker itself. `block_in_place`
/// hands the worker's place to another thread and back, a few context
/// switches that cost more than such an answer; the requests that sync
/// the log or copy files keep it, and so do those that read pages unless
/// the connection's reads come from the page cache
/// (`Served::reads_from_memory`).
fn quick(req: &Request) -> bool {
    matches!(
        req,
        Request::Begin
            | Request::Refresh
            | Request::Alloc { .. }
            | Request::Abort
            | Request::Catalog
            | Request::Stats
            | Request::Blocks { .. }
    )
}

/// The bytes of images one answer may carry: a frame's worth, and no more
/// than half the connection's buffer (the images are held twice while
/// their frame is built). The block list comes on top: an answer whose
/// frame is still over the limit is refused when it is sent.
fn answer_limit(max_frame: u32, max_buffered: usize) -> usize {
    (max_frame as usize).min(max_buffered / 2)
}

/// The next frame's body, whole by `until`, unless the server shuts down
/// first.
async fn next_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    shutdown: &mut watch::Receiver<bool>,
    until: Instant,
    limit: u32,
    what: &str,
) -> Result<Vec<u8>, End> {
    if *shutdown.borrow() {
        return Err(shutting_down());
    }
    tokio::select! {
        got = timeout_at(until, read_frame(stream, limit)) => match got {
            Err(_) => Err(End::Refuse(ErrorCode::Timeout, format!("no whole {what}"))),
            Ok(Ok(Some(body))) => Ok(body),
            Ok(Ok(None)) => Err(End::Left),
            Ok(Err(WireError::TooLarge { len, max })) => Err(End::Refuse(
                ErrorCode::TooLarge,
                format!("a frame of {len} bytes exceeds the limit of {max} on requests"),
            )),
            Ok(Err(WireError::Io(e))) => Err(End::Lost(e.to_string())),
            Ok(Err(e)) => Err(End::Refuse(ErrorCode::Malformed, e.to_string())),
        },
        _ = shutdown.wait_for(|&s| s) => Err(shutting_down()),
    }
}

fn shutting_down() -> End {
    End::Refuse(
        ErrorCode::ShuttingDown,
        "the server is shutting down".into(),
    )
}

/// Reads a frame: `None` if the peer closed before its first byte.
async fn read_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    limit: u32,
) -> Result<Option<Vec<u8>>, WireError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match stream.read(&mut prefix[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => {
                return Err(WireError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the peer closed after {got} bytes of a length prefix"),
                )));
            }
            n => got += n,
        }
    }
    let mut body = vec![0u8; body_len(prefix, limit)?];
    stream.read_exact(&mut body).await.map_err(|e| {
        WireError::Io(std::io::Error::new(
            e.kind(),
            format!("inside a frame of {} bytes: {e}", body.len()),
        ))
    })?;
    Ok(Some(body))
}

/// Sends `resp`, or a `TooLarge` refusal in its place if its frame is over
/// the limit; the bytes sent. A client that does not take it within the
/// idle timeout is dropped; once the server shuts down, within 5 s.
async fn send<S: AsyncWrite + Unpin>(
    stream: &mut S,
    resp: &Response,
    opts: &ServeOptions,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<usize, End> {
    let (head, tail) = resp.encode_split();
    send_frame(stream, &head, tail, opts, shutdown).await
}

/// Sends a frame, `head` then `tail`, as `send` does.
async fn send_frame<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut head: &[u8],
    mut tail: &[u8],
    opts: &ServeOptions,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<usize, End> {
    let body = head.len() - 4 + tail.len();
    let refusal;
    if body > opts.max_frame as usize {
        refusal = Response::Error {
            code: ErrorCode::TooLarge,
            message: format!(
                "the answer is {body} bytes, more than the frame limit of {}: ask for fewer pages",
                opts.max_frame
            ),
        }
        .encode();
        head = &refusal;
        tail = &[];
    }
    let len = head.len() + tail.len();
    let sent = |done: std::io::Result<()>| {
        done.map(|()| len)
            .map_err(|e| End::Lost(format!("writing an answer: {e}")))
    };
    let write = write_flushed(stream, head, tail);
    tokio::pin!(write);
    // Most answers fit in the socket's buffer: written at the first poll,
    // without arming the timeout (a timer costs more than a small
    // answer's write).
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx))).await;
    if let std::task::Poll::Ready(done) = first {
        return sent(done);
    }
    let mut deadline = Instant::now() + opts.idle_timeout;
    let mut stopping = false;
    loop {
        tokio::select! {
            done = &mut write => return sent(done),
            () = tokio::time::sleep_until(deadline) => {
                let why = if stopping { "the shutdown's grace" } else { "the idle timeout" };
                return Err(End::Lost(format!("the client took no answer within {why}")));
            }
            _ = shutdown.wait_for(|&s| s), if !stopping => {
                stopping = true;
                deadline = deadline.min(Instant::now() + close_wait(opts));
            }
        }
    }
}

/// Writes a frame, `head` then `tail` (see `Response::encode_split`), and
/// flushes it: a TLS stream may hold the last record until flushed.
async fn write_flushed<S: AsyncWrite + Unpin>(
    stream: &mut S,
    head: &[u8],
    tail: &[u8],
) -> std::io::Result<()> {
    stream.write_all(head).await?;
    stream.write_all(tail).await?;
    stream.flush().await
}

/// Whether `given` is the token, in time that does not depend on where
/// they first differ (only on their lengths).
fn same_token(token: &[u8], given: &[u8]) -> bool {
    let mut diff = u8::from(token.len() != given.len());
    for i in 0..token.len().max(given.len()) {
        let a = token.get(i).copied().unwrap_or(0);
        let b = given.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(a ^ b);
    }
    diff == 0
}

/// A request's name, for a refusal.
fn name(r: &Request) -> &'static str {
    match r {
        Request::Hello { .. } => "Hello",
        Request::Blocks { .. } => "Blocks",
        Request::ReadBlock { .. } => "ReadBlock",
        Request::ReadCluster { .. } => "ReadCluster",
        Request::Catalog => "Catalog",
        Request::Refresh => "Refresh",
        Request::Stats => "Stats",
        Request::Bye => "Bye",
        Request::Begin => "Begin",
        Request::Alloc { .. } => "Alloc",
        Request::DefineType { .. } => "DefineType",
        Request::Commit { .. } => "Commit",
        Request::Abort => "Abort",
        Request::Status => "Status",
        Request::BackupBegin => "BackupBegin",
        Request::BackupRead { .. } => "BackupRead",
        Request::BackupEnd => "BackupEnd",
        Request::Verify { .. } => "Verify",
        Request::Checkpoint => "Checkpoint",
        Request::Inspect(_) => "Inspect",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"secret", b"secret"));
        assert!(!same_token(b"secret", b"secreT"));
        assert!(!same_token(b"secret", b"secret\0"));
        assert!(!same_token(b"secret", b""));
    }

    #[test]
    fn the_longest_hello_fits_the_request_limit() {
        let hello = Request::Hello {
            version: VERSION,
            database: "d".repeat(u16::MAX as usize),
            token: vec![1; MAX_TOKEN],
        }
        .encode();
        assert_eq!(hello.len() - 4, MAX_REQUEST as usize);
    }
}
