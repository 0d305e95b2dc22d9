//! `oo1`: runs OO1 on every comparison engine, as `amber bench oo1` will once
//! the CLI routes to the harness. `oo1 __oo1-child` serves the harness's child
//! processes.

use std::process::ExitCode;

use amber_bench::oo1::{self, BenchError, CHILD_SUBCOMMAND, Oo1Args};

fn engines() -> Vec<Box<dyn oo1::EngineFactory>> {
    let mut all = oo1::builtin_engines();
    all.extend(amber_compare::engines());
    all
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        oo1::run_oo1_child(engines())
    } else {
        Oo1Args::parse(&args).and_then(|a| oo1::run_oo1(a, engines()).map(|_| ()))
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Help(usage)) => {
            print!("{usage}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oo1: {e}");
            ExitCode::FAILURE
        }
    }
}
