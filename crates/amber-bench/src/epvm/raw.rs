//! The call-interface baselines' engine: the store of the raw database,
//! its directory and a buffer pool, and a *method* (CESM's or EPVM 1.0's)
//! that reaches objects through them.

use std::path::Path;

use amber::internals::store::{Store, StoreTx};

use super::engine::{Engine, Transaction, Work};
use super::pool::{PinError, Pool, Ud};
use super::rawdb::{self, Directory, PageKind};
use crate::oo1::database::PartId;
use crate::oo1::engine::{Answer, EngineError, ResultExt, Tally};
use crate::oo1::ops::Op;

/// What a method reaches objects with during a transaction.
pub struct Cx<'t, 's> {
    pub store: &'s Store,
    pub tx: &'t mut StoreTx<'s>,
    pub dir: &'t Directory,
    pub pool: &'t mut Pool,
}

impl Cx<'_, '_> {
    /// Pins the record `oid`; a full pool is an error here (CESM holds at
    /// most a traversal's depth of pins).
    pub fn pin(&mut self, oid: u64, kind: PageKind) -> Result<Ud, EngineError> {
        self.pool.pin(self.store, oid, kind).map_err(|e| match e {
            PinError::Engine(e) => e,
            PinError::Full => full(self.pool.capacity()),
        })
    }

    /// The update call of OO1's benchmark: the 4-byte field at `at` of the
    /// pinned record `ud`, which holds `old`, becomes `old + 1`, logged.
    pub fn increment(&mut self, ud: Ud, at: usize, old: i32) -> Result<(), EngineError> {
        self.pool
            .update(self.tx, ud, at, &old.wrapping_add(1).to_le_bytes())
    }

    /// The OID of the index page holding part `id`, and the entry's offset
    /// in that page's first record.
    pub fn index_entry(&self, id: PartId) -> Result<(u64, usize), EngineError> {
        let (page, at) = self.dir.entry(id)?;
        Ok((
            page * rawdb::PAGE as u64 + rawdb::RECORDS_AT as u64,
            at - rawdb::RECORDS_AT,
        ))
    }
}

/// The error of a pool whose every frame is pinned.
pub fn full(frames: usize) -> EngineError {
    EngineError::bad_input(format!(
        "the buffer pool's {frames} frames are all pinned: it is too small for this traversal"
    ))
}

/// How a version reaches objects.
pub trait Method {
    /// One iteration.
    fn iterate(
        &mut self,
        cx: &mut Cx<'_, '_>,
        root: PartId,
        work: &mut Work<'_>,
        tally: &mut Tally,
    ) -> Result<(), EngineError>;

    /// The transaction is about to commit: release what the method holds.
    fn before_commit(&mut self, pool: &mut Pool);
}

/// An open raw database reached by method `M`.
pub struct RawEngine<M> {
    store: Store,
    dir: Directory,
    pool: Pool,
    method: M,
}

impl<M: Method> RawEngine<M> {
    /// Opens the database in `dir` with a pool of `frames` frames.
    pub fn open(dir: &Path, frames: usize, method: M) -> Result<Self, EngineError> {
        let store = rawdb::open(dir)?;
        let dir = Directory::read(&store)?;
        Ok(RawEngine {
            store,
            dir,
            pool: Pool::new(frames),
            method,
        })
    }

    /// The method.
    pub fn method(&self) -> &M {
        &self.method
    }

    /// Closes the store (a checkpoint installs what was committed).
    pub fn close(self) -> Result<(), EngineError> {
        self.store.close().ctx("closing the store")
    }
}

/// A transaction of a [`RawEngine`].
pub struct RawTx<'a, M> {
    store: &'a Store,
    tx: StoreTx<'a>,
    dir: &'a Directory,
    pool: &'a mut Pool,
    method: &'a mut M,
}

impl<M: Method> Engine for RawEngine<M> {
    type Tx<'a>
        = RawTx<'a, M>
    where
        M: 'a;

    fn begin(&mut self, _real: bool) -> Result<RawTx<'_, M>, EngineError> {
        Ok(RawTx {
            store: &self.store,
            tx: self.store.begin().ctx("beginning a transaction")?,
            dir: &self.dir,
            pool: &mut self.pool,
            method: &mut self.method,
        })
    }

    fn reads(&self) -> u64 {
        self.pool.stats.reads
    }
}

impl<M: Method> Transaction for RawTx<'_, M> {
    fn iterate(&mut self, root: PartId, mut work: Work<'_>) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let mut cx = Cx {
            store: self.store,
            tx: &mut self.tx,
            dir: self.dir,
            pool: self.pool,
        };
        self.method.iterate(&mut cx, root, &mut work, &mut tally)?;
        Ok(tally.finish())
    }

    fn reads(&self) -> Option<u64> {
        Some(self.pool.stats.reads)
    }

    fn commit(self) -> Result<u64, EngineError> {
        self.method.before_commit(self.pool);
        let info = self.tx.commit().ctx("committing")?;
        self.pool.end_transaction();
        Ok(info.log_bytes)
    }
}

/// A part record's visible values: id, x, y, kind.
#[inline]
pub fn values(r: &[u8]) -> (u32, i32, i32, crate::oo1::database::Kind) {
    (
        rawdb::u32_at(r, rawdb::field::ID),
        rawdb::i32_at(r, rawdb::field::X),
        rawdb::i32_at(r, rawdb::field::Y),
        *rawdb::kind_of(r),
    )
}
