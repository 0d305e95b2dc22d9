//! Storage benchmarks, run by `amber bench commit`, `amber bench recovery`
//! and `amber bench checkpoint`.
//!
//! - [`commit()`]: the latency of committing a 100-byte change, against the
//!   cheapest durable write the same file system offers (a bare `pwrite` of
//!   the same 100 bytes and `fdatasync`), measured interleaved in one run and
//!   one directory so that drift hits both equally.
//! - [`recovery()`]: the time to open a database whose log holds tens of MiB of
//!   committed transactions (scan and redo), against reading a file of the
//!   log's size sequentially from the same directory; with the page cache
//!   dropped before every run of each side (the headline, since after a
//!   machine crash the log is read from the device) and warm.
//! - [`restart()`]: an `amber serve`'s restart after a kill with a large
//!   log of range records (REDO, ESM) or of whole pages (WPL), against a
//!   sequential read of that log, the page cache dropped before each.
//! - [`stall()`]: how long page faults of another thread stall while a
//!   checkpoint installs a large log, called explicitly or triggered by a
//!   commit.
//!
//! Both run on real files under a directory on the file system being measured
//! (by default a fresh temporary directory under the working directory, not
//! `/tmp`, which is often tmpfs), and record the kernel, the machine and the
//! file system with the numbers.
//!
//! Each benchmark has its own module; `measure` holds what every benchmark
//! of the crate measures with (the hot, fault and update ones too), and this
//! module the error they all return.

mod commit;
mod measure;
mod recovery;
mod restart;
mod stall;

pub use commit::{CHANGE_BYTES, CommitConfig, CommitReport, commit};
pub use measure::{Environment, Summary};
pub(crate) use measure::{Workdir, environment, median, median_u64, range, summarize};
pub use recovery::{ColdNumbers, RecoveryBreakdown, RecoveryConfig, RecoveryReport, recovery};
pub use restart::{RestartReport, RestartRow, restart};
pub use stall::{CaseRun, CaseSummary, FaultStats, StallConfig, StallReport, stall};
use std::fmt;
use std::io;
use std::path::Path;

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
