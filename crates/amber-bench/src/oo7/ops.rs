//! The OO7 operations and each iteration's inputs, derived from the seed
//! alone so that the parent, the child processes and every engine agree.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::engine::{Answer, EngineError, Oo7Engine};
use super::generate::{DATE_MAX, DATE_MIN, NewComposite, new_composites, title};
use super::params::Params;
use crate::rng::Rng;

/// What a traversal does at each composite-part visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Traversal {
    /// Visit every atomic part; count = parts visited.
    T1,
    /// As T1, incrementing `x` and `y` of the root part (QuickStore's
    /// increment in place of OO7's swap); count = updates.
    T2a,
    /// As T1, incrementing every visited part.
    T2b,
    /// As T1, incrementing every visited part 4 times (4 updates).
    T2c,
    /// As T2a, toggling `build_date` ([`toggle_date`](super::engine::toggle_date)) and moving the part
    /// in the build-date index.
    T3a,
    /// As T2b, toggling `build_date`.
    T3b,
    /// As T2c, toggling `build_date`.
    T3c,
    /// Visit the root part only; count = parts visited.
    T6,
}

/// Which field an updating traversal changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Xy,
    Date,
}

impl Traversal {
    /// Whether only the root part of each composite part is visited.
    pub fn root_only(self) -> bool {
        self == Traversal::T6
    }

    /// The field changed, the number of changes per updated part, and
    /// whether every visited part (else only the root part) is updated.
    pub fn update(self) -> Option<(Field, u32, bool)> {
        match self {
            Traversal::T1 | Traversal::T6 => None,
            Traversal::T2a => Some((Field::Xy, 1, false)),
            Traversal::T2b => Some((Field::Xy, 1, true)),
            Traversal::T2c => Some((Field::Xy, 4, true)),
            Traversal::T3a => Some((Field::Date, 1, false)),
            Traversal::T3b => Some((Field::Date, 1, true)),
            Traversal::T3c => Some((Field::Date, 4, true)),
        }
    }

    /// How many times the atomic part visited `index`-th in its composite
    /// part (0 = the root) is updated.
    #[inline]
    pub fn updates_at(self, index: usize) -> u32 {
        match self.update() {
            Some((_, times, all)) if all || index == 0 => times,
            _ => 0,
        }
    }
}

/// An OO7 operation (the names of `--ops` and the JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    T1,
    T2a,
    T2b,
    T2c,
    T3a,
    T3b,
    T3c,
    T4,
    T5,
    T6,
    T7,
    T8,
    T9,
    Q1,
    Q2,
    Q3,
    Q4,
    Q5,
    Q6,
    Q7,
    Q8,
    Insert,
    Delete,
}

/// Q1's atomic parts per iteration (OO7).
pub const Q1_PARTS: usize = 10;
/// **(choice)** T7's atomic parts per iteration: 10, as Q1 (OO7 starts from
/// one; ten keep the time above the timer's resolution).
pub const T7_PARTS: usize = 10;
/// Q4's titles per iteration (OO7).
pub const Q4_TITLES: usize = 100;
/// Composite parts added (and deleted) per structural modification (OO7).
pub const INSERT_COMPOSITES: u32 = 5;

impl Op {
    /// Every operation, in report order.
    pub const ALL: [Op; 23] = [
        Op::T1,
        Op::T2a,
        Op::T2b,
        Op::T2c,
        Op::T3a,
        Op::T3b,
        Op::T3c,
        Op::T4,
        Op::T5,
        Op::T6,
        Op::T7,
        Op::T8,
        Op::T9,
        Op::Q1,
        Op::Q2,
        Op::Q3,
        Op::Q4,
        Op::Q5,
        Op::Q6,
        Op::Q7,
        Op::Q8,
        Op::Insert,
        Op::Delete,
    ];

    /// The name of `--ops` and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Op::T1 => "t1",
            Op::T2a => "t2a",
            Op::T2b => "t2b",
            Op::T2c => "t2c",
            Op::T3a => "t3a",
            Op::T3b => "t3b",
            Op::T3c => "t3c",
            Op::T4 => "t4",
            Op::T5 => "t5",
            Op::T6 => "t6",
            Op::T7 => "t7",
            Op::T8 => "t8",
            Op::T9 => "t9",
            Op::Q1 => "q1",
            Op::Q2 => "q2",
            Op::Q3 => "q3",
            Op::Q4 => "q4",
            Op::Q5 => "q5",
            Op::Q6 => "q6",
            Op::Q7 => "q7",
            Op::Q8 => "q8",
            Op::Insert => "insert",
            Op::Delete => "delete",
        }
    }

    /// Parses a name from [`Op::name`].
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The traversal this operation is, if it is one.
    pub fn traversal(self) -> Option<Traversal> {
        Some(match self {
            Op::T1 => Traversal::T1,
            Op::T2a => Traversal::T2a,
            Op::T2b => Traversal::T2b,
            Op::T2c => Traversal::T2c,
            Op::T3a => Traversal::T3a,
            Op::T3b => Traversal::T3b,
            Op::T3c => Traversal::T3c,
            Op::T6 => Traversal::T6,
            _ => return None,
        })
    }

    /// Whether the operation commits changes.
    pub fn commits(self) -> bool {
        matches!(self, Op::T5 | Op::Insert | Op::Delete)
            || self.traversal().is_some_and(|t| t.update().is_some())
    }

    fn stream_tag(self) -> u64 {
        800 + self as u64
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The iteration counts, as OO1 has them: iteration 1 cold (a new
/// process), `warm` warm iterations on new inputs, `hot` repeating the last
/// warm iteration's input.
pub use crate::oo1::Phase;
pub use crate::oo1::ops::Protocol;

/// **(choice)** OO7's default protocol per operation: 1 cold, 4 warm, 5 hot.
pub const OO7_PROTOCOL: Protocol = Protocol { warm: 4, hot: 5 };

/// The input of one iteration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Input {
    Traverse {
        module: u32,
        t: Traversal,
    },
    Documents {
        module: u32,
        update: bool,
    },
    Up(Vec<u32>),
    Manual {
        module: u32,
        scan: bool,
    },
    Lookup(Vec<u32>),
    Range {
        lo: i32,
        hi: i32,
    },
    Titles(Vec<String>),
    Q5,
    Q6,
    Scan,
    Join,
    Insert(Vec<NewComposite>),
    /// Insert `setup` untimed (its own commit), then delete it (timed).
    Delete {
        setup: Vec<NewComposite>,
    },
}

impl Input {
    /// Runs this input on `engine` (the untimed setup of a delete excluded).
    pub fn run(&self, engine: &mut dyn Oo7Engine) -> Result<Answer, EngineError> {
        match self {
            Input::Traverse { module, t } => engine.traverse(*module, *t),
            Input::Documents { module, update } => engine.documents(*module, *update),
            Input::Up(ids) => engine.up(ids),
            Input::Manual { module, scan } => engine.manual(*module, *scan),
            Input::Lookup(ids) => engine.lookup(ids),
            Input::Range { lo, hi } => engine.date_range(*lo, *hi),
            Input::Titles(t) => engine.by_title(t),
            Input::Q5 => engine.q5(),
            Input::Q6 => engine.q6(),
            Input::Scan => engine.scan(),
            Input::Join => engine.join(),
            Input::Insert(parts) => engine.insert(parts),
            Input::Delete { setup } => {
                let ids: Vec<u32> = setup.iter().map(|c| c.part.id).collect();
                engine.delete(&ids)
            }
        }
    }

    /// The untimed work before [`Input::run`]: a delete's insert.
    pub fn setup(&self, engine: &mut dyn Oo7Engine) -> Result<(), EngineError> {
        if let Input::Delete { setup } = self {
            engine.insert(setup)?;
        }
        Ok(())
    }
}

/// **(choice)** Q2's and Q3's date ranges: 1% and 10% of the atomic parts'
/// date range ([1000, 1999]), placed uniformly at random per iteration.
pub fn range_width(op: Op) -> i32 {
    let span = DATE_MAX - DATE_MIN + 1;
    if op == Op::Q2 { span / 100 } else { span / 10 }
}

/// The inputs of every iteration of `op` on a database generated from
/// `params` (each job starts from a pristine copy).
///
/// **(choice)** Iteration `i` of a traversal, T4, T5, T8 or T9 works on
/// module `1 + i mod modules` (hot iterations repeat the last warm one's).
/// Inserts and deletes take fresh ids in every iteration, hot ones too.
pub fn inputs(params: &Params, op: Op, protocol: Protocol) -> Vec<Input> {
    let distinct = 1 + protocol.warm;
    (0..protocol.iterations())
        .map(|i| {
            let fresh = matches!(op, Op::Insert | Op::Delete);
            let d = if fresh { i } else { i.min(distinct - 1) };
            input(params, op, d)
        })
        .collect()
}

/// The input of draw `d` of `op`.
pub fn input(params: &Params, op: Op, d: usize) -> Input {
    let mut rng = Rng::stream(params.seed, &[op.stream_tag(), d as u64]);
    let module = 1 + (d as u32 % params.modules);
    let atomics = u64::from(params.atomics());
    let mut random_atomics =
        |n: usize| -> Vec<u32> { (0..n).map(|_| 1 + rng.below(atomics) as u32).collect() };
    let traverse = |t| Input::Traverse { module, t };
    match op {
        Op::T1 => traverse(Traversal::T1),
        Op::T2a => traverse(Traversal::T2a),
        Op::T2b => traverse(Traversal::T2b),
        Op::T2c => traverse(Traversal::T2c),
        Op::T3a => traverse(Traversal::T3a),
        Op::T3b => traverse(Traversal::T3b),
        Op::T3c => traverse(Traversal::T3c),
        Op::T6 => traverse(Traversal::T6),
        Op::T4 | Op::T5 => Input::Documents {
            module,
            update: op == Op::T5,
        },
        Op::T7 => Input::Up(random_atomics(T7_PARTS)),
        Op::T8 | Op::T9 => Input::Manual {
            module,
            scan: op == Op::T8,
        },
        Op::Q1 => Input::Lookup(random_atomics(Q1_PARTS)),
        Op::Q2 | Op::Q3 => {
            let w = range_width(op);
            let lo = DATE_MIN + rng.below((DATE_MAX - DATE_MIN + 2 - w) as u64) as i32;
            Input::Range { lo, hi: lo + w - 1 }
        }
        Op::Q4 => {
            let comps = u64::from(params.composites());
            Input::Titles(
                (0..Q4_TITLES)
                    .map(|_| title(1 + rng.below(comps) as u32))
                    .collect(),
            )
        }
        Op::Q5 => Input::Q5,
        Op::Q6 => Input::Q6,
        Op::Q7 => Input::Scan,
        Op::Q8 => Input::Join,
        Op::Insert => Input::Insert(batch(params, &mut rng, d)),
        Op::Delete => Input::Delete {
            setup: batch(params, &mut rng, d),
        },
    }
}

/// Draw `d`'s new composite parts: ids after the database's and the
/// earlier draws'.
fn batch(params: &Params, rng: &mut Rng, d: usize) -> Vec<NewComposite> {
    let first_comp = params.composites() + 1 + d as u32 * INSERT_COMPOSITES;
    let first_atomic = params.atomics() + 1 + d as u32 * INSERT_COMPOSITES * params.atomic_per_comp;
    let bases = params.base_per_module() * params.modules;
    new_composites(
        params,
        rng,
        first_comp,
        first_atomic,
        INSERT_COMPOSITES,
        bases,
    )
}

/// **(choice)** Untimed reads after the last iteration of a committing job,
/// so that a change that did not land, or landed in the wrong index, fails
/// the run: every module's T1 (the bags and the parts' x and y), Q7, a
/// date range crossing the pairs T3 toggles between ([1001, 1500]: the
/// index must have moved the parts), T4 of every module (documents); after
/// an insert or a delete, also Q1 of the added atomic parts (after an
/// insert) and Q4 of the added titles (none found after a delete).
pub fn post_checks(params: &Params, op: Op, protocol: Protocol) -> Vec<Input> {
    if !op.commits() {
        return Vec::new();
    }
    let mut out: Vec<Input> = (1..=params.modules)
        .flat_map(|module| {
            [
                Input::Traverse {
                    module,
                    t: Traversal::T1,
                },
                Input::Documents {
                    module,
                    update: false,
                },
            ]
        })
        .collect();
    out.push(Input::Scan);
    out.push(Input::Range { lo: 1001, hi: 1500 });
    if matches!(op, Op::Insert | Op::Delete) {
        let added: Vec<NewComposite> = inputs(params, op, protocol)
            .into_iter()
            .flat_map(|i| match i {
                Input::Insert(p) | Input::Delete { setup: p } => p,
                _ => Vec::new(),
            })
            .collect();
        if op == Op::Insert {
            out.push(Input::Lookup(
                added
                    .iter()
                    .flat_map(|c| c.atomics.iter().map(|a| a.id))
                    .collect(),
            ));
        }
        out.push(Input::Titles(
            added.iter().map(|c| title(c.part.id)).collect(),
        ));
    }
    out
}
