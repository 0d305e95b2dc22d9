//! What `amber bench faults` measured, as JSON and as a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::CLUSTER;
use crate::storage::{Environment, Summary};

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
    /// Faults Amber served, each checking what it brought in (median):
    /// `faults` for userfaultfd and SIGSEGV, the check windows of `mapped`
    /// (whose `faults` are the kernel's), 0 for `mapped-unverified`.
    pub checks: u64,
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
    /// The `mapped` backend's check of one fetched page without swizzling
    /// it (`check_block`: the same object walk, each pointer mapped as at
    /// home, where a stored pointer is its own address, nothing written), µs.
    pub check_walk_us: f64,
    /// The machine's limits for a cold page (`Limits`).
    pub limits: Limits,
}

/// What a cold page costs at least on this machine, whatever user-space
/// work is added: the kernel's own minor fault on a page-cache page of a
/// mapped file, and the copy a user-space fetch cannot avoid.
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    /// Reading one byte per page of a fresh private mapping of the page
    /// file, random order, the kernel's fault-around on (its default: up
    /// to 16 cached neighbours mapped per fault), ns per page.
    pub minor_fault_ns: f64,
    /// The same in page order (where fault-around helps most), ns per page.
    pub minor_fault_in_order_ns: f64,
    /// Random order with `MADV_RANDOM` (meant to turn fault-around off, one
    /// minor fault per page; on Linux 6.18 the kernel still maps the
    /// page-cache folio, or 16 pages, per fault: docs/design.md §4.3.1),
    /// ns per page.
    pub minor_fault_one_per_page_ns: f64,
    /// Copying a page into freshly allocated memory (its first-touch
    /// fault included), µs per page.
    pub copy_fresh_us: f64,
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

pub(super) const DESIGN_REFERENCE: &str = "DESIGN.md (Linux 6.18, 2 vCPU): read fault on PROT_NONE -> SIGSEGV -> fill 4 KiB -> return 6-14 us; \
userfaultfd missing fault served by a handler thread (UFFDIO_COPY) 57-81 us blocking, about 20 us with the handler spinning; \
amber/src/vm/mod.rs (vm_costs example): cold read fault filled by one memcpy 7.9-8.2 us (sigsegv), 7.2-16 us (uffd, spin 200 us)";

pub(super) const METHOD: &str = "N pages of 127 objects (value, next, far: an object on a random page); closed and reopened per run (files in the OS page cache); \
the directory of first objects is read first (its pages fault, every page gets a frame); then one object per page is touched in page or random order; \
time / faults and time / pages fetched from db.stats(); medians over runs. Breakdown without faults: pread per page, CRC-32C of a page, \
Store::read_cluster of one page into a kept buffer (pread + checksum + bookkeeping), convert_block (swizzle) with a scratch frame space's frame table, check_block (the mapped backend's check-only walk, pointers mapped as at home). \
Limits: one byte read per page of a fresh read-only MAP_PRIVATE mapping of the page file, random page order (and page order) with the kernel's fault-around, and random order with MADV_RANDOM \
(which on Linux 6.18 does not turn fault-around off: the kernel still maps the page-cache folio or 16 pages per fault); a page copied into a fresh zeroed allocation (first-touch fault included), per page. \
mapped-unverified and mapped: each run in a child process (a database is at its home in the first session of a process), which opens the database, reads the directory, \
gives every frame back to the file (the pages stay in the OS page cache; with mapped they are unchecked again), then touches one object per page; minor faults from /proc/self/stat, \
mapped's window checks (one SIGSEGV each, served by a service thread that checks every block of the window: checksum and check-only object walk, over a read-only view of the page file) from db.stats(); \
with mapped the minor faults include the service thread's on that view (about one per window)";

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
            "  {:<17} {:>7} {:<7} {:>10} {:>12} {:>8} {:>8} {:>9}",
            "backend", "cluster", "order", "µs/fault", "µs/page", "faults", "fetched", "loop ms"
        );
        for c in &self.cases {
            let _ = writeln!(
                s,
                "  {:<17} {:>7} {:<7} {:>10.2} {:>12.2} {:>8} {:>8} {:>9.1}",
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
            "  without faults, per page: pread {:.2} µs, checksum {:.2} µs ({:.1} GB/s), store read as a fault does (pread, checksum, bookkeeping) {:.2} µs, swizzle {:.2} µs, check-only walk {:.2} µs",
            b.pread_us, b.checksum_us, b.checksum_gb_s, b.fetch_us, b.swizzle_us, b.check_walk_us
        );
        let l = &b.limits;
        let _ = writeln!(
            s,
            "  the machine's limits per cold page: minor fault on a mapped page-cache page {:.0} ns at random ({:.0} in page order) with fault-around, {:.0} ns with MADV_RANDOM; copy into fresh memory {:.2} µs; CRC-32C {:.2} µs",
            l.minor_fault_ns,
            l.minor_fault_in_order_ns,
            l.minor_fault_one_per_page_ns,
            l.copy_fresh_us,
            b.checksum_us
        );
        for (name, f) in &self.backends {
            if name == "mapped-unverified" {
                let _ = writeln!(
                    s,
                    "  {name}: cold read {:.2} µs/page in page order, {:.2} at random, served by the kernel ({} minor faults for {} pages)",
                    f.cold_fault_us, f.cold_fault_random_us, f.faults, self.pages
                );
            } else if name == "mapped" {
                let checks = self
                    .cases
                    .iter()
                    .find(|c| c.backend == *name)
                    .map_or(0, |c| c.checks);
                let _ = writeln!(
                    s,
                    "  {name}: cold read {:.2} µs/page in page order, {:.2} at random: {} windows checked ({:.1} µs each), {} minor faults for {} pages; \
                     cold cost per page (random order) = {:.2} × (a minor fault with fault-around + a CRC-32C of the page)",
                    f.cold_fault_us,
                    f.cold_fault_random_us,
                    checks,
                    f.cold_fault_us * self.pages as f64 / checks.max(1) as f64,
                    f.faults,
                    self.pages,
                    f.cold_fault_random_us / (l.minor_fault_ns / 1e3 + b.checksum_us)
                );
            } else {
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
            let _ = writeln!(
                s,
                "  {name}: cold cost per page (random order) = {:.2} × a minor fault with fault-around, {:.2} × with MADV_RANDOM",
                f.cold_fault_random_us * 1e3 / l.minor_fault_ns,
                f.cold_fault_random_us * 1e3 / l.minor_fault_one_per_page_ns
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
