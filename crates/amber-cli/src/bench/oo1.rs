//! `amber bench oo1`: the OO1 benchmark and the child process it re-executes.

use super::{COMPARE_HINT, check_json_target};
use crate::error::CliError;
use amber_bench::oo1::{self, BenchError, CHILD_SUBCOMMAND, EngineFactory, Oo1Args};
use std::fmt::Write as _;
use std::process::ExitCode;

/// The engines of `amber bench oo1`: Amber's, then the comparison engines
/// when the CLI is built with the `compare` feature.
fn oo1_engines() -> Vec<Box<dyn EngineFactory>> {
    #[allow(unused_mut)]
    let mut all = oo1::builtin_engines();
    #[cfg(feature = "compare")]
    all.extend(amber_compare::engines());
    all
}

/// `amber bench oo1 [ARGS]...`, and the hidden child subcommand the harness
/// re-executes this binary with (`amber bench oo1 __oo1-child`).
pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        // The reply (success or error) is on stdout; the status says which.
        return oo1::run_oo1_child(oo1_engines())
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| CliError::msg(format!("bench oo1: {e}")));
    }
    let compare = cfg!(feature = "compare");
    let mut a = match Oo1Args::parse(args) {
        Ok(a) => a,
        Err(BenchError::Help(usage)) if compare => return Err(CliError::Help(usage)),
        Err(BenchError::Help(usage)) => {
            return Err(CliError::Help(format!("{usage}\nnote: {COMPARE_HINT}")));
        }
        Err(e) => return Err(CliError::msg(format!("bench oo1: {e}"))),
    };
    a.child_args = vec!["bench".into(), "oo1".into(), CHILD_SUBCOMMAND.into()];
    check_json_target(a.json.as_deref())?;
    check_json_target(a.plot.as_deref())?;
    let engines = oo1_engines();
    let available: Vec<&str> = engines.iter().map(|f| f.info().name).collect();
    if let Some(unknown) = a
        .engines
        .iter()
        .flatten()
        .find(|n| !available.contains(&n.as_str()))
    {
        let hint = if compare {
            String::new()
        } else {
            format!(" ({COMPARE_HINT})")
        };
        return Err(CliError::msg(format!(
            "bench oo1: unknown engine {unknown:?}; available: {}{hint}",
            available.join(", ")
        )));
    }
    if !compare {
        eprintln!("amber bench oo1: note: {COMPARE_HINT}");
    }
    let json = a.json.clone();
    oo1::run_oo1(a, engines).map_err(|e| CliError::msg(format!("bench oo1: {e}")))?;
    if let Some(p) = json {
        let _ = writeln!(out, "wrote {}", p.display());
    }
    if !compare {
        let _ = writeln!(out, "note: {COMPARE_HINT}");
    }
    Ok(ExitCode::SUCCESS)
}
