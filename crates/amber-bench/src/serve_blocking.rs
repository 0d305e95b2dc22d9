//! `amber bench serve-blocking`: a fetch cluster read through the storage server
//! (`amber-server`) on loopback, against the same cluster read from the
//! store directly, with the server's two ways of running blocking store
//! calls (tokio's blocking pool, `block_in_place`).
//!
//! The database holds `blocks` one-page blocks (raw bytes, written through
//! the store). Three arms read clusters of `cluster_pages` pages, cycling
//! over the file, `requests` per round, for `rounds` rounds, interleaved
//! round by round so that drift of the machine falls on all three:
//!
//! - **direct**: `Store::read_cluster` on a read-only store in this
//!   process — the cost of the read itself, the baseline;
//! - **pool** and **in_place**: one client connection to an in-process
//!   server (its own runtime, two workers) running `Blocking::Pool` or
//!   `Blocking::InPlace`, asking `ReadCluster` and waiting for each
//!   answer (a page fault waits for its cluster the same way).
//!
//! Reported: the median time per cluster of each arm, and the ratios
//! `pool / direct`, `in_place / direct`, `in_place / pool`.

use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};
use amber::StoreOptions;
use amber::internals::format::page::BlockKind;
use amber::internals::io::real::RealVfs;
use amber::internals::store::Store;
use amber::internals::wire::{self, DEFAULT_MAX_FRAME, Request, Response, VERSION};
use amber_server::{Blocking, ServeOptions};
use serde::Serialize;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// One-page blocks in the database.
    pub blocks: u64,
    /// Pages per cluster.
    pub cluster_pages: u64,
    /// Clusters read per round and arm.
    pub requests: u64,
    /// Rounds.
    pub rounds: usize,
    /// Where to make the database.
    pub dir: Option<PathBuf>,
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct ServeReport {
    /// `"serve-blocking"`.
    pub benchmark: &'static str,
    /// One-page blocks in the database.
    pub blocks: u64,
    /// Pages per cluster.
    pub cluster_pages: u64,
    /// Bytes of images per cluster.
    pub cluster_bytes: u64,
    /// Clusters per round and arm.
    pub requests: u64,
    /// The store read directly, µs per cluster (one sample per round).
    pub direct_us: Summary,
    /// Through the server, blocking pool, µs per cluster.
    pub pool_us: Summary,
    /// Through the server, `block_in_place`, µs per cluster.
    pub in_place_us: Summary,
    /// Medians: pool / direct.
    pub pool_vs_direct: f64,
    /// Medians: in_place / direct.
    pub in_place_vs_direct: f64,
    /// Medians: in_place / pool (below 1: `block_in_place` is cheaper).
    pub in_place_vs_pool: f64,
    /// The machine.
    pub environment: Environment,
}

/// Writes `blocks` one-page blocks of raw bytes.
fn build(path: &Path, blocks: u64) -> Result<(), BenchError> {
    let store = Store::create(Arc::new(RealVfs), path, StoreOptions::default())?;
    let ps = store.page_size() as u64;
    for chunk in 0..blocks.div_ceil(1000) {
        let mut tx = store.begin()?;
        for i in chunk * 1000..blocks.min((chunk + 1) * 1000) {
            let page = tx.alloc(1, BlockKind::Raw)?;
            tx.write(page * ps + 64, format!("block {i}").repeat(64).as_bytes())?;
        }
        tx.commit()?;
    }
    store.close()?;
    Ok(())
}

/// A server on its own thread and runtime.
struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(path: &Path, blocking: Blocking) -> Result<Running, BenchError> {
    let opts = ServeOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        databases: vec![("bench".into(), path.to_path_buf())],
        insecure_no_auth: true,
        blocking,
        // The direct arm reads the same database in this process: the
        // server reads it only, as reading is all this measures.
        read_only: true,
        ..ServeOptions::default()
    };
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = addr_tx.send(Err(format!("a runtime: {e}")));
                return;
            }
        };
        rt.block_on(async move {
            match amber_server::bind(opts).await {
                Ok(server) => {
                    let _ = addr_tx.send(Ok(server.local_addr()));
                    server
                        .run(async {
                            let _ = stopped.await;
                        })
                        .await;
                }
                Err(e) => {
                    let _ = addr_tx.send(Err(e.to_string()));
                }
            }
        });
    });
    let addr = addr_rx
        .recv()
        .map_err(|_| BenchError::new("serve: the server thread died"))?
        .map_err(|e| BenchError::new(format!("serve: the server: {e}")))?;
    Ok(Running {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// A connection to a server, welcomed.
struct Client(TcpStream);

impl Client {
    fn connect(addr: SocketAddr) -> Result<Client, BenchError> {
        let s = TcpStream::connect(addr)
            .map_err(|e| BenchError::new(format!("serve: connecting to {addr}: {e}")))?;
        let _ = s.set_nodelay(true);
        let mut c = Client(s);
        match c.ask(&Request::Hello {
            version: VERSION,
            database: "bench".into(),
            token: Vec::new(),
        })? {
            Response::Welcome { .. } => Ok(c),
            other => Err(BenchError::new(format!("serve: not welcomed: {other:?}"))),
        }
    }

    fn ask(&mut self, r: &Request) -> Result<Response, BenchError> {
        let err = |e: &dyn std::fmt::Display| BenchError::new(format!("serve: {e}"));
        self.0.write_all(&r.encode()).map_err(|e| err(&e))?;
        let body = wire::read_frame(&mut self.0, DEFAULT_MAX_FRAME).map_err(|e| err(&e))?;
        Response::decode(&body).map_err(|e| err(&e))
    }
}

/// The clusters of a round: `n` ranges cycling over the data pages.
fn ranges(first: u64, pages: u64, cluster: u64, n: u64) -> impl Iterator<Item = u64> {
    let spans = (pages / cluster).max(1);
    (0..n).map(move |i| first + (i % spans) * cluster)
}

/// Runs the benchmark.
pub fn run(cfg: &ServeConfig) -> Result<ServeReport, BenchError> {
    if cfg.cluster_pages == 0 || cfg.requests == 0 || cfg.rounds == 0 {
        return Err(BenchError::new(
            "serve: --cluster-pages, --requests and --rounds must be above 0",
        ));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    let path = work.path().join("serve.amber");
    build(&path, cfg.blocks)?;
    let ro = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    let store = Store::open(Arc::new(RealVfs), &path, ro)?;
    let first = store.first_data_page();
    let pages = store.page_count() - first;
    let cluster = cfg.cluster_pages;
    let (pool, in_place) = (
        start(&path, Blocking::Pool)?,
        start(&path, Blocking::InPlace)?,
    );
    let mut clients = [Client::connect(pool.addr)?, Client::connect(in_place.addr)?];
    let mut buf = Vec::new();
    let mut bytes = 0u64;
    let (mut direct, mut served) = (Vec::new(), [Vec::new(), Vec::new()]);
    // One untimed round of each arm: the OS page cache and the servers'
    // threads warm.
    for round in 0..=cfg.rounds {
        let t = Instant::now();
        for from in ranges(first, pages, cluster, cfg.requests) {
            let got = store.read_cluster(from, cluster, &mut buf);
            if let Some(b) = got.iter().find(|b| b.image.is_err()) {
                return Err(BenchError::new(format!(
                    "serve: block {} is damaged",
                    b.head
                )));
            }
            bytes = got.iter().map(|b| u64::from(b.pages)).sum::<u64>() * store.page_size() as u64;
        }
        let direct_us = t.elapsed().as_secs_f64() * 1e6 / cfg.requests as f64;
        for (c, samples) in clients.iter_mut().zip(&mut served) {
            let t = Instant::now();
            for from in ranges(first, pages, cluster, cfg.requests) {
                match c.ask(&Request::ReadCluster {
                    from,
                    pages: cluster,
                })? {
                    Response::Cluster { blocks, .. }
                        if blocks.iter().all(|b| b.error.is_none()) => {}
                    other => {
                        return Err(BenchError::new(format!(
                            "serve: cluster at {from}: {other:?}"
                        )));
                    }
                }
            }
            if round > 0 {
                samples.push(t.elapsed().as_secs_f64() * 1e6 / cfg.requests as f64);
            }
        }
        if round > 0 {
            direct.push(direct_us);
        }
    }
    drop((pool, in_place));
    let [pool_us, in_place_us] = [summarize(&served[0]), summarize(&served[1])];
    let direct_us = summarize(&direct);
    Ok(ServeReport {
        benchmark: "serve-blocking",
        blocks: cfg.blocks,
        cluster_pages: cluster,
        cluster_bytes: bytes,
        requests: cfg.requests,
        pool_vs_direct: pool_us.median / direct_us.median,
        in_place_vs_direct: in_place_us.median / direct_us.median,
        in_place_vs_pool: in_place_us.median / pool_us.median,
        direct_us,
        pool_us,
        in_place_us,
        environment: environment(work.path()),
    })
}

/// The report as a table.
pub fn render(r: &ServeReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "a fetch cluster of {} pages ({} bytes of images) per request, {} requests a round, medians of rounds",
        r.cluster_pages, r.cluster_bytes, r.requests
    );
    for (name, v) in [
        ("store, direct", &r.direct_us),
        ("server, blocking pool", &r.pool_us),
        ("server, block_in_place", &r.in_place_us),
    ] {
        let _ = writeln!(
            s,
            "  {name:<24} {:>9.1} µs (p10 {:.1}, p90 {:.1})",
            v.median, v.p10, v.p90
        );
    }
    let _ = writeln!(
        s,
        "  pool / direct {:.2}   in_place / direct {:.2}   in_place / pool {:.3}",
        r.pool_vs_direct, r.in_place_vs_direct, r.in_place_vs_pool
    );
    let _ = writeln!(
        s,
        "  kernel {}; {}; file system {}",
        r.environment.kernel, r.environment.machine, r.environment.filesystem
    );
    s
}
