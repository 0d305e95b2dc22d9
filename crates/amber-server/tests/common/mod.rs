//! What the server's tests share: a database written through `amber::Db`,
//! a server started in this process on a free loopback port (its own
//! runtime, on its own thread), and a raw blocking client that speaks the
//! wire protocol frame by frame — nothing of the real client, so that
//! every byte the tests send is the one they mean.
#![allow(dead_code)]

use amber::internals::wire::{self, DEFAULT_MAX_FRAME, Request, Response, VERSION};
use amber::{Db, Options, PRef, PString, Persistent, RemoteOptions, View};
use amber_server::ServeOptions;
use amber_server::serve_write::Writer;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

pub const TOKEN: &[u8] = b"correct horse battery staple";

/// A client's options: the real client over plain TCP with the tests' token.
pub fn client_options() -> Options {
    Options {
        remote: RemoteOptions {
            token: Some(TOKEN.to_vec()),
            ..RemoteOptions::default()
        },
        ..Options::default()
    }
}

/// A real client connected to database `name` of the server at `addr`.
pub fn connect_db(addr: SocketAddr, name: &str) -> Db {
    Db::connect(&format!("amber://{addr}/{name}"), client_options()).expect("connected")
}

#[derive(Persistent)]
#[repr(C)]
pub struct Item {
    pub id: u64,
    pub name: PString,
    pub next: Option<PRef<Item>>,
}

/// `path` opened read-only in this process, at its last commit: what a
/// connection's answers are compared with.
pub fn local(path: &Path) -> amber::internals::store::Store {
    let opts = amber::StoreOptions {
        read_only: true,
        ..amber::StoreOptions::default()
    };
    let vfs = Arc::new(amber::internals::io::real::RealVfs);
    amber::internals::store::Store::open(vfs, path, opts).expect("opened locally")
}

/// Writes `n` items in a list under root "items" (a new database at
/// `path`).
pub fn write_db(path: &Path, n: u64) {
    let mut db = Db::create(path, Options::default()).expect("created");
    append(&mut db, 0..n);
    db.close().expect("closed");
}

/// Commits items `ids` at the head of the list.
pub fn append(db: &mut Db, ids: std::ops::Range<u64>) {
    let mut tx = db.begin().expect("begun");
    let mut head: Option<PRef<Item>> = tx.root("items").expect("root");
    for id in ids {
        let item = tx
            .alloc_with(|tx| {
                Ok(Item {
                    id,
                    name: tx.new_string(&format!("item {id} {}", "x".repeat(id as usize % 300)))?,
                    next: head,
                })
            })
            .expect("allocated");
        head = Some(item);
    }
    tx.set_root("items", head.expect("an item"))
        .expect("root set");
    tx.commit().expect("committed");
}

/// A server running on its own thread and runtime.
pub struct Running {
    pub addr: SocketAddr,
    /// The writer of each database the server writes (dropped before the
    /// server is stopped, so that it closes them).
    pub writers: Vec<(String, Arc<Writer>)>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Asks the server to shut down and waits until it has.
    pub fn shutdown(mut self) -> Duration {
        self.writers.clear();
        let t = std::time::Instant::now();
        let _ = self.stop.take().expect("running").send(());
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("the server thread");
        t.elapsed()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.writers.clear();
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Options serving `databases` read-only (a writer may run beside) on a
/// free loopback port, with [`TOKEN`].
pub fn options(databases: &[(&str, &Path)]) -> ServeOptions {
    ServeOptions {
        listen: "127.0.0.1:0".parse().expect("an address"),
        databases: databases
            .iter()
            .map(|(n, p)| (n.to_string(), p.to_path_buf()))
            .collect(),
        token: Some(TOKEN.to_vec()),
        read_only: true,
        ..ServeOptions::default()
    }
}

/// Options serving `databases` for writing through the server.
pub fn writing(databases: &[(&str, &Path)]) -> ServeOptions {
    ServeOptions {
        read_only: false,
        ..options(databases)
    }
}

/// Starts a server with `opts`.
pub fn start(opts: ServeOptions) -> Running {
    let opts_names: Vec<String> = opts.databases.iter().map(|(n, _)| n.clone()).collect();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let server = match amber_server::bind(opts).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = addr_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let writers = (opts_names.iter())
                .filter_map(|n| Some((n.clone(), server.writer(n)?)))
                .collect::<Vec<_>>();
            let _ = addr_tx.send(Ok((server.local_addr(), writers)));
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
    });
    let (addr, writers) = addr_rx
        .recv()
        .expect("the server thread reports")
        .unwrap_or_else(|e| panic!("the server did not start: {e}"));
    Running {
        addr,
        writers,
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// A raw client connection.
pub struct Client {
    pub s: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connected");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        Client { s }
    }

    /// Connects and says `Hello` for `database` with `token`; returns the
    /// answer.
    pub fn hello(addr: SocketAddr, database: &str, token: &[u8]) -> (Client, Response) {
        let mut c = Client::connect(addr);
        let r = c.ask(&Request::Hello {
            version: VERSION,
            database: database.into(),
            token: token.to_vec(),
        });
        (c, r)
    }

    /// Connects, is welcomed, and returns the client and the `Welcome`.
    pub fn welcomed(addr: SocketAddr, database: &str) -> (Client, Response) {
        let (c, r) = Client::hello(addr, database, TOKEN);
        assert!(matches!(r, Response::Welcome { .. }), "{r:?}");
        (c, r)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("sent");
    }

    pub fn recv(&mut self) -> Response {
        let body = wire::read_frame(&mut self.s, DEFAULT_MAX_FRAME).expect("a frame");
        Response::decode(&body).expect("a response")
    }

    pub fn ask(&mut self, r: &Request) -> Response {
        self.send_raw(&r.encode());
        self.recv()
    }

    /// Reads until the server closes; panics if it sends anything more.
    pub fn expect_closed(&mut self) {
        let mut b = [0u8; 64];
        match self.s.read(&mut b) {
            Ok(0) => {}
            Ok(n) => panic!("{n} more bytes after the last frame: {:?}", &b[..n]),
            // A reset after the server closed is closed too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the connection is not closed: {e}"),
        }
    }
}

/// The error code and message of a response that must be an error.
pub fn error_of(r: Response) -> (wire::ErrorCode, String) {
    match r {
        Response::Error { code, message } => (code, message),
        other => panic!("not an error: {other:?}"),
    }
}

/// A temporary directory and a database of `n` items in it.
pub fn fixture(n: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("items.amber");
    write_db(&path, n);
    (dir, path)
}
