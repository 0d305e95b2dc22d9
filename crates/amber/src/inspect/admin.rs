//! The administrative operations: creating an empty database, verifying one,
//! checkpointing it, and running recovery with a report of what it found.
//! Each goes through the store's own code paths (its create, open, recovery
//! and checkpoint), so none can leave a database in a state the store would
//! not.

use super::files::log_closed_cleanly;
use crate::error::Result;
use crate::io::real::RealVfs;
use crate::store::checkpoint::CheckpointReport;
use crate::store::salvage::CutLog;
use crate::store::verify::VerifyReport;
use crate::store::{RecoveryReport, Store, StoreOptions, StoreStats, wal_path};
use std::path::Path;
use std::sync::Arc;

/// Creates a new, empty database at `path` (and its log at
/// [`wal_path`](super::wal_path)`(path)`) with pages of `page_size` bytes,
/// and closes it. Returns its numbers.
pub fn create(path: &Path, page_size: usize) -> Result<StoreStats> {
    let opts = StoreOptions {
        page_size,
        ..StoreOptions::default()
    };
    let s = Store::create(Arc::new(RealVfs), path, opts)?;
    let stats = s.stats();
    s.close()?;
    Ok(stats)
}

/// Checks the database at `path` without changing it: both superblock
/// copies, both log header copies, every log record since the checkpoint,
/// and every allocated block (checksum, header, object map). `Err` only when
/// the check could not run at all (no such file, a locked database, an I/O
/// failure); damage is in the report.
pub fn verify(path: &Path) -> Result<VerifyReport> {
    crate::store::verify::verify(Arc::new(RealVfs), path)
}

/// What a checkpoint installed into the page file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Installed {
    /// Data blocks written.
    pub blocks: u64,
    /// Bytes written to the page file (metadata included).
    pub bytes: u64,
    /// The checkpoint LSN afterwards.
    pub lsn: u64,
    /// The superblock generation afterwards.
    pub generation: u64,
}

impl Installed {
    fn of(ck: &CheckpointReport, s: &Store) -> Installed {
        Installed {
            blocks: ck.blocks,
            bytes: ck.bytes,
            lsn: ck.lsn,
            generation: s.superblock().generation,
        }
    }

    /// Whether nothing was written.
    pub fn is_nothing(&self) -> bool {
        self.blocks == 0 && self.bytes == 0
    }
}

/// What [`checkpoint`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointOutcome {
    /// What recovery found when the database was opened.
    pub recovery: RecoveryReport,
    /// What the open installed (recovery's work, or a rewrite of a damaged
    /// superblock or log header copy); `None` when it had nothing to do.
    pub at_open: Option<Installed>,
    /// What the checkpoint then installed (nothing when the open had
    /// installed everything).
    pub checkpoint: Installed,
}

/// Opens the database at `path` (running recovery and installing its work),
/// installs every committed change into the page file, recycles the log,
/// and closes it.
pub fn checkpoint(path: &Path) -> Result<CheckpointOutcome> {
    let s = Store::open(Arc::new(RealVfs), path, StoreOptions::default())?;
    let at_open = s.open_checkpoint().map(|ck| Installed::of(&ck, &s));
    let ck = s.checkpoint()?;
    let out = CheckpointOutcome {
        recovery: s.recovery_report().clone(),
        at_open,
        checkpoint: Installed::of(&ck, &s),
    };
    s.close()?;
    Ok(out)
}

/// What [`recover`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryOutcome {
    /// What the recovery pass found.
    pub recovery: RecoveryReport,
    /// Whether the log said, before recovery, that the database had been
    /// closed cleanly: then bytes after the end of the log are older records
    /// left by a recycling checkpoint, not a torn batch.
    pub closed_cleanly: bool,
    /// What installing recovery's work wrote; `None` when there was nothing
    /// to install.
    pub installed: Option<Installed>,
    /// The checkpoint LSN afterwards.
    pub checkpoint_lsn: u64,
}

/// Opens the database at `path` writable, which runs recovery and installs
/// what it rebuilt, and closes it; reports what recovery found.
pub fn recover(path: &Path) -> Result<RecoveryOutcome> {
    // Read before the open, which may start a new log epoch.
    let closed_cleanly = log_closed_cleanly(&wal_path(path));
    let s = Store::open(Arc::new(RealVfs), path, StoreOptions::default())?;
    let out = RecoveryOutcome {
        recovery: s.recovery_report().clone(),
        closed_cleanly,
        installed: s.open_checkpoint().map(|ck| Installed::of(&ck, &s)),
        checkpoint_lsn: s.superblock().checkpoint_lsn,
    };
    s.close()?;
    Ok(out)
}

/// What [`salvage`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SalvageOutcome {
    /// The damaged log record that recovery refused, and what cutting the
    /// log there gave up; `None` when the log had no such damage (nothing
    /// was given up).
    pub cut: Option<CutLog>,
    /// The recovery that followed.
    pub recovery: RecoveryOutcome,
}

/// Brings back a database whose log has a damaged record followed by
/// durable commits, which [`recover`] refuses: the log is cut at the
/// damaged record (the bytes cut off saved beside it first), and the
/// database recovers to the last commit before it. The outcome lists the
/// transactions lost. A database without such damage is just recovered.
pub fn salvage(path: &Path) -> Result<SalvageOutcome> {
    let cut = crate::store::salvage::cut_damaged_log(&RealVfs, path)?;
    let recovery = recover(path)?;
    Ok(SalvageOutcome { cut, recovery })
}

/// What [`new_log`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLogOutcome {
    /// The LSN of the page file's last checkpoint, where the new log
    /// starts: every commit up to it is in the page file.
    pub checkpoint_lsn: u64,
    /// The recovery that followed (of an empty log: nothing to replay).
    pub recovery: RecoveryOutcome,
}

/// Makes a new, empty log for a database whose log file is missing, then
/// opens it. After a clean close this loses nothing (closing installs every
/// commit into the page file); after a crash, commits that were only in the
/// missing log are lost, and nothing left can tell which: so this is never
/// done without being asked. Refuses when the log exists.
pub fn new_log(path: &Path) -> Result<NewLogOutcome> {
    let checkpoint_lsn = crate::store::salvage::new_log(&RealVfs, path)?;
    let recovery = recover(path)?;
    Ok(NewLogOutcome {
        checkpoint_lsn,
        recovery,
    })
}
