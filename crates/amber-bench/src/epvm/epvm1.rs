//! *EPVM1* and *EPVM1-NO*: EPVM 1.0 (White & DeWitt's architecture 2,
//! Figure 6). The first dereference of an object pins it in the buffer pool
//! and enters its OID into the OID hash table with its user descriptor;
//! later dereferences find it there and read the pinned copy in place.
//! Objects stay pinned until the pool is full or the transaction commits;
//! then every entry is unpinned and the table emptied.
//!
//! *Swizzling* is EPVM 1.0's limited form: a local pointer variable (here
//! the part a visit's function works on, and the index page of the lookup)
//! remembers the descriptor after its first dereference, so the function's
//! later dereferences of it skip the table; pointers inside objects are
//! never swizzled. Emptying the table invalidates every swizzled local —
//! EPVM 1.0 scanned its pointer stack and unswizzled them — which the
//! epoch here stands for: a local swizzled in an earlier epoch is looked up
//! again. *EPVM1-NO* looks every dereference up.
//!
//! Updates go through a storage-manager call, as CESM's do (one per field,
//! each logged at once).
//!
//! **(choice)** A visit dereferences its part once per value it reads (id,
//! x, y, kind), once per update call and once per connection it follows:
//! what `p->id`, `p->x`, … compile to in E, seven to nine dereferences of
//! the same local per visit.

use super::engine::Work;
use super::oid_table::OidTable;
use super::pool::{PinError, Pool, Ud};
use super::raw::{Cx, Method, full};
use super::rawdb::{self, PART_SIZE, PageKind, field};
use crate::oo1::database::PartId;
use crate::oo1::engine::{EngineError, TRAVERSAL_DEPTH, Tally};

/// EPVM 1.0's method.
pub struct Epvm1 {
    table: OidTable,
    swizzle: bool,
    epoch: u64,
    /// Times the table was emptied because the pool was full.
    pub flushes: u64,
    /// Dereferences that went to the table (all of them without
    /// swizzling).
    pub lookups: u64,
}

/// A local pointer variable: an OID, and once swizzled the descriptor.
struct Local {
    oid: u64,
    kind: PageKind,
    swizzled: Option<(Ud, u64)>,
}

impl Local {
    fn new(oid: u64, kind: PageKind) -> Local {
        Local {
            oid,
            kind,
            swizzled: None,
        }
    }
}

impl Epvm1 {
    /// EPVM1 (`swizzle`) or EPVM1-NO.
    pub fn new(swizzle: bool) -> Epvm1 {
        Epvm1 {
            table: OidTable::default(),
            swizzle,
            epoch: 0,
            flushes: 0,
            lookups: 0,
        }
    }

    /// Dereferences `local`: its swizzled descriptor, or the table's entry,
    /// or a pin entered into the table.
    #[inline]
    fn deref(&mut self, cx: &mut Cx<'_, '_>, local: &mut Local) -> Result<Ud, EngineError> {
        if let Some((ud, epoch)) = local.swizzled
            && epoch == self.epoch
        {
            return Ok(ud);
        }
        self.lookups += 1;
        let ud = match self.table.get(local.oid) {
            Some(ud) => ud,
            None => self.fault(cx, local.oid, local.kind)?,
        };
        if self.swizzle {
            local.swizzled = Some((ud, self.epoch));
        }
        Ok(ud)
    }

    /// Pins `oid` and enters it; a full pool is emptied first.
    fn fault(&mut self, cx: &mut Cx<'_, '_>, oid: u64, kind: PageKind) -> Result<Ud, EngineError> {
        loop {
            match cx.pool.pin(cx.store, oid, kind) {
                Ok(ud) => {
                    self.table.insert(oid, ud);
                    return Ok(ud);
                }
                Err(PinError::Full) if !self.table.is_empty() => {
                    self.flushes += 1;
                    self.release(cx.pool);
                }
                Err(PinError::Full) => return Err(full(cx.pool.capacity())),
                Err(PinError::Engine(e)) => return Err(e),
            }
        }
    }

    /// Unpins every object of the table and empties it.
    fn release(&mut self, pool: &mut Pool) {
        self.table.drain(|ud| pool.unpin(ud));
        self.epoch += 1;
    }

    fn visit(
        &mut self,
        cx: &mut Cx<'_, '_>,
        oid: u64,
        depth: u32,
        visit: &mut usize,
        work: &mut Work<'_>,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let mut p = Local::new(oid, PageKind::Parts);
        let id = rawdb::u32_at(self.part(cx, &mut p)?, field::ID);
        let x = rawdb::i32_at(self.part(cx, &mut p)?, field::X);
        let y = rawdb::i32_at(self.part(cx, &mut p)?, field::Y);
        let kind = *rawdb::kind_of(self.part(cx, &mut p)?);
        tally.visit(id, x, y, &kind);
        if work.updates(*visit) {
            let ud = self.deref(cx, &mut p)?;
            cx.increment(ud, field::X, x)?;
            let ud = self.deref(cx, &mut p)?;
            cx.increment(ud, field::Y, y)?;
            tally.changed();
        }
        *visit += 1;
        if depth < TRAVERSAL_DEPTH {
            for i in 0..3 {
                let to = rawdb::target(self.part(cx, &mut p)?, i);
                self.visit(cx, to, depth + 1, visit, work, tally)?;
            }
        }
        Ok(())
    }

    /// The record `p` leads to.
    #[inline]
    fn part<'c>(&mut self, cx: &'c mut Cx<'_, '_>, p: &mut Local) -> Result<&'c [u8], EngineError> {
        let ud = self.deref(cx, p)?;
        Ok(cx.pool.record(ud, PART_SIZE))
    }
}

impl Method for Epvm1 {
    fn iterate(
        &mut self,
        cx: &mut Cx<'_, '_>,
        root: PartId,
        work: &mut Work<'_>,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let (index, at) = cx.index_entry(root)?;
        let mut local = Local::new(index, PageKind::Index);
        let ud = self.deref(cx, &mut local)?;
        let oid = rawdb::u64_at(cx.pool.record(ud, at + 8), at);
        self.visit(cx, oid, 0, &mut 0, work, tally)
    }

    fn before_commit(&mut self, pool: &mut Pool) {
        self.release(pool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epvm::cesm::Cesm;
    use crate::epvm::engine::{Engine, Transaction};
    use crate::epvm::raw::RawEngine;
    use crate::oo1::database::{GenParams, generate};
    use crate::oo1::engine::{Engine as _, TRAVERSAL_VISITS};
    use crate::oo1::reference::Reference;

    /// Traverses from part 17 of a 2,000-part database with a pool of
    /// `frames` frames, checking the answer against the reference; returns
    /// the engine (and the directory it lives in).
    fn traverse<M: Method>(frames: usize, method: M) -> (RawEngine<M>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let data = generate(GenParams {
            parts: 2_000,
            seed: 8,
        })
        .expect("parameters");
        crate::epvm::rawdb::build(dir.path(), &data).expect("build");
        let mut engine = RawEngine::open(dir.path(), frames, method).expect("open");
        let mut tx = engine.begin(false).expect("begin");
        let answer = tx
            .iterate(
                17,
                Work {
                    plan: None,
                    random: None,
                },
            )
            .expect("iterate");
        tx.commit().expect("commit");
        let want = Reference::new(&data).traverse(17).expect("reference");
        assert_eq!(answer, want);
        assert_eq!(answer.count, TRAVERSAL_VISITS);
        (engine, dir)
    }

    #[test]
    fn swizzled_locals_skip_the_table() {
        let (with, _dir) = traverse(729, Epvm1::new(true));
        let (without, _dir) = traverse(729, Epvm1::new(false));
        let (with, without) = (with.method(), without.method());
        // One lookup per visit and one for the index with swizzling; one
        // per value read and per connection followed without (4 + 3 per
        // visit, no connections followed at depth 7).
        assert_eq!(with.lookups, TRAVERSAL_VISITS + 1);
        let inner = (TRAVERSAL_VISITS - 3u64.pow(7)) * 3;
        assert_eq!(without.lookups, 4 * TRAVERSAL_VISITS + inner + 1);
        assert_eq!((with.flushes, without.flushes), (0, 0));
    }

    #[test]
    fn a_full_pool_is_emptied_and_swizzled_locals_looked_up_again() {
        // 8 frames: the traversal touches more pages than that, all
        // pinned by the table until it is emptied.
        let (small, _dir) = traverse(8, Epvm1::new(true));
        let small = small.method();
        assert!(small.flushes > 0);
        assert!(small.lookups > TRAVERSAL_VISITS + 1, "{}", small.lookups);
        // CESM holds only the current path's pins: 8 frames are enough.
        traverse(8, Cesm);
    }
}
