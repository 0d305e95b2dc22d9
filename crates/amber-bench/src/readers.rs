//! `amber bench readers`: a read-only handle in one process beside a writer
//! in another that commits at a steady rate.
//!
//! The database holds a linked list of `nodes` nodes (the `hot` benchmark's
//! node: 24 bytes, 127 to a 4 KiB page). The reader opens it read-only and
//! makes it resident with one untimed traversal; then:
//!
//! - **alone**: with no writer running, `traversals` timed hot traversals
//!   of the whole list;
//! - **beside**: a writer process is started (the `amber` binary itself,
//!   with a hidden argument) that commits `rate` transactions per second,
//!   each rewriting the value of 4 random nodes and syncing, for `seconds`;
//!   the reader times `traversals` hot traversals while it runs (its
//!   snapshot does not move meanwhile: a traversal reads resident pages
//!   only), then refreshes every `refresh_every_ms` until the writer stops,
//!   timing each refresh (reading the log written since the last one and
//!   dropping the pages it changed; the traversal after a refresh fetches
//!   those pages again and is not timed as hot).
//!
//! Reported: `reader_hot_vs_alone` = median traversal beside / median
//! alone (target ≤ 1.1), `refresh_ms` = median refresh (target ≤ 1), the
//! writer's achieved rate, and the last refresh's snapshot against the
//! writer's last commit (the reader must reach it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use amber::{Db, Options, PRef};
use serde::Serialize;

use crate::hot::Node;
use crate::rng::Rng;
use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};

/// The hidden argument that makes `amber bench readers` the writer.
pub const WRITER_ARG: &str = "__readers-writer";

/// Targets of the issue: the reader's hot traversal beside a writer, and a
/// refresh.
pub const TARGET_HOT_VS_ALONE: f64 = 1.1;
/// At most this many milliseconds per refresh.
pub const TARGET_REFRESH_MS: f64 = 1.0;

/// What to run.
#[derive(Debug, Clone)]
pub struct ReadersConfig {
    /// Nodes in the list.
    pub nodes: u64,
    /// Timed traversals alone and beside the writer.
    pub traversals: usize,
    /// The writer's commits per second.
    pub rate: u64,
    /// How long the writer runs.
    pub seconds: f64,
    /// How often the reader refreshes while the writer runs.
    pub refresh_every_ms: u64,
    /// Where to make the database.
    pub dir: Option<PathBuf>,
    /// The command that starts the writer: the `amber` binary and the
    /// arguments before [`WRITER_ARG`].
    pub writer_cmd: Vec<String>,
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct ReadersReport {
    /// `"readers"`.
    pub benchmark: &'static str,
    /// Nodes in the list.
    pub nodes: u64,
    /// The writer's target rate.
    pub rate: u64,
    /// Commits the writer made per second, measured by it.
    pub writer_tx_per_s: f64,
    /// Commits the writer made.
    pub writer_commits: u64,
    /// Hot traversal alone, ms.
    pub alone_ms: Summary,
    /// Hot traversal beside the writer, ms.
    pub beside_ms: Summary,
    /// `beside_ms.median / alone_ms.median`.
    pub reader_hot_vs_alone: f64,
    /// Median refresh, ms.
    pub refresh_ms: f64,
    /// Refresh times, ms.
    pub refresh: Summary,
    /// Refreshes that found new commits.
    pub refreshes: u64,
    /// The commit counter the reader saw after its last refresh, and the
    /// writer's last (they must match).
    pub reader_last_commit: u64,
    /// The writer's last commit.
    pub writer_last_commit: u64,
    /// The machine.
    pub environment: Environment,
}

/// The root: the list's head and the writer's commit counter.
#[derive(amber::Persistent)]
#[persistent(name = "readers::Head")]
#[repr(C)]
pub struct Head {
    first: Option<PRef<Node>>,
    commits: u64,
    nodes: amber::PVec<PRef<Node>>,
}

fn build(path: &Path, nodes: u64) -> Result<(), BenchError> {
    let mut db = Db::create(path, Options::default())?;
    let mut tx = db.begin()?;
    let head = tx.alloc(Head {
        first: None,
        commits: 0,
        nodes: amber::PVec::new(),
    })?;
    let mut next = None;
    let mut all = Vec::with_capacity(nodes as usize);
    for i in (0..nodes).rev() {
        let n = tx.alloc(Node {
            value: i,
            next,
            _pad: 0,
        })?;
        all.push(n);
        next = Some(n);
    }
    tx.get_mut(head).first = next;
    for n in all.into_iter().rev() {
        tx.push(head, |h| &mut h.nodes, n)?;
    }
    tx.set_root("head", head)?;
    tx.commit()?;
    db.close()?;
    Ok(())
}

fn traverse(db: &Db, head: PRef<Head>) -> u64 {
    let mut sum = 0u64;
    let mut at = db.get(head).first;
    while let Some(p) = at {
        let n = db.get(p);
        sum = sum.wrapping_add(n.value);
        at = n.next;
    }
    std::hint::black_box(sum)
}

fn time_traversals(db: &Db, head: PRef<Head>, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            traverse(db, head);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

/// The writer: `rate` commits a second for `seconds`, each rewriting 4
/// random nodes' values and bumping the counter; prints its commit count
/// and last counter on stdout when done.
pub fn run_writer(path: &Path, rate: u64, seconds: f64) -> Result<String, BenchError> {
    let mut db = Db::open(path, Options::default())?;
    let head: PRef<Head> = db
        .root("head")?
        .ok_or_else(|| BenchError::new("readers: no root `head`"))?;
    let nodes: Vec<PRef<Node>> = db.slice(&db.get(head).nodes).to_vec();
    let mut rng = Rng::seed_from_u64(7);
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let mut commits = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        let due = start + period * commits as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut tx = db.begin()?;
        for _ in 0..4 {
            let n = nodes[rng.below(nodes.len() as u64) as usize];
            tx.get_mut(n).value += 1;
        }
        tx.get_mut(head).commits += 1;
        tx.commit()?;
        commits += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let last = db.get(head).commits;
    db.close()?;
    Ok(format!("{commits} {secs} {last}"))
}

fn start_writer(cfg: &ReadersConfig, path: &Path) -> Result<Child, BenchError> {
    let (exe, args) = cfg
        .writer_cmd
        .split_first()
        .ok_or_else(|| BenchError::new("readers: no command to start the writer"))?;
    Command::new(exe)
        .args(args)
        .arg(WRITER_ARG)
        .arg(path)
        .arg(cfg.rate.to_string())
        .arg(cfg.seconds.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::new(format!("readers: starting the writer ({exe}): {e}")))
}

/// Runs the benchmark.
pub fn run(cfg: &ReadersConfig) -> Result<ReadersReport, BenchError> {
    let work = Workdir::new(cfg.dir.as_deref())?;
    let path = work.path().join("readers.amber");
    build(&path, cfg.nodes)?;
    let mut db = Db::open_read_only(&path, Options::default())?;
    let head: PRef<Head> = db
        .root("head")?
        .ok_or_else(|| BenchError::new("readers: no root `head`"))?;
    traverse(&db, head);
    let alone = time_traversals(&db, head, cfg.traversals);

    let writer = start_writer(cfg, &path)?;
    // Let the writer open and start committing before timing.
    std::thread::sleep(Duration::from_millis(200));
    let beside = time_traversals(&db, head, cfg.traversals);
    let mut refresh = Vec::new();
    let mut refreshes = 0;
    let until = Instant::now() + Duration::from_secs_f64(cfg.seconds);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(cfg.refresh_every_ms));
        let t = Instant::now();
        let changed = db.refresh()?;
        refresh.push(t.elapsed().as_secs_f64() * 1e3);
        refreshes += u64::from(changed);
    }
    let out = writer
        .wait_with_output()
        .map_err(|e| BenchError::new(format!("readers: the writer: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::new(format!(
            "readers: the writer failed: {}",
            out.status
        )));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let mut words = line.split_whitespace().map(str::parse::<f64>);
    let mut next = || -> Result<f64, BenchError> {
        words
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| BenchError::new(format!("readers: the writer said `{line}`")))
    };
    let (commits, secs, last) = (next()?, next()?, next()?);
    db.refresh()?;
    let reader_last = db.get(head).commits;
    db.close()?;
    let (alone_ms, beside_ms) = (summarize(&alone), summarize(&beside));
    let refresh_sum = summarize(&refresh);
    Ok(ReadersReport {
        benchmark: "readers",
        nodes: cfg.nodes,
        rate: cfg.rate,
        writer_tx_per_s: commits / secs,
        writer_commits: commits as u64,
        reader_hot_vs_alone: beside_ms.median / alone_ms.median,
        refresh_ms: refresh_sum.median,
        alone_ms,
        beside_ms,
        refresh: refresh_sum,
        refreshes,
        reader_last_commit: reader_last,
        writer_last_commit: last as u64,
        environment: environment(work.path()),
    })
}

/// The report as a table.
pub fn render(r: &ReadersReport) -> String {
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    let mut s = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        s,
        "a read-only handle beside a writer process committing {} tx/s (achieved {:.0}, {} commits); {} nodes",
        r.rate, r.writer_tx_per_s, r.writer_commits, r.nodes
    );
    let _ = writeln!(
        s,
        "  hot traversal alone   {:.3} ms (p10 {:.3}, p90 {:.3})",
        r.alone_ms.median, r.alone_ms.p10, r.alone_ms.p90
    );
    let _ = writeln!(
        s,
        "  hot traversal beside  {:.3} ms (p10 {:.3}, p90 {:.3})",
        r.beside_ms.median, r.beside_ms.p10, r.beside_ms.p90
    );
    let _ = writeln!(
        s,
        "  refresh               {:.3} ms median (p90 {:.3}); {} refreshes found new commits",
        r.refresh.median, r.refresh.p90, r.refreshes
    );
    let _ = writeln!(
        s,
        "  reader_hot_vs_alone {:.3} (target <= {TARGET_HOT_VS_ALONE}: {}); refresh_ms {:.3} (target <= {TARGET_REFRESH_MS}: {})",
        r.reader_hot_vs_alone,
        verdict(r.reader_hot_vs_alone <= TARGET_HOT_VS_ALONE),
        r.refresh_ms,
        verdict(r.refresh_ms <= TARGET_REFRESH_MS)
    );
    let _ = writeln!(
        s,
        "  the reader's last snapshot: commit {} of the writer's {} ({})",
        r.reader_last_commit,
        r.writer_last_commit,
        if r.reader_last_commit == r.writer_last_commit {
            "reached"
        } else {
            "NOT REACHED"
        }
    );
    let _ = writeln!(
        s,
        "  kernel {}; {}",
        r.environment.kernel, r.environment.machine
    );
    s
}
