//! What every benchmark measures with (the fault, hot and update benchmarks
//! too): a fresh directory on the file system being measured, the summary of
//! a sample, and the machine and file system the numbers came from.

use super::{Result, io_err};
use crate::sys;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

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

/// The median of `v` (NaN when empty).
pub(crate) fn median(v: &[f64]) -> f64 {
    summarize(v).median
}

/// The median of counts (the upper one of an even sample; 0 when empty).
pub(crate) fn median_u64(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

/// The smallest and largest of `v`.
pub(crate) fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
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

pub(super) fn env_lines(s: &mut String, env: &Environment) {
    let _ = writeln!(s, "  kernel {}; {}", env.kernel, env.machine);
    let _ = writeln!(s, "  file system {} ({})", env.filesystem, env.dir);
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
}
