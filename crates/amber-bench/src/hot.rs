//! `amber bench hot`: a hot traversal of a persistent linked list against the
//! same traversal over plain Rust structs, to show what following a swizzled
//! `PRef` costs once every page is resident.
//!
//! Both sides hold the same list of N nodes, built in the same run and in
//! the same way: N nodes allocated one after another, then linked in a given
//! order. A visit reads the node's `value` into a sum and follows `next`:
//!
//! - Amber: `#[derive(Persistent)] struct Node { value: u64, next:
//!   Option<PRef<Node>>, _pad: u64 }`, reached with `db.get(p)` (a range check
//!   and a load);
//! - memory: `struct MemNode { value: u64, next: Option<Box<MemNode>>, _pad:
//!   u64 }`, reached through the `Box`.
//!
//! **(choice)** Nodes are 24 bytes on both sides so that both heaps have the
//! same stride: Amber puts an 8-byte object header before each (32-byte
//! slots, 127 per 4 KiB page after the page header), glibc's malloc an
//! 8-byte chunk header (32-byte chunks). Two lists are measured: *in order*
//! (node i links to node i + 1: what appending builds; the hardware
//! prefetcher streams it, so the time is the per-visit work) and *shuffled*
//! (linked in a random order: every visit is a cache miss and most a TLB
//! miss, so the time is the memory system's).
//!
//! The database is built, closed and reopened once per backend; one untimed
//! traversal of each list faults every page in (its time and fault count are
//! reported), then `runs` timed traversals of each side alternate, Amber first
//! on even runs and memory first on odd ones. Reported: medians.
//!
//! The same two lists are also built of [`LazyNode`]s, whose `next` is a
//! `Lazy` (swizzled upon discovery, issue 20) and followed with
//! `db.lazy(&n.next)`: their first traversal after opening faults the pages
//! in and swizzles the fields whose target was already resident, the second
//! swizzles the rest (the *warm-up*, both timed and reported); then the
//! timed traversals against the same boxes. Target: ≤ 1.3 × memory.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use amber::internals::vm::{Backend, BackendChoice};
use amber::{Db, Detect, Lazy, Options, PRef, Persistent, Strategy, View};
use serde::Serialize;

use crate::backend::Backends;
use crate::rng::Rng;
use crate::storage::{BenchError, Environment, Summary, Workdir, environment, summarize};

/// The target of the hot traversal: Amber within 5% of plain memory, the
/// header check every dereference makes (stale pointers) included.
pub const TARGET_HOT_VS_MEMORY: f64 = 1.05;

/// A node of the persistent list.
#[derive(Persistent)]
#[persistent(name = "hot::Node")]
#[repr(C)]
pub struct Node {
    pub value: u64,
    pub next: Option<PRef<Node>>,
    pub _pad: u64,
}

/// The target of the hot traversal through lazy pointers, once warmed up
/// (every field swizzled upon discovery): within 30% of plain memory.
pub const TARGET_LAZY_HOT_VS_MEMORY: f64 = 1.3;

/// A node of the persistent list linked by a lazy pointer: [`Node`]'s
/// layout, `next` swizzled upon discovery.
#[derive(Persistent)]
#[persistent(name = "hot::LazyNode")]
#[repr(C)]
pub struct LazyNode {
    pub value: u64,
    pub next: Lazy<LazyNode>,
    pub _pad: u64,
}

/// A node of the in-memory list: the same fields and size as [`Node`].
struct MemNode {
    value: u64,
    next: Option<Box<MemNode>>,
    _pad: u64,
}

/// A list of boxes, dropped iteratively (a recursive drop of a million
/// nodes would overflow the stack).
struct MemList {
    head: Option<Box<MemNode>>,
}

impl Drop for MemList {
    fn drop(&mut self) {
        let mut cur = self.head.take();
        while let Some(mut n) = cur {
            cur = n.next.take();
        }
    }
}

/// Settings of `amber bench hot`.
#[derive(Clone, Debug)]
pub struct HotConfig {
    /// Nodes per list.
    pub objects: u64,
    /// Backends to measure.
    pub backends: Backends,
    /// Timed traversals of each side per list and backend.
    pub runs: usize,
    /// Directory for the database (default: the working directory).
    pub dir: Option<PathBuf>,
    /// Seed of the shuffled order.
    pub seed: u64,
    /// The update-detection scheme the database is armed with before the
    /// traversals (a software scheme's frames are writable, page
    /// protection's write-protected).
    pub detect: Detect,
}

impl Default for HotConfig {
    fn default() -> Self {
        HotConfig {
            objects: 1_000_000,
            backends: Backends::Both,
            runs: 15,
            dir: None,
            seed: 1,
            detect: Detect::Pages,
        }
    }
}

/// One list on one backend.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    /// Amber's traversal, ms.
    pub amber_ms: Summary,
    /// The same traversal of the boxes, ms.
    pub memory_ms: Summary,
    /// Median over median.
    pub ratio: f64,
}

/// Everything measured on one backend.
#[derive(Clone, Debug, Serialize)]
pub struct BackendHot {
    /// The backend the database was opened with.
    pub backend: String,
    /// Median hot traversal of the in-order list, Amber (ms).
    pub amber_hot_ms: f64,
    /// The same over the boxes (ms).
    pub memory_hot_ms: f64,
    /// `amber_hot_ms / memory_hot_ms`; target ≤ 1.05.
    pub hot_vs_memory: f64,
    /// Median hot traversal of the shuffled list, Amber (ms).
    pub amber_shuffled_ms: f64,
    /// The same over the boxes (ms).
    pub memory_shuffled_ms: f64,
    /// `amber_shuffled_ms / memory_shuffled_ms`.
    pub shuffled_vs_memory: f64,
    /// Distributions of the four.
    pub in_order: Pair,
    pub shuffled: Pair,
    /// Median hot traversal of the in-order list of lazy nodes (ms).
    pub lazy_hot_ms: f64,
    /// `lazy_hot_ms` over the boxes' median of the same runs; target ≤ 1.3.
    pub lazy_hot_vs_memory: f64,
    /// The same for the shuffled list of lazy nodes.
    pub lazy_shuffled_vs_memory: f64,
    /// Distributions of the lazy lists against the boxes.
    pub lazy_in_order: Pair,
    pub lazy_shuffled: Pair,
    /// The first traversal of both lazy lists after opening (faulting, and
    /// swizzling the fields whose targets were resident), then the second
    /// (swizzling the rest), ms.
    pub lazy_warmup_ms: [f64; 2],
    /// The untimed first traversal of both lists after opening (every page
    /// faulted in from the OS page cache), ms.
    pub warmup_ms: f64,
    /// Faults served during it.
    pub warmup_faults: u64,
}

/// The result of `amber bench hot`.
#[derive(Clone, Debug, Serialize)]
pub struct HotReport {
    pub benchmark: &'static str,
    /// The update-detection scheme armed during the traversals.
    pub scheme: String,
    /// Nodes per list.
    pub objects: u64,
    pub runs: usize,
    /// Bytes of a node, both sides.
    pub node_bytes: usize,
    /// Bytes per node in Amber's pages (object header included).
    pub amber_slot_bytes: usize,
    /// Bytes per node in glibc's heap (chunk header included).
    pub memory_chunk_bytes: usize,
    pub target_hot_vs_memory: f64,
    pub target_lazy_hot_vs_memory: f64,
    /// Per backend.
    pub backends: BTreeMap<String, BackendHot>,
    /// The first (or only) backend's figures, at the top level when one
    /// backend ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amber_hot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_hot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_vs_memory: Option<f64>,
    /// What was measured, in words.
    pub method: &'static str,
    pub environment: Environment,
}

const METHOD: &str = "two singly linked lists of N 24-byte nodes (value, next, pad), on both sides allocated in order then linked: in order (i -> i+1) and in a random order; \
a visit adds value to a sum and follows next (Amber: db.get(p), memory: the Box); the database is reopened per backend and warmed by one traversal of each list; \
then runs timed traversals of each side alternate (Amber first on even runs); medians. The same lists of lazy nodes (next a Lazy, followed with db.lazy), \
warmed by two traversals of each (the first faults and swizzles what is resident, the second the rest), timed against the same boxes";

/// Allocates N boxes in order, then links them in `order`.
fn memory_list(order: &[u32]) -> MemList {
    let mut slots: Vec<Option<Box<MemNode>>> = (0..order.len() as u64)
        .map(|i| {
            Some(Box::new(MemNode {
                value: i,
                next: None,
                _pad: 0,
            }))
        })
        .collect();
    let mut head = None;
    for &i in order.iter().rev() {
        if let Some(mut b) = slots[i as usize].take() {
            b.next = head;
            head = Some(b);
        }
    }
    MemList { head }
}

/// Allocates N nodes in order (`node(i)` holding value i), links them in
/// `order` (`link(from, to)`), names the head `name`.
fn build_list<T: Persistent>(
    db: &mut Db,
    name: &str,
    order: &[u32],
    node: impl Fn(u64) -> T,
    link: impl Fn(&mut T, PRef<T>),
) -> Result<(), BenchError> {
    let mut tx = db.begin()?;
    let nodes = (0..order.len() as u64)
        .map(|i| tx.alloc(node(i)))
        .collect::<amber::Result<Vec<_>>>()?;
    for w in order.windows(2) {
        link(tx.get_mut(nodes[w[0] as usize]), nodes[w[1] as usize]);
    }
    let head = order
        .first()
        .map(|&i| nodes[i as usize])
        .ok_or_else(|| BenchError::new("an empty list"))?;
    tx.set_root(name, head)?;
    tx.commit()?;
    Ok(())
}

/// The list of [`Node`]s of `order`, named `name`.
fn amber_list(db: &mut Db, name: &str, order: &[u32]) -> Result<(), BenchError> {
    let node = |value| Node {
        value,
        next: None,
        _pad: 0,
    };
    build_list(db, name, order, node, |n, to| n.next = Some(to))
}

/// The list of [`LazyNode`]s of `order`, named `name`.
fn lazy_list(db: &mut Db, name: &str, order: &[u32]) -> Result<(), BenchError> {
    let node = |value| LazyNode {
        value,
        next: Lazy::null(),
        _pad: 0,
    };
    build_list(db, name, order, node, |n, to| n.next = Lazy::from(to))
}

/// The head of the list named `name`.
fn head_of<T: Persistent>(db: &Db, name: &str) -> Result<PRef<T>, BenchError> {
    db.root(name)?
        .ok_or_else(|| BenchError::new(format!("no root {name:?}")))
}

#[inline(never)]
fn walk_amber(db: &Db, head: PRef<Node>) -> u64 {
    let mut sum = 0u64;
    let mut cur = Some(head);
    while let Some(p) = cur {
        let n = db.get(p);
        sum = sum.wrapping_add(n.value);
        cur = n.next;
    }
    sum
}

#[inline(never)]
fn walk_lazy(db: &Db, head: PRef<LazyNode>) -> u64 {
    let mut n = db.get(head);
    let mut sum = n.value;
    while let Some(next) = db.lazy(&n.next) {
        n = next;
        sum = sum.wrapping_add(n.value);
    }
    sum
}

#[inline(never)]
fn walk_memory(head: &MemList) -> u64 {
    let mut sum = 0u64;
    let mut cur = head.head.as_deref();
    while let Some(n) = cur {
        sum = sum.wrapping_add(n.value);
        cur = n.next.as_deref();
    }
    sum
}

/// Fails if `db` does not use the backend that was asked for.
pub(crate) fn check_backend(choice: BackendChoice, db: &Db) -> Result<(), BenchError> {
    match (choice, db.backend()) {
        (BackendChoice::Auto, _)
        | (BackendChoice::Uffd, Backend::Uffd)
        | (BackendChoice::Sigsegv, Backend::Sigsegv)
        | (BackendChoice::MappedUnverified, Backend::MappedUnverified)
        | (BackendChoice::Mapped, Backend::Mapped) => Ok(()),
        (_, got) => Err(BenchError::new(format!(
            "asked for the {choice:?} backend, got {got} ({})",
            db.backend_reason()
        ))),
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Times `runs` alternating traversals of both sides of one list, Amber's
/// by `walk`.
fn measure(
    walk: impl Fn() -> u64,
    mem: &MemList,
    runs: usize,
    want: u64,
) -> Result<Pair, BenchError> {
    let mut a = Vec::with_capacity(runs);
    let mut m = Vec::with_capacity(runs);
    for r in 0..runs {
        for side in [r % 2, 1 - r % 2] {
            let t = Instant::now();
            let sum = if side == 0 {
                walk()
            } else {
                walk_memory(black_box(mem))
            };
            let elapsed = ms(t);
            if black_box(sum) != want {
                return Err(BenchError::new(format!(
                    "traversal summed {sum}, expected {want}"
                )));
            }
            let samples = if side == 0 { &mut a } else { &mut m };
            samples.push(elapsed);
        }
    }
    let (amber_ms, memory_ms) = (summarize(&a), summarize(&m));
    Ok(Pair {
        ratio: amber_ms.median / memory_ms.median,
        amber_ms,
        memory_ms,
    })
}

/// Runs `amber bench hot`.
pub fn hot(cfg: &HotConfig) -> Result<HotReport, BenchError> {
    let n = u32::try_from(cfg.objects)
        .ok()
        .filter(|&n| n >= 2)
        .ok_or_else(|| BenchError::new("--objects must be between 2 and 2^32 - 1"))?;
    if cfg.runs == 0 {
        return Err(BenchError::new("--runs must be at least 1"));
    }
    let work = Workdir::new(cfg.dir.as_deref())?;
    let path = work.path().join("hot.amber");
    let in_order: Vec<u32> = (0..n).collect();
    let mut shuffled = in_order.clone();
    let mut rng = Rng::seed_from_u64(cfg.seed);
    for i in (1..shuffled.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        shuffled.swap(i, j);
    }
    let want = (u64::from(n) * (u64::from(n) - 1)) / 2;
    {
        let mut db = Db::create(&path, Options::default())?;
        amber_list(&mut db, "in-order", &in_order)?;
        amber_list(&mut db, "shuffled", &shuffled)?;
        lazy_list(&mut db, "lazy-in-order", &in_order)?;
        lazy_list(&mut db, "lazy-shuffled", &shuffled)?;
        db.close()?;
    }
    let mem_in_order = memory_list(&in_order);
    let mem_shuffled = memory_list(&shuffled);
    drop((in_order, shuffled));

    let mut backends = BTreeMap::new();
    let mut first = None;
    for choice in cfg.backends.choices() {
        let mut db = Db::open(
            &path,
            Options {
                backend: choice,
                strategy: Strategy::detect(cfg.detect),
                ..Options::default()
            },
        )?;
        check_backend(choice, &db)?;
        // A transaction arms the scheme (protecting or unprotecting the
        // frames); the traversals then read as any program does.
        db.begin()?.abort()?;
        let head: PRef<Node> = head_of(&db, "in-order")?;
        let shuffled_head: PRef<Node> = head_of(&db, "shuffled")?;
        let faults0 = db.stats().faults;
        let t = Instant::now();
        let sums = (walk_amber(&db, head), walk_amber(&db, shuffled_head));
        let warmup_ms = ms(t);
        if sums != (want, want) {
            return Err(BenchError::new(format!(
                "warm-up traversals summed {sums:?}, expected {want} each"
            )));
        }
        let warmup_faults = db.stats().faults - faults0;
        let in_order = measure(
            || walk_amber(&db, black_box(head)),
            &mem_in_order,
            cfg.runs,
            want,
        )?;
        let shuffled = measure(
            || walk_amber(&db, black_box(shuffled_head)),
            &mem_shuffled,
            cfg.runs,
            want,
        )?;
        let lazy_head: PRef<LazyNode> = head_of(&db, "lazy-in-order")?;
        let lazy_shuffled_head: PRef<LazyNode> = head_of(&db, "lazy-shuffled")?;
        let mut lazy_warmup_ms = [0.0; 2];
        for w in &mut lazy_warmup_ms {
            let t = Instant::now();
            let sums = (
                walk_lazy(&db, lazy_head),
                walk_lazy(&db, lazy_shuffled_head),
            );
            *w = ms(t);
            if sums != (want, want) {
                return Err(BenchError::new(format!(
                    "lazy warm-up traversals summed {sums:?}, expected {want} each"
                )));
            }
        }
        let lazy_in_order = measure(
            || walk_lazy(&db, black_box(lazy_head)),
            &mem_in_order,
            cfg.runs,
            want,
        )?;
        let lazy_shuffled = measure(
            || walk_lazy(&db, black_box(lazy_shuffled_head)),
            &mem_shuffled,
            cfg.runs,
            want,
        )?;
        let name = db.backend().to_string();
        db.close()?;
        let b = BackendHot {
            backend: name.clone(),
            amber_hot_ms: in_order.amber_ms.median,
            memory_hot_ms: in_order.memory_ms.median,
            hot_vs_memory: in_order.ratio,
            amber_shuffled_ms: shuffled.amber_ms.median,
            memory_shuffled_ms: shuffled.memory_ms.median,
            shuffled_vs_memory: shuffled.ratio,
            in_order,
            shuffled,
            lazy_hot_ms: lazy_in_order.amber_ms.median,
            lazy_hot_vs_memory: lazy_in_order.ratio,
            lazy_shuffled_vs_memory: lazy_shuffled.ratio,
            lazy_in_order,
            lazy_shuffled,
            lazy_warmup_ms,
            warmup_ms,
            warmup_faults,
        };
        first.get_or_insert_with(|| b.clone());
        backends.insert(name, b);
    }
    let single = (backends.len() == 1).then_some(first).flatten();
    Ok(HotReport {
        benchmark: "hot",
        scheme: cfg.detect.to_string(),
        objects: cfg.objects,
        runs: cfg.runs,
        node_bytes: std::mem::size_of::<Node>(),
        amber_slot_bytes: 8 + std::mem::size_of::<Node>(),
        memory_chunk_bytes: 32,
        target_hot_vs_memory: TARGET_HOT_VS_MEMORY,
        target_lazy_hot_vs_memory: TARGET_LAZY_HOT_VS_MEMORY,
        amber_hot_ms: single.as_ref().map(|b| b.amber_hot_ms),
        memory_hot_ms: single.as_ref().map(|b| b.memory_hot_ms),
        hot_vs_memory: single.as_ref().map(|b| b.hot_vs_memory),
        backends,
        method: METHOD,
        environment: environment(work.path()),
    })
}

impl HotReport {
    /// The result as a small table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "hot traversal: {} nodes of {} B per list ({} B per node in Amber's pages and in glibc's heap), median of {} runs, all pages resident",
            self.objects, self.node_bytes, self.amber_slot_bytes, self.runs
        );
        let _ = writeln!(
            s,
            "  {:<8} {:<13} {:>10} {:>10} {:>8} {:>10} {:>10}",
            "backend", "list", "amber ms", "memory ms", "ratio", "p10..p90", ""
        );
        for b in self.backends.values() {
            for (list, p) in [
                ("in order", &b.in_order),
                ("shuffled", &b.shuffled),
                ("lazy in order", &b.lazy_in_order),
                ("lazy shuffled", &b.lazy_shuffled),
            ] {
                let _ = writeln!(
                    s,
                    "  {:<8} {:<13} {:>10.3} {:>10.3} {:>8.3}   amber {:.3}..{:.3}, memory {:.3}..{:.3}",
                    b.backend,
                    list,
                    p.amber_ms.median,
                    p.memory_ms.median,
                    p.ratio,
                    p.amber_ms.p10,
                    p.amber_ms.p90,
                    p.memory_ms.p10,
                    p.memory_ms.p90
                );
            }
            let _ = writeln!(
                s,
                "  {:<8} warm-up (first traversal of both lists, faulting): {:.1} ms, {} faults",
                b.backend, b.warmup_ms, b.warmup_faults
            );
            let _ = writeln!(
                s,
                "  {:<8} lazy warm-up (first and second traversal of both lazy lists): {:.1} ms, {:.1} ms",
                b.backend, b.lazy_warmup_ms[0], b.lazy_warmup_ms[1]
            );
        }
        for b in self.backends.values() {
            let _ = writeln!(
                s,
                "  {}: hot_vs_memory {:.3} (target <= {:.2}: {})",
                b.backend,
                b.hot_vs_memory,
                self.target_hot_vs_memory,
                if b.hot_vs_memory <= self.target_hot_vs_memory {
                    "met"
                } else {
                    "MISSED"
                }
            );
            let _ = writeln!(
                s,
                "  {}: lazy_hot_vs_memory {:.3} (target <= {:.2}: {})",
                b.backend,
                b.lazy_hot_vs_memory,
                self.target_lazy_hot_vs_memory,
                if b.lazy_hot_vs_memory <= self.target_lazy_hot_vs_memory {
                    "met"
                } else {
                    "MISSED"
                }
            );
        }
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
        let r = hot(&HotConfig {
            objects: 2_000,
            backends: Backends::Both,
            runs: 3,
            dir: Some(dir.path().to_path_buf()),
            seed: 3,
            detect: Detect::Remsets,
        })
        .expect("hot");
        assert_eq!(r.scheme, "remsets");
        assert_eq!(r.backends.len(), 2);
        assert!(r.amber_hot_ms.is_none());
        for b in r.backends.values() {
            assert!(b.amber_hot_ms > 0.0 && b.memory_hot_ms > 0.0);
            assert!(b.lazy_hot_ms > 0.0 && b.lazy_warmup_ms[0] > 0.0);
            // Pages come in a fetch cluster at a time.
            assert!(b.warmup_faults >= 1);
        }
        assert!(r.table().contains("hot_vs_memory"));
        assert!(r.table().contains("lazy_hot_vs_memory"));
    }
}
