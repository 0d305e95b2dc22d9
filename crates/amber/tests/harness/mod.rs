//! The harness of the suites whose tests need something of the kernel or
//! the host: the userfaultfd backend (asynchronous write-protect and
//! `PAGEMAP_SCAN`, Linux 6.7), or `vm.max_map_count` at its default.
//!
//! The standard harness cannot decide at run time that a test does not
//! apply, and a test that returns early passes, so a machine that ran
//! nothing would report success. Here a test that cannot run is reported
//! as *ignored*, its requirement named in the list and the reason printed
//! first; and a test needing userfaultfd fails instead when
//! `AMBER_REQUIRE_UFFD=1` (set by CI on kernels that have the features): a
//! capable machine never skips them silently.
#![allow(dead_code)]

use amber::{BackendChoice, Db, Options};
use libtest_mimic::{Arguments, Failed, Trial};
use std::process::ExitCode;

/// What a test needs of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: it runs everywhere.
    Nothing,
    /// The userfaultfd backend.
    Uffd,
    /// `vm.max_map_count` low enough to be exhausted by a test (at most
    /// 65,530 × 1.05: the default, give or take).
    DefaultMapCount,
}

/// A test: its name, its body, and what it needs.
pub type Case = (&'static str, fn(), Needs);

/// Why the userfaultfd backend cannot run here, if it cannot.
/// `AMBER_TEST_NO_UFFD=<reason>` pretends it cannot (to check this
/// harness's reports on a kernel that has the features).
pub fn uffd_unavailable() -> Option<String> {
    if let Ok(why) = std::env::var("AMBER_TEST_NO_UFFD") {
        return Some(why);
    }
    let o = Options {
        backend: BackendChoice::Uffd,
        ..Options::default()
    };
    Db::probe_backend(&o).err().map(|e| e.to_string())
}

/// Why the map-entry limit cannot be reached by a test here, if it cannot.
pub fn map_count_raised() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/sys/vm/max_map_count").ok()?;
    let n: u64 = raw.trim().parse().ok()?;
    (n > 68_800).then(|| format!("vm.max_map_count is {n} on this host, above the default 65530"))
}

/// Why a test needing `needs` cannot run here, if it cannot.
fn unavailable(needs: Needs) -> Option<String> {
    match needs {
        Needs::Nothing => None,
        Needs::Uffd => uffd_unavailable(),
        Needs::DefaultMapCount => map_count_raised(),
    }
}

/// The command line, with the test-name filters taken out: the standard
/// harness takes any number of them (`cargo test -- killed bigger`), this
/// one only one, so they are applied here.
fn arguments() -> (Arguments, Vec<String>) {
    // Options of the standard harness that take a value.
    const VALUED: [&str; 7] = [
        "--test-threads",
        "--skip",
        "--format",
        "--color",
        "--logfile",
        "-Z",
        "--report-time",
    ];
    let mut rest = Vec::new();
    let mut filters = Vec::new();
    let mut args = std::env::args();
    rest.extend(args.next());
    while let Some(a) = args.next() {
        if a.starts_with('-') {
            let takes_value = VALUED.contains(&a.as_str());
            rest.push(a);
            if takes_value {
                rest.extend(args.next());
            }
        } else {
            filters.push(a);
        }
    }
    (Arguments::from_iter(rest), filters)
}

/// Runs `cases` (those the command line's filters name, or all).
pub fn run(cases: Vec<Case>) -> ExitCode {
    let (args, filters) = arguments();
    let named = |name: &str| {
        filters.is_empty()
            || filters.iter().any(|f| {
                if args.exact {
                    name == f
                } else {
                    name.contains(f.as_str())
                }
            })
    };
    let cases: Vec<Case> = cases.into_iter().filter(|c| named(c.0)).collect();
    let required = std::env::var("AMBER_REQUIRE_UFFD").is_ok_and(|v| v == "1");
    let mut said = std::collections::BTreeSet::new();
    let trials = cases
        .into_iter()
        .map(|(name, f, needs)| match unavailable(needs) {
            None => Trial::test(name, move || {
                f();
                Ok(())
            }),
            Some(why) if required && needs == Needs::Uffd => Trial::test(name, move || {
                Err(Failed::from(format!(
                    "AMBER_REQUIRE_UFFD=1 but the userfaultfd backend is unavailable: {why}"
                )))
            }),
            Some(why) => {
                if said.insert(why.clone()) {
                    eprintln!("not run here: {why}");
                }
                let kind = match needs {
                    Needs::Uffd => "needs userfaultfd",
                    _ => "needs vm.max_map_count at its default",
                };
                Trial::test(name, || Ok(()))
                    .with_kind(kind)
                    .with_ignored_flag(true)
            }
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Runs `cases`, which all need the userfaultfd backend.
pub fn run_uffd(cases: Vec<(&'static str, fn())>) -> ExitCode {
    run(cases
        .into_iter()
        .map(|(n, f)| (n, f, Needs::Uffd))
        .collect())
}
