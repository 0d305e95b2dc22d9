//! Lookups and traversals per scheme (Hosking et al. §6, the read-only
//! rows): ten iterations of OO1's lookup (1,000 random parts) and
//! traversal (depth 7 from a random part), the first cold (right after
//! the database is opened and the scheme armed), the other nine warm, each
//! answer checked against the reference. Reads pass no barrier, so the
//! schemes differ only in how a faulted page is installed (write-protected
//! or writable) — the rows show that they cost the same.

use serde::Serialize;
use std::path::Path;
use std::time::Instant;

use amber::{BackendChoice, Strategy};

use crate::oo1::ops::{Input, Job, Op, Protocol, inputs};
use crate::oo1::reference::Reference;
use crate::oo1::{Engine, GeneratedDb};
use crate::storage::{BenchError, summarize};
use crate::update::open_engine;

/// One (scheme, op, phase): the cold iteration, or the median of the warm.
#[derive(Clone, Debug, Serialize)]
pub struct ReadRow {
    pub scheme: String,
    pub op: &'static str,
    pub phase: &'static str,
    pub ms: f64,
}

/// The read rows of one scheme on the database in `dir`.
pub(super) fn run_scheme(
    generated: &GeneratedDb,
    dir: &Path,
    choice: BackendChoice,
    strategy: Strategy,
    scheme: &str,
) -> Result<Vec<ReadRow>, BenchError> {
    let mut rows = Vec::new();
    let mut reference = Reference::new(generated);
    for op in [Op::Lookup, Op::Traversal] {
        let mut eng = open_engine(dir, choice, strategy)?;
        // Arm the scheme before the first fault, as a program's first
        // transaction would.
        eng.db_mut()
            .begin()
            .and_then(|tx| tx.abort())
            .map_err(|e| BenchError::new(format!("{scheme}: arming: {e}")))?;
        let job = Job { op, p: None };
        let mut times = Vec::new();
        for input in inputs(generated.params, job, Protocol::OO1)
            .into_iter()
            .take(10)
        {
            let t = Instant::now();
            let (got, want) = match &input {
                Input::Lookup(ids) => (eng.lookup(ids), reference.lookup(ids)),
                Input::Traversal(root) => (eng.traverse(*root), reference.traverse(*root)),
                _ => return Err(BenchError::new("the harness gave an unexpected input")),
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let (got, want) = (
                got.map_err(|e| BenchError::new(format!("{scheme}: {op:?}: {e}")))?,
                want.map_err(|e| BenchError::new(format!("reference {op:?}: {e}")))?,
            );
            if got != want {
                return Err(BenchError::new(format!(
                    "{scheme}: {op:?} answered {got:?}, the reference {want:?}"
                )));
            }
            times.push(ms);
        }
        Box::new(eng)
            .close()
            .map_err(|e| BenchError::new(format!("{scheme}: closing: {e}")))?;
        let name = if op == Op::Lookup {
            "lookup"
        } else {
            "traversal"
        };
        rows.push(ReadRow {
            scheme: scheme.to_string(),
            op: name,
            phase: "cold",
            ms: times[0],
        });
        rows.push(ReadRow {
            scheme: scheme.to_string(),
            op: name,
            phase: "warm",
            ms: summarize(&times[1..]).median,
        });
    }
    Ok(rows)
}
