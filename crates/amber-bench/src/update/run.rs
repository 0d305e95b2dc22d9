//! One scheme's run (a strategy on a backend): for each update
//! probability, the timed update traversals with one commit each, every
//! answer checked against the reference, and the minimal log computed
//! independently from the parts the traversal changed.

use std::path::Path;
use std::time::Duration;

use amber::CommitStats;
use amber::internals::wal::record::COMMIT_SIZE;
use amber::{BackendChoice, Strategy};

use super::first_write::first_write;
use super::minimal::{Expected, Shadow, visit_order};
use super::report::{FirstWrite, UpdateRow};
use super::{UpdateConfig, hot_input, open_engine};
use crate::hot::check_backend;
use crate::oo1::reference::Reference;
use crate::oo1::{Engine, GeneratedDb};
use crate::procfs::IoCounters;
use crate::storage::{BenchError, summarize};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_u64(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// `num / den`, 1 when both are 0 (nothing to log, nothing logged).
fn ratio(num: u64, den: u64) -> f64 {
    if num == 0 && den == 0 {
        1.0
    } else {
        num as f64 / den as f64
    }
}

/// One timed update.
struct Sample {
    traverse: Duration,
    commit: Duration,
    stats: CommitStats,
    /// What the benchmark computed the update changed, and the least log for
    /// it.
    expected: Expected,
    /// Bytes passed to write calls around the update.
    wchar: u64,
}

impl Sample {
    /// The commit record every non-empty commit adds.
    fn commit_record(&self) -> u64 {
        if self.stats.log_bytes > 0 {
            COMMIT_SIZE as u64
        } else {
            0
        }
    }

    /// The log bytes of the commit's range records alone.
    fn records(&self) -> u64 {
        self.stats.log_bytes - self.commit_record()
    }
}

/// Everything measured on one backend.
pub(super) struct BackendRun {
    pub(super) rows: Vec<UpdateRow>,
    pub(super) first_write: FirstWrite,
}

/// One scheme's database open for the hot update rows: `update` measures
/// each p on every scheme in turn (`measure`), so that the rows of one p
/// are taken seconds apart rather than minutes (this machine's speed drifts
/// by more over a scheme's whole sweep than the schemes differ by).
pub(super) struct SchemeRun {
    eng: crate::oo1::amber_engine::AmberOo1,
    backend: String,
    scheme: String,
    strategy: Strategy,
    reference: Reference,
    shadow: Shadow,
    rows: Vec<UpdateRow>,
}

impl SchemeRun {
    /// Opens the database in `dir` on backend `choice` under `strategy`.
    pub(super) fn open(
        generated: &GeneratedDb,
        dir: &Path,
        choice: BackendChoice,
        strategy: Strategy,
    ) -> Result<SchemeRun, BenchError> {
        let eng = open_engine(dir, choice, strategy)?;
        check_backend(choice, eng.db())?;
        let backend = eng.db().backend().to_string();
        // The scheme names of `amber bench detect`: page protection by backend.
        let scheme = super::scheme_name(strategy, &backend);
        let reference = Reference::new(generated);
        let shadow = Shadow::new(generated, &eng)?;
        Ok(SchemeRun {
            eng,
            backend,
            scheme,
            strategy,
            reference,
            shadow,
            rows: Vec::new(),
        })
    }

    /// The row of update probability `p`: the warm-up and timed updates.
    pub(super) fn measure(
        &mut self,
        cfg: &UpdateConfig,
        generated: &GeneratedDb,
        p: f64,
    ) -> Result<(), BenchError> {
        let SchemeRun {
            eng,
            backend,
            scheme,
            strategy,
            reference,
            shadow,
            rows,
        } = self;
        let strategy = *strategy;
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
            let expected = shadow.apply(&order, &decisions);
            let wchar = io0.zip(io1).map_or(0, |(a, b)| a.delta(b).wchar);
            if i >= cfg.warmup {
                samples.push(Sample {
                    traverse: cost.traverse,
                    commit: cost.commit,
                    stats: cost.stats,
                    expected,
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
        // The verdict: each commit's records against the independent
        // minimum, the worst commit deciding.
        let vs_minimal: Vec<f64> = samples
            .iter()
            .map(|s| ratio(s.records(), s.expected.minimal_log_bytes))
            .collect();
        rows.push(UpdateRow {
            backend: backend.clone(),
            scheme: scheme.clone(),
            p,
            iters: samples.len(),
            increments: plan.increments() as u64,
            changed_parts: medu(&|s| s.expected.parts),
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
            noted_bytes: medu(&|s| s.stats.noted_bytes),
            ran_under: super::ran_under(samples.iter().map(|s| s.stats.strategy)),
            log: super::log_name(strategy),
            log_bytes,
            commit_record_bytes: medu(&Sample::commit_record),
            minimal_log_bytes: medu(&|s| s.expected.minimal_log_bytes),
            log_vs_minimal: vs_minimal.iter().copied().fold(f64::NAN, f64::max),
            log_vs_minimal_median: summarize(&vs_minimal).median,
            engine_minimal_log_bytes: medu(&|s| s.stats.minimal_log_bytes),
            log_vs_engine_minimal: samples
                .iter()
                .map(|s| ratio(s.records(), s.stats.minimal_log_bytes))
                .fold(f64::NAN, f64::max),
            changed_bytes: medu(&|s| s.stats.changed_bytes),
            blocks: medu(&|s| s.stats.blocks),
            wchar: medu(&|s| s.wchar),
            first_write_us: f64::NAN,
            commit_ms_summary: commit,
            traverse_ms_summary: traverse,
        });
        Ok(())
    }

    /// The first write's cost, and the database closed.
    pub(super) fn finish(mut self, cfg: &UpdateConfig) -> Result<BackendRun, BenchError> {
        let first_write = first_write(cfg, &mut self.eng, &self.backend)?;
        for r in &mut self.rows {
            r.first_write_us = first_write.first_write_us;
        }
        Box::new(self.eng)
            .close()
            .map_err(|e| BenchError::new(format!("{}: closing: {e}", self.backend)))?;
        Ok(BackendRun {
            rows: self.rows,
            first_write,
        })
    }
}
