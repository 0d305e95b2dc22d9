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

use super::schema::{ROOT, Visit, all_raw, all_smart, smart_index};
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

    /// Looks `id` up and traverses from it; `on_object` sees the address of
    /// every object the traversal reads (the root, nodes and parts).
    fn traverse(
        db: &Db,
        root: PRef<Self::Root>,
        id: PartId,
        tally: &mut Tally,
        on_object: &mut impl FnMut(usize),
    ) -> Result<(), EngineError>;

    /// Calls `f(address, swizzled pointers)` for every object.
    fn census(
        db: &Db,
        root: PRef<Self::Root>,
        f: &mut impl FnMut(usize, u64),
    ) -> Result<(), EngineError>;
}

macro_rules! set {
    ($ty:ident, $m:ident, $checked:literal) => {
        struct $ty;

        impl Set for $ty {
            type Root = $m::Root;

            #[inline(always)]
            fn traverse(
                db: &Db,
                root: PRef<$m::Root>,
                id: PartId,
                tally: &mut Tally,
                on_object: &mut impl FnMut(usize),
            ) -> Result<(), EngineError> {
                let r = db.get(root);
                on_object(r as *const $m::Root as usize);
                let part = $m::lookup::<$checked>(db, r, id, on_object)?
                    .ok_or(EngineError::MissingPart { id })?;
                $m::traverse::<$checked>(db, part, 0, &mut |v: Visit<'_>| {
                    on_object(v.addr);
                    tally.visit(v.id, v.x, v.y, v.kind);
                })
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

set!(AllRaw, all_raw, false);
set!(SmartIndex, smart_index, false);
set!(AllSmart, all_smart, false);
set!(AllRawTryGet, all_raw, true);

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
    for &id in &roots {
        let before = db.stats();
        let cpu = procfs::cpu_time_ns();
        let wall = Instant::now();
        let mut tally = Tally::for_op(Op::Traversal);
        S::traverse(&db, root, id, &mut tally, &mut |_| {})?;
        let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        let cpu_ms = procfs::cpu_time_ns().saturating_sub(cpu) as f64 / 1e6;
        let after = db.stats();
        // Untimed: the pages this traversal touched first (all resident now,
        // so walking it again faults nothing).
        let mut new = Vec::new();
        S::traverse(
            &db,
            root,
            id,
            &mut Tally::for_op(Op::Traversal),
            &mut |addr| {
                if touched.insert(addr / page) {
                    new.push(addr / page);
                }
            },
        )?;
        samples.push(sample(&before, &after, cpu_ms, wall_ms, new.len(), tally));
        first_touched.push(new);
    }
    // Untimed, after the last traversal: every object's swizzled pointers,
    // by page. Fetches every page.
    let mut per_page: HashMap<usize, u64> = HashMap::new();
    S::census(&db, root, &mut |addr, pointers| {
        *per_page.entry(addr / page).or_default() += pointers
    })?;
    for (s, pages) in samples.iter_mut().zip(&first_touched) {
        let exact = request.fetch == Fetch::OnePage && s.blocks_fetched == pages.len() as u64;
        s.pointers_swizzled = exact.then(|| {
            pages
                .iter()
                .map(|p| per_page.get(p).copied().unwrap_or(0))
                .sum()
        });
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
