//! `amber bench faults`: what a cold fault costs per page — fetch from the OS
//! page cache, checksum, swizzle, install — per fault backend, with one page
//! per fault and with a fetch cluster of 8.
//!
//! The database holds N pages of 127 small objects each (`value`, `next`:
//! the following object, `far`: an object on a random page), so swizzling a
//! page converts 254 pointers, half of them to other pages, through the frame
//! table. A directory (one object per page, a `PVec` allocated after them)
//! lets the measurement reach every page without touching any other.
//!
//! Each run opens the database afresh (its files in the OS page cache), reads
//! the directory (which faults in the directory's own pages and reserves
//! frames for every page), then touches one object per page — in page order,
//! or in a random order — and divides the time by the faults served and by
//! the pages fetched (`db.stats()`). Runs are repeated and medians reported.
//!
//! Separately, without faults: reading every page with `pread` (the OS page
//! cache copy), its CRC-32C alone, reading it through the store as a fault
//! does (`pread` + checksum + bookkeeping, into a buffer kept between reads:
//! a fresh buffer per page would add a page fault of the benchmark's own
//! heap to each, which an earlier version counted as checksum time), and
//! swizzling the fetched images with the frame table of a scratch frame space
//! in which every page already has a frame (as during the measured faults,
//! where the directory reserved them). The difference between the fault cost
//! and these is the fault mechanism itself, the install and the pager's
//! bookkeeping.
//!
//! The database is built in `database`, the measurements without faults are
//! in `breakdown`, and the result and its table in `report`.

mod breakdown;
mod database;
mod mapped;
mod report;

pub use mapped::{CHILD_SUBCOMMAND, child};

pub use database::{Dir, Node};
pub use report::{BackendFaults, Breakdown, FaultCase, FaultsReport};

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use amber::BackendChoice;
use amber::{Db, Options, PRef};

use crate::backend::Backends;
use crate::hot::check_backend;
use crate::storage::{BenchError, Workdir, environment, summarize};
use breakdown::breakdown;
use database::build;
use report::{DESIGN_REFERENCE, METHOD};

/// The fetch cluster measured besides one page per fault.
pub const CLUSTER: u32 = 8;

/// Settings of `amber bench faults`.
#[derive(Clone, Debug)]
pub struct FaultsConfig {
    /// Pages of objects.
    pub pages: u64,
    /// Backends to measure.
    pub backends: Backends,
    /// Runs of each case.
    pub runs: usize,
    /// Directory for the database (default: the working directory).
    pub dir: Option<PathBuf>,
    /// Seed of the pointers and of the random order.
    pub seed: u64,
    /// How to re-execute this binary into a mapped run ([`child`]): the
    /// arguments before the run's own (the CLI's `bench faults
    /// __faults-mapped`); empty where no such binary is at hand.
    pub child_args: Vec<String>,
}

impl Default for FaultsConfig {
    fn default() -> Self {
        FaultsConfig {
            pages: 8_192,
            backends: Backends::Both,
            runs: 5,
            dir: None,
            seed: 1,
            child_args: Vec::new(),
        }
    }
}

/// One run: open, read the directory, touch one object per page in `order`
/// (indices into the directory). Returns (µs, faults, fetched).
fn touch_run(
    path: &Path,
    backend: BackendChoice,
    cluster: u32,
    order: &[u32],
) -> Result<(f64, u64, u64, String), BenchError> {
    let db = Db::open(
        path,
        Options {
            backend,
            fetch_cluster: cluster,
            fetch_adaptive: false,
            ..Options::default()
        },
    )?;
    check_backend(backend, &db)?;
    let dir: PRef<Dir> = db
        .root("dir")?
        .ok_or_else(|| BenchError::new("no root \"dir\""))?;
    let firsts: Vec<PRef<Node>> = db.slice(&db.get(dir).pages).to_vec();
    if firsts.len() != order.len() {
        return Err(BenchError::new(format!(
            "the directory lists {} pages, expected {}",
            firsts.len(),
            order.len()
        )));
    }
    let s0 = db.stats();
    let t = Instant::now();
    let mut sum = 0u64;
    for &i in order {
        sum = sum.wrapping_add(db.get(firsts[i as usize]).value);
    }
    let us = t.elapsed().as_secs_f64() * 1e6;
    black_box(sum);
    let s1 = db.stats();
    let name = db.backend().to_string();
    db.close()?;
    Ok((us, s1.faults - s0.faults, s1.fetched - s0.fetched, name))
}

fn median_u64(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Runs `amber bench faults`.
pub fn faults(cfg: &FaultsConfig) -> Result<FaultsReport, BenchError> {
    if !(1..=1 << 24).contains(&cfg.pages) {
        return Err(BenchError::new("--pages must be between 1 and 16777216"));
    }
    if cfg.runs == 0 {
        return Err(BenchError::new("--runs must be at least 1"));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    let path = work.path().join("faults.amber");
    let per_page = build(&path, cfg.pages, cfg.seed)?;
    let in_order = mapped::order(cfg.pages, false, cfg.seed);
    let random = mapped::order(cfg.pages, true, cfg.seed);
    let mut cases = Vec::new();
    let mut backends = BTreeMap::new();
    for choice in cfg.backends.choices() {
        let mapped_as = match choice {
            BackendChoice::MappedUnverified => Some(amber::Backend::MappedUnverified),
            BackendChoice::Mapped => Some(amber::Backend::Mapped),
            _ => None,
        };
        if let Some(backend) = mapped_as {
            let run = (cfg.pages, cfg.runs, cfg.seed);
            let (c, b) = mapped::cases(&path, run, backend, &cfg.child_args)?;
            cases.extend(c);
            backends.insert(backend.to_string(), b);
            continue;
        }
        let mut name = String::new();
        for cluster in [1, CLUSTER] {
            for (order, touch) in [("page", &in_order), ("random", &random)] {
                let (mut per_fault, mut per_page_us, mut faults, mut fetched, mut ms) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for _ in 0..cfg.runs {
                    let (us, f, p, n) = touch_run(&path, choice, cluster, touch)?;
                    per_fault.push(us / f.max(1) as f64);
                    per_page_us.push(us / p.max(1) as f64);
                    faults.push(f);
                    fetched.push(p);
                    ms.push(us / 1e3);
                    name = n;
                }
                cases.push(FaultCase {
                    backend: name.clone(),
                    cluster,
                    order,
                    us_per_fault: summarize(&per_fault),
                    us_per_page: summarize(&per_page_us),
                    faults: median_u64(&mut faults),
                    fetched: median_u64(&mut fetched),
                    ms: summarize(&ms).median,
                    checks: median_u64(&mut faults),
                });
            }
        }
        let find = |cluster: u32, order: &str| {
            cases
                .iter()
                .find(|c| c.backend == name && c.cluster == cluster && c.order == order)
        };
        if let (Some(a), Some(b), Some(c), Some(d)) = (
            find(1, "page"),
            find(1, "random"),
            find(CLUSTER, "page"),
            find(CLUSTER, "random"),
        ) {
            backends.insert(
                name.clone(),
                BackendFaults {
                    cold_fault_us: a.us_per_page.median,
                    cold_fault_random_us: b.us_per_page.median,
                    cluster8_us_per_page: c.us_per_page.median,
                    cluster8_random_us_per_page: d.us_per_page.median,
                    faults: a.faults,
                    cluster8_faults: c.faults,
                },
            );
        }
    }
    let breakdown = breakdown(&path, cfg.runs)?;
    Ok(FaultsReport {
        benchmark: "faults",
        pages: cfg.pages,
        objects_per_page: per_page,
        pointers_per_page: 2 * per_page,
        runs: cfg.runs,
        backends,
        cases,
        breakdown,
        design_reference: DESIGN_REFERENCE,
        method: METHOD,
        environment: environment(work.path()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = faults(&FaultsConfig {
            pages: 64,
            backends: Backends::Both,
            runs: 1,
            dir: Some(dir.path().to_path_buf()),
            seed: 3,
            child_args: Vec::new(),
        })
        .expect("faults");
        assert_eq!(r.objects_per_page, 127);
        assert_eq!(r.cases.len(), 8);
        for (name, b) in &r.backends {
            assert_eq!(b.faults, 64, "{name}: one fault per page");
            assert!(b.cluster8_faults < 64, "{name}: clusters fetch ahead");
        }
        assert!(r.breakdown.swizzle_us > 0.0);
        assert!(r.breakdown.check_walk_us > 0.0);
        assert!(r.table().contains("cold fault"));
    }
}
