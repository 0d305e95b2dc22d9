//! `amber bench epvm`: White & DeWitt's comparison of object faulting and
//! pointer swizzling architectures (`papers/003_*`, VLDB 1992) on OO1, with
//! the versions that need no new core machinery:
//!
//! - [`cesm`]: every access a call into the storage manager (pin, read,
//!   update with a log record at once, unpin) over a buffer pool of the
//!   store's pages;
//! - [`epvm1`]: EPVM 1.0, an OID hash table into objects pinned in that
//!   buffer pool, with (*epvm1*) and without (*epvm1-no*) swizzling of
//!   local pointer variables; updates through calls;
//! - [`mapped`]: Amber itself, pages faulted in and swizzled, the analogue
//!   of ObjectStore.
//!
//! - [`copying`]: EPVM 2.0's copy architecture through Amber's core
//!   (`Db::copy_cache`) over the mapped version's database: object caching
//!   with lazy swizzling upon discovery (*oc*), without swizzling
//!   (*oc-no*), with eager swizzling (*oc-eager*), with a fifth of the
//!   buffer pool (*oc-small-pool*, the paper's OC1M), and page caching with
//!   (*pc*, PC1M) and without (*pc-no*) swizzling, on that smaller pool.
//!
//! The baselines read their own database through Amber's store
//! ([`rawdb`]: part records on raw pages, an array of OIDs as the index);
//! `mapped` reads Amber's objects ([`mapped`]). Both hold the same parts,
//! built from one generated OO1 database, and every iteration's answer
//! (parts visited, parts updated, a checksum of every value read) must be
//! the reference evaluator's, in every round; after a run that updates,
//! the database is opened again and every part read back must be what the
//! reference holds. A difference fails the run.
//!
//! The experiments ([`Experiment`]) are the paper's tables and figures; each
//! runs in a fresh process on a fresh copy of the database, so that its
//! first iteration is cold. See `docs/design.md` for the choices the paper
//! leaves open.

pub mod cesm;
pub mod child;
pub mod copying;
pub mod engine;
pub mod epvm1;
pub mod mapped;
pub mod oid_table;
pub mod paper;
pub mod pool;
pub mod raw;
pub mod rawdb;
pub mod report;
pub mod schema;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::oo1::error::BenchError;
use crate::oo1::harness::{
    Workspace, copy_tree, expected_answers, generate_for, reset_dir, run_checked, sync_tree,
    with_progress_of,
};
use crate::procfs;

pub use child::{CHILD_SUBCOMMAND, ChildRequest, ChildRun, run_epvm_child};
pub use report::{EpvmReport, Row};

/// A software version of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Version {
    #[serde(rename = "cesm")]
    Cesm,
    #[serde(rename = "epvm1")]
    Epvm1,
    #[serde(rename = "epvm1-no")]
    Epvm1No,
    #[serde(rename = "oc")]
    Oc,
    #[serde(rename = "oc-no")]
    OcNo,
    #[serde(rename = "oc-eager")]
    OcEager,
    #[serde(rename = "oc-small-pool")]
    OcSmallPool,
    #[serde(rename = "pc")]
    Pc,
    #[serde(rename = "pc-no")]
    PcNo,
    #[serde(rename = "mapped")]
    Mapped,
}

impl Version {
    /// Every version, in report order.
    pub const ALL: [Version; 10] = [
        Version::Cesm,
        Version::Epvm1,
        Version::Epvm1No,
        Version::Oc,
        Version::OcNo,
        Version::OcEager,
        Version::OcSmallPool,
        Version::Pc,
        Version::PcNo,
        Version::Mapped,
    ];

    /// The name in the JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Version::Cesm => "cesm",
            Version::Epvm1 => "epvm1",
            Version::Epvm1No => "epvm1-no",
            Version::Oc => "oc",
            Version::OcNo => "oc-no",
            Version::OcEager => "oc-eager",
            Version::OcSmallPool => "oc-small-pool",
            Version::Pc => "pc",
            Version::PcNo => "pc-no",
            Version::Mapped => "mapped",
        }
    }

    /// The paper's name of the version (the copy architecture's without a
    /// counterpart there named after it as the paper would have).
    pub fn paper_name(self) -> &'static str {
        match self {
            Version::Cesm => "CESM",
            Version::Epvm1 => "EPVM1",
            Version::Epvm1No => "EPVM1-NO",
            Version::Oc => "OC5M",
            Version::OcNo => "OC5M-NO",
            Version::OcEager => "OC5M-EAGER",
            Version::OcSmallPool => "OC1M",
            Version::Pc => "PC1M",
            Version::PcNo => "PC1M-NO",
            Version::Mapped => "OS",
        }
    }

    /// Whether it reads the baselines' database (else Amber's objects).
    pub fn raw(self) -> bool {
        matches!(self, Version::Cesm | Version::Epvm1 | Version::Epvm1No)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Version {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Version::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Version::ALL.iter().map(|v| v.name()).collect();
                format!("unknown version {s:?}; known: {}", known.join(", "))
            })
    }
}

/// One measured process's work.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Experiment {
    /// Tables 1, 3 and 5: one transaction without updates: 1 cold, 9 warm
    /// and 10 hot iterations, then 10 more hot ones drawing a random number
    /// at every visit (Table 3's first column). Begin and commit untimed.
    Single,
    /// Table 4: the same iterations, each a transaction of its own, its
    /// commit timed with it.
    PerIteration,
    /// Figures 7, 8, 12 and 13: 1 cold, 9 warm and `hot` hot iterations
    /// updating each visited part with probability `p`, in one transaction
    /// or one per iteration; the total time, commits included.
    Update {
        p: f64,
        per_iteration: bool,
        hot: usize,
    },
    /// Figures 9 and 10: 1 cold and `hot` hot iterations in one
    /// transaction, updating with probability `p`; the total, commit
    /// included.
    Sweep { p: f64, hot: usize },
    /// Figure 11: Figure 7's iterations in one transaction at p = 0.3 on
    /// the Figure 11 part (`schema::Fig11`), each update changing `ints`
    /// of its 19 integers; the total, commit included. The versions over
    /// Amber's objects only (the baselines' records have no array).
    Figure11 { ints: usize },
}

impl Experiment {
    /// Whether it changes the database (and so is checked after).
    pub fn updates(self) -> bool {
        match self {
            Experiment::Single | Experiment::PerIteration => false,
            Experiment::Update { p, .. } | Experiment::Sweep { p, .. } => p > 0.0,
            Experiment::Figure11 { .. } => true,
        }
    }

    /// A label for progress lines and errors.
    pub fn label(self) -> String {
        match self {
            Experiment::Single => "single transaction".into(),
            Experiment::PerIteration => "a transaction per iteration".into(),
            Experiment::Update {
                p,
                per_iteration,
                hot,
            } => format!(
                "update p={p}, {} hot, {}",
                hot,
                if per_iteration {
                    "a transaction per iteration"
                } else {
                    "one transaction"
                }
            ),
            Experiment::Sweep { p, hot } => format!("1 cold + {hot} hot, p={p}"),
            Experiment::Figure11 { ints } => {
                format!(
                    "Figure 11, {ints} of {} integers, p={FIGURE_11_P}",
                    schema::INTS
                )
            }
        }
    }
}

/// Settings of `amber bench epvm`.
#[derive(Clone, Debug)]
pub struct EpvmConfig {
    /// Database sizes (parts); up to [`SMALL_MAX`] the small database's
    /// experiments run, above it the large one's.
    pub parts: Vec<u32>,
    pub versions: Vec<Version>,
    /// Which of single, per-iteration, update, sweep to run.
    pub experiments: Vec<String>,
    /// Update probabilities of the update figures.
    pub ps: Vec<f64>,
    /// Hot iterations of the sweeps.
    pub sweep: Vec<usize>,
    /// Update probabilities of the sweeps (Figures 9 and 10: 0 and 0.01).
    pub sweep_ps: Vec<f64>,
    /// Buffer pool (baselines) and cache budget (mapped), in 4 KiB pages.
    pub pool_pages: usize,
    /// Runs of every cell (medians are reported).
    pub rounds: usize,
    pub seed: u64,
    pub dir: Option<PathBuf>,
    /// How to start a child: the arguments after this binary's path.
    pub child_args: Vec<String>,
}

/// The largest database run with the small database's experiments.
pub const SMALL_MAX: u32 = 20_000;

/// The experiment kinds, as `--experiments` names them.
pub const EXPERIMENTS: [&str; 5] = ["single", "per-iteration", "update", "sweep", "fig11"];

/// Figure 11's update probability.
pub const FIGURE_11_P: f64 = 0.3;

/// Figure 11's points: integers of the part's 19 an update changes (11%,
/// 26%, 53%, 79% and 100% of the array; at least x and y, see
/// `schema.rs`).
pub const FIGURE_11_INTS: [usize; 5] = [2, 5, 10, 15, 19];

/// The buffer pool, scaled as the paper's: its 5 MB pool held its small
/// database (3.8 MB) with a third to spare and a fifth of its large one
/// (125,000 parts, 24 MB). The same ratio to the baselines' small database
/// (20,000 parts: [`rawdb::pages`]) gives this many 4 KiB pages.
pub fn scaled_pool_pages() -> usize {
    (rawdb::pages(u64::from(SMALL_MAX)) as f64 * 5.0 / 3.8).ceil() as usize
}

impl EpvmConfig {
    /// The experiments of a database of `parts` parts.
    pub fn experiments_for(&self, parts: u32) -> Vec<Experiment> {
        let small = parts <= SMALL_MAX;
        let wants = |k: &str| self.experiments.iter().any(|e| e == k);
        let mut out = Vec::new();
        if wants("single") {
            out.push(Experiment::Single);
        }
        if wants("per-iteration") {
            out.push(Experiment::PerIteration);
        }
        if wants("update") {
            // Small: 1 cold, 9 warm, 10 hot (Figures 7–8); large: 1 cold,
            // 9 warm, no hot (Figures 12–13).
            let hot = if small { 10 } else { 0 };
            for per_iteration in [false, true] {
                for &p in &self.ps {
                    out.push(Experiment::Update {
                        p,
                        per_iteration,
                        hot,
                    });
                }
            }
        }
        if wants("sweep") && small {
            for &p in &self.sweep_ps {
                for &hot in &self.sweep {
                    out.push(Experiment::Sweep { p, hot });
                }
            }
        }
        if wants("fig11") && small {
            out.extend(FIGURE_11_INTS.map(|ints| Experiment::Figure11 { ints }));
        }
        out
    }
}

/// The databases a run builds, once per size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Database {
    /// The baselines' raw records (`rawdb`).
    Baselines,
    /// Amber's objects, OO1's part (`schema::Oo1`).
    Mapped,
    /// Amber's objects, Figure 11's part (`schema::Fig11`).
    Figure11,
}

impl Database {
    fn name(self) -> &'static str {
        match self {
            Database::Baselines => "baselines",
            Database::Mapped => "mapped",
            Database::Figure11 => "fig11",
        }
    }

    /// What version `v` runs experiment `e` on (`None`: it does not).
    fn of(v: Version, e: Experiment) -> Option<Database> {
        match (v.raw(), e) {
            (true, Experiment::Figure11 { .. }) => None,
            (true, _) => Some(Database::Baselines),
            (false, Experiment::Figure11 { .. }) => Some(Database::Figure11),
            (false, _) => Some(Database::Mapped),
        }
    }
}

/// A run's labelled result: version, parts, experiment, round, and what
/// the child measured.
pub type Labelled = (Version, u32, Experiment, usize, ChildRun);

/// Runs every experiment of every version; returns the report and the
/// problems found (wrong answers, failed children).
pub fn run(config: &EpvmConfig) -> Result<(EpvmReport, Vec<String>), BenchError> {
    if config.rounds == 0 {
        return Err(BenchError::Usage("--rounds must be at least 1".into()));
    }
    if let Some(bad) = config
        .experiments
        .iter()
        .find(|e| !EXPERIMENTS.contains(&e.as_str()))
    {
        return Err(BenchError::Usage(format!(
            "unknown experiment {bad:?}; known: {}",
            EXPERIMENTS.join(", ")
        )));
    }
    let workspace = Workspace::with_prefix(config.dir.as_deref(), "amber-epvm-")?;
    let load_before = procfs::load_average();
    let mut builds = Vec::new();
    let mut runs: Vec<Labelled> = Vec::new();
    let mut problems = Vec::new();
    for &parts in &config.parts {
        let (params, data) = generate_for("epvm", parts, config.seed)?;
        let root = workspace.root().join(format!("{parts}"));
        let experiments = config.experiments_for(parts);
        let base = |d: Database| root.join(d.name());
        for d in [Database::Baselines, Database::Mapped, Database::Figure11] {
            let wanted = experiments
                .iter()
                .any(|&e| (config.versions.iter()).any(|&v| Database::of(v, e) == Some(d)));
            if !wanted {
                continue;
            }
            let dir = base(d);
            reset_dir(&dir)?;
            let start = Instant::now();
            let pages = with_progress_of(
                "epvm",
                &format!("building the {} database of {parts} parts", d.name()),
                || match d {
                    Database::Baselines => rawdb::build(&dir, &data),
                    Database::Mapped => mapped::build::<schema::Oo1>(&dir, &data),
                    Database::Figure11 => mapped::build::<schema::Fig11>(&dir, &data),
                },
            )
            .map_err(|e| BenchError::engine(d.name(), "building", e))?;
            sync_tree(&dir)?;
            builds.push(report::Build {
                database: d.name(),
                parts,
                pages,
                build_ms: start.elapsed().as_secs_f64() * 1e3,
            });
        }
        let expected: Vec<_> = experiments
            .iter()
            .map(|&e| {
                let (job, protocol) = child::job_of(e);
                expected_answers(&data, job, protocol)
            })
            .collect::<Result<_, _>>()?;
        let run_dir = root.join("run");
        for round in 1..=config.rounds {
            for (&experiment, want) in experiments.iter().zip(&expected) {
                for &version in &config.versions {
                    let Some(d) = Database::of(version, experiment) else {
                        continue;
                    };
                    reset_dir(&run_dir)?;
                    copy_tree(&base(d), &run_dir)?;
                    let request = ChildRequest {
                        version,
                        params,
                        experiment,
                        pool_pages: config.pool_pages,
                        dir: run_dir.clone(),
                    };
                    let label = format!(
                        "round {round}/{}: {parts} parts, {}, {version}",
                        config.rounds,
                        experiment.label()
                    );
                    let job = experiment.label();
                    let run: Option<ChildRun> = run_checked(
                        "epvm",
                        &config.child_args,
                        &request,
                        (&label, version.name(), &job),
                        |run| child::check(&label, run, want, experiment),
                        &mut problems,
                    );
                    if let Some(run) = run {
                        runs.push((version, parts, experiment, round, run));
                    }
                }
            }
        }
    }
    let report = EpvmReport::new(
        config,
        &builds,
        &runs,
        load_before,
        procfs::load_average(),
        workspace.root(),
    );
    Ok((report, problems))
}
