//! Storage benchmarks, run by `amber bench commit` and `amber bench recovery`.
//!
//! - [`commit`]: the latency of committing a 100-byte change, against the
//!   cheapest durable write the same file system offers (a bare `pwrite` of
//!   the same 100 bytes and `fdatasync`), measured interleaved in one run and
//!   one directory so that drift hits both equally.
//! - [`recovery`]: the time to open a database whose log holds tens of MiB of
//!   committed transactions (scan and redo), against reading a file of the
//!   log's size sequentially from the same directory; with the page cache
//!   dropped before every run of each side (the headline, since after a
//!   machine crash the log is read from the device) and warm.
//!
//! Both run on real files under a directory on the file system being measured
//! (by default a fresh temporary directory under the working directory, not
//! `/tmp`, which is often tmpfs), and record the kernel, the machine and the
//! file system with the numbers.

use crate::{procfs, sys};
use amber::format::page::{BlockKind, HEADER_SIZE};
use amber::io::crash::SplitMix;
use amber::io::real::RealVfs;
use amber::io::{IoFile, OpenMode, Vfs};
use amber::store::{Store, StoreOptions, wal_path};
use amber::wal::header::{LogHeader, RECORDS_START, SLOT_OFFSETS, SLOT_SIZE};
use amber::wal::scan;
use serde::Serialize;
use std::fmt::{self, Write as _};
use std::fs::{self, File};
use std::io::{self, Read};
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A benchmark could not run.
#[derive(Debug)]
pub struct BenchError(String);

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl BenchError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        BenchError(message.into())
    }
}

impl From<amber::Error> for BenchError {
    fn from(e: amber::Error) -> Self {
        BenchError(e.to_string())
    }
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(io::Error) -> BenchError {
    let at = path.display().to_string();
    let what = what.to_string();
    move |e| BenchError(format!("{at}: {what}: {e}"))
}

/// Result of a benchmark step.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// The directory a benchmark works in: a fresh temporary directory under
/// `dir` (or the working directory), removed afterwards.
pub(crate) struct Workdir {
    tmp: tempfile::TempDir,
}

impl Workdir {
    pub(crate) fn new(dir: Option<&Path>) -> Result<Workdir> {
        let base = match dir {
            Some(d) => d.to_path_buf(),
            None => std::env::current_dir().map_err(io_err("working directory", Path::new(".")))?,
        };
        let tmp = tempfile::Builder::new()
            .prefix(".amber-bench-")
            .tempdir_in(&base)
            .map_err(io_err("create a temporary directory", &base))?;
        Ok(Workdir { tmp })
    }

    pub(crate) fn path(&self) -> &Path {
        self.tmp.path()
    }
}

/// Summary statistics of a sample.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Mean.
    pub mean: f64,
}

pub(crate) fn summarize(v: &[f64]) -> Summary {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| -> f64 {
        if s.is_empty() {
            return f64::NAN;
        }
        let i = p * (s.len() - 1) as f64;
        let (lo, hi) = (i.floor() as usize, i.ceil() as usize);
        s[lo] + (s[hi] - s[lo]) * (i - lo as f64)
    };
    Summary {
        median: q(0.5),
        p10: q(0.1),
        p90: q(0.9),
        mean: s.iter().sum::<f64>() / s.len().max(1) as f64,
    }
}

fn micros(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// What the machine was.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// `uname -r`.
    pub kernel: String,
    /// CPU, CPUs, memory.
    pub machine: String,
    /// File system of the benchmark directory.
    pub filesystem: String,
    /// The benchmark directory (removed afterwards).
    pub dir: String,
}

pub(crate) fn environment(dir: &Path) -> Environment {
    Environment {
        kernel: sys::kernel(),
        machine: sys::machine(),
        filesystem: sys::filesystem(dir),
        dir: dir.display().to_string(),
    }
}

pub(crate) fn warn_if_memory_fs(dir: &Path) {
    if sys::is_memory_fs(dir) {
        eprintln!(
            "amber bench: warning: {} is on {}: fdatasync does nothing there, so these numbers say nothing about a disk",
            dir.display(),
            sys::filesystem(dir)
        );
    }
}

// ---------------------------------------------------------------------------
// commit

/// Settings of the commit benchmark.
#[derive(Debug, Clone)]
pub struct CommitConfig {
    /// Measured iterations (each: one commit and one of each bare write).
    pub iters: usize,
    /// Unmeasured iterations first.
    pub warmup: usize,
    /// Directory to work in (a temporary directory is made inside it).
    pub dir: Option<PathBuf>,
}

impl Default for CommitConfig {
    fn default() -> Self {
        CommitConfig {
            iters: 2000,
            warmup: 200,
            dir: None,
        }
    }
}

/// Size of the change the commit benchmark commits.
pub const CHANGE_BYTES: usize = 100;

/// What the commit benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct CommitReport {
    /// "commit".
    pub bench: &'static str,
    /// Measured iterations.
    pub iters: usize,
    /// Warm-up iterations (not measured).
    pub warmup: usize,
    /// Median latency of begin + one 100-byte `StoreTx::write` + commit on a
    /// new database, whose log file grows with every commit, µs.
    pub commit_median_us: f64,
    /// Median latency of `pwrite` of the same 100 bytes appended to a plain
    /// file + `fdatasync`, µs (the file grows, as that log does).
    pub bare_sync_median_us: f64,
    /// `commit_median_us / bare_sync_median_us`.
    pub commit_vs_bare_sync: f64,
    /// Median latency of the same commit on a database whose log was
    /// recycled by a checkpoint, so that commits overwrite the previous
    /// epoch's bytes in place and the file does not grow, µs.
    pub commit_recycled_log_median_us: f64,
    /// Median latency of `pwrite` of 100 bytes inside a preallocated,
    /// already-synced file + `fdatasync`, µs (no size change to journal).
    pub bare_overwrite_sync_median_us: f64,
    /// `commit_recycled_log_median_us / bare_overwrite_sync_median_us`.
    pub commit_recycled_vs_bare_overwrite_sync: f64,
    /// `commit_median_us / bare_overwrite_sync_median_us`: the growing log
    /// against the cheapest durable write (includes the file-size journal
    /// commit the growing log pays).
    pub commit_vs_bare_overwrite_sync: f64,
    /// Distribution of commit latencies (growing log), µs.
    pub commit_us: Summary,
    /// Distribution of commit latencies (recycled log), µs.
    pub commit_recycled_log_us: Summary,
    /// Distribution of bare appending writes + sync, µs.
    pub bare_sync_us: Summary,
    /// Distribution of bare in-place writes + sync, µs.
    pub bare_overwrite_sync_us: Summary,
    /// Mean `CommitInfo::log_bytes` (expected 100 + H 20 + commit 16 = 136).
    pub log_bytes_per_commit: f64,
    /// LSN advance of the log per commit (bytes appended, by LSN).
    pub wal_lsn_bytes_per_commit: f64,
    /// Growth of the `-wal` file per commit on the new database (bytes
    /// actually appended; valid only when no checkpoint recycled the log
    /// during the loop).
    pub wal_file_bytes_per_commit: f64,
    /// Growth of the recycled database's `-wal` file during the loop (0:
    /// every commit overwrote old bytes in place).
    pub recycled_wal_file_growth: u64,
    /// `fdatasync` calls on the log per commit.
    pub log_syncs_per_commit: f64,
    /// Checkpoints that ran during the measured loop (both databases).
    pub auto_checkpoints: u64,
    /// How checkpoints were handled.
    pub checkpoint_policy: String,
    /// Where it ran.
    #[serde(flatten)]
    pub env: Environment,
}

/// The two bare writes the commit is compared with.
struct Bare {
    append: File,
    append_at: u64,
    overwrite: File,
    overwrite_len: u64,
    overwrite_at: u64,
}

impl Bare {
    fn new(dir: &Path, total: usize) -> Result<Bare> {
        let ap = dir.join("bare-append");
        let append = File::create_new(&ap).map_err(io_err("create", &ap))?;
        append.sync_all().map_err(io_err("sync", &ap))?;
        // Written with real zeros (not fallocate, whose unwritten extents
        // would need a journalled conversion on first write) and synced.
        let op = dir.join("bare-overwrite");
        let overwrite = File::create_new(&op).map_err(io_err("create", &op))?;
        let overwrite_len = (total * CHANGE_BYTES).next_multiple_of(4096) as u64;
        overwrite
            .write_all_at(&vec![0u8; overwrite_len as usize], 0)
            .and_then(|()| overwrite.sync_all())
            .map_err(io_err("preallocate", &op))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("sync", dir))?;
        Ok(Bare {
            append,
            append_at: 0,
            overwrite,
            overwrite_len,
            overwrite_at: 0,
        })
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.append.write_all_at(data, self.append_at)?;
        self.append.sync_data()?;
        self.append_at += data.len() as u64;
        Ok(())
    }

    fn overwrite(&mut self, data: &[u8]) -> io::Result<()> {
        if self.overwrite_at + data.len() as u64 > self.overwrite_len {
            self.overwrite_at = 0;
        }
        self.overwrite.write_all_at(data, self.overwrite_at)?;
        self.overwrite.sync_data()?;
        self.overwrite_at += data.len() as u64;
        Ok(())
    }
}

/// A database for the commit loop, with one block to write into.
struct CommitDb {
    store: Store,
    page: u64,
    wal: PathBuf,
}

impl CommitDb {
    fn new(db: PathBuf, opts: StoreOptions) -> Result<CommitDb> {
        let store = Store::create(Arc::new(RealVfs), &db, opts)?;
        let mut tx = store.begin()?;
        let page = tx.alloc(1, BlockKind::Raw)?;
        tx.commit()?;
        store.checkpoint()?;
        Ok(CommitDb {
            store,
            page,
            wal: wal_path(&db),
        })
    }

    /// Commits 100 bytes in slot `i % 8` of the block; returns the log bytes.
    fn commit(&self, i: usize, data: &[u8]) -> Result<u64> {
        let ps = self.store.page_size() as u64;
        let addr = self.page * ps + (HEADER_SIZE + (i % 8) * CHANGE_BYTES) as u64;
        let mut tx = self.store.begin()?;
        tx.write(addr, data)?;
        Ok(tx.commit()?.log_bytes)
    }

    fn wal_len(&self) -> Result<u64> {
        Ok(fs::metadata(&self.wal)
            .map_err(io_err("stat", &self.wal))?
            .len())
    }
}

/// Runs the commit benchmark.
pub fn commit(cfg: &CommitConfig) -> Result<CommitReport> {
    if cfg.iters == 0 {
        return Err(BenchError("--iters must be at least 1".into()));
    }
    let wd = Workdir::new(cfg.dir.as_deref())?;
    let dir = wd.path();
    warn_if_memory_fs(dir);
    // The default checkpoint policy, as users get it: at 136 log bytes per
    // commit the 64 MiB trigger fires about once per 490,000 commits, so it
    // is counted below rather than switched off.
    let opts = StoreOptions::default();
    let policy = format!(
        "default (checkpoint when the log passes {} MiB or pending changes {} MiB); \
         auto-checkpoints are left on and counted",
        opts.checkpoint_log_bytes >> 20,
        opts.checkpoint_pending_bytes >> 20
    );
    let total = cfg.warmup + cfg.iters;
    // A new database: its log grows with every commit.
    let fresh = CommitDb::new(dir.join("commit.amber"), opts.clone())?;
    // A database whose log has been used and recycled: the loop's commits
    // overwrite the previous epoch's bytes, as in a long-lived database.
    let recycled = CommitDb::new(dir.join("recycled.amber"), opts)?;
    let data = [0x5au8; CHANGE_BYTES];
    for i in 0..total + 8 {
        recycled.commit(i, &data)?;
    }
    recycled.store.checkpoint()?;
    let mut bare = Bare::new(dir, total)?;

    let mut commit_us = Vec::with_capacity(cfg.iters);
    let mut recycled_us = Vec::with_capacity(cfg.iters);
    let mut append_us = Vec::with_capacity(cfg.iters);
    let mut overwrite_us = Vec::with_capacity(cfg.iters);
    let mut log_bytes = 0u64;
    let mut start = None;
    let mut data = [0u8; CHANGE_BYTES];
    let generations = || fresh.store.stats().generation + recycled.store.stats().generation;
    for i in 0..total {
        if i == cfg.warmup {
            let st = fresh.store.stats();
            start = Some((
                st.end_lsn,
                st.log_syncs,
                generations(),
                fresh.wal_len()?,
                recycled.wal_len()?,
            ));
        }
        let measured = i >= cfg.warmup;
        for (j, b) in data.iter_mut().enumerate() {
            *b = (i * 7 + j) as u8;
        }
        // Rotate the order so that none of the four always follows another.
        for k in 0..4 {
            let t = Instant::now();
            let into = match (i + k) % 4 {
                0 => {
                    let n = fresh.commit(i, &data)?;
                    if measured {
                        log_bytes += n;
                    }
                    &mut commit_us
                }
                1 => {
                    recycled.commit(i, &data)?;
                    &mut recycled_us
                }
                2 => {
                    bare.append(&data)
                        .map_err(io_err("bare append", &dir.join("bare-append")))?;
                    &mut append_us
                }
                _ => {
                    bare.overwrite(&data)
                        .map_err(io_err("bare overwrite", &dir.join("bare-overwrite")))?;
                    &mut overwrite_us
                }
            };
            if measured {
                into.push(micros(t));
            }
        }
    }
    let st = fresh.store.stats();
    let (lsn0, syncs0, gen0, wal0, rwal0) = start.unwrap_or_default();
    let auto_checkpoints = generations() - gen0;
    let wal_len = fresh.wal_len()?;
    let recycled_wal_file_growth = recycled.wal_len()?.saturating_sub(rwal0);
    fresh.store.close()?;
    recycled.store.close()?;
    let n = cfg.iters as f64;
    let c = summarize(&commit_us);
    let r = summarize(&recycled_us);
    let a = summarize(&append_us);
    let o = summarize(&overwrite_us);
    Ok(CommitReport {
        bench: "commit",
        iters: cfg.iters,
        warmup: cfg.warmup,
        commit_median_us: c.median,
        bare_sync_median_us: a.median,
        commit_vs_bare_sync: c.median / a.median,
        commit_recycled_log_median_us: r.median,
        bare_overwrite_sync_median_us: o.median,
        commit_recycled_vs_bare_overwrite_sync: r.median / o.median,
        commit_vs_bare_overwrite_sync: c.median / o.median,
        commit_us: c,
        commit_recycled_log_us: r,
        bare_sync_us: a,
        bare_overwrite_sync_us: o,
        log_bytes_per_commit: log_bytes as f64 / n,
        wal_lsn_bytes_per_commit: (st.end_lsn - lsn0) as f64 / n,
        wal_file_bytes_per_commit: if auto_checkpoints == 0 {
            wal_len.saturating_sub(wal0) as f64 / n
        } else {
            f64::NAN
        },
        recycled_wal_file_growth,
        log_syncs_per_commit: (st.log_syncs - syncs0) as f64 / n,
        auto_checkpoints,
        checkpoint_policy: policy,
        env: environment(dir),
    })
}

impl CommitReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "commit latency: {} iterations after {} warm-up, the four interleaved, one directory",
            self.iters, self.warmup
        );
        let _ = writeln!(
            s,
            "  {:<50} {:>10} {:>8} {:>8}",
            "operation", "median µs", "p10 µs", "p90 µs"
        );
        for (name, x) in [
            ("commit 100 B, new database (log grows)", &self.commit_us),
            ("bare pwrite 100 B appended + fdatasync", &self.bare_sync_us),
            (
                "commit 100 B, recycled log (overwrites in place)",
                &self.commit_recycled_log_us,
            ),
            (
                "bare pwrite 100 B in place + fdatasync",
                &self.bare_overwrite_sync_us,
            ),
        ] {
            let _ = writeln!(
                s,
                "  {name:<50} {:>10.1} {:>8.1} {:>8.1}",
                x.median, x.p10, x.p90
            );
        }
        let verdict = |r: f64| if r <= 1.3 { "met" } else { "MISSED" };
        let _ = writeln!(
            s,
            "  commit / bare sync, growing files:    {:.3}  (target <= 1.3: {})",
            self.commit_vs_bare_sync,
            verdict(self.commit_vs_bare_sync)
        );
        let _ = writeln!(
            s,
            "  commit / bare sync, in place:         {:.3}  (target <= 1.3: {})",
            self.commit_recycled_vs_bare_overwrite_sync,
            verdict(self.commit_recycled_vs_bare_overwrite_sync)
        );
        let _ = writeln!(
            s,
            "  growing-log commit / in-place bare:   {:.3}",
            self.commit_vs_bare_overwrite_sync
        );
        let _ = writeln!(
            s,
            "  log bytes per commit: {:.1} (CommitInfo), {:.1} (LSN), {:.1} (-wal file growth); \
             recycled log grew {} bytes; {:.2} log syncs per commit; {} auto-checkpoints",
            self.log_bytes_per_commit,
            self.wal_lsn_bytes_per_commit,
            self.wal_file_bytes_per_commit,
            self.recycled_wal_file_growth,
            self.log_syncs_per_commit,
            self.auto_checkpoints
        );
        env_lines(&mut s, &self.env);
        s
    }
}

fn env_lines(s: &mut String, env: &Environment) {
    let _ = writeln!(s, "  kernel {}; {}", env.kernel, env.machine);
    let _ = writeln!(s, "  file system {} ({})", env.filesystem, env.dir);
}

// ---------------------------------------------------------------------------
// recovery

/// Settings of the recovery benchmark.
#[derive(Debug, Clone)]
pub struct RecoveryConfig {
    /// Log to build, MiB of committed transactions.
    pub wal_mib: u64,
    /// Pages in the database the transactions write to.
    pub pages: u64,
    /// Timed runs of each measurement.
    pub runs: usize,
    /// Also measure with the OS page cache dropped, where allowed.
    pub cold: bool,
    /// Workload seed.
    pub seed: u64,
    /// Directory to work in (a temporary directory is made inside it).
    pub dir: Option<PathBuf>,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            wal_mib: 64,
            pages: 4096,
            runs: 5,
            cold: true,
            seed: 1,
            dir: None,
        }
    }
}

/// Where the time of a warm read-only open goes (medians of separately
/// timed steps).
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryBreakdown {
    /// Reading the log file alone, start to end in 1 MiB `read`s into one
    /// reused buffer, seconds: the floor for reading this log as it sits in
    /// the page cache (see `warm_note`).
    pub read_log_s: f64,
    /// `wal::scan::scan` with nothing applied: reading the log through the
    /// read-ahead buffers and checking every record's length and checksum,
    /// seconds.
    pub scan_s: f64,
    /// The rest of the open: loading the checkpoint's metadata and
    /// replaying the records into pending changes, as far as it does not
    /// overlap the scan, seconds (`recovery_s - scan_s`).
    pub redo_and_rest_s: f64,
}

/// Numbers with the OS page cache dropped before every run of each side.
#[derive(Debug, Clone, Serialize)]
pub struct ColdNumbers {
    /// Runs of each side.
    pub runs: usize,
    /// Median read-only open, seconds.
    pub recovery_s: f64,
    /// Median sequential read, seconds.
    pub sequential_read_s: f64,
    /// `recovery_s / sequential_read_s`.
    pub recovery_vs_read: f64,
    /// Every run, seconds.
    pub recovery_runs_s: Vec<f64>,
    /// Every run, seconds.
    pub sequential_read_runs_s: Vec<f64>,
}

/// What the recovery benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryReport {
    /// "recovery".
    pub bench: &'static str,
    /// The headline: recovery time over the time to read a file of the
    /// log's size sequentially, both from the device (cold page cache) when
    /// the cache can be dropped, since after a machine crash the log is read
    /// from the device; warm otherwise (`recovery_vs_read_basis` says which).
    pub recovery_vs_read: f64,
    /// "cold", or "warm" with why there are no cold runs.
    pub recovery_vs_read_basis: String,
    /// `recovery_s / sequential_read_s`, both warm.
    pub recovery_vs_read_warm: f64,
    /// The cold ratio, when there are cold runs.
    pub recovery_vs_read_cold: Option<f64>,
    /// Median time of a read-only `Store::open` (recovery in memory: read
    /// the log, check, replay; nothing written), seconds, warm page cache.
    pub recovery_s: f64,
    /// Mean CPU time of a warm read-only open, user and system, both of its
    /// threads, seconds (clock-tick resolution, summed over the runs). With
    /// other work on the machine, wall times stretch toward it divided by the
    /// CPUs left, while a sequential read needs little CPU.
    pub recovery_cpu_s: Option<f64>,
    /// The one-minute load average before and after the warm runs: other
    /// work competing for the CPUs.
    pub load_average: [Option<f64>; 2],
    /// Median time of a writable `Store::open`: the same recovery plus the
    /// checkpoint that installs it (page writes, fdatasyncs, log recycle),
    /// seconds, warm page cache.
    pub recovery_with_install_s: f64,
    /// Median time to read a file of the log's size sequentially (1 MiB
    /// `read`s into one buffer), seconds, warm page cache.
    pub sequential_read_s: f64,
    /// `recovery_with_install_s / sequential_read_s`, warm.
    pub recovery_with_install_vs_read: f64,
    /// Every timed run, seconds.
    pub recovery_runs_s: Vec<f64>,
    /// Every timed run, seconds.
    pub recovery_with_install_runs_s: Vec<f64>,
    /// Every timed run, seconds.
    pub sequential_read_runs_s: Vec<f64>,
    /// Where the warm read-only open's time goes.
    pub breakdown: RecoveryBreakdown,
    /// How the sequential read reads.
    pub sequential_read_method: &'static str,
    /// What the warm comparison compares.
    pub warm_note: &'static str,
    /// Cold-cache numbers, when the page cache can be dropped (in a VM the
    /// host may still cache the disk).
    pub cold: Option<ColdNumbers>,
    /// Why there are no cold numbers, if there are none.
    pub cold_skipped: Option<String>,
    /// Timed runs per measurement.
    pub runs: usize,
    /// Requested log size, MiB.
    pub wal_mib: u64,
    /// Log bytes after the checkpoint LSN (what recovery scans).
    pub log_bytes: u64,
    /// Size of the `-wal` file.
    pub wal_file_bytes: u64,
    /// Size of the page file.
    pub db_file_bytes: u64,
    /// Page size.
    pub page_size: usize,
    /// Data pages the transactions write to.
    pub db_pages: u64,
    /// Log records recovery found.
    pub records: u64,
    /// Committed transactions recovery found.
    pub transactions: u64,
    /// Records replayed.
    pub redone: u64,
    /// Range records in the workload.
    pub range_records: u64,
    /// Mean range records per transaction.
    pub ranges_per_transaction: f64,
    /// Mean bytes per range.
    pub bytes_per_range: f64,
    /// Blocks the writable open installed (median run).
    pub installed_blocks: u64,
    /// Bytes the writable open wrote to the page file (median run).
    pub installed_bytes: u64,
    /// Seconds spent building the database and log (syncs skipped while
    /// building; the files are synced once at the end).
    pub build_s: f64,
    /// Where it ran.
    #[serde(flatten)]
    pub env: Environment,
}

/// The real file system with `fdatasync` skipped, for building the
/// benchmark's files quickly: the bytes written are the same as with syncs,
/// and the finished files are synced once.
#[derive(Debug)]
struct NoSyncVfs;

#[derive(Debug)]
struct NoSyncFile(Box<dyn IoFile>);

impl Vfs for NoSyncVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn IoFile>> {
        Ok(Box::new(NoSyncFile(RealVfs.open(path, mode)?)))
    }

    fn exists(&self, path: &Path) -> bool {
        RealVfs.exists(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        RealVfs.remove(path)
    }
}

impl IoFile for NoSyncFile {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, off)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write_all_at(buf, off)
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        self.0.size()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        self.0.try_lock_exclusive()
    }
}

/// The workload's shape, counted while building it.
#[derive(Debug, Default)]
struct Built {
    transactions: u64,
    ranges: u64,
    range_bytes: u64,
}

/// Builds a database of `cfg.pages` installed pages and a log of about
/// `cfg.wal_mib` MiB of committed transactions after its checkpoint, then
/// leaves both as a crash would (no close).
fn build(cfg: &RecoveryConfig, db: &Path) -> Result<Built> {
    let opts = StoreOptions {
        checkpoint_log_bytes: u64::MAX,
        checkpoint_pending_bytes: usize::MAX,
        checkpoint_on_close: false,
        ..StoreOptions::default()
    };
    let store = Store::create(Arc::new(NoSyncVfs), db, opts)?;
    let ps = store.page_size();
    let mut heads = Vec::with_capacity(cfg.pages as usize);
    while (heads.len() as u64) < cfg.pages {
        let mut tx = store.begin()?;
        for _ in 0..(cfg.pages - heads.len() as u64).min(512) {
            heads.push(tx.alloc(1, BlockKind::Raw)?);
        }
        tx.commit()?;
    }
    // Install the formatted pages: the log now starts empty.
    store.checkpoint()?;
    let target = cfg.wal_mib << 20;
    let mut rng = SplitMix::new(cfg.seed);
    let mut built = Built::default();
    let mut logged = 0u64;
    let mut buf = [0u8; 200];
    while logged < target {
        let mut tx = store.begin()?;
        // A few ranges (1 to 5) of 20 to 200 bytes, anywhere after the page
        // header of any page.
        for _ in 0..1 + rng.below(5) {
            let len = 20 + rng.below(181) as usize;
            let off = HEADER_SIZE as u64 + rng.below((ps - HEADER_SIZE - len + 1) as u64);
            let page = heads[rng.below(heads.len() as u64) as usize];
            for b in &mut buf[..len] {
                *b = rng.next_u64() as u8;
            }
            tx.write(page * ps as u64 + off, &buf[..len])?;
            built.ranges += 1;
            built.range_bytes += len as u64;
        }
        logged += tx.commit()?.log_bytes;
        built.transactions += 1;
    }
    // No close: the log stays as a crash leaves it. Then make the files
    // durable once (the build skipped every sync).
    drop(store);
    for p in [db.to_path_buf(), wal_path(db)] {
        File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(io_err("sync", &p))?;
    }
    Ok(built)
}

/// Reads `path` from start to end in 1 MiB reads into one buffer.
fn sequential_read(path: &Path) -> Result<(f64, u64)> {
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut f = File::open(path).map_err(io_err("open", path))?;
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io_err("read", path))?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok((t.elapsed().as_secs_f64(), total))
}

fn read_only() -> StoreOptions {
    StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    }
}

/// Times a read-only open (pure recovery: nothing is written).
fn time_ro_open(db: &Path) -> Result<(f64, Store)> {
    let t = Instant::now();
    let s = Store::open(Arc::new(RealVfs), db, read_only())?;
    Ok((t.elapsed().as_secs_f64(), s))
}

/// Times the two steps of an open that do not depend on the page file:
/// reading the log through one reused buffer, and scanning it (reading and
/// checking every record, as `Store::open` does, but applying nothing).
fn time_read_and_scan(db: &Path, from_lsn: u64, page_size: usize) -> Result<(f64, f64)> {
    let wal = wal_path(db);
    let (read, len) = sequential_read(&wal)?;
    let f = RealVfs
        .open(&wal, OpenMode::ReadOnly)
        .map_err(io_err("open", &wal))?;
    let mut header = [0u8; SLOT_SIZE];
    let base = SLOT_OFFSETS
        .iter()
        .filter_map(|&off| {
            f.read_exact_at(&mut header, off).ok()?;
            LogHeader::decode(&header).ok()
        })
        .max_by_key(|h| h.generation)
        .map(|h| h.base_lsn)
        .ok_or_else(|| BenchError(format!("{}: no valid log header", wal.display())))?;
    let t = Instant::now();
    let s = scan::scan(&*f, base, from_lsn, page_size, &mut |_, _| {
        ControlFlow::Continue(())
    })
    .map_err(io_err("scan", &wal))?;
    let scan_s = t.elapsed().as_secs_f64();
    if s.records == 0 && len > RECORDS_START {
        return Err(BenchError(format!(
            "{}: the scan found no records",
            wal.display()
        )));
    }
    Ok((read, scan_s))
}

fn copy_synced(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).map_err(io_err("copy", from))?;
    File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(io_err("sync", to))
}

/// Runs the recovery benchmark.
pub fn recovery(cfg: &RecoveryConfig) -> Result<RecoveryReport> {
    if cfg.runs == 0 || cfg.wal_mib == 0 || cfg.pages == 0 {
        return Err(BenchError(
            "--runs, --wal-mib and --pages must be at least 1".into(),
        ));
    }
    let wd = Workdir::new(cfg.dir.as_deref())?;
    let dir = wd.path();
    warn_if_memory_fs(dir);
    let db = dir.join("recovery.amber");
    let wal = wal_path(&db);
    eprintln!(
        "amber bench recovery: building {} pages and a {} MiB log in {}",
        cfg.pages,
        cfg.wal_mib,
        dir.display()
    );
    let t = Instant::now();
    let built = build(cfg, &db)?;
    let build_s = t.elapsed().as_secs_f64();
    let wal_file_bytes = fs::metadata(&wal).map_err(io_err("stat", &wal))?.len();
    let db_file_bytes = fs::metadata(&db).map_err(io_err("stat", &db))?.len();

    // The file read for comparison: the log's size, same directory, synced.
    let seq = dir.join("sequential.bin");
    {
        let f = File::create_new(&seq).map_err(io_err("create", &seq))?;
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i * 31) as u8).collect();
        let mut at = 0u64;
        while at < wal_file_bytes {
            let n = (wal_file_bytes - at).min(chunk.len() as u64) as usize;
            f.write_all_at(&chunk[..n], at)
                .map_err(io_err("write", &seq))?;
            at += n as u64;
        }
        f.sync_all().map_err(io_err("sync", &seq))?;
    }

    // Warm the page cache with both, and learn the facts of the log.
    let (_, s) = time_ro_open(&db)?;
    let rep = s.recovery_report().clone();
    let page_size = s.page_size();
    drop(s);
    sequential_read(&seq)?;
    eprintln!(
        "amber bench recovery: {} records, {} transactions; timing {} runs",
        rep.records, rep.committed, cfg.runs
    );

    let load_before = procfs::load_average();
    let mut ro = Vec::new();
    let mut rd = Vec::new();
    let mut read_log = Vec::new();
    let mut scans = Vec::new();
    let mut cpu = Some(0.0);
    for _ in 0..cfg.runs {
        let before = procfs::cpu_time_s();
        let (t, s) = time_ro_open(&db)?;
        cpu = cpu
            .zip(before.zip(procfs::cpu_time_s()))
            .map(|(c, (a, b))| c + b - a);
        ro.push(t);
        drop(s);
        let (t, _) = sequential_read(&seq)?;
        rd.push(t);
        let (r, sc) = time_read_and_scan(&db, rep.from_lsn, page_size)?;
        read_log.push(r);
        scans.push(sc);
    }

    // Writable opens, each on a fresh synced copy of the crashed files.
    let run_db = dir.join("run.amber");
    let run_wal = wal_path(&run_db);
    let mut install = Vec::new();
    let mut installed = Vec::new();
    for _ in 0..cfg.runs {
        let _ = fs::remove_file(&run_db);
        let _ = fs::remove_file(&run_wal);
        copy_synced(&db, &run_db)?;
        copy_synced(&wal, &run_wal)?;
        let t = Instant::now();
        let s = Store::open(Arc::new(RealVfs), &run_db, StoreOptions::default())?;
        install.push(t.elapsed().as_secs_f64());
        installed.push(s.open_checkpoint().unwrap_or_default());
        drop(s);
    }
    let _ = fs::remove_file(&run_db);
    let _ = fs::remove_file(&run_wal);

    let (cold, cold_skipped) = if !cfg.cold {
        (None, Some("not requested (--no-cold)".to_string()))
    } else if !procfs::can_drop_caches() {
        (
            None,
            Some("/proc/sys/vm/drop_caches is not writable (needs root)".to_string()),
        )
    } else {
        (Some(cold_runs(&db, &seq, cfg.runs)?), None)
    };

    let load_after = procfs::load_average();
    let recovery_s = summarize(&ro).median;
    let sequential_read_s = summarize(&rd).median;
    let recovery_with_install_s = summarize(&install).median;
    let scan_s = summarize(&scans).median;
    let mut by_time: Vec<(f64, _)> = install.iter().copied().zip(installed).collect();
    by_time.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mid = by_time
        .get(by_time.len() / 2)
        .map(|x| x.1)
        .unwrap_or_default();
    let warm = recovery_s / sequential_read_s;
    let (headline, basis) = match (&cold, &cold_skipped) {
        (Some(c), _) => (c.recovery_vs_read, "cold".to_string()),
        (None, why) => (
            warm,
            format!(
                "warm: no cold runs ({})",
                why.as_deref().unwrap_or("unknown")
            ),
        ),
    };
    Ok(RecoveryReport {
        bench: "recovery",
        recovery_vs_read: headline,
        recovery_vs_read_basis: basis,
        recovery_vs_read_warm: warm,
        recovery_vs_read_cold: cold.as_ref().map(|c| c.recovery_vs_read),
        recovery_s,
        recovery_cpu_s: cpu.map(|c| c / cfg.runs as f64),
        load_average: [load_before, load_after],
        recovery_with_install_s,
        sequential_read_s,
        recovery_with_install_vs_read: recovery_with_install_s / sequential_read_s,
        recovery_runs_s: ro,
        recovery_with_install_runs_s: install,
        sequential_read_runs_s: rd,
        breakdown: RecoveryBreakdown {
            read_log_s: summarize(&read_log).median,
            scan_s,
            redo_and_rest_s: recovery_s - scan_s,
        },
        sequential_read_method: "read() calls of 1 MiB into one reused buffer, from the start of the file to its end",
        warm_note: "warm, both files are in the page cache and a read is a copy from memory; \
            the comparison file was written in 1 MiB writes and sits in large folios, while the log, \
            written by small appends, sits in 4 KiB ones and copies more slowly (breakdown.read_log_s)",
        cold,
        cold_skipped,
        runs: cfg.runs,
        wal_mib: cfg.wal_mib,
        log_bytes: rep.end_lsn - rep.from_lsn,
        wal_file_bytes,
        db_file_bytes,
        page_size,
        db_pages: cfg.pages,
        records: rep.records,
        transactions: rep.committed,
        redone: rep.redone,
        range_records: built.ranges,
        ranges_per_transaction: built.ranges as f64 / built.transactions.max(1) as f64,
        bytes_per_range: built.range_bytes as f64 / built.ranges.max(1) as f64,
        installed_blocks: mid.blocks,
        installed_bytes: mid.bytes,
        build_s,
        env: environment(dir),
    })
}

/// `runs` read-only opens of `db` and sequential reads of `seq`,
/// interleaved, each after dropping the OS page cache.
fn cold_runs(db: &Path, seq: &Path, runs: usize) -> Result<ColdNumbers> {
    let drop_caches =
        || procfs::drop_caches().map_err(io_err("drop caches", Path::new("/proc/sys/vm")));
    let mut ro = Vec::new();
    let mut rd = Vec::new();
    for _ in 0..runs {
        drop_caches()?;
        let (t, s) = time_ro_open(db)?;
        ro.push(t);
        drop(s);
        drop_caches()?;
        rd.push(sequential_read(seq)?.0);
    }
    let (a, b) = (summarize(&ro).median, summarize(&rd).median);
    Ok(ColdNumbers {
        runs,
        recovery_s: a,
        sequential_read_s: b,
        recovery_vs_read: a / b,
        recovery_runs_s: ro,
        sequential_read_runs_s: rd,
    })
}

impl RecoveryReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "recovery: {:.1} MiB of log ({} records, {} transactions, {:.1} ranges of {:.0} B per transaction) over {} pages; medians of {} runs",
            self.log_bytes as f64 / (1 << 20) as f64,
            self.records,
            self.transactions,
            self.ranges_per_transaction,
            self.bytes_per_range,
            self.db_pages,
            self.runs,
        );
        let _ = writeln!(
            s,
            "  {:<52} {:>10} {:>8}",
            "warm page cache", "seconds", "× read"
        );
        let rows = [
            (
                "read-only open (recovery: read, check, replay)",
                self.recovery_s,
            ),
            (
                "  scan alone (read and check, nothing applied)",
                self.breakdown.scan_s,
            ),
            (
                "  rest (metadata, replay beyond the scan)",
                self.breakdown.redo_and_rest_s,
            ),
            (
                "  read the log file alone (its page-cache state)",
                self.breakdown.read_log_s,
            ),
            (
                "writable open (recovery + installing checkpoint)",
                self.recovery_with_install_s,
            ),
            (
                "sequential read of a file of the log's size",
                self.sequential_read_s,
            ),
        ];
        for (name, x) in rows {
            let _ = writeln!(
                s,
                "  {name:<52} {x:>10.4} {:>8.2}",
                x / self.sequential_read_s
            );
        }
        match (&self.cold, &self.cold_skipped) {
            (Some(c), _) => {
                let _ = writeln!(
                    s,
                    "  {:<52} {:>10} {:>8}",
                    "cold page cache (dropped before every run)", "seconds", "× read"
                );
                for (name, x) in [
                    ("read-only open", c.recovery_s),
                    ("sequential read", c.sequential_read_s),
                ] {
                    let _ = writeln!(s, "  {name:<52} {x:>10.4} {:>8.2}", x / c.sequential_read_s);
                }
            }
            (None, Some(why)) => {
                let _ = writeln!(s, "  cold page cache: skipped ({why})");
            }
            (None, None) => {}
        }
        let _ = writeln!(
            s,
            "  recovery / read: {:.2} ({}; target <= 3: {}); warm {:.2}{}",
            self.recovery_vs_read,
            self.recovery_vs_read_basis,
            if self.recovery_vs_read <= 3.0 {
                "met"
            } else {
                "MISSED"
            },
            self.recovery_vs_read_warm,
            self.recovery_vs_read_cold
                .map(|c| format!(", cold {c:.2}"))
                .unwrap_or_default(),
        );
        if let Some(c) = self.recovery_cpu_s {
            let _ = writeln!(
                s,
                "  a warm read-only open used {c:.3} s of CPU (both threads); load average {}",
                self.load_average
                    .iter()
                    .map(|l| l.map_or("?".to_string(), |l| format!("{l:.2}")))
                    .collect::<Vec<_>>()
                    .join(" → ")
            );
        }
        let _ = writeln!(
            s,
            "  writable open installed {} blocks, {} bytes",
            self.installed_blocks, self.installed_bytes
        );
        env_lines(&mut s, &self.env);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_sample() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mean, 3.0);
        assert!((s.p10 - 1.4).abs() < 1e-9);
    }

    #[test]
    fn tiny_commit_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = commit(&CommitConfig {
            iters: 5,
            warmup: 1,
            dir: Some(dir.path().to_path_buf()),
        })
        .expect("runs");
        assert_eq!(r.log_bytes_per_commit, 136.0);
        assert_eq!(r.wal_lsn_bytes_per_commit, 136.0);
        assert_eq!(r.wal_file_bytes_per_commit, 136.0);
        assert!(r.table().contains("commit"));
    }

    #[test]
    fn tiny_recovery_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = recovery(&RecoveryConfig {
            wal_mib: 1,
            pages: 64,
            runs: 1,
            cold: false,
            seed: 7,
            dir: Some(dir.path().to_path_buf()),
        })
        .expect("runs");
        assert_eq!(r.transactions, r.records - r.range_records);
        assert_eq!(r.redone, r.range_records);
        assert!(r.log_bytes >= 1 << 20);
        assert!(r.installed_blocks > 0);
        // No cold runs: the headline is the warm ratio, and says so.
        assert!(r.cold.is_none());
        assert!(r.recovery_vs_read_basis.starts_with("warm: no cold runs"));
        assert_eq!(r.recovery_vs_read, r.recovery_vs_read_warm);
        assert!(r.recovery_cpu_s.is_some_and(|c| c >= 0.0));
        assert!(r.table().contains("cold page cache: skipped"));
    }
}
