//! Clients of `amber serve` through the public API (`Db::connect`): they
//! read what a local handle reads, at a snapshot that moves only on
//! `refresh`, while a writer in this process commits; pages fetched after a
//! writer's commit still show the client's snapshot; writes are refused;
//! a wrong token or a vanished server is a clear error, never a panic.
//!
//! The server runs in this test process on a runtime of its own (this
//! binary is the process of its tests alone).

use amber::{BackendChoice, Db, Error, Options, PRef, PVec, Persistent, RemoteOptions};
use amber_server::{ServeOptions, bind};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

#[derive(Persistent)]
#[repr(C)]
struct Node {
    value: u64,
    next: Option<PRef<Node>>,
    /// Makes nodes big enough that the list spans many pages (and so
    /// several fetch clusters).
    pad: [u64; 30],
}

#[derive(Persistent)]
#[repr(C)]
struct Head {
    first: Option<PRef<Node>>,
    commits: u64,
    all: PVec<PRef<Node>>,
}

const NODES: u64 = 5000;
const TOKEN: &[u8] = b"client-test-token";

/// A server on a free loopback port, stopped when dropped.
struct Running {
    addr: SocketAddr,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(path: &Path) -> Running {
        Running::with(path, |_| {})
    }

    /// A server whose options `adjust` changed.
    fn with(path: &Path, adjust: impl FnOnce(&mut ServeOptions)) -> Running {
        let mut opts = ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            databases: vec![("list".into(), path.to_path_buf())],
            token: Some(TOKEN.to_vec()),
            read_only: true,
            ..ServeOptions::default()
        };
        adjust(&mut opts);
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = bind(opts).await.expect("bind");
                addr_tx.send(server.local_addr()).unwrap();
                let stop = async move {
                    let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
                };
                server.run(stop).await;
            });
        });
        Running {
            addr: addr_rx.recv().expect("server address"),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("amber://{}/list", self.addr)
    }

    fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            t.join().expect("server thread");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn client_opts(backend: BackendChoice) -> Options {
    Options {
        backend,
        remote: RemoteOptions {
            token: Some(TOKEN.to_vec()),
            ..RemoteOptions::default()
        },
        ..Options::default()
    }
}

/// A writer holding a list of `NODES` nodes, values 0..NODES.
fn create(path: &Path) -> Db {
    let mut db = Db::create(path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let head = tx
        .alloc(Head {
            first: None,
            commits: 0,
            all: PVec::new(),
        })
        .expect("alloc");
    let mut next = None;
    let mut all = Vec::new();
    for v in (0..NODES).rev() {
        let n = tx
            .alloc(Node {
                value: v,
                next,
                pad: [v; 30],
            })
            .expect("alloc");
        all.push(n);
        next = Some(n);
    }
    tx.get_mut(head).first = next;
    for n in all.into_iter().rev() {
        tx.push(head, |h| &mut h.all, n).expect("push");
    }
    tx.set_root("head", head).expect("root");
    tx.commit().expect("commit");
    db
}

/// Adds `delta` to every node's value and counts the commit.
fn bump(db: &mut Db, delta: u64) {
    let head: PRef<Head> = db.root("head").unwrap().unwrap();
    let mut tx = db.begin().unwrap();
    let mut at = tx.get(head).first;
    while let Some(p) = at {
        tx.get_mut(p).value += delta;
        at = tx.get(p).next;
    }
    tx.get_mut(head).commits += 1;
    tx.commit().unwrap();
}

/// The sum of the values, the commit count, and the list's length.
fn walk(db: &Db) -> (u64, u64, u64) {
    let head: PRef<Head> = db.root("head").unwrap().expect("head");
    let h = db.get(head);
    let (mut sum, mut len, mut at) = (0, 0, h.first);
    while let Some(p) = at {
        let n = db.get(p);
        assert_eq!(n.pad[0] + (n.value - n.pad[0]), n.value);
        sum += n.value;
        len += 1;
        at = n.next;
    }
    (sum, h.commits, len)
}

fn base_sum() -> u64 {
    NODES * (NODES - 1) / 2
}

fn reads_and_refreshes(backend: BackendChoice) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("list.amber");
    let mut writer = create(&path);
    let server = Running::start(&path);

    let mut client = Db::connect(&server.url(), client_opts(backend)).expect("connect");
    assert_eq!(walk(&client), (base_sum(), 0, NODES));
    assert_eq!(walk(&client), walk(&writer));
    let fetched = client.stats().fetched;
    assert!(fetched > 1, "the list spans many blocks, fetched {fetched}");

    // The writer commits; the client's snapshot does not move.
    bump(&mut writer, 1);
    assert_eq!(walk(&client), (base_sum(), 0, NODES));
    assert_eq!(
        client.stats().fetched,
        fetched,
        "a hot walk fetches nothing"
    );

    // Until it refreshes.
    assert!(client.refresh().expect("refresh"));
    assert_eq!(walk(&client), (base_sum() + NODES, 1, NODES));
    assert!(!client.refresh().expect("refresh"), "nothing new");

    // Writes are refused, with the reason.
    let e = client.begin().map(drop).unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e}");
    assert!(e.to_string().contains("server"), "{e}");
    drop(client);
    drop(server);
    writer.close().unwrap();
}

#[test]
fn a_client_reads_what_the_writer_committed_and_refreshes_on_request() {
    reads_and_refreshes(BackendChoice::Auto);
}

#[test]
fn a_client_on_the_sigsegv_backend_reads_the_same() {
    reads_and_refreshes(BackendChoice::Sigsegv);
}

/// Blocks first fetched after the writer committed still show the
/// client's snapshot: the server answers at the connection's snapshot.
#[test]
fn pages_fetched_later_show_the_clients_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("list.amber");
    let mut writer = create(&path);
    let server = Running::start(&path);
    let mut client = Db::connect(&server.url(), client_opts(BackendChoice::Auto)).unwrap();
    let head: PRef<Head> = client.root("head").unwrap().unwrap();
    assert_eq!(client.get(head).commits, 0);
    for delta in 1..=3 {
        bump(&mut writer, delta);
    }
    writer.checkpoint().ok(); // deferred while the client's snapshot is old
    // Only now does the client walk the nodes.
    assert_eq!(walk(&client), (base_sum(), 0, NODES));
    assert!(client.refresh().unwrap());
    assert_eq!(walk(&client), (base_sum() + 6 * NODES, 3, NODES));
    drop(client);
    drop(server);
    writer.close().unwrap();
}

#[test]
fn a_wrong_or_missing_token_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("list.amber");
    create(&path).close().unwrap();
    let server = Running::start(&path);
    for token in [Some(b"wrong".to_vec()), None] {
        let mut opts = client_opts(BackendChoice::Auto);
        opts.remote.token = token.clone();
        let e = Db::connect(&server.url(), opts).map(drop).unwrap_err();
        assert!(matches!(e, Error::Remote { .. }), "{token:?}: {e}");
        assert!(
            e.to_string().to_lowercase().contains("token"),
            "{token:?}: {e}"
        );
    }
    let e = Db::connect(
        &format!("amber://{}/nosuch", server.addr),
        client_opts(BackendChoice::Auto),
    )
    .map(drop)
    .unwrap_err();
    assert!(e.to_string().contains("nosuch"), "{e}");
}

/// A server that goes away: pages not yet fetched are an error from
/// `try_get`, never a panic; resident ones still read.
#[test]
fn a_vanished_server_is_an_error_from_try_get() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("list.amber");
    create(&path).close().unwrap();
    let mut server = Running::start(&path);
    let opts = Options {
        fetch_cluster: 1,
        fetch_adaptive: false,
        ..client_opts(BackendChoice::Auto)
    };
    let client = Db::connect(&server.url(), opts).unwrap();
    let head: PRef<Head> = client.root("head").unwrap().unwrap();
    let first = client.get(head).first.unwrap();
    let all = client.slice(&client.get(head).all).to_vec();
    server.stop();
    assert_eq!(client.get(head).commits, 0, "resident pages still read");
    // A node in the middle of the list: far from the head's page (the
    // last node allocated shares it) and from the first node's.
    let middle = all[all.len() / 2];
    assert_ne!(middle, first);
    let e = client.try_get(middle).map(|n| n.value).unwrap_err();
    assert!(matches!(e, Error::Io { .. } | Error::Remote { .. }), "{e}");
}

/// A server whose connections may buffer little answers a fault's window
/// `TooLarge`: the client asks for it in halves, and reads everything.
#[test]
fn a_window_too_large_for_the_server_is_fetched_in_halves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("list.amber");
    let writer = create(&path);
    // Answers of at most 4 pages of images (half the buffer).
    let server = Running::with(&path, |o| o.max_buffered = 2 * 4 * 4096);
    let client = Db::connect(&server.url(), client_opts(BackendChoice::Auto)).expect("connect");
    let head: PRef<Head> = client.root("head").unwrap().expect("head");
    let (mut sum, mut len, mut at) = (0, 0, client.try_get(head).expect("head read").first);
    while let Some(p) = at {
        let n = client.try_get(p).expect("every node is read");
        sum += n.value;
        len += 1;
        at = n.next;
    }
    assert_eq!((sum, len), (base_sum(), NODES));
    let s = client.stats();
    assert!(s.faults > 1, "{s:?}");
    drop(client);
    drop(server);
    drop(writer);
}
