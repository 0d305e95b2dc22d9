//! `amber bench oo7`: the OO7 benchmark and the child process it re-executes.

use super::{COMPARE_HINT, check_json_target};
use crate::error::CliError;
use amber_bench::oo1::BenchError;
use amber_bench::oo7::{self, CHILD_SUBCOMMAND, Oo7Args, Oo7Factory};
use std::fmt::Write as _;
use std::process::ExitCode;

/// The engines of `amber bench oo7`: Amber's, then the comparison engines
/// when the CLI is built with the `compare` feature.
fn oo7_engines() -> Vec<Box<dyn Oo7Factory>> {
    #[allow(unused_mut)]
    let mut all = oo7::builtin_engines();
    #[cfg(feature = "compare")]
    all.extend(amber_compare::oo7::engines());
    all
}

/// The peers of `amber bench oo7 --server`: PostgreSQL when the CLI is
/// built with the `compare` feature.
fn peers() -> Vec<Box<dyn oo7::clients::Peer>> {
    #[cfg(feature = "compare")]
    return vec![Box::new(amber_compare::postgres::clients::PostgresPeer)];
    #[cfg(not(feature = "compare"))]
    Vec::new()
}

/// `amber bench oo7 [ARGS]...`, and the hidden child subcommand the harness
/// re-executes this binary with (`amber bench oo7 __oo7-child`).
pub(super) fn run(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    if args.first().map(String::as_str) == Some(oo7::client::CLIENT_SUBCOMMAND) {
        let job = args.get(1).map(String::as_str).unwrap_or_default();
        return oo7::client::run_client(job, &peers())
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| CliError::msg(format!("bench oo7 client: {e}")));
    }
    if args.iter().any(|a| a == "--server") {
        return run_clients(args, out);
    }
    if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        return oo7::run_oo7_child(oo7_engines())
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| CliError::msg(format!("bench oo7: {e}")));
    }
    let compare = cfg!(feature = "compare");
    let mut a = match Oo7Args::parse(args) {
        Ok(a) => a,
        Err(BenchError::Help(usage)) if compare => return Err(CliError::Help(usage)),
        Err(BenchError::Help(usage)) => {
            return Err(CliError::Help(format!("{usage}\nnote: {COMPARE_HINT}")));
        }
        Err(e) => return Err(CliError::msg(format!("bench oo7: {e}"))),
    };
    a.child_args = vec!["bench".into(), "oo7".into(), CHILD_SUBCOMMAND.into()];
    check_json_target(a.json.as_deref())?;
    check_json_target(a.plot.as_deref())?;
    let engines = oo7_engines();
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
            "bench oo7: unknown engine {unknown:?}; available: {}{hint}",
            available.join(", ")
        )));
    }
    if !compare {
        eprintln!("amber bench oo7: note: {COMPARE_HINT}");
    }
    let json = a.json.clone();
    oo7::run_oo7(a, engines).map_err(|e| CliError::msg(format!("bench oo7: {e}")))?;
    if let Some(p) = json {
        let _ = writeln!(out, "wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `amber bench oo7 --server …`: QuickStore's client-server experiment.
fn run_clients(args: &[String], out: &mut String) -> Result<ExitCode, CliError> {
    let mut a = match oo7::clients::ClientsArgs::parse(args) {
        Ok(a) => a,
        Err(BenchError::Help(usage)) => return Err(CliError::Help(usage)),
        Err(e) => return Err(CliError::msg(format!("bench oo7: {e}"))),
    };
    a.child_args = vec![
        "bench".into(),
        "oo7".into(),
        oo7::client::CLIENT_SUBCOMMAND.into(),
    ];
    check_json_target(a.json.as_deref())?;
    let report = oo7::clients::run_clients(&a, &peers())
        .map_err(|e| CliError::msg(format!("bench oo7: {e}")))?;
    oo7::clients::print_table(&report, out);
    if let Some(p) = &a.json {
        let _ = writeln!(out, "wrote {}", p.display());
    }
    if let Some(d) = &a.plot {
        let _ = writeln!(out, "wrote the charts into {}", d.display());
    }
    Ok(ExitCode::SUCCESS)
}
