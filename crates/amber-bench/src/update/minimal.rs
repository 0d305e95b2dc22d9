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
//! 2. *What logging them costs at least*: the log (format 3,
//!    `docs/design.md` 1.2) carries changed bytes as ranges in ranges
//!    records, after-images only (a commit writes no before-images). A
//!    range covers one contiguous span of one page (a part's block is one
//!    page) and costs [`ENTRY`] plus the bytes it spans; a record costs
//!    [`RECORD`] and holds any number of ranges that ascend with less than
//!    64 KiB between one and the next. The cheapest covering is found by
//!    trying every way of cutting the regions (in address order) into
//!    ranges — dynamic programming over the cut points, within a page —
//!    and counting a record for the first range and for every range more
//!    than a u16 (65,535 bytes) after the one before, where no record can
//!    go on. (A record's ranges fill at most 64 KiB; a commit logging more
//!    pays one record more per 64 KiB, at most 22 bytes in 65,535, which
//!    this minimum leaves out: it is a lower bound there.)
//!
//! The commit record every commit adds is not part of it (the verdict
//! compares records with records).

use std::collections::HashMap;
use std::mem::offset_of;

use amber::internals::wal::ranges::{ENTRY, RECORD};

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
            minimal_log_bytes: minimal_records(changed_bytes, self.page_size),
        }
    }
}

/// The least bytes of ranges records that cover every address of
/// `changed` (module docs, step 2).
pub(super) fn minimal_records(mut changed: Vec<u64>, page_size: u64) -> u64 {
    changed.sort_unstable();
    changed.dedup();
    // Maximal runs of consecutive changed bytes that do not cross a page
    // boundary: [start, end).
    let mut regions: Vec<(u64, u64)> = Vec::new();
    for a in changed {
        match regions.last_mut() {
            Some(last) if last.1 == a && a % page_size != 0 => last.1 = a + 1,
            _ => regions.push((a, a + 1)),
        }
    }
    let (entry, record) = (ENTRY as u64, RECORD as u64);
    // best[j]: the least cost of the first j regions, region j − 1 ending a
    // range. A range over regions i..j lies in one page; it opens a record
    // when it is the first or lies more than a u16 after region i − 1.
    let mut best = vec![0u64; regions.len() + 1];
    for j in 1..=regions.len() {
        let page = regions[j - 1].0 / page_size;
        best[j] = (0..j)
            .rev()
            .take_while(|&i| regions[i].0 / page_size == page)
            .map(|i| {
                let opens = i == 0 || regions[i].0 - regions[i - 1].1 > u64::from(u16::MAX);
                best[i] + entry + (regions[j - 1].1 - regions[i].0) + if opens { record } else { 0 }
            })
            .min()
            .unwrap_or(u64::MAX);
    }
    best[regions.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_cut_where_a_gap_costs_more_than_an_entry() {
        let (e, r) = (ENTRY as u64, RECORD as u64);
        // One byte: one record of one range.
        assert_eq!(minimal_records(vec![100], 4096), r + e + 1);
        // Two bytes 4 apart share a range (3 unchanged bytes < an entry).
        assert_eq!(minimal_records(vec![100, 104], 4096), r + e + 5);
        // Two bytes 6 apart do not: two ranges of one record.
        assert_eq!(minimal_records(vec![100, 106], 4096), r + 2 * (e + 1));
        // The same bytes on two pages never share a range, but a record.
        assert_eq!(minimal_records(vec![4095, 4096], 4096), r + 2 * (e + 1));
        // Ranges more than a u16 apart need two records.
        assert_eq!(
            minimal_records(vec![100, 100 + 65_537], 1 << 20),
            2 * (r + e + 1)
        );
        assert_eq!(
            minimal_records(vec![100, 100 + 65_536], 1 << 20),
            r + 2 * (e + 1)
        );
        // A run of changed bytes, duplicates ignored.
        assert_eq!(minimal_records(vec![7, 5, 6, 6], 4096), r + e + 3);
        assert_eq!(minimal_records(Vec::new(), 4096), 0);
    }
}
