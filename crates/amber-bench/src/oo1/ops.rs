//! The OO1 operations and their inputs: which ids, roots, update decisions and
//! new parts each iteration uses. Inputs are derived from the seed alone, so the
//! parent process, the child processes and every engine agree on them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::database::{GenParams, NewPart, PartId, new_parts};
use super::engine::{TRAVERSAL_VISITS, UpdatePlan};
use crate::rng::Rng;

/// An OO1 operation (`open` is the time to open a database, measured with a
/// first operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Lookup,
    Traversal,
    Reverse,
    Insert,
    Update,
    Open,
}

impl Op {
    /// Every operation, in report order.
    pub const ALL: [Op; 6] = [
        Op::Lookup,
        Op::Traversal,
        Op::Reverse,
        Op::Insert,
        Op::Update,
        Op::Open,
    ];

    /// The name used in the JSON and by `--ops`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Lookup => "lookup",
            Op::Traversal => "traversal",
            Op::Reverse => "reverse",
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Open => "open",
        }
    }

    /// Parses a name from [`Op::name`].
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Whether the operation commits (and so writes).
    pub fn commits(self) -> bool {
        matches!(self, Op::Insert | Op::Update)
    }

    fn stream_tag(self) -> u64 {
        match self {
            Op::Lookup => 10,
            Op::Traversal => 11,
            Op::Reverse => 12,
            Op::Insert => 13,
            Op::Update => 14,
            Op::Open => 15,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Ids fetched by one lookup.
pub const LOOKUP_IDS: usize = 1_000;

/// Parts added by one insert.
pub const INSERT_PARTS: u32 = 100;

/// The update probabilities p of BENCHMARKS.md (Hosking et al.; White & DeWitt).
pub const UPDATE_PROBABILITIES: [f64; 7] = [0.0, 0.05, 0.1, 0.15, 0.2, 0.5, 1.0];

/// One measured process's work: an operation (and for `update`, its p).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub op: Op,
    /// The update probability; `None` for every other operation.
    pub p: Option<f64>,
}

impl Job {
    /// Every job of a full run for the operations `ops`, in run order.
    pub fn all(ops: &[Op]) -> Vec<Job> {
        let mut jobs = Vec::new();
        for &op in ops {
            if op == Op::Update {
                jobs.extend(UPDATE_PROBABILITIES.iter().map(|&p| Job { op, p: Some(p) }));
            } else {
                jobs.push(Job { op, p: None });
            }
        }
        jobs
    }

    /// A label such as `update p=0.05`.
    pub fn label(&self) -> String {
        match self.p {
            Some(p) => format!("{} p={p}", self.op),
            None => self.op.to_string(),
        }
    }
}

/// The iteration counts: 1 cold, `warm` warm on new parts, `hot` repeating the
/// last warm iteration's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protocol {
    pub warm: usize,
    pub hot: usize,
}

impl Protocol {
    /// OO1's protocol: iteration 1 cold, 2–10 warm, then 10 hot.
    pub const OO1: Protocol = Protocol { warm: 9, hot: 10 };

    /// Iterations in all: cold + warm + hot.
    pub fn iterations(&self) -> usize {
        1 + self.warm + self.hot
    }

    /// The phase of iteration `i` (0-based).
    pub fn phase(&self, i: usize) -> Phase {
        if i == 0 {
            Phase::Cold
        } else if i <= self.warm {
            Phase::Warm
        } else {
            Phase::Hot
        }
    }
}

/// Cold (iteration 1, new process), warm (2–10) or hot (repeats).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Cold,
    Warm,
    Hot,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Cold, Phase::Warm, Phase::Hot];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Cold => "cold",
            Phase::Warm => "warm",
            Phase::Hot => "hot",
        }
    }
}

/// The input of one iteration.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Lookup(Vec<PartId>),
    Traversal(PartId),
    Reverse(PartId),
    Insert(Vec<NewPart>),
    Update {
        root: PartId,
        plan: UpdatePlan,
    },
    /// `open`: one lookup of a single part right after opening.
    Open(PartId),
}

/// The inputs of every iteration of `job`, on a database as built from `params`
/// (the harness gives every job a pristine copy of the database).
///
/// Iteration `i` (0 = cold) draws from the stream `(seed, op, i)`; hot iterations
/// repeat the last warm iteration's input, except for `insert`, where ids cannot
/// repeat: **(choice)** every insert iteration, hot ones included, adds a fresh
/// batch of 100 parts with the next ids.
///
/// **(choice)** Update decisions: visit `v` of iteration `i` increments its part
/// when `u(seed, i, v) < p`, with `u` uniform in [0, 1) and independent of p, so
/// the same roots are used for every p and the parts updated at a smaller p are
/// a subset of those updated at a larger p.
pub fn inputs(params: GenParams, job: Job, protocol: Protocol) -> Vec<Input> {
    if job.op == Op::Open {
        let mut rng = Rng::stream(params.seed, &[job.op.stream_tag(), 0]);
        return vec![Input::Open(random_id(&mut rng, params.parts))];
    }
    let distinct = 1 + protocol.warm;
    let mut out: Vec<Input> = Vec::with_capacity(protocol.iterations());
    for i in 0..protocol.iterations() {
        let draw_index = if job.op == Op::Insert {
            i
        } else {
            i.min(distinct - 1)
        };
        if i >= distinct
            && job.op != Op::Insert
            && let Some(last) = out.last()
        {
            out.push(last.clone());
            continue;
        }
        let mut rng = Rng::stream(params.seed, &[job.op.stream_tag(), draw_index as u64]);
        let input = match job.op {
            Op::Lookup => Input::Lookup(
                (0..LOOKUP_IDS)
                    .map(|_| random_id(&mut rng, params.parts))
                    .collect(),
            ),
            Op::Traversal => Input::Traversal(random_id(&mut rng, params.parts)),
            Op::Reverse => Input::Reverse(random_id(&mut rng, params.parts)),
            Op::Insert => {
                let first = params.parts + 1 + draw_index as u32 * INSERT_PARTS;
                Input::Insert(new_parts(params, &mut rng, first, INSERT_PARTS))
            }
            Op::Update => {
                let root = random_id(&mut rng, params.parts);
                let p = job.p.unwrap_or(0.0);
                let plan = (0..TRAVERSAL_VISITS).map(|_| rng.chance(p)).collect();
                Input::Update {
                    root,
                    plan: UpdatePlan::new(plan),
                }
            }
            Op::Open => Input::Open(random_id(&mut rng, params.parts)),
        };
        out.push(input);
    }
    out
}

/// Uniform in `1..=parts`: random parts are drawn from the original database.
fn random_id(rng: &mut Rng, parts: u32) -> PartId {
    1 + rng.below(u64::from(parts)) as PartId
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: GenParams = GenParams {
        parts: 2_000,
        seed: 5,
    };

    #[test]
    fn warm_iterations_differ_and_hot_ones_repeat_the_last_warm() {
        let ins = inputs(
            PARAMS,
            Job {
                op: Op::Lookup,
                p: None,
            },
            Protocol::OO1,
        );
        assert_eq!(ins.len(), 20);
        for i in 1..10 {
            assert_ne!(ins[i], ins[i - 1]);
        }
        for hot in &ins[10..] {
            assert_eq!(hot, &ins[9]);
        }
    }

    #[test]
    fn inserts_always_take_fresh_ids() {
        let ins = inputs(
            PARAMS,
            Job {
                op: Op::Insert,
                p: None,
            },
            Protocol::OO1,
        );
        let mut next = 2_001;
        for input in &ins {
            let Input::Insert(batch) = input else {
                panic!("not an insert input")
            };
            for np in batch {
                assert_eq!(np.part.id, next);
                next += 1;
            }
        }
        assert_eq!(next, 2_001 + 20 * 100);
    }

    #[test]
    fn update_decisions_are_nested_across_p() {
        let plan_of = |p: f64| {
            let ins = inputs(
                PARAMS,
                Job {
                    op: Op::Update,
                    p: Some(p),
                },
                Protocol::OO1,
            );
            match &ins[3] {
                Input::Update { root, plan } => (*root, plan.clone()),
                other => panic!("unexpected input {other:?}"),
            }
        };
        let (r0, p0) = plan_of(0.0);
        let (r1, p1) = plan_of(0.2);
        let (r2, p2) = plan_of(1.0);
        assert_eq!((r0, r1), (r1, r2));
        assert_eq!(p0.increments(), 0);
        assert_eq!(p2.increments(), TRAVERSAL_VISITS as usize);
        let share = p1.increments() as f64 / TRAVERSAL_VISITS as f64;
        assert!((0.15..0.25).contains(&share));
        assert!((0..TRAVERSAL_VISITS as usize).all(|v| !p1.increment_at(v) || p2.increment_at(v)));
    }
}
