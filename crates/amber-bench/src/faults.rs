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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use amber::schema::registry::Registry;
use amber::translate::swizzle::{AddrMap, Direction, convert_block};
use amber::vm::{
    BackendChoice, FaultError, FaultService, FrameNo, FrameSpace, Installer, VmConfig,
};
use amber::{Db, Options, PRef, PVec, Persistent};
use serde::Serialize;

use crate::backend::Backends;
use crate::hot::check_backend;
use crate::rng::Rng;
use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};

/// An object of the fault benchmark's pages: 24 bytes, two pointers.
#[derive(Persistent)]
#[persistent(name = "faults::Node")]
#[repr(C)]
pub struct Node {
    pub value: u64,
    pub next: Option<PRef<Node>>,
    pub far: Option<PRef<Node>>,
}

/// The directory: the first object of every page, in page order.
#[derive(Persistent)]
#[persistent(name = "faults::Dir")]
#[repr(C)]
pub struct Dir {
    pub pages: PVec<PRef<Node>>,
}

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
}

impl Default for FaultsConfig {
    fn default() -> Self {
        FaultsConfig {
            pages: 8_192,
            backends: Backends::Both,
            runs: 5,
            dir: None,
            seed: 1,
        }
    }
}

/// One backend, cluster and order.
#[derive(Clone, Debug, Serialize)]
pub struct FaultCase {
    pub backend: String,
    /// Pages fetched per fault at most.
    pub cluster: u32,
    /// `page` (ascending) or `random`.
    pub order: &'static str,
    /// Time of the touching loop divided by the faults served, µs.
    pub us_per_fault: Summary,
    /// Time of the touching loop divided by the pages fetched, µs.
    pub us_per_page: Summary,
    /// Faults served by the loop (median over runs).
    pub faults: u64,
    /// Pages fetched by the loop (median over runs).
    pub fetched: u64,
    /// The loop's time, ms (median).
    pub ms: f64,
}

/// The headline figures of one backend.
#[derive(Clone, Debug, Serialize)]
pub struct BackendFaults {
    /// Cold fault, one page per fault, page order: µs per page.
    pub cold_fault_us: f64,
    /// The same in a random order.
    pub cold_fault_random_us: f64,
    /// Fetch cluster 8, page order: µs per page fetched.
    pub cluster8_us_per_page: f64,
    /// Fetch cluster 8, random order: µs per page fetched.
    pub cluster8_random_us_per_page: f64,
    /// Faults served touching every page once, one page per fault.
    pub faults: u64,
    /// Faults served touching every page in order with cluster 8.
    pub cluster8_faults: u64,
}

/// The parts of a fault measured without faulting.
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    /// `pread` of one page from the OS page cache, µs.
    pub pread_us: f64,
    /// Reading one page through the store as a fault does
    /// (`Store::read_cluster` into a buffer kept between calls): `pread`,
    /// checksum and the store's bookkeeping, µs.
    pub fetch_us: f64,
    /// The CRC-32C of one page alone, µs.
    pub checksum_us: f64,
    /// The same as a rate, GB/s.
    pub checksum_gb_s: f64,
    /// Swizzling one fetched page (object walk, 254 pointers converted
    /// through a frame table where every page already has a frame), µs.
    pub swizzle_us: f64,
}

/// The result of `amber bench faults`.
#[derive(Clone, Debug, Serialize)]
pub struct FaultsReport {
    pub benchmark: &'static str,
    /// Pages of objects touched.
    pub pages: u64,
    pub objects_per_page: u64,
    pub pointers_per_page: u64,
    pub runs: usize,
    /// Headline figures per backend.
    pub backends: BTreeMap<String, BackendFaults>,
    /// Every case.
    pub cases: Vec<FaultCase>,
    /// Fetch, checksum and swizzle alone (no faults), medians.
    pub breakdown: Breakdown,
    /// The costs DESIGN.md and `vm_costs` measured for the mechanism alone.
    pub design_reference: &'static str,
    pub method: &'static str,
    pub environment: Environment,
}

const DESIGN_REFERENCE: &str = "DESIGN.md (Linux 6.18, 2 vCPU): read fault on PROT_NONE -> SIGSEGV -> fill 4 KiB -> return 6-14 us; \
userfaultfd missing fault served by a handler thread (UFFDIO_COPY) 57-81 us blocking, about 20 us with the handler spinning; \
amber/src/vm/mod.rs (vm_costs example): cold read fault filled by one memcpy 7.9-8.2 us (sigsegv), 7.2-16 us (uffd, spin 200 us)";

const METHOD: &str = "N pages of 127 objects (value, next, far: an object on a random page); closed and reopened per run (files in the OS page cache); \
the directory of first objects is read first (its pages fault, every page gets a frame); then one object per page is touched in page or random order; \
time / faults and time / pages fetched from db.stats(); medians over runs. Breakdown without faults: pread per page, CRC-32C of a page, \
Store::read_cluster of one page into a kept buffer (pread + checksum + bookkeeping), convert_block (swizzle) with a scratch frame space's frame table";

/// Builds the database: objects until `pages` pages are filled, their
/// pointers, and the directory.
fn build(path: &Path, pages: u64, seed: u64) -> Result<u64, BenchError> {
    let mut db = Db::create(path, Options::default())?;
    let ps = db.page_size() as u64;
    let mut tx = db.begin()?;
    let mut nodes = Vec::new();
    let mut firsts = Vec::new();
    let mut last_page = None;
    loop {
        let n = tx.alloc(Node {
            value: nodes.len() as u64,
            next: None,
            far: None,
        })?;
        let page = n.addr() / ps;
        if last_page != Some(page) {
            if firsts.len() as u64 == pages {
                // The first object of one page too many: it stays, unlisted.
                break;
            }
            firsts.push(n);
            last_page = Some(page);
        }
        nodes.push(n);
    }
    let mut rng = Rng::seed_from_u64(seed);
    for i in 0..nodes.len() {
        let far = nodes[rng.below(nodes.len() as u64) as usize];
        let node = tx.get_mut(nodes[i]);
        node.next = nodes.get(i + 1).copied();
        node.far = Some(far);
    }
    let dir = tx.alloc(Dir { pages: PVec::new() })?;
    for &f in &firsts {
        tx.push(dir, |d| &mut d.pages, f)?;
    }
    tx.set_root("dir", dir)?;
    tx.commit()?;
    db.close()?;
    Ok(nodes.len() as u64 / pages.max(1))
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

/// A fault service for a frame space that is never touched.
struct NoFaults;

impl FaultService for NoFaults {
    fn missing(&self, frame: FrameNo, _inst: &mut Installer<'_>) -> Result<(), FaultError> {
        Err(FaultError {
            page: u64::MAX,
            message: format!("frame {frame}: the swizzle measurement touches no frame"),
        })
    }

    fn first_write(&self, _frame: FrameNo, _clean: &[u8]) {}
}

/// Persistent address → frame address through a frame space's table, as the
/// pager's map does.
struct TableMap<'a> {
    fs: &'a FrameSpace,
    shift: u32,
}

impl AddrMap for TableMap<'_> {
    fn to_va(&self, paddr: u64, pages: u32) -> Result<u64, String> {
        let f = self
            .fs
            .assign(paddr >> self.shift, pages)
            .map_err(|e| e.to_string())?;
        Ok(self.fs.frame_addr(f) as u64 + (paddr & ((1 << self.shift) - 1)))
    }

    fn to_paddr(&self, _va: u64) -> Result<u64, String> {
        Err("not used".into())
    }
}

/// pread, store read and swizzle of every one-page block, `runs` times.
fn breakdown(path: &Path, runs: usize) -> Result<Breakdown, BenchError> {
    let db = Db::open(path, Options::default())?;
    let store = db.store();
    let ps = store.page_size();
    let heads: Vec<u64> = store
        .blocks()
        .into_iter()
        .filter(|&(_, n)| n == 1)
        .map(|(h, _)| h)
        .collect();
    let n = heads.len().max(1) as f64;
    let registry = Registry::load(ps, &store.types())?;
    let types = registry.snapshot();
    let fs = FrameSpace::new(
        VmConfig {
            backend: BackendChoice::Sigsegv,
            frame_size: ps,
            track_writes: false,
            ..VmConfig::default()
        },
        Arc::new(NoFaults),
    )
    .map_err(|e| BenchError::new(format!("scratch frame space: {e}")))?;
    for &(h, len) in &store.blocks() {
        fs.assign(h, len)
            .map_err(|e| BenchError::new(format!("scratch frame space: {e}")))?;
    }
    let map = TableMap {
        fs: &fs,
        shift: ps.trailing_zeros(),
    };
    let file = File::open(path).map_err(|e| BenchError::new(format!("{}: {e}", path.display())))?;
    let mut buf = vec![0u8; ps];
    let mut cluster_buf = Vec::new();
    let (mut pread, mut fetch, mut crc, mut swizzle) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        for &h in &heads {
            file.read_exact_at(&mut buf, h * ps as u64)
                .map_err(|e| BenchError::new(format!("{}: {e}", path.display())))?;
            black_box(&buf);
        }
        pread.push(t.elapsed().as_secs_f64() * 1e6 / n);
        let t = Instant::now();
        for &h in &heads {
            for b in store.read_cluster(h, 1, &mut cluster_buf) {
                b.image?;
            }
        }
        fetch.push(t.elapsed().as_secs_f64() * 1e6 / n);
        let mut images = Vec::with_capacity(heads.len());
        for &h in &heads {
            images.push(store.read_block(h)?);
        }
        let t = Instant::now();
        for img in &images {
            black_box(amber::format::page::compute_checksum(img));
        }
        crc.push(t.elapsed().as_secs_f64() * 1e6 / n);
        let t = Instant::now();
        for img in &mut images {
            convert_block(img, ps, &types, &map, Direction::Swizzle).map_err(BenchError::new)?;
        }
        swizzle.push(t.elapsed().as_secs_f64() * 1e6 / n);
        black_box(&images);
    }
    drop(fs);
    db.close()?;
    let checksum_us = summarize(&crc).median;
    Ok(Breakdown {
        pread_us: summarize(&pread).median,
        fetch_us: summarize(&fetch).median,
        checksum_us,
        checksum_gb_s: ps as f64 / checksum_us / 1e3,
        swizzle_us: summarize(&swizzle).median,
    })
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
    let in_order: Vec<u32> = (0..cfg.pages as u32).collect();
    let mut random = in_order.clone();
    let mut rng = Rng::seed_from_u64(cfg.seed ^ 0x5eed);
    for i in (1..random.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        random.swap(i, j);
    }
    let mut cases = Vec::new();
    let mut backends = BTreeMap::new();
    for choice in cfg.backends.choices() {
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

impl FaultsReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "cold faults: {} pages of {} objects ({} pointers) each, files in the OS page cache; medians of {} runs",
            self.pages, self.objects_per_page, self.pointers_per_page, self.runs
        );
        let _ = writeln!(
            s,
            "  {:<8} {:>7} {:<7} {:>10} {:>12} {:>8} {:>8} {:>9}",
            "backend", "cluster", "order", "µs/fault", "µs/page", "faults", "fetched", "loop ms"
        );
        for c in &self.cases {
            let _ = writeln!(
                s,
                "  {:<8} {:>7} {:<7} {:>10.2} {:>12.2} {:>8} {:>8} {:>9.1}",
                c.backend,
                c.cluster,
                c.order,
                c.us_per_fault.median,
                c.us_per_page.median,
                c.faults,
                c.fetched,
                c.ms
            );
        }
        let b = &self.breakdown;
        let _ = writeln!(
            s,
            "  without faults, per page: pread {:.2} µs, checksum {:.2} µs ({:.1} GB/s), store read as a fault does (pread, checksum, bookkeeping) {:.2} µs, swizzle {:.2} µs",
            b.pread_us, b.checksum_us, b.checksum_gb_s, b.fetch_us, b.swizzle_us
        );
        for (name, f) in &self.backends {
            let _ = writeln!(
                s,
                "  {name}: cold fault {:.2} µs/page ({} faults), cluster {CLUSTER}: {:.2} µs/page ({} faults); \
                 fault mechanism + install + bookkeeping ≈ {:.2} µs/page",
                f.cold_fault_us,
                f.faults,
                f.cluster8_us_per_page,
                f.cluster8_faults,
                f.cold_fault_us - b.fetch_us - b.swizzle_us
            );
        }
        let _ = writeln!(s, "  for comparison: {}", self.design_reference);
        let _ = writeln!(
            s,
            "  kernel {}; {}",
            self.environment.kernel, self.environment.machine
        );
        s
    }
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
        })
        .expect("faults");
        assert_eq!(r.objects_per_page, 127);
        assert_eq!(r.cases.len(), 8);
        for (name, b) in &r.backends {
            assert_eq!(b.faults, 64, "{name}: one fault per page");
            assert!(b.cluster8_faults < 64, "{name}: clusters fetch ahead");
        }
        assert!(r.breakdown.swizzle_us > 0.0);
        assert!(r.table().contains("cold fault"));
    }
}
