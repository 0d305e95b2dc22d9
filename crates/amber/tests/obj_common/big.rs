//! A database bigger than the cache budget, traversed end to end.
//!
//! The parent builds a linked list of 512-byte nodes filling `AMBER_OBJ_BIG_MB`
//! MiB of pages (40 by default, 80 with `AMBER_OBJ_LONG`), in transactions of
//! 4 MiB under an 8 MiB budget. A child process (this binary run again, so
//! that the memory it measures is its own) opens it with `cache_bytes` =
//! 8 MiB and follows the list twice from end to end, also following a
//! `skip` pointer to a node 1000 back every 50 nodes (a page evicted long
//! ago), checking every node. It samples its resident memory from
//! `/proc/self/status` every 500 nodes.
//!
//! The bound: resident memory (anonymous + shared) may grow, from the value
//! just after opening, by at most `F` x budget + 256 bytes x frames assigned
//! + 4 MiB, where
//! - `F` is 1 for userfaultfd (frames are private anonymous pages, counted
//!   once in RssAnon) and 2 for SIGSEGV (frames live in a memfd mapped
//!   twice, the program's view and the staging view the handler fills them
//!   through; a resident frame is mapped, and counted in RssShmem, in both);
//! - every page a pointer has reached has a frame assigned, resident or not
//!   (the address space, not the cache): its frame-table entry (24 bytes)
//!   and its slots in the page hash table (kept at most half full, grown by
//!   doubling, old tables kept until the space is dropped) -- measured at
//!   about 120 bytes per page, allowed 256;
//! - 4 MiB for the rest: the pager's queue, fetch and swizzle buffers,
//!   allocator slack.
//!
//! Measured (debug build): 40 MiB, userfaultfd +9.2 MiB (8.0 of frames),
//! SIGSEGV +17.2 MiB (16.0 of RssShmem); 80 MiB, +10.4 and +18.4 MiB.

use super::Cfg;
use super::{Rss, check_backend, child_dir, child_scenario, env_num, long, opts, run_child};
use amber::BackendChoice;
use amber::{Db, Options, PRef, Persistent};

#[derive(Persistent)]
#[repr(C)]
pub struct BNode {
    pub id: u64,
    pub next: Option<PRef<BNode>>,
    pub skip: Option<PRef<BNode>>,
    pub check: u64,
    pub payload: [u8; 480],
}

#[derive(Persistent)]
#[repr(C)]
pub struct BRoot {
    pub head: Option<PRef<BNode>>,
    pub count: u64,
}

const BUDGET: u64 = 8 << 20;
/// Nodes per 4 KiB page (520-byte slots).
const PER_PAGE: u64 = 7;
const SKIP: u64 = 1000;

fn payload(id: u64) -> [u8; 480] {
    let mut p = [(id as u8) ^ 0x5a; 480];
    p[..8].copy_from_slice(&id.to_le_bytes());
    p[472..].copy_from_slice(&(!id).to_le_bytes());
    p
}

fn options(b: Cfg) -> Options {
    Options {
        cache_bytes: Some(BUDGET),
        reserve_bytes: 2 << 30,
        ..opts(b)
    }
}

/// Builds the list, newest node first in the file order's reverse: node
/// `id` points to `id + 1`, so the traversal sweeps the file forwards.
fn build(path: &std::path::Path, b: Cfg, nodes: u64) {
    let mut db = Db::create(path, options(b)).expect("create");
    check_backend(&db, b);
    let per_tx = (4 << 20) / 4096 * PER_PAGE;
    let mut prev: Option<PRef<BNode>> = None;
    let mut root = None;
    let mut recent: std::collections::VecDeque<PRef<BNode>> = Default::default();
    let mut id = 0;
    while id < nodes {
        let mut tx = db.begin().expect("begin");
        let r = match root {
            Some(r) => r,
            None => {
                let r = tx
                    .alloc(BRoot {
                        head: None,
                        count: 0,
                    })
                    .expect("root");
                tx.set_root("big", r).expect("set root");
                root = Some(r);
                r
            }
        };
        for _ in 0..per_tx.min(nodes - id) {
            let skip = (recent.len() as u64 == SKIP).then(|| recent[0]);
            let n = tx
                .alloc(BNode {
                    id,
                    next: None,
                    skip,
                    check: id.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    payload: payload(id),
                })
                .expect("alloc");
            match prev {
                Some(p) => tx.get_mut(p).next = Some(n),
                None => tx.get_mut(r).head = Some(n),
            }
            prev = Some(n);
            recent.push_back(n);
            if recent.len() as u64 > SKIP {
                recent.pop_front();
            }
            id += 1;
        }
        tx.get_mut(r).count = id;
        tx.commit().expect("commit");
    }
    assert!(db.stats().evicted > 0, "building under the budget evicts");
    db.close().expect("close");
}

/// The child: two traversals, memory sampled.
fn traverse(b: Cfg) {
    let path = child_dir().join("big.amber");
    let before_open = Rss::now();
    let db = Db::open(&path, options(b)).expect("open");
    check_backend(&db, b);
    let root: PRef<BRoot> = db.root("big").expect("root").expect("big");
    let count = db.get(root).count;
    let base = Rss::now();
    let mut peak = base;
    let mut peak_frames = 0;
    let t0 = std::time::Instant::now();
    for pass in 0..2 {
        let mut at = db.get(root).head;
        let mut id = 0u64;
        while let Some(p) = at {
            let n = db.get(p);
            assert_eq!(n.id, id, "pass {pass}");
            assert_eq!(n.check, id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            assert!(n.payload == payload(id), "pass {pass}: node {id} payload");
            if id.is_multiple_of(50)
                && let Some(s) = n.skip
            {
                assert_eq!(db.get(s).id, id - SKIP, "node {id} skip");
            }
            if id.is_multiple_of(500) {
                let r = Rss::now();
                if r.data() > peak.data() {
                    peak = r;
                }
                peak_frames = peak_frames.max(db.stats().resident_frames);
            }
            at = n.next;
            id += 1;
        }
        assert_eq!(id, count, "pass {pass}: nodes");
    }
    let elapsed = t0.elapsed();
    let st = db.stats();
    let end = Rss::now();
    let factor = if b.backend == BackendChoice::Sigsegv {
        2
    } else {
        1
    };
    let bound = factor * BUDGET + 256 * st.assigned_frames + (4 << 20);
    let grown = peak.data().saturating_sub(base.data());
    const M: f64 = 1048576.0;
    println!(
        "big: {:?}, {} MiB of pages, {count} nodes, 2 passes in {elapsed:.2?}; budget {} MiB ({} frames)",
        b,
        (st.store.page_count * 4096) >> 20,
        BUDGET >> 20,
        BUDGET / 4096
    );
    println!("big: before open   {before_open}");
    println!("big: after open    {base}");
    println!("big: peak          {peak}");
    println!("big: at the end    {end}");
    println!(
        "big: growth {:.1} MiB (bound {:.1} MiB = {factor} x budget + 256 B x {} frames assigned + 4 MiB); \
         peak resident frames {peak_frames}; \
         faults {}, fetched {}, evicted {}, frames assigned {}",
        grown as f64 / M,
        bound as f64 / M,
        st.assigned_frames,
        st.faults,
        st.fetched,
        st.evicted,
        st.assigned_frames
    );
    assert!(st.evicted > 0, "{st:?}");
    assert!(
        peak_frames <= BUDGET / 4096 + 8,
        "resident frames {peak_frames}"
    );
    assert!(
        grown <= bound,
        "resident memory grew by {:.1} MiB, bound {:.1} MiB",
        grown as f64 / M,
        bound as f64 / M
    );
    println!("big scenario done");
}

pub fn run(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("big") {
        traverse(b);
        return;
    }
    let mb = env_num("AMBER_OBJ_BIG_MB", if long() { 80 } else { 40 });
    let nodes = mb * 256 * PER_PAGE;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    build(&dir.path().join("big.amber"), b, nodes);
    let out = run_child(test, "big", dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // (libtest writes "test NAME ... " before the first line.)
    for l in stdout
        .lines()
        .filter_map(|l| l.find("big:").map(|i| &l[i..]))
    {
        eprintln!("{l}");
    }
    assert!(
        out.status.success() && stdout.contains("big scenario done"),
        "the child failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
