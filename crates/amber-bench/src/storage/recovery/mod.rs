//! The recovery benchmark (`amber bench recovery`): a read-only and a
//! writable open of a crashed database against a sequential read of a file
//! of its log's size, warm and with the page cache dropped. The crashed
//! database is built by `build`; what is measured, and its table, is in
//! `report`.

pub(super) mod build;
mod report;

pub use report::{ColdNumbers, RecoveryBreakdown, RecoveryReport};

use super::measure::{Workdir, environment, summarize, warn_if_memory_fs};
use super::{BenchError, Result, io_err};
use crate::procfs;
use amber::internals::io::real::RealVfs;
use amber::internals::io::{OpenMode, Vfs};
use amber::internals::store::{Store, StoreOptions, wal_path};
use amber::internals::wal::header::{LogHeader, RECORDS_START, SLOT_OFFSETS, SLOT_SIZE};
use amber::internals::wal::scan;
use build::build;
use std::fs::{self, File};
use std::io::Read;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

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

/// Reads `path` from start to end in 1 MiB reads into one buffer.
pub(super) fn sequential_read(path: &Path) -> Result<(f64, u64)> {
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

pub(super) fn copy_synced(from: &Path, to: &Path) -> Result<()> {
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
        // The open returns once recovered; its checkpointer thread then
        // installs: this waits for it.
        installed.push(s.open_checkpoint().unwrap_or_default());
        install.push(t.elapsed().as_secs_f64());
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
        ranges: built.ranges,
        range_records: rep.records - rep.committed,
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            (r.transactions..=r.ranges).contains(&r.range_records),
            "{r:?}"
        );
        assert_eq!(r.redone, r.ranges);
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
