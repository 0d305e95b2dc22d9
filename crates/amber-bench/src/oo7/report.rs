//! The OO7 report: the JSON contract, the printed table, and the issue's
//! targets computed as ratios of cells measured in the same run.
//!
//! The JSON is `{benchmark: "oo7", size, modules, seed, engines, results:
//! [{engine, op, phase, ms, count, checksum, bytes_written?,
//! amortized_bytes_per_commit?, tx_per_s?}], peak_rss_kib: {engine: KiB}}`
//! plus what a reader needs to interpret it (parameters, protocol, rounds,
//! builds, targets, the recorded choices, the machine, the problems). The
//! strategies and client-server issues add `scheme`, `clients` and `cache`
//! to the rows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::args::Oo7Args;
use super::child::JobResult;
use super::engine::EngineInfo;
use super::ops::{Op, Phase, Protocol};
use super::params::Params;
use crate::oo1::harness::Unavailable;
use crate::oo1::table::{fmt_bytes, fmt_ms};
use crate::sys;

/// One engine's database as built.
#[derive(Clone, Debug)]
pub struct Build {
    pub info: EngineInfo,
    /// The engine whose database this is (itself, or the engine a scheme
    /// engine opens the build of).
    pub shares: &'static str,
    pub build_ms: f64,
    pub db_bytes: u64,
}

/// An engine of the run.
#[derive(Clone, Debug, Serialize)]
pub struct EngineJson {
    #[serde(flatten)]
    pub info: EngineInfo,
    pub build_ms: f64,
    pub db_bytes: u64,
}

/// One cell: an engine's operation in one phase, the median over rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub engine: String,
    /// `--schemes`: the update strategy the engine ran under (its name's
    /// part after `/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// An operation's name, or `open` (the time to open the database, in
    /// the T1 job's process, or the first job's).
    pub op: String,
    pub phase: &'static str,
    pub ms: f64,
    pub count: u64,
    pub checksum: u64,
    /// Committing operations: the bytes the process passed to write calls
    /// around each iteration (`wchar`), median over the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_written: Option<u64>,
    /// Committing operations: the engine's own count of its last commit's
    /// log bytes (Amber), median over the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
    /// Committing operations: every byte written from before the first
    /// iteration to after the forced installation, per commit (the same
    /// for the three phases of a job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amortized_bytes_per_commit: Option<u64>,
    /// One transaction per iteration: 1,000 / ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_per_s: Option<f64>,
    /// `ms` of each round, in order.
    pub ms_rounds: Vec<f64>,
}

/// One target of the issue, as measured.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub what: String,
    /// The measured ratio.
    pub ratio: f64,
    /// The bound the ratio must meet: `<= 1.15`, `>= 30`, `< 1`.
    pub goal: String,
    pub met: bool,
}

/// A choice made where BENCHMARKS.md is silent.
#[derive(Clone, Debug, Serialize)]
pub struct Choice {
    pub what: &'static str,
    pub choice: &'static str,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Oo7Report {
    pub benchmark: &'static str,
    pub size: String,
    pub modules: u32,
    pub seed: u64,
    pub params: Params,
    pub protocol: Protocol,
    pub rounds: u32,
    pub cache_mib: Option<u64>,
    pub engines: Vec<EngineJson>,
    pub results: Vec<Row>,
    pub peak_rss_kib: BTreeMap<String, u64>,
    pub targets: Vec<Target>,
    pub choices: Vec<Choice>,
    pub machine: String,
    pub kernel: String,
    pub problems: Vec<String>,
    /// Engines left out because they cannot run on this machine, and why.
    pub unavailable: Vec<Unavailable>,
}

/// The scheme of an `ENGINE/SCHEME` engine.
fn scheme_of(engine: &str) -> Option<String> {
    engine.split_once('/').map(|(_, s)| s.to_string())
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_u64(v: &mut [u64]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The choices every result depends on.
pub const CHOICES: &[Choice] = &[
    Choice {
        what: "T2 update",
        choice: "QuickStore's: x and y are incremented by 1 (not swapped), so that repeated updates always change the object; T2c increments 4 times per visit, 4 updates",
    },
    Choice {
        what: "T3 update",
        choice: "build_date ^= 1 (toggles between 2k and 2k+1, staying in its range), the part moved in the build-date index at each toggle; T3c toggles 4 times",
    },
    Choice {
        what: "T4/T5",
        choice: "per composite-part visit of the traversal (documents visited once per bag entry): T4 counts the 'I's of the document; T5 replaces a leading \"I am\" by \"This is\" or the reverse (the text grows or shrinks by 3 bytes)",
    },
    Choice {
        what: "T7",
        choice: "10 random atomic parts per iteration; from each up to its composite part, every base assembly of used_in_priv and used_in_shar, its super assemblies to the design root and the module",
    },
    Choice {
        what: "T8/T9",
        choice: "T8 counts the 'I's of the module's manual; T9 answers whether its first and last bytes are equal",
    },
    Choice {
        what: "modules",
        choice: "iteration i of a traversal, T4, T5, T8 or T9 works on module 1 + (i mod modules); queries cover the whole database",
    },
    Choice {
        what: "Q1",
        choice: "10 atomic parts drawn uniformly from the database's ids",
    },
    Choice {
        what: "Q2/Q3",
        choice: "a range of 10 (1%) / 100 (10%) consecutive build dates placed uniformly in [1000, 1999] per iteration, read through the build-date index",
    },
    Choice {
        what: "Q4",
        choice: "100 titles of composite parts drawn uniformly; per title the document through the title index, then every base assembly of its composite part's used_in_priv and used_in_shar (one per bag entry)",
    },
    Choice {
        what: "Q5/Q6",
        choice: "a base assembly uses the composite parts of both its bags; Q6 counts base and complex assemblies, a complex assembly using every composite part below it, each compared with its own build date",
    },
    Choice {
        what: "Q8",
        choice: "every atomic part joined to the document whose id is its doc_id (through the composite part id index; document id = composite part id)",
    },
    Choice {
        what: "insert/delete",
        choice: "5 new composite parts (ids and atomic ids after the database's, fresh in every iteration), each added to the components_priv of a random base assembly; the delete job inserts 5 untimed (own commit) and deletes them timed: unlinked from every bag and index and freed",
    },
    Choice {
        what: "connections",
        choice: "connection 0 of part i goes to part (i+1) mod n; the others to a part drawn uniformly from the same composite part, the part itself included",
    },
    Choice {
        what: "protocol",
        choice: "per operation a new process on a pristine copy: iteration 1 cold, `warm` warm iterations on new inputs, `hot` iterations repeating the last warm input (inserts and deletes take fresh ids); cold is iteration 1, warm and hot the mean of their iterations; each cell the median over rounds",
    },
    Choice {
        what: "answers",
        choice: "count and a wrapping sum of a hash per object read (order-free); every iteration and the post checks (T1 and T4 of every module, Q7, a date range across the T3 toggles, the inserted parts and titles) must equal the in-memory model's",
    },
    Choice {
        what: "bytes",
        choice: "bytes_written = wchar of /proc/self/io around each committing iteration (median over the phase), or of the server's processes for an engine with a server (see servers); amortized_bytes_per_commit = wchar from before the first iteration to after the forced installation (Amber checkpoint, SQLite wal_checkpoint(TRUNCATE), PostgreSQL CHECKPOINT) divided by the commits; log_bytes = the engine's own count of its commit's log (Amber) or WAL (PostgreSQL)",
    },
    Choice {
        what: "servers",
        choice: crate::oo1::report::SERVERS,
    },
    Choice {
        what: "tiny",
        choice: "5 atomic parts per composite, 20 composites per module, 3 assembly levels (4 complex, 9 base assemblies), 200-byte documents, 1,000-byte manual: for tests and CI",
    },
];

impl Oo7Report {
    /// The report of a run.
    pub fn new(
        args: &Oo7Args,
        builds: &[Build],
        results: &[(u32, JobResult)],
        problems: &[String],
    ) -> Oo7Report {
        let params = args.params();
        let mut rows = Vec::new();
        let mut peak = BTreeMap::new();
        for b in builds {
            let name = b.info.name;
            let mine: Vec<&JobResult> = results
                .iter()
                .map(|(_, r)| r)
                .filter(|r| r.engine == name)
                .collect();
            for r in &mine {
                if let Some(k) = r.peak_rss_kib {
                    let e = peak.entry(name.to_string()).or_insert(0);
                    *e = (*e).max(k);
                }
            }
            let open_op = if args.ops.contains(&Op::T1) {
                Op::T1
            } else {
                args.ops[0]
            };
            let mut open: Vec<f64> = mine
                .iter()
                .filter(|r| r.op == open_op)
                .map(|r| r.open_ms)
                .collect();
            if !open.is_empty() {
                let ms_rounds = open.clone();
                rows.push(Row {
                    engine: name.to_string(),
                    scheme: scheme_of(name),
                    op: "open".into(),
                    phase: "cold",
                    ms: median(&mut open),
                    count: 0,
                    checksum: 0,
                    bytes_written: None,
                    log_bytes: None,
                    amortized_bytes_per_commit: None,
                    tx_per_s: None,
                    ms_rounds,
                });
            }
            for &op in &args.ops {
                let jobs: Vec<&&JobResult> = mine.iter().filter(|r| r.op == op).collect();
                if jobs.is_empty() {
                    continue;
                }
                let amortized = median_u64(
                    &mut jobs
                        .iter()
                        .filter_map(|r| r.amortized.as_ref())
                        .filter_map(|a| a.io.map(|io| io.wchar / a.commits.max(1)))
                        .collect::<Vec<_>>(),
                );
                for phase in Phase::ALL {
                    let mut ms_rounds = Vec::new();
                    let mut bytes = Vec::new();
                    let mut logs = Vec::new();
                    let mut answer = None;
                    for r in &jobs {
                        let its: Vec<_> = r
                            .iterations
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| args.protocol.phase(*i) == phase)
                            .map(|(_, it)| it)
                            .collect();
                        let Some(last) = its.last() else { continue };
                        ms_rounds.push(mean(&its.iter().map(|it| it.ms).collect::<Vec<_>>()));
                        bytes.extend(its.iter().filter_map(|it| it.io.map(|io| io.wchar)));
                        logs.extend(its.iter().filter_map(|it| it.log_bytes));
                        answer = Some(last.answer);
                    }
                    let Some(answer) = answer else { continue };
                    let ms = median(&mut ms_rounds.clone());
                    rows.push(Row {
                        engine: name.to_string(),
                        scheme: scheme_of(name),
                        op: op.name().to_string(),
                        phase: phase.name(),
                        ms,
                        count: answer.count,
                        checksum: answer.checksum,
                        bytes_written: median_u64(&mut bytes),
                        log_bytes: median_u64(&mut logs),
                        amortized_bytes_per_commit: amortized,
                        tx_per_s: (ms > 0.0).then(|| 1e3 / ms),
                        ms_rounds,
                    });
                }
            }
        }
        let mut report = Oo7Report {
            benchmark: "oo7",
            size: args.size.name().to_string(),
            modules: params.modules,
            seed: params.seed,
            params,
            protocol: args.protocol,
            rounds: args.rounds,
            cache_mib: args.cache_mib,
            engines: builds
                .iter()
                .map(|b| EngineJson {
                    info: b.info.clone(),
                    build_ms: b.build_ms,
                    db_bytes: b.db_bytes,
                })
                .collect(),
            results: rows,
            peak_rss_kib: peak,
            targets: Vec::new(),
            choices: CHOICES.to_vec(),
            machine: sys::machine(),
            kernel: sys::kernel(),
            problems: problems.to_vec(),
            unavailable: Vec::new(),
        };
        report.targets = report.compute_targets();
        report
    }

    /// The row of `engine`'s `op` in `phase`.
    pub fn row(&self, engine: &str, op: &str, phase: &str) -> Option<&Row> {
        self.results
            .iter()
            .find(|r| r.engine == engine && r.op == op && r.phase == phase)
    }

    fn ms(&self, engine: &str, op: &str, phase: &str) -> Option<f64> {
        self.row(engine, op, phase).map(|r| r.ms)
    }

    fn amortized(&self, engine: &str, op: &str) -> Option<f64> {
        self.row(engine, op, "hot")
            .and_then(|r| r.amortized_bytes_per_commit)
            .map(|b| b as f64)
    }

    /// The targets, where both engines of a ratio ran.
    fn compute_targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        // `goal` is a comparison and a bound: "<=", ">=" or "<".
        let mut add = |what: String, a: Option<f64>, b: Option<f64>, goal: (&str, f64)| {
            let (Some(a), Some(b)) = (a, b) else { return };
            if b <= 0.0 {
                return;
            }
            let ratio = a / b;
            let (cmp, bound) = goal;
            let met = match cmp {
                "<=" => ratio <= bound,
                ">=" => ratio >= bound,
                _ => ratio < bound,
            };
            out.push(Target {
                what,
                ratio,
                goal: format!("{cmp} {bound}"),
                met,
            });
        };
        let hot = |e: &str, op: &str| self.ms(e, op, "hot");
        add(
            "T1 hot: amber / memory".into(),
            hot("amber", "t1"),
            hot("memory", "t1"),
            ("<=", 1.15),
        );
        for (peer, goal) in [("lmdb", 30.0), ("redb", 30.0), ("sqlite", 200.0)] {
            add(
                format!("T1 hot: {peer} / amber"),
                hot(peer, "t1"),
                hot("amber", "t1"),
                (">=", goal),
            );
        }
        add(
            "T6 hot: amber / memory".into(),
            hot("amber", "t6"),
            hot("memory", "t6"),
            ("<=", 1.5),
        );
        add(
            "Q1 hot: amber / memory".into(),
            hot("amber", "q1"),
            hot("memory", "q1"),
            ("<=", 1.5),
        );
        for peer in ["sqlite", "lmdb"] {
            for (op, goal) in [("t2a", 0.1), ("t2b", 0.5)] {
                add(
                    format!(
                        "{} amortized bytes per commit: amber / {peer}",
                        op.to_uppercase()
                    ),
                    self.amortized("amber", op),
                    self.amortized(peer, op),
                    ("<=", goal),
                );
                add(
                    format!("{} hot time: amber / {peer}", op.to_uppercase()),
                    hot("amber", op),
                    hot(peer, op),
                    ("<=", 1.0),
                );
            }
        }
        let open_t1 = |e: &str| Some(self.ms(e, "open", "cold")? + self.ms(e, "t1", "cold")?);
        add(
            "open + cold T1: amber / snapshot".into(),
            open_t1("amber"),
            open_t1("snapshot"),
            ("<", 1.0),
        );
        out
    }

    /// Engine names, in column order.
    pub fn engine_names(&self) -> Vec<&str> {
        self.engines.iter().map(|e| e.info.name).collect()
    }

    /// The printed table: ms per operation and phase, one column per engine;
    /// then bytes per commit, peak RSS, the targets and the problems.
    pub fn table(&self) -> String {
        let names = self.engine_names();
        let mut t = String::new();
        let p = &self.params;
        let _ = writeln!(
            t,
            "OO7 {} ({} module(s), {} composite parts, {} atomic parts, seed {}): ms, median of {} round(s); cold = iteration 1 in a new process, warm/hot = mean of {}/{} iterations",
            self.size,
            p.modules,
            p.composites(),
            p.atomics(),
            self.seed,
            self.rounds,
            self.protocol.warm,
            self.protocol.hot
        );
        let _ = write!(t, "{:<14}", "op");
        // A column is 14 wide, or one more than a longer engine name.
        let w: Vec<usize> = names.iter().map(|n| n.len().max(13) + 1).collect();
        for (n, w) in names.iter().zip(&w) {
            let _ = write!(t, "{n:>w$}");
        }
        t.push('\n');
        let mut keys: Vec<(String, &str)> = Vec::new();
        for r in &self.results {
            if !keys.iter().any(|(o, ph)| *o == r.op && *ph == r.phase) {
                keys.push((r.op.clone(), r.phase));
            }
        }
        for (op, phase) in &keys {
            let _ = write!(t, "{:<14}", format!("{op} {phase}"));
            for (n, w) in names.iter().zip(&w) {
                let cell = self.ms(n, op, phase).map_or("-".to_string(), fmt_ms);
                let _ = write!(t, "{cell:>w$}");
            }
            t.push('\n');
        }
        let committing: Vec<&String> = keys
            .iter()
            .filter(|(op, ph)| *ph == "hot" && Op::from_name(op).is_some_and(Op::commits))
            .map(|(op, _)| op)
            .collect();
        if !committing.is_empty() {
            let _ = writeln!(
                t,
                "\nbytes per commit (hot: written around the commit / amortized with the installation)"
            );
            for op in &committing {
                let _ = write!(t, "{:<14}", op);
                for (n, w) in names.iter().zip(&w) {
                    let r = self.row(n, op, "hot");
                    let cell = format!(
                        "{}/{}",
                        fmt_bytes(r.and_then(|r| r.bytes_written)),
                        fmt_bytes(r.and_then(|r| r.amortized_bytes_per_commit))
                    );
                    let _ = write!(t, "{cell:>w$}");
                }
                t.push('\n');
            }
        }
        let logs: Vec<&&String> = committing
            .iter()
            .filter(|op| {
                names.iter().any(|n| {
                    self.row(n, op, "hot")
                        .is_some_and(|r| r.log_bytes.is_some())
                })
            })
            .collect();
        if !logs.is_empty() {
            let _ = writeln!(t, "\nlog bytes per commit (hot, the engine's own account)");
            for op in logs {
                let _ = write!(t, "{:<14}", op);
                for (n, w) in names.iter().zip(&w) {
                    let cell = fmt_bytes(self.row(n, op, "hot").and_then(|r| r.log_bytes));
                    let _ = write!(t, "{cell:>w$}");
                }
                t.push('\n');
            }
        }
        let _ = write!(t, "\n{:<14}", "peak RSS");
        for (n, w) in names.iter().zip(&w) {
            let cell = fmt_bytes(self.peak_rss_kib.get(*n).map(|k| k * 1024));
            let _ = write!(t, "{cell:>w$}");
        }
        let _ = write!(t, "\n{:<14}", "database");
        for (e, w) in self.engines.iter().zip(&w) {
            let _ = write!(t, "{:>w$}", fmt_bytes(Some(e.db_bytes)));
        }
        t.push('\n');
        // One line per schema (the schemes of an engine share it).
        let mut schemas: Vec<(Vec<&str>, &str)> = Vec::new();
        for e in &self.engines {
            match schemas.iter_mut().find(|(_, s)| *s == e.info.schema) {
                Some((names, _)) => names.push(e.info.name),
                None => schemas.push((vec![e.info.name], e.info.schema)),
            }
        }
        for (names, schema) in schemas {
            let _ = writeln!(t, "  {}: {schema}", names.join(", "));
        }
        if !self.targets.is_empty() {
            let _ = writeln!(t, "\ntargets (ratios within this run):");
            for g in &self.targets {
                let verdict = if g.met { "met" } else { "MISSED" };
                let _ = writeln!(
                    t,
                    "  {:<52} {:>9.3} (goal {}) {verdict}",
                    g.what, g.ratio, g.goal
                );
            }
        }
        for u in &self.unavailable {
            let _ = writeln!(t, "  {}: unavailable: {}", u.engine, u.reason);
        }
        for p in &self.problems {
            let _ = writeln!(t, "problem: {p}");
        }
        t
    }
}
