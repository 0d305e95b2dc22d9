//! The minimal log of an update traversal, computed by the benchmark from
//! what the traversal did, independently of Amber's diff and of its
//! coalescing code (`wal::coalesce`): the denominator of `amber bench
//! update`'s verdict.
//!
//! 1. *Which bytes change*: the benchmark keeps every part's `x` and `y`
//!    itself; for each part the traversal increments (k times, if it visits
//!    it k times) it compares the old and the new little-endian bytes of both
//!    fields, at the fields' addresses in the database (the part's address
//!    plus the fields' offsets in [`Part`]). Consecutive changed bytes form a
//!    region.
//! 2. *What logging them costs at least*: a range record of the log covers
//!    one contiguous span of one page with after-images only (a commit
//!    writes no before-images, `docs/design.md` 1.2), at a cost of its
//!    header `H` plus the bytes it spans. The cheapest set of records
//!    covering a page's regions is found by trying every way of cutting the
//!    page's regions (in address order) into runs: dynamic programming over
//!    the cut points, `O(n²)` per page.
//!
//! The commit record every commit adds is not part of it (the verdict
//! compares records with records).

use std::collections::{BTreeMap, HashMap};
use std::mem::offset_of;

use amber::internals::wal::RANGE_HEADER;

use crate::oo1::amber_engine::AmberOo1;
use crate::oo1::amber_engine::schema::Part;
use crate::oo1::{GeneratedDb, PartId, TRAVERSAL_DEPTH};
use crate::storage::BenchError;

/// The parts visited by an OO1 traversal from `root`, in visit order.
pub(super) fn visit_order(db: &GeneratedDb, root: PartId) -> Vec<PartId> {
    fn walk(db: &GeneratedDb, id: PartId, depth: u32, out: &mut Vec<PartId>) {
        out.push(id);
        if depth < TRAVERSAL_DEPTH {
            for c in db.outgoing(id) {
                walk(db, c.to, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(db, root, 0, &mut out);
    out
}

/// The benchmark's own copy of every part's `x` and `y`, and where they
/// live in the database.
pub(super) struct Shadow {
    /// `(x, y)` of part `id` at index `id − 1`.
    xy: Vec<(i32, i32)>,
    /// The address of part `id`'s `x` at index `id − 1`.
    x_addr: Vec<u64>,
    page_size: u64,
}

/// What one update changed, by the benchmark's own count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Expected {
    /// Distinct parts changed.
    pub(super) parts: u64,
    /// The least record bytes that log the changed bytes.
    pub(super) minimal_log_bytes: u64,
}

impl Shadow {
    /// The parts of `generated` as stored by `eng` (built from it, not yet
    /// updated).
    pub(super) fn new(generated: &GeneratedDb, eng: &AmberOo1) -> Result<Shadow, BenchError> {
        let x_at = offset_of!(Part, x) as u64;
        let x_addr = generated
            .parts
            .iter()
            .map(|p| {
                eng.part(p.id)
                    .map(|r| r.addr() + x_at)
                    .map_err(|e| BenchError::new(format!("part {}: {e}", p.id)))
            })
            .collect::<Result<_, _>>()?;
        Ok(Shadow {
            xy: generated.parts.iter().map(|p| (p.x, p.y)).collect(),
            x_addr,
            page_size: eng.db().page_size() as u64,
        })
    }

    /// Applies one update (the parts visited in `order`, incremented where
    /// `increments` says) to the copy, and returns what it changed and the
    /// least log for it.
    pub(super) fn apply(&mut self, order: &[PartId], increments: &[bool]) -> Expected {
        let mut count: HashMap<PartId, i32> = HashMap::new();
        for (&id, &inc) in order.iter().zip(increments) {
            if inc {
                *count.entry(id).or_default() += 1;
            }
        }
        let y_after_x = (offset_of!(Part, y) - offset_of!(Part, x)) as u64;
        let mut changed_bytes: Vec<u64> = Vec::new();
        for (&id, &k) in &count {
            let i = id as usize - 1;
            let (x, y) = self.xy[i];
            self.xy[i] = (x.wrapping_add(k), y.wrapping_add(k));
            let base = self.x_addr[i];
            for (at, old, new) in [
                (base, x, x.wrapping_add(k)),
                (base + y_after_x, y, y.wrapping_add(k)),
            ] {
                let (old, new) = (old.to_le_bytes(), new.to_le_bytes());
                changed_bytes.extend((0..4).filter(|&b| old[b] != new[b]).map(|b| at + b as u64));
            }
        }
        Expected {
            parts: count.len() as u64,
            minimal_log_bytes: minimal_records(changed_bytes, self.page_size, RANGE_HEADER as u64),
        }
    }
}

/// The least bytes of range records (each `header` plus the bytes it spans,
/// within one page) that cover every address of `changed`.
pub(super) fn minimal_records(mut changed: Vec<u64>, page_size: u64, header: u64) -> u64 {
    changed.sort_unstable();
    changed.dedup();
    // Maximal runs of consecutive changed bytes, per page: [start, end).
    let mut pages: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for a in changed {
        let regions = pages.entry(a / page_size).or_default();
        match regions.last_mut() {
            Some(last) if last.1 == a => last.1 = a + 1,
            _ => regions.push((a, a + 1)),
        }
    }
    pages
        .values()
        .map(|regions| {
            // best[j]: the least cost of covering the first j regions.
            let mut best = vec![0u64; regions.len() + 1];
            for j in 1..=regions.len() {
                best[j] = (0..j)
                    .map(|i| best[i] + header + (regions[j - 1].1 - regions[i].0))
                    .min()
                    .unwrap_or(u64::MAX);
            }
            best[regions.len()]
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_cut_where_a_gap_costs_more_than_a_header() {
        let h = 20;
        // One byte: one record.
        assert_eq!(minimal_records(vec![100], 4096, h), 21);
        // Two bytes 10 apart share a record (20 + 11 < 2 · 21).
        assert_eq!(minimal_records(vec![100, 110], 4096, h), 31);
        // Two bytes 100 apart do not (2 · 21 < 20 + 101).
        assert_eq!(minimal_records(vec![100, 200], 4096, h), 42);
        // The same bytes on two pages never share a record.
        assert_eq!(minimal_records(vec![4095, 4096], 4096, h), 42);
        // A run of changed bytes, duplicates ignored.
        assert_eq!(minimal_records(vec![7, 5, 6, 6], 4096, h), 23);
        assert_eq!(minimal_records(Vec::new(), 4096, h), 0);
    }
}
