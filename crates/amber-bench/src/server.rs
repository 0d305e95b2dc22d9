//! `amber bench server`: OO1 read through `amber serve` against the same
//! database opened locally, in one run.
//!
//! The OO1 database (20,000 parts by default) is built once with Amber's
//! OO1 engine. A server is started as a child process (the `amber` binary
//! itself: `amber serve PATH --listen 127.0.0.1:PORT --token-file F
//! --tls-cert --tls-key --tls-client-ca`, with certificates generated in
//! the run's directory), so that its CPU time and memory are its own.
//! Every connection is mutual TLS with the token, as a client off loopback
//! would connect (`"tls": true` in the JSON). Then, for each round, with a
//! traversal root drawn for the round:
//!
//! - **local**: the database opened read-only in this process (the
//!   default fault backend: userfaultfd where the kernel offers it), one
//!   *cold* traversal (the first after the open: every page it reaches is
//!   faulted in, copied out of the OS page cache, checked and swizzled),
//!   then `hot` traversals of the same root (every page resident);
//! - **remote**: the same through `Db::connect` (a fresh connection and
//!   client: every page the traversal reaches is fetched from the server,
//!   a fetch cluster per fault, then checked and swizzled by the client as
//!   from a file).
//!
//! The two orders alternate between rounds. Both answer each traversal
//! with the same visit checksum, or the run fails. The ratios are
//! medians: `hot_traversal_vs_local` (target ≤ 1.05) and
//! `cold_traversal_vs_local` (target ≤ 2). Also measured: a round trip on
//! an authenticated connection (a `Stats` request, answered from memory), the
//! server's CPU time per block it served, and the peak memory of the
//! server and of this process (the client).
//!
//! Then the write figures (`server_writes.rs`): a commit through the
//! server against the same commit on a local copy of the database
//! (`commit_vs_local_plus_rtt`, target ≤ 1.3), and 16 client processes
//! committing at once against one (`group_commit_16_vs_1`, target ≥ 4).

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use amber::internals::source::tls;
use amber::internals::wire::{self, Request, Response};
use amber::{Db, Options, RemoteOptions};
use amber_server::certs::CertFiles;
use serde::Serialize;

use crate::oo1::amber_engine::{AmberFactory, AmberOo1};
use crate::oo1::database::{GenParams, PartId, generate};
use crate::oo1::engine::{Answer, Engine, EngineFactory, EngineOptions};
use crate::procfs;
use crate::rng::Rng;
use crate::server_writes::{self, WriteReport};
use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};

/// Target: a hot traversal through the server against a local one.
pub const TARGET_HOT: f64 = 1.05;
/// Target: a cold traversal through the server against a local one.
pub const TARGET_COLD: f64 = 2.0;
/// Target: a commit through the server against a local one plus a round
/// trip.
pub const TARGET_COMMIT: f64 = 1.3;
/// Target: commits per second of 16 clients against one.
pub const TARGET_GROUP: f64 = 4.0;

/// What to run.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// OO1 parts.
    pub parts: u32,
    /// Rounds (each a cold traversal and `hot` hot ones, local and remote).
    pub rounds: usize,
    /// Hot traversals per round.
    pub hot: usize,
    /// Round trips timed.
    pub round_trips: usize,
    /// Seed of the database and the traversal roots.
    pub seed: u64,
    /// Where to make the database.
    pub dir: Option<PathBuf>,
    /// The command that starts a server: the `amber` binary and `serve`.
    pub serve_cmd: Vec<String>,
    /// The command that starts a client process: the `amber` binary and
    /// the arguments before [`CLIENT_ARG`](crate::server_writes::CLIENT_ARG).
    pub client_cmd: Vec<String>,
    /// Transactions timed on each side for the commit figure.
    pub commits: usize,
    /// How long the client processes commit, per group, s.
    pub group_seconds: f64,
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    /// `"server"`.
    pub benchmark: &'static str,
    /// Every connection of the run is mutual TLS (TLS 1.3, client
    /// certificates) with the token: the connects, traversals, round trips
    /// and commits all pay for it.
    pub tls: bool,
    /// OO1 parts.
    pub parts: u32,
    /// Rounds.
    pub rounds: usize,
    /// Hot traversals per round.
    pub hot: usize,
    /// The client's (and the local handle's) fault backend.
    pub backend: String,
    /// Median remote hot traversal / median local hot traversal.
    pub hot_traversal_vs_local: f64,
    /// Median remote cold traversal / median local cold traversal.
    pub cold_traversal_vs_local: f64,
    /// Local cold traversals, ms.
    pub local_cold_ms: Summary,
    /// Remote cold traversals, ms.
    pub remote_cold_ms: Summary,
    /// Local hot traversals, ms.
    pub local_hot_ms: Summary,
    /// Remote hot traversals, ms.
    pub remote_hot_ms: Summary,
    /// Opening: `Db::open_read_only` against `Db::connect`, ms.
    pub local_open_ms: Summary,
    /// `Db::connect` (TCP, the greeting with the token, the catalog), ms.
    pub remote_open_ms: Summary,
    /// One round trip on an authenticated connection (a `Stats` request,
    /// answered from memory), µs.
    pub round_trip_us: Summary,
    /// Parts a traversal visited (median).
    pub visited: u64,
    /// Blocks the client fetched over the cold traversals, per traversal
    /// (median).
    pub blocks_per_cold_traversal: f64,
    /// Faults the client took per cold traversal (median).
    pub faults_per_cold_traversal: f64,
    /// The server's CPU time (user + system) over the remote phases,
    /// divided by the blocks it served, µs.
    pub server_cpu_us_per_block: f64,
    /// The fetch clusters of the remote rounds (each connection's first
    /// reads, of the OO1 engine's roots and index, and its cold
    /// traversal) the server answered from its buffer pool and by reads
    /// (`amber serve --image-cache-mib`; its status report's counts). A
    /// cluster an earlier round fetched is a hit unless it was let go.
    pub server_image_cache: CacheCounts,
    /// The server's peak resident memory, KiB.
    pub server_peak_rss_kib: Option<u64>,
    /// This process's peak resident memory (the client and the local
    /// handle, one at a time), KiB.
    pub client_peak_rss_kib: Option<u64>,
    /// Median remote commit / (median local commit + median round trip).
    pub commit_vs_local_plus_rtt: f64,
    /// Commits per second of 16 client processes / of one.
    pub group_commit_16_vs_1: f64,
    /// The write figures in full.
    pub writes: WriteReport,
    /// The machine.
    pub environment: Environment,
}

/// The server child, stopped when dropped.
struct Server {
    child: Child,
}

impl Server {
    /// Serves `db` with mutual TLS (`certs`) and the token in file `token`.
    fn start(
        cmd: &[String],
        db: &Path,
        token: &Path,
        certs: &CertFiles,
    ) -> Result<(Server, String), BenchError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| BenchError::new(format!("bench server: a free port: {e}")))?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let (exe, args) = cmd
            .split_first()
            .ok_or_else(|| BenchError::new("bench server: no command starts the server"))?;
        let child = Command::new(exe)
            .env("RUST_LOG", "warn")
            .args(args)
            .arg(db)
            .args(["--listen", &addr, "--token-file"])
            .arg(token)
            .arg("--tls-cert")
            .arg(&certs.server_cert)
            .arg("--tls-key")
            .arg(&certs.server_key)
            .arg("--tls-client-ca")
            .arg(&certs.ca)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| BenchError::new(format!("bench server: starting {exe}: {e}")))?;
        Ok((Server { child }, addr))
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn cpu_s(&self) -> f64 {
        procfs::cpu_time_s_of(&self.pid()).unwrap_or(f64::NAN)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM, so that it shuts down as an operator would stop it.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One traversal, timed.
fn traverse(e: &mut AmberOo1, root: PartId) -> Result<(f64, Answer), BenchError> {
    let t = Instant::now();
    let a = e
        .traverse(root)
        .map_err(|err| BenchError::new(format!("traversal from part {root}: {err}")))?;
    Ok((t.elapsed().as_secs_f64() * 1e3, a))
}

/// What one side measured in one round.
struct Side {
    open_ms: f64,
    cold_ms: f64,
    hot_ms: Vec<f64>,
    answer: Answer,
    fetched: u64,
    faults: u64,
}

fn run_side(
    open: impl FnOnce() -> amber::Result<Db>,
    root: PartId,
    hot: usize,
) -> Result<Side, BenchError> {
    let t = Instant::now();
    let db = open()?;
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut e = AmberOo1::over(db).map_err(|err| BenchError::new(err.to_string()))?;
    let (cold_ms, answer) = traverse(&mut e, root)?;
    let stats = e.db().stats();
    let mut hot_ms = Vec::with_capacity(hot);
    for _ in 0..hot {
        let (ms, a) = traverse(&mut e, root)?;
        if a != answer {
            return Err(BenchError::new(format!(
                "traversal from part {root}: a hot traversal answered differently from the cold one"
            )));
        }
        hot_ms.push(ms);
    }
    Ok(Side {
        open_ms,
        cold_ms,
        hot_ms,
        answer,
        fetched: stats.fetched,
        faults: stats.faults,
    })
}

/// Connects, retrying while the server starts (at most 10 s).
fn connect_when_up(url: &str, opts: &Options) -> Result<Db, BenchError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Db::connect(url, opts.clone()) {
            Ok(db) => return Ok(db),
            Err(amber::Error::Io { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(BenchError::new(format!(
                    "bench server: connecting to {url}: {e}"
                )));
            }
        }
    }
}

/// A connection of the bench's own to the server, authenticated as the
/// clients' are (mutual TLS as their options say, and the token), for
/// requests `Db` does not make: round trips timed, the status report.
struct Probe {
    stream: tls::TlsStream,
}

impl Probe {
    fn open((addr, name): (&str, &str), opts: &RemoteOptions) -> Result<Probe, BenchError> {
        let tcp = TcpStream::connect(addr).map_err(|e| probe_failed(&e))?;
        tcp.set_nodelay(true).map_err(|e| probe_failed(&e))?;
        let tls = opts
            .tls
            .as_ref()
            .ok_or_else(|| probe_failed(&"no TLS options"))?;
        let stream = tls::connect(tls, tcp, addr, &format!("amber://{addr}/{name}"))?;
        let mut probe = Probe { stream };
        let hello = Request::Hello {
            version: wire::VERSION,
            database: name.to_string(),
            token: opts.token.clone().unwrap_or_default(),
        };
        match probe.ask(&hello)? {
            Response::Welcome { .. } => Ok(probe),
            other => Err(probe_failed(&format!(
                "the greeting was answered {other:?}"
            ))),
        }
    }

    fn ask(&mut self, req: &Request) -> Result<Response, BenchError> {
        let s = &mut self.stream;
        s.write_all(&req.encode())
            .and_then(|()| s.flush())
            .map_err(|e| probe_failed(&e))?;
        let body = wire::read_frame(s, wire::DEFAULT_MAX_FRAME).map_err(|e| probe_failed(&e))?;
        Response::decode(&body).map_err(|e| probe_failed(&e))
    }

    /// `n` round trips, µs each: a `Stats` request (the server answers
    /// from memory) and its answer.
    fn round_trips(&mut self, n: usize) -> Result<Vec<f64>, BenchError> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            match self.ask(&Request::Stats)? {
                Response::Stats { .. } => out.push(t.elapsed().as_secs_f64() * 1e6),
                other => return Err(probe_failed(&format!("Stats was answered {other:?}"))),
            }
        }
        Ok(out)
    }

    /// The server's buffer pool of the (only) database so far: its hits
    /// and misses, from the status report.
    fn image_cache(&mut self) -> Result<CacheCounts, BenchError> {
        let Response::Report(json) = self.ask(&Request::Status)? else {
            return Err(probe_failed(&"Status was not answered with a report"));
        };
        let doc: serde_json::Value = serde_json::from_str(&json).map_err(|e| probe_failed(&e))?;
        let c = &doc["databases"][0]["image_cache"];
        let n = |k: &str| c[k].as_u64().unwrap_or(0);
        Ok(CacheCounts {
            hits: n("hits"),
            misses: n("misses"),
        })
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.ask(&Request::Bye);
    }
}

fn probe_failed(e: &dyn std::fmt::Display) -> BenchError {
    BenchError::new(format!("bench server: the bench's own connection: {e}"))
}

/// Fetch clusters the server answered from its buffer pool and by reads.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CacheCounts {
    /// Answered from the pool.
    pub hits: u64,
    /// Read from the file.
    pub misses: u64,
}

/// Runs the benchmark.
pub fn run(cfg: &ServerConfig) -> Result<ServerReport, BenchError> {
    if cfg.rounds == 0 || cfg.hot == 0 {
        return Err(BenchError::new(
            "bench server: --rounds and --hot must be at least 1",
        ));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    let dir = work.path().to_path_buf();
    let generated = generate(GenParams {
        parts: cfg.parts,
        seed: cfg.seed,
    })
    .map_err(BenchError::new)?;
    AmberFactory::DEFAULT
        .build(&dir, &generated, &EngineOptions::default())
        .map_err(|e| BenchError::new(format!("bench server: building OO1: {e}")))?;
    let path = AmberFactory::file(&dir);
    // The local side of the commit figure writes a copy: the server holds
    // the database itself open for writing.
    let local_dir = dir.join("local");
    let local_copy = AmberFactory::file(&local_dir);
    let copy = |suffix: &str| {
        let name = |p: &Path| format!("{}{suffix}", p.display());
        std::fs::copy(name(&path), name(&local_copy))
    };
    std::fs::create_dir_all(&local_dir)
        .and_then(|_| copy(""))
        .and_then(|_| copy("-wal"))
        .map_err(|e| BenchError::new(format!("bench server: copying the database: {e}")))?;
    let token_path = dir.join("token");
    let token = format!(
        "bench-{:016x}",
        Rng::seed_from_u64(cfg.seed ^ 0x5eed).next_u64()
    );
    std::fs::File::create(&token_path)
        .and_then(|mut f| f.write_all(token.as_bytes()))
        .map_err(|e| BenchError::new(format!("bench server: writing the token: {e}")))?;
    // Every figure is over mutual TLS (and the token): what a client off
    // loopback pays.
    let certs_dir = dir.join("certs");
    let certs = amber_server::certs::generate(&certs_dir, &[])
        .map_err(|e| BenchError::new(format!("bench server: {e}")))?;
    let (server, addr) = Server::start(&cfg.serve_cmd, &path, &token_path, &certs)?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("oo1");
    let url = format!("amber://{addr}/{name}");
    let remote_opts = server_writes::remote_options(&token, &certs_dir)?;

    // The first connection also waits for the server to be up.
    let db = connect_when_up(&url, &remote_opts)?;
    let backend = db.backend().to_string();
    drop(db);
    let mut probe = Probe::open((&addr, name), &remote_opts.remote)?;
    let rtt = probe.round_trips(cfg.round_trips)?;
    let cache_before = probe.image_cache()?;

    let mut rng = Rng::seed_from_u64(cfg.seed);
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    let mut server_cpu = 0.0;
    for round in 0..cfg.rounds {
        let root = 1 + rng.below(u64::from(cfg.parts)) as PartId;
        let local_side = || {
            run_side(
                || Db::open_read_only(&path, Options::default()),
                root,
                cfg.hot,
            )
        };
        let remote_side = |cpu: &mut f64| {
            let before = server.cpu_s();
            let side = run_side(|| Db::connect(&url, remote_opts.clone()), root, cfg.hot);
            *cpu += server.cpu_s() - before;
            side
        };
        let (l, r) = if round % 2 == 0 {
            let l = local_side()?;
            (l, remote_side(&mut server_cpu)?)
        } else {
            let r = remote_side(&mut server_cpu)?;
            (local_side()?, r)
        };
        if l.answer != r.answer {
            return Err(BenchError::new(format!(
                "traversal from part {root}: the server's answer differs from the local one"
            )));
        }
        local.push(l);
        remote.push(r);
    }
    let cache_after = probe.image_cache()?;
    drop(probe);
    // The write figures.
    let rtt_median = summarize(&rtt).median;
    let (local_commit_ms, remote_commit_ms, local_tx_ms, remote_tx_ms, commit_ratio) =
        server_writes::one_client(
            &local_copy,
            &url,
            &remote_opts,
            cfg.commits,
            rtt_median,
            server_writes::per_client(cfg.parts),
        )?;
    let mut groups = Vec::new();
    for clients in [1, 16] {
        let cpu = server.cpu_s();
        let g = server_writes::group(
            &cfg.client_cmd,
            &url,
            (&token, &certs_dir),
            (clients, server_writes::per_client(cfg.parts)),
            cfg.group_seconds,
        )?;
        let server_cpu = server.cpu_s() - cpu;
        groups.push((g, server_cpu));
    }
    let cores = procfs::cores().max(1) as f64;
    let busy = |(g, s): &(server_writes::Group, f64)| (g.cpu_s + s) / (g.wall_s * cores);
    let per_commit = |(g, s): &(server_writes::Group, f64)| s * 1e6 / g.commits.max(1) as f64;
    let writes = WriteReport {
        local_commit_ms,
        remote_commit_ms,
        local_tx_ms,
        remote_tx_ms,
        commit_vs_local_plus_rtt: commit_ratio,
        one_client_tx_per_s: groups[0].0.tx_per_s,
        sixteen_clients_tx_per_s: groups[1].0.tx_per_s,
        group_commit_16_vs_1: groups[1].0.tx_per_s / groups[0].0.tx_per_s,
        sixteen_clients_retries: groups[1].0.retries,
        server_cpu_us_per_commit: [per_commit(&groups[0]), per_commit(&groups[1])],
        cpu_busy: [busy(&groups[0]), busy(&groups[1])],
        saturates: if busy(&groups[1]) > 0.8 {
            "cpu"
        } else {
            "the log's syncs (disk)"
        },
    };
    let server_peak_rss_kib = procfs::peak_rss_kib_of(&server.pid());
    drop(server);

    let cold = |v: &[Side]| summarize(&v.iter().map(|s| s.cold_ms).collect::<Vec<_>>());
    let hot = |v: &[Side]| {
        summarize(
            &v.iter()
                .flat_map(|s| s.hot_ms.iter().copied())
                .collect::<Vec<_>>(),
        )
    };
    let open = |v: &[Side]| summarize(&v.iter().map(|s| s.open_ms).collect::<Vec<_>>());
    let (lc, rc, lh, rh) = (cold(&local), cold(&remote), hot(&local), hot(&remote));
    let served: u64 = remote.iter().map(|s| s.fetched).sum();
    let median = |v: Vec<f64>| summarize(&v).median;
    Ok(ServerReport {
        benchmark: "server",
        tls: remote_opts.remote.tls.is_some(),
        parts: cfg.parts,
        rounds: cfg.rounds,
        hot: cfg.hot,
        backend,
        hot_traversal_vs_local: rh.median / lh.median,
        cold_traversal_vs_local: rc.median / lc.median,
        local_open_ms: open(&local),
        remote_open_ms: open(&remote),
        local_cold_ms: lc,
        remote_cold_ms: rc,
        local_hot_ms: lh,
        remote_hot_ms: rh,
        round_trip_us: summarize(&rtt),
        visited: remote[0].answer.count,
        blocks_per_cold_traversal: median(remote.iter().map(|s| s.fetched as f64).collect()),
        faults_per_cold_traversal: median(remote.iter().map(|s| s.faults as f64).collect()),
        server_cpu_us_per_block: server_cpu * 1e6 / served.max(1) as f64,
        server_image_cache: CacheCounts {
            hits: cache_after.hits - cache_before.hits,
            misses: cache_after.misses - cache_before.misses,
        },
        server_peak_rss_kib,
        client_peak_rss_kib: procfs::peak_rss_kib(),
        commit_vs_local_plus_rtt: writes.commit_vs_local_plus_rtt,
        group_commit_16_vs_1: writes.group_commit_16_vs_1,
        writes,
        environment: environment(&dir),
    })
}

/// The report as a table.
pub fn render(r: &ServerReport) -> String {
    // A ratio against its ceiling, padded so that the keys line up.
    let at_most = |key: &str, x: f64, t: f64| {
        let v = if x <= t { "met" } else { "MISSED" };
        format!("  {key:<23} {x:.3} (target ≤ {t}: {v})\n")
    };
    let row = |name: &str, s: &Summary| {
        format!(
            "  {name:<26} median {:>9.3}  p10 {:>9.3}  p90 {:>9.3}\n",
            s.median, s.p10, s.p90
        )
    };
    let mut out = format!(
        "OO1 through `amber serve`{} against the same database opened locally: {} parts, {} rounds, {} hot traversals each, backend {}\n",
        if r.tls { " (mutual TLS)" } else { "" },
        r.parts,
        r.rounds,
        r.hot,
        r.backend
    );
    out += &row("local open ms", &r.local_open_ms);
    out += &row("remote connect ms", &r.remote_open_ms);
    out += &row("local cold traversal ms", &r.local_cold_ms);
    out += &row("remote cold traversal ms", &r.remote_cold_ms);
    out += &row("local hot traversal ms", &r.local_hot_ms);
    out += &row("remote hot traversal ms", &r.remote_hot_ms);
    out += &row("round trip µs", &r.round_trip_us);
    out += &at_most(
        "hot_traversal_vs_local",
        r.hot_traversal_vs_local,
        TARGET_HOT,
    );
    out += &at_most(
        "cold_traversal_vs_local",
        r.cold_traversal_vs_local,
        TARGET_COLD,
    );
    out += &format!(
        "  a traversal visits {} parts; a cold one fetched {:.0} blocks in {:.0} faults; server CPU {:.1} µs per block served\n",
        r.visited,
        r.blocks_per_cold_traversal,
        r.faults_per_cold_traversal,
        r.server_cpu_us_per_block
    );
    out += &format!(
        "  the remote rounds' fetch clusters: {} answered from the server's buffer pool, {} read\n",
        r.server_image_cache.hits, r.server_image_cache.misses
    );
    let kib =
        |k: Option<u64>| k.map_or("?".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    out += &format!(
        "  peak memory: server {}, client {}\n",
        kib(r.server_peak_rss_kib),
        kib(r.client_peak_rss_kib)
    );
    let w = &r.writes;
    out += &row("local commit ms", &w.local_commit_ms);
    out += &row("remote commit ms", &w.remote_commit_ms);
    out += &row("local transaction ms", &w.local_tx_ms);
    out += &row("remote transaction ms", &w.remote_tx_ms);
    out += &at_most(
        "commit_vs_local_plus_rtt",
        r.commit_vs_local_plus_rtt,
        TARGET_COMMIT,
    );
    out += &format!(
        "  group commit: 1 client {:.0} tx/s, 16 clients {:.0} tx/s ({} retries); group_commit_16_vs_1 {:.2} (target ≥ {TARGET_GROUP}: {})\n",
        w.one_client_tx_per_s,
        w.sixteen_clients_tx_per_s,
        w.sixteen_clients_retries,
        r.group_commit_16_vs_1,
        if r.group_commit_16_vs_1 >= TARGET_GROUP {
            "met"
        } else {
            "MISSED"
        }
    );
    out += &format!(
        "  server CPU per commit {:.0} µs (1 client), {:.0} µs (16); CPU busy {:.2} / {:.2}: {} saturates\n",
        w.server_cpu_us_per_commit[0],
        w.server_cpu_us_per_commit[1],
        w.cpu_busy[0],
        w.cpu_busy[1],
        w.saturates
    );
    out
}
