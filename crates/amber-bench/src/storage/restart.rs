//! `amber bench recovery --server` (issue 19's restart target): how long an
//! `amber serve` takes to come back after it was SIGKILLed with a large
//! log, against a sequential read of that log file, the OS page cache
//! dropped before each.
//!
//! Two logs, each built as the recovery benchmark builds its own
//! (`recovery/build.rs`: formatted pages installed, then about `wal_mib`
//! MiB of committed transactions, the files left as a kill leaves them —
//! no close, no shutdown checkpoint — and synced once):
//! - `pd-redo`: range records, what the server logs under PD-REDO and
//!   under every ESM scheme and `auto` (an ESM commit's cached pages are
//!   not logged, docs/design.md §11.7), so their restart is this one: the
//!   forward redo pass.
//! - `wpl`: whole page images, what it logs under WPL; the restart is the
//!   forward pass, which verifies the log (and finds its end) without
//!   replaying past the first page record, then the backward scan that
//!   rebuilds the WPL table (§3.2): the log's tail is read twice, not the
//!   paper's single backward scan.
//!
//! *The restart* is `amber_server::bind` on the database, timed whole: it
//! opens the writer store (recovery, which replays the log into memory)
//! and listens; the store's checkpointer thread then installs what
//! recovery rebuilt and recycles the log while the server serves
//! (docs/design.md §11.9). `installed_ms`, from the same start, is when
//! that installation ended. Each run works on a fresh synced copy of the
//! killed files, so every run restarts from the same state.
//!
//! Beside it, `recovery_ms`: a read-only open of another cold copy, which
//! recovers and installs nothing: for range records the same redo pass;
//! for page records a read-only open keeps the one forward pass with the
//! images in memory (§3.2), so it says what one pass over the log costs,
//! not the backward scan.
//!
//! *The cache.* As root, `sync` and `3` written to
//! `/proc/sys/vm/drop_caches` before each restart and each read; otherwise
//! `posix_fadvise(DONTNEED)` on the files the step reads (the copy being
//! restarted, or the log), after syncing them; the report says which.

use super::measure::{Environment, Workdir, environment, summarize, warn_if_memory_fs};
use super::recovery::build::{build, build_pages};
use super::recovery::{copy_synced, sequential_read};
use super::{BenchError, RecoveryConfig, Result, io_err};
use crate::procfs;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions, wal_path};
use serde::Serialize;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// One scheme's restart.
#[derive(Debug, Clone, Serialize)]
pub struct RestartRow {
    pub scheme: &'static str,
    /// The log's bytes after the checkpoint (what the restart recovers).
    pub log_bytes: u64,
    /// The server's restart, median, ms.
    pub restart_ms: f64,
    /// A sequential read of the same log file, median, ms.
    pub sequential_read_ms: f64,
    /// `restart_ms / sequential_read_ms`; the target is ≤ 3.
    pub ratio: f64,
    /// Of the restart, the recovery passes alone: a read-only open of
    /// another cold copy (no installation, no log recycled), median, ms.
    pub recovery_ms: f64,
    /// From the same start as `restart_ms`, until the checkpointer thread
    /// had installed what the restart recovered (the page file written and
    /// synced, the log recycled), median, ms: the server serves meanwhile.
    pub installed_ms: f64,
    /// What the restart does with this log.
    pub restart: &'static str,
    pub restart_runs_ms: Vec<f64>,
    pub sequential_read_runs_ms: Vec<f64>,
    pub recovery_runs_ms: Vec<f64>,
    pub installed_runs_ms: Vec<f64>,
    /// The log file's size.
    pub wal_file_bytes: u64,
    /// From the restarted store's recovery report: records scanned,
    /// records redone, records the backward scan read, WPL table entries
    /// rebuilt.
    pub records: u64,
    pub redone: u64,
    pub backward_records: u64,
    pub logged_pages: u64,
}

/// What `amber bench recovery --server` reports.
#[derive(Debug, Clone, Serialize)]
pub struct RestartReport {
    pub bench: &'static str,
    /// How the OS page cache was emptied before each step.
    pub cache: String,
    pub target_ratio: f64,
    /// Every row's ratio within the target.
    pub met: bool,
    pub rows: Vec<RestartRow>,
    pub runs: usize,
    pub wal_mib: u64,
    pub pages: u64,
    pub load_average: [Option<f64>; 2],
    pub env: Environment,
}

const TARGET: f64 = 3.0;

/// Runs the restart benchmark with `cfg`'s log size, pages, runs (each a
/// restart, a read-only open and a read), cache setting (`cold`: drop the
/// OS page cache before each step; warm only for tests) and seed.
pub fn restart(cfg: &RecoveryConfig) -> Result<RestartReport> {
    if cfg.runs == 0 || cfg.wal_mib == 0 || cfg.pages == 0 {
        return Err(BenchError::new(
            "--runs, --wal-mib and --pages must be at least 1",
        ));
    }
    let wd = Workdir::new(cfg.dir.as_deref())?;
    let dir = wd.path();
    warn_if_memory_fs(dir);
    let cache = match (cfg.cold, procfs::can_drop_caches()) {
        (false, _) => "warm (not dropped)",
        (true, true) => "dropped: sync, then 3 written to /proc/sys/vm/drop_caches",
        (true, false) => {
            "dropped per file: synced, then posix_fadvise(DONTNEED) (drop_caches needs root)"
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(io_err("starting a runtime", dir))?;
    let load_before = procfs::load_average();
    let mut rows = Vec::new();
    let read_only = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    type Build = fn(&RecoveryConfig, &Path) -> Result<super::recovery::build::Built>;
    let schemes: [(&str, Build, &str); 2] = [
        (
            "pd-redo",
            build,
            "the forward redo pass (the ESM schemes and auto log the same records)",
        ),
        (
            "wpl",
            build_pages,
            "the forward pass verifying the log, then the backward scan rebuilding the WPL table",
        ),
    ];
    for (scheme, make, what) in schemes {
        let killed = dir.join(format!("{scheme}.amber"));
        eprintln!(
            "amber bench recovery --server: building a {} MiB {scheme} log",
            cfg.wal_mib
        );
        make(cfg, &killed)?;
        let wal = wal_path(&killed);
        let wal_file_bytes = fs::metadata(&wal).map_err(io_err("stat", &wal))?.len();
        let run = dir.join("run.amber");
        let (mut restarts, mut reads, mut report) = (Vec::new(), Vec::new(), None);
        let (mut recoveries, mut installs) = (Vec::new(), Vec::new());
        let fresh = || -> Result<()> {
            for p in [run.clone(), wal_path(&run)] {
                let _ = fs::remove_file(&p);
            }
            copy_synced(&killed, &run)?;
            copy_synced(&wal, &wal_path(&run))?;
            empty_cache(cfg.cold, &[&run, &wal_path(&run)])
        };
        for _ in 0..cfg.runs {
            fresh()?;
            let (ms, installed_ms, r) = time_restart(&rt, &run)?;
            restarts.push(ms);
            installs.push(installed_ms);
            report = Some(r);
            fresh()?;
            let t = Instant::now();
            drop(Store::open(Arc::new(RealVfs), &run, read_only.clone())?);
            recoveries.push(t.elapsed().as_secs_f64() * 1e3);
            empty_cache(cfg.cold, &[&wal])?;
            reads.push(sequential_read(&wal)?.0 * 1e3);
        }
        for p in [run.clone(), wal_path(&run), killed.clone(), wal] {
            let _ = fs::remove_file(&p);
        }
        let r = report.expect("at least one run");
        let (restart_ms, read_ms) = (summarize(&restarts).median, summarize(&reads).median);
        eprintln!(
            "amber bench recovery --server: {scheme} {restart_ms:.0} ms, read {read_ms:.0} ms"
        );
        rows.push(RestartRow {
            scheme,
            log_bytes: r.end_lsn - r.from_lsn,
            restart_ms,
            sequential_read_ms: read_ms,
            ratio: restart_ms / read_ms,
            recovery_ms: summarize(&recoveries).median,
            installed_ms: summarize(&installs).median,
            restart: what,
            restart_runs_ms: restarts,
            sequential_read_runs_ms: reads,
            recovery_runs_ms: recoveries,
            installed_runs_ms: installs,
            wal_file_bytes,
            records: r.records,
            redone: r.redone,
            backward_records: r.backward_records,
            logged_pages: r.logged_pages,
        });
    }
    Ok(RestartReport {
        bench: "server-restart",
        cache: cache.into(),
        target_ratio: TARGET,
        met: rows.iter().all(|r| r.ratio <= TARGET),
        rows,
        runs: cfg.runs,
        wal_mib: cfg.wal_mib,
        pages: cfg.pages,
        load_average: [load_before, procfs::load_average()],
        env: environment(dir),
    })
}

/// Starts a server on `db` (its restart), timed to when it listens and to
/// when its checkpointer thread has installed what it recovered; stops it
/// afterwards (untimed). The two times and the restarted store's recovery
/// report.
fn time_restart(
    rt: &tokio::runtime::Runtime,
    db: &Path,
) -> Result<(f64, f64, amber::internals::store::RecoveryReport)> {
    let opts = amber_server::ServeOptions {
        listen: "127.0.0.1:0".parse().expect("an address"),
        databases: vec![("db".into(), db.to_path_buf())],
        token: Some(b"restart".to_vec()),
        ..amber_server::ServeOptions::default()
    };
    let t = Instant::now();
    let server = rt
        .block_on(amber_server::bind(opts))
        .map_err(|e| BenchError::new(format!("restarting the server on {}: {e}", db.display())))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let writer = server
        .writer("db")
        .ok_or_else(|| BenchError::new(format!("{}: the server opened no writer", db.display())))?;
    // Waits for the checkpointer thread's installation of what the
    // restart recovered.
    writer.store.open_checkpoint().ok_or_else(|| {
        BenchError::new(format!("{}: the restart installed nothing", db.display()))
    })?;
    let installed_ms = t.elapsed().as_secs_f64() * 1e3;
    let report = writer.store.recovery_report().clone();
    drop(writer);
    rt.block_on(server.run(async {}));
    Ok((ms, installed_ms, report))
}

/// Empties the OS page cache (when `cold`): all of it as root, else the
/// cached pages of `files`.
fn empty_cache(cold: bool, files: &[&Path]) -> Result<()> {
    if !cold {
        return Ok(());
    }
    if procfs::can_drop_caches() {
        return procfs::drop_caches().map_err(io_err("drop caches", Path::new("/proc/sys/vm")));
    }
    for &p in files {
        let f = File::open(p).map_err(io_err("open", p))?;
        f.sync_all().map_err(io_err("sync", p))?;
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
            .map_err(|e| io_err("posix_fadvise", p)(e.into()))?;
    }
    Ok(())
}

impl RestartReport {
    /// The table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "server restart after a kill, against a sequential read of the same log ({} runs, medians; cache {}; load {:.2} before, {:.2} after)",
            self.runs,
            self.cache,
            self.load_average[0].unwrap_or(f64::NAN),
            self.load_average[1].unwrap_or(f64::NAN)
        );
        let _ = writeln!(
            s,
            "{:<8} {:>11} {:>11} {:>8} {:>7} {:>12} {:>13}  restart",
            "scheme", "log_bytes", "restart_ms", "read_ms", "ratio", "recovery_ms", "installed_ms"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<8} {:>11} {:>11.1} {:>8.1} {:>7.2} {:>12.1} {:>13.1}  {}",
                r.scheme,
                r.log_bytes,
                r.restart_ms,
                r.sequential_read_ms,
                r.ratio,
                r.recovery_ms,
                r.installed_ms,
                r.restart
            );
        }
        let _ = writeln!(
            s,
            "target: each ratio <= {}: {}",
            self.target_ratio,
            if self.met { "met" } else { "NOT met" }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_logs_restart_through_the_server() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = restart(&RecoveryConfig {
            wal_mib: 1,
            pages: 64,
            runs: 1,
            cold: false,
            seed: 3,
            dir: Some(dir.path().to_path_buf()),
        })
        .expect("runs");
        let [redo, wpl] = &r.rows[..] else {
            panic!("two rows: {r:?}")
        };
        assert!(
            redo.log_bytes >= 1 << 20 && wpl.log_bytes >= 1 << 20,
            "{r:?}"
        );
        // The redo pass applied every range; the WPL restart scanned back.
        assert!(redo.redone > 0 && redo.backward_records == 0, "{redo:?}");
        assert!(wpl.backward_records > 0 && wpl.logged_pages > 0, "{wpl:?}");
        assert!(wpl.logged_pages <= 64, "{wpl:?}");
        for row in &r.rows {
            assert!(
                row.restart_ms > 0.0 && row.sequential_read_ms > 0.0,
                "{row:?}"
            );
            assert_eq!(row.ratio, row.restart_ms / row.sequential_read_ms);
            assert!(row.installed_ms >= row.restart_ms, "{row:?}");
        }
        assert!(r.cache.starts_with("warm"));
        assert!(r.table().contains("target: each ratio <= 3"));
    }
}
