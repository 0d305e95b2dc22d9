//! `amber bench texas`: Kakkad & Wilson's granularity experiment
//! (`papers/001_*` §6, Figures 3–4) on Amber.
//!
//! The OO1 database ([`schema`]) is built once per granularity — *all-raw*
//! (`PRef` everywhere), *smart-index* (`Smart` in the B+tree index only),
//! *all-smart* (`Smart` everywhere), and beside the paper's *all-lazy*
//! (`Lazy` everywhere, swizzled upon discovery as in White & DeWitt's
//! EPVM 2.0) — and each *traversal set* runs in a
//! fresh process on a fresh copy: 45 OO1 traversals, the first cold (nothing
//! of the database in the process), 34 warm (each from a new random part,
//! as more of the database becomes resident), then 10 hot (the last warm
//! traversal's part again, everything it touches resident). Each traversal
//! looks its start part up in the index once and visits 3,280 parts.
//!
//! Per traversal the child measures ([`child`]):
//! - *CPU time*: user + system of the whole process, every thread (the
//!   userfaultfd handler's included), from the kernel's process CPU clock,
//!   around the traversal alone ([`procfs::cpu_time_ns`](crate::procfs::cpu_time_ns));
//!   wall time beside it;
//! - *faults*: Amber's fault counter (a kernel fault served, or a fetch made
//!   by a dereference that found its page missing: `Smart`'s);
//! - *pages reserved*: frames assigned (`DbStats::assigned_frames`) during
//!   the traversal;
//! - *pointers swizzled*: the core does not count them. The child computes
//!   them when every block a traversal fetched is one it touched (one page
//!   per fault): the non-null `PRef` fields of the objects on the pages the
//!   traversal touched first, which are exactly what the fault handler
//!   converts when it fetches those pages (docs/design.md §4.3), checked
//!   against the core's count of blocks fetched (a traversal whose newly
//!   touched pages are not the blocks fetched reports none). With the
//!   adaptive window a fault also fetches neighbours the traversal did not
//!   touch, whose pointers are swizzled too and are not attributed: none is
//!   reported. All-lazy's are the fields its traversal rewrote upon
//!   discovery, for either window: after each traversal the child walks its
//!   path again through copies of the fields (which the core never
//!   rewrites) and counts the followed fields found rewritten that no
//!   earlier traversal's walk had found; after the set their sum must equal
//!   the rewritten fields of the whole database (a census), or the run
//!   fails.
//!
//! **(choice)** Fetching: one page per fault, as Texas fetched
//! (`Options::fetch_cluster = 1`, not adaptive), and Amber's default
//! adaptive window beside it. Cache budget: none (Texas left caching to
//! the virtual memory system). Fault backend: Amber's default.
//!
//! Every traversal's answer (count and checksum of what it read) is checked
//! against the reference evaluator: a granularity that reads other values
//! fails the run. Each cell is the median over `--rounds` traversal sets;
//! within a round the granularities run in turn.

pub mod child;
pub mod plot;
pub mod report;
pub mod schema;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::oo1::error::BenchError;
use crate::oo1::harness::{
    Workspace, compare_answers_of, copy_tree, expected_answers, generate_for, reset_dir,
    run_checked, sync_tree, with_progress_of,
};
use crate::oo1::ops::{Job, Op, Protocol};
use crate::procfs;

pub use child::{CHILD_SUBCOMMAND, ChildRequest, ChildRun, Sample, run_texas_child};
pub use report::{Row, TexasReport};

/// Where pointers are swizzled and where translated at each use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Granularity {
    /// `PRef` everywhere (coarse-grained).
    #[serde(rename = "all-raw")]
    AllRaw,
    /// `Smart` in the index only (mixed granularity).
    #[serde(rename = "smart-index")]
    SmartIndex,
    /// `Smart` everywhere (fine-grained).
    #[serde(rename = "all-smart")]
    AllSmart,
    /// Not one of the paper's: `Lazy` everywhere, swizzled upon discovery
    /// (White & DeWitt's EPVM 2.0).
    #[serde(rename = "all-lazy")]
    AllLazy,
    /// Not one of the paper's: the all-raw database traversed with
    /// `Db::try_get`, a dereference that fetches a missing page itself in
    /// the calling thread, as a `Smart`'s does, instead of taking a page
    /// fault. Beside all-raw and all-smart it tells the cost of the fault
    /// mechanism from the cost of swizzling.
    #[serde(rename = "all-raw-try-get")]
    AllRawTryGet,
}

impl Granularity {
    /// Every granularity, in report order, and the diagnostic
    /// all-raw-try-get.
    pub const ALL: [Granularity; 5] = [
        Granularity::AllRaw,
        Granularity::SmartIndex,
        Granularity::AllSmart,
        Granularity::AllLazy,
        Granularity::AllRawTryGet,
    ];

    /// The database it traverses.
    pub fn database(self) -> Granularity {
        match self {
            Granularity::AllRawTryGet => Granularity::AllRaw,
            g => g,
        }
    }

    /// The paper's key.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::AllRaw => "all-raw",
            Granularity::SmartIndex => "smart-index",
            Granularity::AllSmart => "all-smart",
            Granularity::AllLazy => "all-lazy",
            Granularity::AllRawTryGet => "all-raw-try-get",
        }
    }
}

impl fmt::Display for Granularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Granularity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Granularity::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown granularity {s:?}; known: all-raw, smart-index, all-smart, all-lazy, all-raw-try-get"
                )
            })
    }
}

/// How many pages a fault fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Fetch {
    /// One page per fault, as Texas fetched.
    #[serde(rename = "1")]
    OnePage,
    /// Amber's default: a window adapting between 1 and 64 pages.
    #[serde(rename = "adaptive")]
    Adaptive,
}

impl Fetch {
    /// Both, in report order.
    pub const ALL: [Fetch; 2] = [Fetch::OnePage, Fetch::Adaptive];

    /// The name in the JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fetch::OnePage => "1",
            Fetch::Adaptive => "adaptive",
        }
    }

    /// The database options that fetch this way.
    pub fn options(self) -> amber::Options {
        match self {
            Fetch::OnePage => amber::Options {
                fetch_cluster: 1,
                fetch_adaptive: false,
                ..amber::Options::default()
            },
            Fetch::Adaptive => amber::Options::default(),
        }
    }
}

impl fmt::Display for Fetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fetch {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Fetch::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| format!("unknown fetch window {s:?}; known: 1, adaptive"))
    }
}

/// Settings of `amber bench texas`.
#[derive(Clone, Debug)]
pub struct TexasConfig {
    /// Database sizes (parts).
    pub parts: Vec<u32>,
    /// Granularities to measure.
    pub granularities: Vec<Granularity>,
    /// Fetch windows to measure.
    pub fetches: Vec<Fetch>,
    /// Traversal sets per cell (medians are reported).
    pub rounds: usize,
    /// Warm traversals of a set (Texas: 34).
    pub warm: usize,
    /// Hot traversals of a set (Texas: 10).
    pub hot: usize,
    /// Seed of the databases and the start parts.
    pub seed: u64,
    /// Directory for the databases (default: a temporary one).
    pub dir: Option<PathBuf>,
    /// How to start a child: the arguments after this binary's path that
    /// lead to [`run_texas_child`].
    pub child_args: Vec<String>,
}

impl TexasConfig {
    /// Texas's traversal set: 1 cold, 34 warm, 10 hot.
    pub const WARM: usize = 34;
    /// See [`TexasConfig::WARM`].
    pub const HOT: usize = 10;

    fn protocol(&self) -> Protocol {
        Protocol {
            warm: self.warm,
            hot: self.hot,
        }
    }
}

/// Runs the experiment: builds every database, runs every traversal set in
/// a child process, checks every answer, and reports. Answers that differ
/// from the reference, or a failed child, make the result
/// [`BenchError::Failed`] after the report is built (the caller prints it).
pub fn run(config: &TexasConfig) -> Result<(TexasReport, Vec<String>), BenchError> {
    if config.rounds == 0 {
        return Err(BenchError::Usage("--rounds must be at least 1".into()));
    }
    let protocol = config.protocol();
    let workspace = Workspace::with_prefix(config.dir.as_deref(), "amber-texas-")?;
    let load_before = procfs::load_average();
    let mut builds = Vec::new();
    let mut samples = Vec::new();
    let mut problems = Vec::new();
    for &parts in &config.parts {
        let (params, data) = generate_for("texas", parts, config.seed)?;
        let job = Job {
            op: Op::Traversal,
            p: None,
        };
        let expected = expected_answers(&data, job, protocol)?;
        let mut bases = Vec::new();
        for &g in &config.granularities {
            let db = g.database();
            if let Some((_, base)) = bases
                .iter()
                .find(|(b, _): &&(Granularity, PathBuf)| b.database() == db)
            {
                let base: PathBuf = base.clone();
                bases.push((g, base));
                continue;
            }
            let base = workspace.root().join(format!("{parts}")).join(db.name());
            reset_dir(&base)?;
            let start = Instant::now();
            let pages =
                with_progress_of("texas", &format!("{db}: building {parts} parts"), || {
                    child::build(&base, db, &data)
                })?;
            sync_tree(&base)?;
            builds.push(report::Build {
                granularity: db,
                parts,
                build_ms: start.elapsed().as_secs_f64() * 1e3,
                pages,
            });
            bases.push((g, base));
        }
        for round in 1..=config.rounds {
            for &fetch in &config.fetches {
                for (g, base) in &bases {
                    let run_dir = workspace.root().join(format!("{parts}")).join("run");
                    reset_dir(&run_dir)?;
                    copy_tree(base, &run_dir)?;
                    let request = ChildRequest {
                        granularity: *g,
                        fetch,
                        params,
                        protocol,
                        dir: run_dir,
                    };
                    let label = format!(
                        "round {round}/{}: {parts} parts, fetch {fetch}, {g}",
                        config.rounds
                    );
                    let job = format!("{parts} parts, fetch {fetch}");
                    let run: Option<ChildRun> = run_checked(
                        "texas",
                        &config.child_args,
                        &request,
                        (&label, g.name(), &job),
                        |run: &ChildRun| {
                            let answers: Vec<_> = run.samples.iter().map(|s| s.answer).collect();
                            compare_answers_of(&label, &answers, &expected, protocol)
                        },
                        &mut problems,
                    );
                    if let Some(run) = run {
                        samples.push((request.granularity, fetch, parts, round, run));
                    }
                }
            }
        }
    }
    let report = TexasReport::new(
        config,
        &builds,
        &samples,
        load_before,
        procfs::load_average(),
        workspace.root(),
    );
    Ok((report, problems))
}
