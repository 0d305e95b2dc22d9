//! *CESM*: a conventional program calling the storage manager for every
//! object it visits (White & DeWitt's architecture 1, Figure 5). Visiting a
//! part pins it in the buffer pool (a call: the page table, possibly a read
//! of the page), reads its values through the user descriptor, updates
//! through a call that logs each update at once, and unpins it when the
//! visit's function returns — after the visits of its targets, since the
//! function reads the targets through the descriptor as it goes. The index
//! lookup pins the index page, reads the OID and unpins. Nothing is
//! swizzled.
//!
//! **(choice)** An update is two calls, one per 4-byte field (x, then y),
//! each a log record, as a program would write `x += 1; y += 1` against a
//! call interface; 003 says each update call logs its new and old value.

use super::engine::Work;
use super::raw::{Cx, Method, values};
use super::rawdb::{self, PART_SIZE, PageKind, field};
use crate::oo1::database::PartId;
use crate::oo1::engine::{EngineError, TRAVERSAL_DEPTH, Tally};

/// CESM's method (no state: every access is a call).
#[derive(Default)]
pub struct Cesm;

impl Cesm {
    fn visit(
        cx: &mut Cx<'_, '_>,
        oid: u64,
        depth: u32,
        visit: &mut usize,
        work: &mut Work<'_>,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let ud = cx.pin(oid, PageKind::Parts)?;
        let (id, x, y, kind) = values(cx.pool.record(ud, PART_SIZE));
        tally.visit(id, x, y, &kind);
        if work.updates(*visit) {
            cx.increment(ud, field::X, x)?;
            cx.increment(ud, field::Y, y)?;
            tally.changed();
        }
        *visit += 1;
        if depth < TRAVERSAL_DEPTH {
            for i in 0..3 {
                let to = rawdb::target(cx.pool.record(ud, PART_SIZE), i);
                Self::visit(cx, to, depth + 1, visit, work, tally)?;
            }
        }
        cx.pool.unpin(ud);
        Ok(())
    }
}

impl Method for Cesm {
    fn iterate(
        &mut self,
        cx: &mut Cx<'_, '_>,
        root: PartId,
        work: &mut Work<'_>,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let (index, at) = cx.index_entry(root)?;
        let ud = cx.pin(index, PageKind::Index)?;
        let oid = rawdb::u64_at(cx.pool.record(ud, at + 8), at);
        cx.pool.unpin(ud);
        Self::visit(cx, oid, 0, &mut 0, work, tally)
    }

    fn before_commit(&mut self, _pool: &mut super::pool::Pool) {}
}
