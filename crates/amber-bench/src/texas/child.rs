//! One traversal set in one process: open the database of one granularity,
//! run the 45 traversals, measuring each, then (untimed) count the pointers
//! each traversal's faults swizzled.
//!
//! The parent re-executes its binary with [`CHILD_SUBCOMMAND`], sends a
//! [`ChildRequest`] as JSON on stdin and reads a [`ChildRun`] from stdout
//! (the OO1 harness's protocol).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use amber::{Db, DbStats, Options, PRef};
use serde::{Deserialize, Serialize};

use super::schema::{
    CHECKED, LOAD, PEEK, ROOT, Seen, Visit, all_lazy, all_raw, all_smart, smart_index,
};
use super::{Fetch, Granularity};
use crate::oo1::child::serve_child;
use crate::oo1::database::{GenParams, GeneratedDb, PartId};
use crate::oo1::engine::{Answer, EngineError, ResultExt, Tally};
use crate::oo1::error::BenchError;
use crate::oo1::ops::{Input, Job, Op, Protocol, inputs};
use crate::procfs;

/// The hidden subcommand that makes the binary run one traversal set.
pub const CHILD_SUBCOMMAND: &str = "__texas-child";

/// The database file in a granularity's directory.
pub const FILE: &str = "texas.amber";

/// What a child is asked to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRequest {
    pub granularity: Granularity,
    pub fetch: Fetch,
    pub params: GenParams,
    pub protocol: Protocol,
    /// The directory holding the database (a copy the child may change).
    pub dir: PathBuf,
}

/// What a child measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRun {
    /// Opening the database.
    pub open_ms: f64,
    /// The fault backend the database used.
    pub backend: String,
    /// One per traversal, in order.
    pub samples: Vec<Sample>,
}

/// One traversal.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// User + system CPU of the process (every thread) during the traversal.
    pub cpu_ms: f64,
    /// Wall time of the traversal.
    pub wall_ms: f64,
    /// Faults served (Amber's counter).
    pub faults: u64,
    /// Frames assigned during the traversal.
    pub pages_reserved: u64,
    /// Blocks fetched (the faulting ones and their window's neighbours).
    pub blocks_fetched: u64,
    /// Pages the traversal touched that no earlier traversal had.
    pub pages_touched_first: u64,
    /// Non-null `PRef` fields on those pages: what the fault handler
    /// swizzled, when they are exactly the blocks fetched; `None` otherwise.
    pub pointers_swizzled: Option<u64>,
    /// What the traversal read.
    pub answer: Answer,
}

/// Builds the database of granularity `g` from `data` in the empty directory
/// `dir`; returns the pages of its file.
pub fn build(dir: &Path, g: Granularity, data: &GeneratedDb) -> Result<u64, BenchError> {
    let path = dir.join(FILE);
    let fail = |during: &str, e: EngineError| BenchError::engine(g.name(), during, e);
    let mut db = Db::create(&path, Options::default())
        .ctx(&format!("creating {}", path.display()))
        .map_err(|e| fail("building", e))?;
    match g.database() {
        Granularity::AllRaw | Granularity::AllRawTryGet => all_raw::build(&mut db, data),
        Granularity::SmartIndex => smart_index::build(&mut db, data),
        Granularity::AllSmart => all_smart::build(&mut db, data),
        Granularity::AllLazy => all_lazy::build(&mut db, data),
    }
    .map_err(|e| fail("building", e))?;
    let pages = db.stats().store.page_count;
    db.close()
        .ctx("closing the database")
        .map_err(|e| fail("building", e))?;
    Ok(pages)
}

/// The child side: reads a [`ChildRequest`] on stdin, runs it, writes a
/// [`ChildRun`] on stdout.
pub fn run_texas_child() -> Result<(), BenchError> {
    serve_child("texas", |request: ChildRequest| {
        run_set(&request).map_err(|e| BenchError::engine(request.granularity.name(), "running", e))
    })
}

/// The operations of one granularity, over the same measurement.
trait Set {
    /// The root object's type.
    type Root: amber::Persistent;

    /// Whether its pointers are swizzled upon discovery (`Lazy`), not at
    /// fault time: the pointers swizzled are the rewrites the walks see.
    const LAZY: bool;

    /// Looks `id` up and traverses from it, as the measured traversals do.
    fn traverse(
        db: &Db,
        root: PRef<Self::Root>,
        id: PartId,
        tally: &mut Tally,
    ) -> Result<(), EngineError>;

    /// The same walk, rewriting no field ([`PEEK`]); `seen` gets every
    /// object it reads (the root, nodes and parts) and every pointer it
    /// follows.
    fn walk(
        db: &Db,
        root: PRef<Self::Root>,
        id: PartId,
        seen: &mut impl FnMut(Seen),
    ) -> Result<(), EngineError>;

    /// Calls `f(address, swizzled pointers)` for every object.
    fn census(
        db: &Db,
        root: PRef<Self::Root>,
        f: &mut impl FnMut(usize, u64),
    ) -> Result<(), EngineError>;
}

/// Looks `id` up in granularity module `$m`'s database and traverses from
/// it, following pointers as `$mode` says.
macro_rules! lookup_traverse {
    ($m:ident, $mode:expr, $db:expr, $root:expr, $id:expr, $tally:expr, $seen:expr) => {{
        let (db, id, seen) = ($db, $id, $seen);
        let r = db.get($root);
        seen(Seen::Object(r as *const $m::Root as usize));
        let part =
            $m::lookup::<{ $mode }>(db, r, id, seen)?.ok_or(EngineError::MissingPart { id })?;
        let tally: &mut Tally = $tally;
        $m::traverse::<{ $mode }>(
            db,
            part,
            0,
            &mut |v: Visit<'_>| tally.visit(v.id, v.x, v.y, v.kind),
            seen,
        )
    }};
}

macro_rules! set {
    ($ty:ident, $m:ident, $mode:expr, $lazy:literal) => {
        struct $ty;

        impl Set for $ty {
            type Root = $m::Root;
            const LAZY: bool = $lazy;

            #[inline(always)]
            fn traverse(
                db: &Db,
                root: PRef<$m::Root>,
                id: PartId,
                tally: &mut Tally,
            ) -> Result<(), EngineError> {
                lookup_traverse!($m, $mode, db, root, id, tally, &mut |_: Seen| {})
            }

            fn walk(
                db: &Db,
                root: PRef<$m::Root>,
                id: PartId,
                seen: &mut impl FnMut(Seen),
            ) -> Result<(), EngineError> {
                let tally = &mut Tally::for_op(Op::Traversal);
                lookup_traverse!($m, PEEK, db, root, id, tally, seen)
            }

            fn census(
                db: &Db,
                root: PRef<$m::Root>,
                f: &mut impl FnMut(usize, u64),
            ) -> Result<(), EngineError> {
                $m::census(db, root, f)
            }
        }
    };
}

set!(AllRaw, all_raw, LOAD, false);
set!(SmartIndex, smart_index, LOAD, false);
set!(AllSmart, all_smart, LOAD, false);
set!(AllLazy, all_lazy, LOAD, true);
set!(AllRawTryGet, all_raw, CHECKED, false);

fn root<T: amber::Persistent>(db: &Db) -> Result<PRef<T>, EngineError> {
    db.root::<T>(ROOT)
        .ctx("reading the root")?
        .ok_or_else(|| EngineError::corrupt(format!("no root named {ROOT:?}")))
}

fn run_set(request: &ChildRequest) -> Result<ChildRun, EngineError> {
    match request.granularity {
        Granularity::AllRaw => measure::<AllRaw>(request),
        Granularity::SmartIndex => measure::<SmartIndex>(request),
        Granularity::AllSmart => measure::<AllSmart>(request),
        Granularity::AllLazy => measure::<AllLazy>(request),
        Granularity::AllRawTryGet => measure::<AllRawTryGet>(request),
    }
}

fn measure<S: Set>(request: &ChildRequest) -> Result<ChildRun, EngineError> {
    let job = Job {
        op: Op::Traversal,
        p: None,
    };
    let roots: Vec<PartId> = inputs(request.params, job, request.protocol)
        .into_iter()
        .map(|input| match input {
            Input::Traversal(id) => Ok(id),
            other => Err(EngineError::bad_input(format!(
                "a traversal set was given {other:?}"
            ))),
        })
        .collect::<Result<_, _>>()?;
    let path = request.dir.join(FILE);
    let start = Instant::now();
    let db =
        Db::open(&path, request.fetch.options()).ctx(&format!("opening {}", path.display()))?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let page = db.page_size();
    let root = root::<S::Root>(&db)?;
    let mut samples = Vec::with_capacity(roots.len());
    let mut touched: HashSet<usize> = HashSet::new();
    let mut first_touched = Vec::with_capacity(roots.len());
    // The `Lazy` fields found rewritten upon discovery so far, and how many
    // each traversal rewrote.
    let mut discovered: HashSet<usize> = HashSet::new();
    let mut rewrites = Vec::with_capacity(roots.len());
    for &id in &roots {
        let before = db.stats();
        let cpu = procfs::cpu_time_ns();
        let wall = Instant::now();
        let mut tally = Tally::for_op(Op::Traversal);
        S::traverse(&db, root, id, &mut tally)?;
        let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        let cpu_ms = procfs::cpu_time_ns().saturating_sub(cpu) as f64 / 1e6;
        let after = db.stats();
        // Untimed: the same walk, rewriting nothing (all resident now, so it
        // faults nothing): the pages this traversal touched first, and the
        // fields it rewrote (a field is rewritten only when followed, and
        // stays rewritten: no commit, no eviction).
        let mut new = Vec::new();
        let mut rewritten = 0;
        S::walk(&db, root, id, &mut |seen| match seen {
            Seen::Object(addr) => {
                if touched.insert(addr / page) {
                    new.push(addr / page);
                }
            }
            Seen::Pointer {
                at,
                discovered: true,
            } => rewritten += u64::from(discovered.insert(at)),
            Seen::Pointer { .. } => {}
        })?;
        samples.push(sample(&before, &after, cpu_ms, wall_ms, new.len(), tally));
        first_touched.push(new);
        rewrites.push(rewritten);
    }
    // Untimed, after the last traversal: every object's swizzled pointers,
    // by page. Fetches every page, rewrites nothing.
    let mut per_page: HashMap<usize, u64> = HashMap::new();
    S::census(&db, root, &mut |addr, pointers| {
        *per_page.entry(addr / page).or_default() += pointers
    })?;
    if S::LAZY {
        // Every rewrite the walks saw, against every rewritten field of the
        // whole database.
        let (walked, held) = (rewrites.iter().sum::<u64>(), per_page.values().sum::<u64>());
        if walked != held {
            return Err(EngineError::corrupt(format!(
                "the traversals rewrote {walked} lazy fields upon discovery, but the database holds {held} rewritten"
            )));
        }
        for (s, &n) in samples.iter_mut().zip(&rewrites) {
            s.pointers_swizzled = Some(n);
        }
    } else {
        for (s, pages) in samples.iter_mut().zip(&first_touched) {
            let exact = request.fetch == Fetch::OnePage && s.blocks_fetched == pages.len() as u64;
            s.pointers_swizzled = exact.then(|| {
                pages
                    .iter()
                    .map(|p| per_page.get(p).copied().unwrap_or(0))
                    .sum()
            });
        }
    }
    let backend = db.backend().to_string();
    db.close().ctx("closing the database")?;
    Ok(ChildRun {
        open_ms,
        backend,
        samples,
    })
}

fn sample(
    before: &DbStats,
    after: &DbStats,
    cpu_ms: f64,
    wall_ms: f64,
    first_touched: usize,
    tally: Tally,
) -> Sample {
    Sample {
        cpu_ms,
        wall_ms,
        faults: after.faults.saturating_sub(before.faults),
        pages_reserved: after.assigned_frames.saturating_sub(before.assigned_frames),
        blocks_fetched: after.fetched.saturating_sub(before.fetched),
        pages_touched_first: first_touched as u64,
        pointers_swizzled: None,
        answer: tally.finish(),
    }
}
