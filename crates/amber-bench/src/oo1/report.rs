//! The OO1 report: the JSON contract (result rows, engines, the recorded
//! choices). [`super::table`] prints it.

use serde::Serialize;

use super::amber_engine::schema::CHUNK;
use super::args::Oo1Args;
use super::child::JobResult;
use super::database::{BUILD_SPAN, BUILD_START, GeneratedDb, LOCAL_PROBABILITY};
use super::engine::EngineInfo;
use super::harness::Unavailable;
use super::ops::{INSERT_PARTS, Job, LOOKUP_IDS, Op, Phase, Protocol, UPDATE_PROBABILITIES};
use super::table::RowKey;
use crate::{procfs, sys};

/// Whether cold iterations found the database files in the OS page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ColdCache {
    #[serde(rename = "os-cached")]
    OsCached,
    #[serde(rename = "dropped")]
    Dropped,
}

impl ColdCache {
    /// `os-cached` or `dropped`, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            ColdCache::OsCached => "os-cached",
            ColdCache::Dropped => "dropped",
        }
    }
}

/// One engine's database, as built.
#[derive(Clone, Debug)]
pub struct BuildInfo {
    pub info: EngineInfo,
    pub build_ms: f64,
    pub db_bytes: u64,
}

/// The `locality` member: the (choice) of BENCHMARKS.md, spelled out.
#[derive(Clone, Debug, Serialize)]
pub struct LocalityJson {
    pub description: String,
    pub probability: f64,
    pub window: u32,
    pub rule: &'static str,
    pub self_loops: &'static str,
}

/// One choice made where BENCHMARKS.md is silent.
#[derive(Clone, Debug, Serialize)]
pub struct Choice {
    pub what: &'static str,
    pub choice: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct MachineJson {
    pub cpu: String,
    pub cores: usize,
    pub mem_total_kib: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProtocolJson {
    pub cold: usize,
    pub warm: usize,
    pub hot: usize,
    pub ms: &'static str,
    pub ms_reported: &'static str,
    pub update_p: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EngineJson {
    pub name: &'static str,
    pub summary: &'static str,
    /// How the graph is laid out (normalised, inline, …): [`EngineInfo::schema`].
    pub schema: &'static str,
    /// What a commit syncs: [`EngineInfo::durability`].
    pub durability: &'static str,
    /// The installation forced before the amortized figures are taken:
    /// [`EngineInfo::install`].
    pub install: &'static str,
    pub cache_budget: bool,
    pub build_ms: f64,
    pub db_bytes: u64,
    /// The largest `VmHWM` of the engine's measured processes.
    pub peak_rss_kib: Option<u64>,
}

/// One result row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub engine: String,
    pub op: Op,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// For `op: "open"`: `open`, `open+lookup` or `open+traversal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'static str>,
    /// The median over the phase's iterations (cold: the single value); with
    /// several rounds, the median of the rounds' values.
    pub ms: f64,
    /// OO1's figure: cold, the tenth (last warm) iteration, the mean of the hot
    /// ones; with several rounds, the median of the rounds' figures.
    pub ms_reported: f64,
    /// `ms` of each round, in order (filled in by `merge_rounds`).
    pub ms_rounds: Vec<f64>,
    /// Every iteration of the phase, in order, round after round.
    pub ms_all: Vec<f64>,
    /// Parts visited or inserted, in the iteration `ms_reported` refers to
    /// (hot: every hot iteration has the same input).
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<u64>,
    /// Median over the phase of `write_bytes` of `/proc/self/io` around each
    /// committing iteration: bytes written per commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_written: Option<u64>,
    /// The same for `wchar` (bytes passed to write calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wchar: Option<u64>,
    /// The same for the bytes the database's block device received
    /// (`/sys/dev/block/…/stat`; machine-wide, so other processes add noise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
    /// Median over the phase of the log bytes of each commit by the engine's
    /// own account (Amber's `CommitStats::log_bytes`), for engines that count it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
}

/// One committing job of one engine, amortized: its commits as the benchmark
/// runs them (cold, warm and hot iterations, in one process), then the
/// engine's installation work forced ([`Engine::install`]), and every byte
/// written and every millisecond spent divided by the number of commits.
/// With several rounds, each figure is the median of the rounds' figures.
///
/// [`Engine::install`]: super::engine::Engine::install
#[derive(Clone, Debug, Serialize)]
pub struct AmortizedRow {
    pub engine: String,
    pub op: Op,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// The commits the totals are divided by (one per iteration).
    pub commits: u64,
    /// Bytes the process passed to write calls (`wchar`) from just before
    /// the first iteration to just after the installation — log, page file
    /// and metadata, whenever the engine wrote them — per commit.
    pub amortized_bytes_per_commit: Option<u64>,
    /// The whole job's time (every operation, with its commit) plus the
    /// installation, per commit, ms.
    pub amortized_ms_per_commit: f64,
    /// The bytes the database's block device received over the same span
    /// (the file system's journal and block rounding included; machine-wide,
    /// so other processes' writes add noise), per commit; `None` where the
    /// device has no statistics (tmpfs).
    pub amortized_device_bytes_per_commit: Option<u64>,
    /// The same span's `write_bytes` (page-cache folios dirtied) per commit.
    pub amortized_write_bytes_per_commit: Option<u64>,
    /// Time of the installation alone, ms.
    pub install_ms: f64,
    /// `amortized_ms_per_commit` of each round, in order.
    pub amortized_ms_per_commit_rounds: Vec<f64>,
}

/// Everything `amber bench oo1` reports; serialises to the JSON contract.
#[derive(Clone, Debug, Serialize)]
pub struct Oo1Report {
    pub benchmark: &'static str,
    pub parts: u32,
    pub seed: u64,
    pub locality: LocalityJson,
    pub choices: Vec<Choice>,
    pub cold_cache: ColdCache,
    pub kernel: String,
    pub machine: MachineJson,
    pub protocol: ProtocolJson,
    pub cache_mib: Option<u64>,
    pub engines: Vec<EngineJson>,
    /// Sweeps over every engine and job (`--rounds`); each row merges them.
    pub rounds: u32,
    pub results: Vec<Row>,
    /// Per engine and committing job: bytes and time per commit with the
    /// installation work included.
    pub amortized: Vec<AmortizedRow>,
    pub answers_match: bool,
    pub problems: Vec<String>,
    /// Engines left out because they cannot run on this machine, and why.
    pub unavailable: Vec<Unavailable>,
    #[serde(skip)]
    jobs: Vec<Job>,
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median_u64(values: &[u64]) -> Option<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len().checked_sub(1)? / 2).copied()
}

/// The rows of one job's result.
fn rows_of(result: &JobResult, protocol: Protocol) -> Vec<Row> {
    let mut rows = Vec::new();
    let job = result.job;
    let its = &result.iterations;
    let row = |op, phase, detail, ms: f64, count, ms_all: Vec<f64>| Row {
        engine: result.engine.clone(),
        op,
        phase,
        p: None,
        detail,
        ms,
        ms_reported: ms,
        ms_rounds: Vec::new(),
        ms_all,
        count,
        changed: None,
        bytes_written: None,
        wchar: None,
        device_bytes: None,
        log_bytes: None,
        peak_rss_kib: result.peak_rss_kib,
    };
    if job.op == Op::Open {
        rows.push(row(
            Op::Open,
            Phase::Cold,
            Some("open"),
            result.open_ms,
            0,
            vec![result.open_ms],
        ));
        if let Some(first) = its.first() {
            let ms = result.open_ms + first.ms;
            rows.push(row(
                Op::Open,
                Phase::Cold,
                Some("open+lookup"),
                ms,
                first.answer.count,
                vec![ms],
            ));
        }
        return rows;
    }
    for phase in Phase::ALL {
        let idx: Vec<usize> = (0..its.len())
            .filter(|&i| protocol.phase(i) == phase)
            .collect();
        let (Some(&first), Some(&last)) = (idx.first(), idx.last()) else {
            continue;
        };
        let ms_all: Vec<f64> = idx.iter().map(|&i| its[i].ms).collect();
        let reported_index = if phase == Phase::Hot { first } else { last };
        let ms_reported = match phase {
            Phase::Hot => ms_all.iter().sum::<f64>() / ms_all.len() as f64,
            _ => its[last].ms,
        };
        let answer = its[reported_index].answer;
        let ios: Vec<_> = idx.iter().filter_map(|&i| its[i].io).collect();
        rows.push(Row {
            engine: result.engine.clone(),
            op: job.op,
            phase,
            p: job.p,
            detail: None,
            ms: median(&ms_all),
            ms_reported,
            ms_rounds: Vec::new(),
            ms_all,
            count: answer.count,
            changed: (job.op.commits()).then_some(answer.changed),
            bytes_written: median_u64(&ios.iter().map(|d| d.write_bytes).collect::<Vec<_>>()),
            wchar: median_u64(&ios.iter().map(|d| d.wchar).collect::<Vec<_>>()),
            device_bytes: median_u64(
                &ios.iter()
                    .filter_map(|d| d.device_bytes)
                    .collect::<Vec<_>>(),
            ),
            log_bytes: median_u64(
                &idx.iter()
                    .filter_map(|&i| its[i].log_bytes)
                    .collect::<Vec<_>>(),
            ),
            peak_rss_kib: result.peak_rss_kib,
        });
    }
    if job.op == Op::Traversal
        && let Some(first) = its.first()
    {
        let ms = result.open_ms + first.ms;
        rows.push(row(
            Op::Open,
            Phase::Cold,
            Some("open+traversal"),
            ms,
            first.answer.count,
            vec![ms],
        ));
    }
    rows
}

/// Merges the rows of the same cell from several rounds (in the order the
/// cells first appear): times and byte counts become medians over the rounds,
/// peak RSS the largest. Counts agree across rounds (every round's answers
/// are checked against the reference).
fn merge_rounds(rows: Vec<Row>) -> Vec<Row> {
    let mut cells: Vec<Vec<Row>> = Vec::new();
    for row in rows {
        let same = |r: &Row| {
            r.engine == row.engine
                && r.op == row.op
                && r.phase == row.phase
                && r.p == row.p
                && r.detail == row.detail
        };
        match cells.iter_mut().find(|c| same(&c[0])) {
            Some(cell) => cell.push(row),
            None => cells.push(vec![row]),
        }
    }
    cells
        .into_iter()
        .map(|cell| {
            let bytes = |f: fn(&Row) -> Option<u64>| {
                median_u64(&cell.iter().filter_map(f).collect::<Vec<_>>())
            };
            let ms_rounds: Vec<f64> = cell.iter().map(|r| r.ms).collect();
            Row {
                ms: median(&ms_rounds),
                ms_reported: median(&cell.iter().map(|r| r.ms_reported).collect::<Vec<_>>()),
                ms_all: cell.iter().flat_map(|r| r.ms_all.iter().copied()).collect(),
                bytes_written: bytes(|r| r.bytes_written),
                wchar: bytes(|r| r.wchar),
                device_bytes: bytes(|r| r.device_bytes),
                log_bytes: bytes(|r| r.log_bytes),
                peak_rss_kib: cell.iter().filter_map(|r| r.peak_rss_kib).max(),
                ms_rounds,
                ..cell[0].clone()
            }
        })
        .collect()
}

/// The amortized row of one job's result, if it committed.
fn amortized_of(result: &JobResult) -> Option<AmortizedRow> {
    let a = result.amortized.as_ref()?;
    let commits = a.commits.max(1);
    let per = |bytes: u64| (bytes as f64 / commits as f64).round() as u64;
    let ms = a.total_ms / commits as f64;
    Some(AmortizedRow {
        engine: result.engine.clone(),
        op: result.job.op,
        p: result.job.p,
        commits: a.commits,
        amortized_bytes_per_commit: a.io.map(|io| per(io.wchar)),
        amortized_ms_per_commit: ms,
        amortized_device_bytes_per_commit: a.io.and_then(|io| io.device_bytes).map(per),
        amortized_write_bytes_per_commit: a.io.map(|io| per(io.write_bytes)),
        install_ms: a.install_ms,
        amortized_ms_per_commit_rounds: vec![ms],
    })
}

/// Merges the amortized rows of the same engine and job from several rounds
/// into medians (in the order they first appear).
fn merge_amortized(rows: Vec<AmortizedRow>) -> Vec<AmortizedRow> {
    let mut cells: Vec<Vec<AmortizedRow>> = Vec::new();
    for row in rows {
        let same = |r: &AmortizedRow| r.engine == row.engine && r.op == row.op && r.p == row.p;
        match cells.iter_mut().find(|c| same(&c[0])) {
            Some(cell) => cell.push(row),
            None => cells.push(vec![row]),
        }
    }
    cells
        .into_iter()
        .map(|cell| {
            let bytes = |f: fn(&AmortizedRow) -> Option<u64>| {
                median_u64(&cell.iter().filter_map(f).collect::<Vec<_>>())
            };
            let ms_rounds: Vec<f64> = cell.iter().map(|r| r.amortized_ms_per_commit).collect();
            AmortizedRow {
                amortized_bytes_per_commit: bytes(|r| r.amortized_bytes_per_commit),
                amortized_ms_per_commit: median(&ms_rounds),
                amortized_device_bytes_per_commit: bytes(|r| r.amortized_device_bytes_per_commit),
                amortized_write_bytes_per_commit: bytes(|r| r.amortized_write_bytes_per_commit),
                install_ms: median(&cell.iter().map(|r| r.install_ms).collect::<Vec<_>>()),
                amortized_ms_per_commit_rounds: ms_rounds,
                ..cell[0].clone()
            }
        })
        .collect()
}

/// How the harness measures an engine whose work a server does in other
/// processes (OO1's and OO7's `servers` choice).
pub const SERVERS: &str = "postgres runs a PostgreSQL server the engine starts itself, one per measured process, on that process's copy of the database (so the cold iteration meets a fresh server: an empty buffer pool, the files in the OS page cache as the other engines find theirs), and stops at the end (open times include the start); its bytes written are the server's: wchar and write_bytes of /proc/PID/io of the postmaster (whose counters include those of the backends it has reaped) plus those of its live child processes, read in place of the client's, whose writes are requests to a socket; its peak RSS is the client's VmHWM plus the server's processes' proportional set sizes (Pss of /proc/PID/smaps_rollup: shared buffers counted once) read at the end of the job, before the server stops";

/// Every (choice) the results depend on, as recorded in the JSON.
fn choices(protocol: Protocol) -> Vec<Choice> {
    let c = |what, choice: String| Choice { what, choice };
    vec![
        c("part and connection kind", "one of 10 values \"type000\"..\"type009\", NUL-padded to 10 bytes (the OO7 spelling)".into()),
        c("build date", format!("Unix seconds uniform in [{BUILD_START}, {}) = [2010-01-01, 2020-01-01)", BUILD_START + BUILD_SPAN)),
        c("random generator", "xoshiro256** seeded through SplitMix64; the database is one stream, each iteration's input its own stream derived from (seed, op, iteration)".into()),
        c("random parts", format!("ids uniform in 1..=N of the original database; lookups fetch {LOOKUP_IDS} ids drawn with replacement")),
        c("traversal", "depth-first pre-order, outgoing connections in slot (creation) order, root at depth 0, depth 7, no visited set: 3280 visits".into()),
        c("reverse traversal", "the same walk along incoming connections, one step per connection (a part connecting twice is visited twice); the checksum is order-insensitive".into()),
        c("update", "visit v of iteration i increments x and y by 1 when u(seed, i, v) < p, u uniform in [0,1) and shared by all p (same roots for every p; updated sets nested in p); a visit reads the part before incrementing it; one commit per traversal".into()),
        c("update probabilities", format!("{UPDATE_PROBABILITIES:?} (BENCHMARKS.md's set)")),
        c("insert", format!("{INSERT_PARTS} parts with the next ids, 3 connections each by the locality rule with the original W over ids 1..=last id of the batch (a part may connect within its batch); every iteration, hot ones included, inserts a fresh batch because ids cannot repeat")),
        c("isolation between operations", "every operation (and every p) runs in its own process on a fresh copy of the engine's freshly built database, so results do not depend on the order of operations".into()),
        c("cold", "iteration 1 in a new process right after opening; the files come from the OS page cache unless cold_cache is \"dropped\"".into()),
        c("hot", format!("{} repetitions of the last warm iteration's input", protocol.hot)),
        c("bytes per commit", "read before and after each committing iteration (the timed operation, which ends with the commit), median over the phase: bytes_written = write_bytes and wchar = wchar of /proc/self/io, device_bytes = sectors written × 512 of the database's block device (machine-wide). On kernels with large page-cache folios (ext4, Linux 6.x) write_bytes counts every folio a write dirties, up to 2 MiB for a 4 KiB write into a cached file, so it overstates in-place writers; wchar and device_bytes do not, but amber-sigsegv's wchar also counts the pages it installs during the operation (a pwrite into the memfd behind its frames, not I/O to the database); log_bytes is the engine's own count of what its commit appended to its log (Amber) or wrote to its WAL (PostgreSQL: the WAL insert position read with BEGIN and with COMMIT). For an engine with a server (postgres) every counter but device_bytes is the server's: its processes' (see servers)".into()),
        c("amortized per commit", "a committing job (insert, or update at one p) runs its commits as above (cold, warm and hot iterations in one process, one commit each), then the engine's installation work is forced (engines[].install: Amber Db::checkpoint(), SQLite PRAGMA wal_checkpoint(TRUNCATE), PostgreSQL CHECKPOINT; none for LMDB, redb and snapshot, whose commits write their files in place, nor for memory); every byte written from before the first iteration to after the installation, and all that time (the operations, not only their commits, plus the installation), are divided by the number of commits (amortized[].commits). amortized_bytes_per_commit counts the bytes the process passed to write calls (wchar of /proc/self/io: log, page file and metadata, as the engine wrote them; every engine here writes its files with write calls, none through a writable mapping); amortized_device_bytes_per_commit counts what the database's block device received over the same span (the file system's journal and block rounding included; machine-wide, so only meaningful on a quiet machine) and amortized_write_bytes_per_commit the page-cache folios dirtied. amber-sigsegv's wchar also counts the pages it installs into the memfd behind its frames (the cold iteration's faults above all), which is not I/O to the database and makes its figure larger, never smaller".into()),
        c("durability", "every engine that persists syncs each commit before it returns (engines[].durability says how; SQLite's synchronous = FULL is checked at open, PostgreSQL's fsync, synchronous_commit, full_page_writes and wal_sync_method on every connection, LMDB's flags at compile time); memory persists nothing and is the speed limit".into()),
        c("servers", SERVERS.into()),
        c("schemas", "engines[].schema says how each engine lays out the graph: normalised engines keep parts and connections apart (a traversal step is a lookup of the connections, then one of the part), inline ones keep a part's connections with it (a step is one lookup, or for Amber and memory one pointer load)".into()),
        c("open", "open: EngineFactory::open alone; open+lookup: open plus a lookup of one part; open+traversal: open plus the cold traversal (same process)".into()),
        c("amber schema", format!("Amber's engines store OO1 in the shape of the memory engine's arena: a part object holds its 3 outgoing connections inline (a nested persistent struct: target PRef<Part>, kind, length) and incoming: PVec<PRef<Part>> of the parts connecting to it (one element per connection, (from, slot) order); no connection objects, so a traversal step is one dependent load as in memory; the id index has two levels: the root's PVec<PRef<Chunk>>, each chunk an array of {CHUNK} Option<PRef<Part>> (part id i is chunks[(i-1)/{CHUNK}].parts[(i-1)%{CHUNK}]), so that opening and a first lookup fault in the same few pages whatever N is")),
        c("rounds", "the engines' databases are built once; each round then runs every engine's jobs in turn (engine by engine, in column order), and each cell is the median over the rounds, so that a stretch of outside noise lasting a few seconds moves at most one round of a cell".into()),
        c("answers", "every iteration's (count, changed, checksum) and untimed reads after inserts and updates are compared with a reference evaluator; any difference fails the run".into()),
    ]
}

impl Oo1Report {
    /// Assembles the report of a run.
    pub fn new(
        args: &Oo1Args,
        db: &GeneratedDb,
        cold_cache: ColdCache,
        builds: &[BuildInfo],
        jobs: &[Job],
        results: &[JobResult],
        problems: &[String],
    ) -> Oo1Report {
        let window = db.params.locality().window;
        let engines = builds
            .iter()
            .map(|b| EngineJson {
                name: b.info.name,
                summary: b.info.summary,
                schema: b.info.schema,
                durability: b.info.durability,
                install: b.info.install,
                cache_budget: b.info.cache_budget,
                build_ms: b.build_ms,
                db_bytes: b.db_bytes,
                peak_rss_kib: results
                    .iter()
                    .filter(|r| r.engine == b.info.name)
                    .filter_map(|r| r.peak_rss_kib)
                    .max(),
            })
            .collect();
        Oo1Report {
            benchmark: "oo1",
            parts: db.params.parts,
            seed: db.params.seed,
            locality: LocalityJson {
                description: format!(
                    "each connection independently goes with probability {LOCAL_PROBABILITY} to a part chosen uniformly from the closest 1% of ids (W = N/100 = {window}), otherwise to a uniformly chosen part"
                ),
                probability: LOCAL_PROBABILITY,
                window,
                rule: "lo = clamp(id - W/2, 1, N - W + 1), window [lo, lo + W - 1]",
                self_loops: "a target equal to the part itself is redrawn in the same branch (the 0.9/0.1 coin is not tossed again)",
            },
            choices: choices(args.protocol),
            cold_cache,
            kernel: sys::kernel(),
            machine: MachineJson {
                cpu: procfs::cpu_model(),
                cores: procfs::cores(),
                mem_total_kib: procfs::mem_total_kib(),
            },
            protocol: ProtocolJson {
                cold: 1,
                warm: args.protocol.warm,
                hot: args.protocol.hot,
                ms: "median over the phase's iterations (cold: the single value); then the median over the rounds (ms_rounds)",
                ms_reported: "cold: iteration 1; warm: the last warm iteration (the tenth); hot: the mean of the hot iterations; then the median over the rounds",
                update_p: UPDATE_PROBABILITIES.to_vec(),
            },
            cache_mib: args.cache_mib,
            engines,
            rounds: args.rounds,
            results: merge_rounds(
                results
                    .iter()
                    .flat_map(|r| rows_of(r, args.protocol))
                    .collect(),
            ),
            amortized: merge_amortized(results.iter().filter_map(amortized_of).collect()),
            answers_match: problems.is_empty(),
            problems: problems.to_vec(),
            unavailable: Vec::new(),
            jobs: jobs.to_vec(),
        }
    }

    /// The engines that were built, in column order.
    pub fn engine_names(&self) -> Vec<&'static str> {
        self.engines.iter().map(|e| e.name).collect()
    }

    /// The row keys of the table, in order: `(op, p, phase, detail, label)`.
    pub fn row_keys(&self) -> Vec<RowKey> {
        let mut keys = Vec::new();
        for job in self.jobs.iter().filter(|j| j.op != Op::Open) {
            for phase in Phase::ALL {
                keys.push(RowKey {
                    op: job.op,
                    p: job.p,
                    phase,
                    detail: None,
                });
            }
        }
        let mut details = Vec::new();
        if self.jobs.iter().any(|j| j.op == Op::Open) {
            details.extend(["open", "open+lookup"]);
        }
        if self.jobs.iter().any(|j| j.op == Op::Traversal) {
            details.push("open+traversal");
        }
        for d in details {
            keys.push(RowKey {
                op: Op::Open,
                p: None,
                phase: Phase::Cold,
                detail: Some(d),
            });
        }
        keys
    }

    /// The amortized row of `engine` for the committing job of `key`.
    pub fn amortized_row(&self, engine: &str, key: &RowKey) -> Option<&AmortizedRow> {
        self.amortized
            .iter()
            .find(|r| r.engine == engine && r.op == key.op && r.p == key.p)
    }

    /// The row of `engine` for `key`.
    pub fn row(&self, engine: &str, key: &RowKey) -> Option<&Row> {
        self.results.iter().find(|r| {
            r.engine == engine
                && r.op == key.op
                && r.p == key.p
                && r.phase == key.phase
                && r.detail == key.detail
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median_u64(&[5, 1, 3]), Some(3));
        assert_eq!(median_u64(&[]), None);
    }
}
