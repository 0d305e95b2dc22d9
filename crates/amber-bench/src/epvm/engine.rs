//! What every version of `amber bench epvm` implements: transactions of
//! OO1 iterations (White & DeWitt §4: a traversal from a part looked up in
//! the index, to depth 7, each visit passing four of the part's values to
//! a function, and with probability p incrementing two of its 4-byte
//! fields), and the version's own count of reads.

use std::hint::black_box;

use crate::oo1::database::PartId;
use crate::oo1::engine::{Answer, EngineError, UpdatePlan};
use crate::rng::Rng;

/// What one iteration does beside visiting.
pub struct Work<'a> {
    /// Which visits increment their part's `x` and `y` (`None`: none).
    pub plan: Option<&'a UpdatePlan>,
    /// Draw a random number at every visit, as the paper's benchmark did
    /// to decide whether to update (its Table 3's first hot column).
    pub random: Option<&'a mut Rng>,
}

impl Work<'_> {
    /// Whether visit number `visit` (0-based, pre-order) increments.
    #[inline]
    pub fn updates(&mut self, visit: usize) -> bool {
        if let Some(rng) = self.random.as_deref_mut() {
            black_box(rng.next_f64());
        }
        self.plan.is_some_and(|p| p.increment_at(visit))
    }
}

/// An open database of one version, between transactions.
pub trait Engine {
    /// A transaction on it.
    type Tx<'a>: Transaction
    where
        Self: 'a;

    /// Starts a transaction. `real`: it must be a transaction of the
    /// version's own (it updates, or the experiment commits every
    /// iteration); otherwise a version may read without one (`mapped`).
    fn begin(&mut self, real: bool) -> Result<Self::Tx<'_>, EngineError>;

    /// What the version has read from below it so far: pages read from
    /// the store (the baselines) or blocks fetched (mapped).
    fn reads(&self) -> u64;
}

/// A transaction: iterations, then a commit.
pub trait Transaction {
    /// One iteration from part `root`.
    fn iterate(&mut self, root: PartId, work: Work<'_>) -> Result<Answer, EngineError>;

    /// [`Engine::reads`] during the transaction, where the version can
    /// tell.
    fn reads(&self) -> Option<u64>;

    /// Objects copied into an object cache so far (the copy versions).
    fn copied(&self) -> Option<u64> {
        None
    }

    /// Commits durably (a transaction that changed nothing writes
    /// nothing); the log bytes it wrote (early records included).
    fn commit(self) -> Result<u64, EngineError>;
}
