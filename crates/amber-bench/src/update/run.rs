//! One backend's run: for each update probability, the timed update
//! traversals with one commit each, every answer checked against the
//! reference, and the minimal log computed independently from the parts the
//! traversal changed.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use amber::BackendChoice;
use amber::CommitStats;
use amber::internals::wal::RANGE_HEADER;
use amber::internals::wal::record::COMMIT_SIZE;

use super::first_write::first_write;
use super::report::{FirstWrite, UpdateRow};
use super::{PROBABILITIES, UpdateConfig, hot_input};
use crate::hot::check_backend;
use crate::oo1::amber_engine::AmberFactory;
use crate::oo1::reference::Reference;
use crate::oo1::{Engine, EngineOptions, GeneratedDb, PartId, TRAVERSAL_DEPTH};
use crate::procfs::IoCounters;
use crate::storage::{BenchError, summarize};

/// The parts visited by an OO1 traversal from `root`, in visit order.
fn visit_order(db: &GeneratedDb, root: PartId) -> Vec<PartId> {
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

/// What one update changes and the minimal records for it, from the parts'
/// current `x`, `y` (updated in place).
fn expected_changes(xy: &mut [(i32, i32)], order: &[PartId], increments: &[bool]) -> (u64, u64) {
    let mut count: HashMap<PartId, i32> = HashMap::new();
    for (&id, &inc) in order.iter().zip(increments) {
        if inc {
            *count.entry(id).or_default() += 1;
        }
    }
    let mut minimal = 0u64;
    for (&id, &k) in &count {
        let slot = &mut xy[id as usize - 1];
        let old = [slot.0.to_le_bytes(), slot.1.to_le_bytes()].concat();
        *slot = (slot.0 + k, slot.1 + k);
        let new = [slot.0.to_le_bytes(), slot.1.to_le_bytes()].concat();
        let differ: Vec<usize> = (0..8).filter(|&i| old[i] != new[i]).collect();
        if let (Some(first), Some(last)) = (differ.first(), differ.last()) {
            minimal += (RANGE_HEADER + last - first + 1) as u64;
        }
    }
    (count.len() as u64, minimal)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_u64(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// One timed update.
struct Sample {
    traverse: Duration,
    commit: Duration,
    stats: CommitStats,
    /// Distinct parts changed, and the minimal records for them, by the
    /// benchmark's own count.
    changed: u64,
    minimal: u64,
    /// Bytes passed to write calls around the update.
    wchar: u64,
}

/// Everything measured on one backend.
pub(super) struct BackendRun {
    pub(super) rows: Vec<UpdateRow>,
    pub(super) first_write: FirstWrite,
}

pub(super) fn run_backend(
    cfg: &UpdateConfig,
    generated: &GeneratedDb,
    dir: &Path,
    choice: BackendChoice,
) -> Result<BackendRun, BenchError> {
    let factory = AmberFactory::DEFAULT.with_backend(choice);
    let mut eng = factory
        .open_amber(dir, &EngineOptions::default())
        .map_err(|e| BenchError::new(format!("opening the OO1 database: {e}")))?;
    check_backend(choice, eng.db())?;
    let backend = eng.db().backend().to_string();
    let mut reference = Reference::new(generated);
    let mut xy: Vec<(i32, i32)> = generated.parts.iter().map(|p| (p.x, p.y)).collect();
    let mut rows = Vec::new();
    for p in PROBABILITIES {
        let (root, plan) = hot_input(generated.params, p)?;
        let order = visit_order(generated, root);
        let decisions: Vec<bool> = (0..order.len()).map(|v| plan.increment_at(v)).collect();
        let mut samples: Vec<Sample> = Vec::new();
        for i in 0..cfg.warmup + cfg.iters {
            let io0 = IoCounters::now();
            let (answer, cost) = eng
                .update_timed(root, &plan)
                .map_err(|e| BenchError::new(format!("{backend}: update p={p}: {e}")))?;
            let io1 = IoCounters::now();
            let want = reference
                .update(root, &plan)
                .map_err(|e| BenchError::new(format!("reference update: {e}")))?;
            if answer != want {
                return Err(BenchError::new(format!(
                    "{backend}: update p={p} iteration {i} answered {answer:?}, the reference {want:?}"
                )));
            }
            let (changed, minimal) = expected_changes(&mut xy, &order, &decisions);
            let wchar = io0.zip(io1).map_or(0, |(a, b)| a.delta(b).wchar);
            if i >= cfg.warmup {
                samples.push(Sample {
                    traverse: cost.traverse,
                    commit: cost.commit,
                    stats: cost.stats,
                    changed,
                    minimal,
                    wchar,
                });
            }
        }
        let med =
            |f: &dyn Fn(&Sample) -> f64| summarize(&samples.iter().map(f).collect::<Vec<_>>());
        let medu =
            |f: &dyn Fn(&Sample) -> u64| median_u64(&samples.iter().map(f).collect::<Vec<_>>());
        let commit = med(&|s| ms(s.commit));
        let traverse = med(&|s| ms(s.traverse));
        let detect_ms = med(&|s| ms(s.stats.detect)).median;
        let diff_ms = med(&|s| ms(s.stats.diff)).median;
        let write_ms = med(&|s| ms(s.stats.write)).median;
        let log_bytes = medu(&|s| s.stats.log_bytes);
        let minimal_log_bytes = medu(&|s| s.stats.minimal_log_bytes);
        let commit_record_bytes = if log_bytes > 0 { COMMIT_SIZE as u64 } else { 0 };
        let ratio = |num: u64, den: u64| {
            if num == 0 && den == 0 {
                1.0
            } else {
                num as f64 / den as f64
            }
        };
        rows.push(UpdateRow {
            backend: backend.clone(),
            p,
            iters: samples.len(),
            increments: plan.increments() as u64,
            changed_parts: medu(&|s| s.changed),
            commit_ms: commit.median,
            detect_ms,
            diff_ms,
            write_ms,
            other_ms: med(&|s| {
                ms(s.commit
                    .saturating_sub(s.stats.detect + s.stats.diff + s.stats.write))
            })
            .median,
            traverse_ms: traverse.median,
            log_bytes,
            minimal_log_bytes,
            commit_record_bytes,
            log_vs_minimal: ratio(log_bytes - commit_record_bytes, minimal_log_bytes),
            log_vs_minimal_with_commit: ratio(
                log_bytes,
                minimal_log_bytes
                    + if minimal_log_bytes > 0 {
                        COMMIT_SIZE as u64
                    } else {
                        0
                    },
            ),
            expected_minimal_log_bytes: medu(&|s| s.minimal),
            changed_bytes: medu(&|s| s.stats.changed_bytes),
            blocks: medu(&|s| s.stats.blocks),
            wchar: medu(&|s| s.wchar),
            first_write_us: f64::NAN,
            commit_ms_summary: commit,
            traverse_ms_summary: traverse,
        });
    }
    let first_write = first_write(cfg, &mut eng, &backend)?;
    for r in &mut rows {
        r.first_write_us = first_write.first_write_us;
    }
    Box::new(eng)
        .close()
        .map_err(|e| BenchError::new(format!("{backend}: closing: {e}")))?;
    Ok(BackendRun { rows, first_write })
}
