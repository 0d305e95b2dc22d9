//! The mapped backends in `amber bench faults`: cold reads served by the
//! kernel (with `mapped`, each window of pages checked at its first touch),
//! each run in a process of its own.
//!
//! A database is at its home only in the first session of a process that
//! opens it (docs/design.md §4.3: a closed session's range stays taken), and
//! the benchmark builds its database in its own process, so every run is a
//! child (this binary again, with [`CHILD_SUBCOMMAND`]). The child opens the
//! database (at home, mapped), reads the directory, gives every frame back
//! to the file (the pages stay in the OS page cache: the cold state the
//! other backends' runs start from; with `mapped` they are unchecked
//! again), then touches one object per page and reports the loop's time,
//! the minor faults the kernel took and the faults Amber served (`mapped`:
//! the windows checked).

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use amber::{Backend, BackendChoice, Db, Options, PRef};

use super::database::{Dir, Node};
use super::report::{BackendFaults, FaultCase};
use crate::procfs::minor_faults;
use crate::rng::Rng;
use crate::storage::{BenchError, summarize};

/// The hidden subcommand of `amber bench faults` that runs one mapped run.
pub const CHILD_SUBCOMMAND: &str = "__faults-mapped";

/// The order of a run: every page, in page order or shuffled by `seed`.
pub(super) fn order(pages: u64, random: bool, seed: u64) -> Vec<u32> {
    let mut o: Vec<u32> = (0..pages as u32).collect();
    if random {
        Rng::seed_from_u64(seed ^ 0x5eed).shuffle(&mut o);
    }
    o
}

/// One run, in a child: `args` = path, `page`|`random`, seed, pages,
/// backend (`mapped` or `mapped-unverified`). Returns its line for the
/// parent: µs, minor faults, pages touched, Amber's faults.
pub fn child(args: &[String]) -> Result<String, BenchError> {
    let [path, kind, seed, pages, backend] = args else {
        return Err(BenchError::new(format!(
            "{CHILD_SUBCOMMAND}: expected 5 arguments, got {args:?}"
        )));
    };
    let (choice, want) = match backend.as_str() {
        "mapped" => (BackendChoice::Mapped, Backend::Mapped),
        "mapped-unverified" => (BackendChoice::MappedUnverified, Backend::MappedUnverified),
        _ => {
            return Err(BenchError::new(format!(
                "{CHILD_SUBCOMMAND}: {backend:?} is no mapped backend"
            )));
        }
    };
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| BenchError::new(format!("{CHILD_SUBCOMMAND}: {s:?} is not a number")))
    };
    let touch = order(num(pages)?, kind == "random", num(seed)?);
    let opts = Options {
        backend: choice,
        ..Options::default()
    };
    let db = Db::open(Path::new(path), opts)?;
    if db.backend() != want {
        return Err(BenchError::new(format!(
            "the mapped backend was asked for, got {} ({})",
            db.backend(),
            db.backend_reason()
        )));
    }
    let dir: PRef<Dir> = db
        .root("dir")?
        .ok_or_else(|| BenchError::new("no root \"dir\""))?;
    let firsts: Vec<PRef<Node>> = db.slice(&db.get(dir).pages).to_vec();
    if firsts.len() != touch.len() {
        return Err(BenchError::new("the directory does not list every page"));
    }
    let fs = db.frame_space();
    let frames =
        u32::try_from(db.store().page_count()).map_err(|_| BenchError::new("too many pages"))?;
    fs.evict(0, frames)
        .map_err(|e| BenchError::new(format!("giving the frames back to the file: {e}")))?;
    let f0 = minor_faults().unwrap_or(0);
    let a0 = db.stats().faults;
    let t = Instant::now();
    let mut sum = 0u64;
    for &i in &touch {
        sum = sum.wrapping_add(db.get(firsts[i as usize]).value);
    }
    let us = t.elapsed().as_secs_f64() * 1e6;
    let faults = minor_faults().unwrap_or(0).saturating_sub(f0);
    let served = db.stats().faults - a0;
    black_box(sum);
    db.close()?;
    Ok(format!("{us} {faults} {} {served}", touch.len()))
}

/// A mapped backend's cases, `runs` children each, through `child_args`
/// (how this binary is re-executed into [`child`]).
pub(super) fn cases(
    path: &Path,
    (pages, runs, seed): (u64, usize, u64),
    backend: Backend,
    child_args: &[String],
) -> Result<(Vec<FaultCase>, BackendFaults), BenchError> {
    if child_args.is_empty() {
        return Err(BenchError::new(
            "the mapped backend is measured in child processes: run it through `amber bench faults`",
        ));
    }
    let exe = std::env::current_exe().map_err(|e| BenchError::new(format!("this binary: {e}")))?;
    let mut out = Vec::new();
    for kind in ["page", "random"] {
        let (mut per_page, mut per_fault, mut faults, mut served, mut ms) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let o = Command::new(&exe)
                .args(child_args)
                .args([
                    &path.display().to_string(),
                    kind,
                    &seed.to_string(),
                    &pages.to_string(),
                    &backend.to_string(),
                ])
                .output()
                .map_err(|e| BenchError::new(format!("running a mapped child: {e}")))?;
            let said = String::from_utf8_lossy(&o.stdout);
            let nums: Vec<f64> = said
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            let [us, f, n, a] = nums[..] else {
                return Err(BenchError::new(format!(
                    "a mapped child failed: {said}{}",
                    String::from_utf8_lossy(&o.stderr)
                )));
            };
            per_page.push(us / n.max(1.0));
            per_fault.push(us / f.max(1.0));
            faults.push(f);
            served.push(a);
            ms.push(us / 1e3);
        }
        out.push(FaultCase {
            backend: backend.to_string(),
            cluster: 1,
            order: kind,
            // The kernel's minor faults, not Amber's.
            us_per_fault: summarize(&per_fault),
            us_per_page: summarize(&per_page),
            faults: summarize(&faults).median as u64,
            fetched: pages,
            ms: summarize(&ms).median,
            checks: summarize(&served).median as u64,
        });
    }
    let b = BackendFaults {
        cold_fault_us: out[0].us_per_page.median,
        cold_fault_random_us: out[1].us_per_page.median,
        cluster8_us_per_page: out[0].us_per_page.median,
        cluster8_random_us_per_page: out[1].us_per_page.median,
        faults: out[0].faults,
        cluster8_faults: out[0].faults,
    };
    Ok((out, b))
}
