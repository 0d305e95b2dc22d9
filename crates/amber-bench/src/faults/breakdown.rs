//! The parts of a fault measured without faulting: `pread`, the store's
//! read, the checksum and swizzling, so that what the fault itself adds can
//! be told apart.

use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use amber::internals::format::home::Home;
use amber::internals::schema::registry::Registry;
use amber::internals::translate::check::check_block;
use amber::internals::translate::swizzle::{AddrMap, Direction, convert_block};
use amber::internals::vm::probe::mapped_read;
use amber::internals::vm::{
    BackendChoice, FaultError, FaultKind, FaultService, FrameNo, FrameSpace, Installer, VmConfig,
};
use amber::{Db, Options};

use super::report::{Breakdown, Limits};
use crate::rng::Rng;
use crate::storage::{BenchError, summarize};

/// A fault service for a frame space that is never touched.
struct NoFaults;

impl FaultService for NoFaults {
    fn missing(&self, frame: FrameNo, _inst: &mut Installer<'_>) -> Result<(), FaultError> {
        Err(FaultError::new(
            u64::MAX,
            FaultKind::Internal,
            format!("frame {frame}: the swizzle measurement touches no frame"),
        ))
    }

    fn first_write(&self, _frame: FrameNo, _clean: &[u8]) {}
}

/// Persistent address → frame address through a frame space's table, as the
/// pager's map does.
struct TableMap<'a> {
    fs: &'a FrameSpace,
    shift: u32,
    home: Home,
}

impl AddrMap for TableMap<'_> {
    fn home(&self) -> Home {
        self.home
    }

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

/// Persistent address → the address it has at home (`Home::stored`): what
/// the mapped backend's frame map answers for a pointer to a one-page block.
struct AtHome(Home);

impl AddrMap for AtHome {
    fn home(&self) -> Home {
        self.0
    }

    fn to_va(&self, paddr: u64, _pages: u32) -> Result<u64, String> {
        self.0.stored(paddr)
    }

    fn to_paddr(&self, _va: u64) -> Result<u64, String> {
        Err("not used".into())
    }
}

/// pread, store read and swizzle of every one-page block, `runs` times.
pub(super) fn breakdown(path: &Path, runs: usize) -> Result<Breakdown, BenchError> {
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
        home: store.home(),
    };
    let file = File::open(path).map_err(|e| BenchError::new(format!("{}: {e}", path.display())))?;
    let mut buf = vec![0u8; ps];
    let mut cluster_buf = Vec::new();
    let (mut pread, mut fetch, mut crc, mut swizzle, mut check) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
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
            black_box(amber::internals::format::page::compute_checksum(img));
        }
        crc.push(t.elapsed().as_secs_f64() * 1e6 / n);
        let at_home = AtHome(store.home());
        let t = Instant::now();
        for img in &images {
            check_block(img, ps, &types, &at_home).map_err(BenchError::new)?;
        }
        check.push(t.elapsed().as_secs_f64() * 1e6 / n);
        let t = Instant::now();
        for img in &mut images {
            convert_block(img, ps, &types, &map, Direction::Swizzle).map_err(BenchError::new)?;
        }
        swizzle.push(t.elapsed().as_secs_f64() * 1e6 / n);
        black_box(&images);
    }
    drop(fs);
    db.close()?;
    let limits = limits(&file, ps, &heads, runs)?;
    let checksum_us = summarize(&crc).median;
    Ok(Breakdown {
        pread_us: summarize(&pread).median,
        fetch_us: summarize(&fetch).median,
        checksum_us,
        checksum_gb_s: ps as f64 / checksum_us / 1e3,
        swizzle_us: summarize(&swizzle).median,
        check_walk_us: summarize(&check).median,
        limits,
    })
}

/// The machine's limits per cold page (`Limits`), over the pages `heads`
/// of the page file `file`, `runs` times each, medians.
fn limits(file: &File, ps: usize, heads: &[u64], runs: usize) -> Result<Limits, BenchError> {
    let mut order = heads.to_vec();
    Rng::seed_from_u64(0xfa17).shuffle(&mut order);
    let n = order.len().max(1) as f64;
    let (mut around, mut in_order, mut one, mut copy) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let src = vec![7u8; ps];
    for _ in 0..runs {
        for (pages, one_per_fault, out) in [
            (&order[..], false, &mut around),
            (heads, false, &mut in_order),
            (&order[..], true, &mut one),
        ] {
            let t = mapped_read(file, ps, pages, one_per_fault)
                .map_err(|e| BenchError::new(format!("mapped read of the page file: {e}")))?;
            out.push(t.as_secs_f64() * 1e9 / n);
        }
        // Fresh memory: a zeroed allocation this large is mapped lazily, so
        // each page's first write takes the fault a fetch into a new frame
        // takes.
        let mut fresh = vec![0u8; order.len() * ps];
        let t = Instant::now();
        for dst in fresh.chunks_exact_mut(ps) {
            dst.copy_from_slice(&src);
        }
        copy.push(t.elapsed().as_secs_f64() * 1e6 / n);
        black_box(&fresh);
    }
    Ok(Limits {
        minor_fault_ns: summarize(&around).median,
        minor_fault_in_order_ns: summarize(&in_order).median,
        minor_fault_one_per_page_ns: summarize(&one).median,
        copy_fresh_us: summarize(&copy).median,
    })
}
