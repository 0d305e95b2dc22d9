//! The harness of the suites that need the userfaultfd backend.
//!
//! Where the kernel lacks what that backend needs (asynchronous
//! write-protect and `PAGEMAP_SCAN`, Linux 6.7), its tests cannot run. The
//! standard harness has no way to decide that at run time, and a test that
//! returns early passes, so a machine that ran nothing would report
//! success. Here each such test is reported as *ignored*, with the reason in
//! the summary line, and with `AMBER_REQUIRE_UFFD=1` (set by CI on kernels
//! that have the features) as *failed*: a capable machine never skips them
//! silently.
#![allow(dead_code)]

use amber::{BackendChoice, Db, Options};
use libtest_mimic::{Arguments, Failed, Trial};
use std::process::ExitCode;

/// A test: its name and body.
pub type Case = (&'static str, fn());

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

/// Runs `cases`, which need the userfaultfd backend.
pub fn run_uffd(cases: Vec<Case>) -> ExitCode {
    let args = Arguments::from_args();
    let unavailable = uffd_unavailable();
    let required = std::env::var("AMBER_REQUIRE_UFFD").is_ok_and(|v| v == "1");
    if let Some(why) = &unavailable {
        eprintln!("userfaultfd backend unavailable on this kernel: {why}");
    }
    let trials = cases
        .into_iter()
        .map(|(name, f)| match &unavailable {
            None => Trial::test(name, move || {
                f();
                Ok(())
            }),
            Some(why) if required => {
                let why = why.clone();
                Trial::test(name, move || {
                    Err(Failed::from(format!(
                        "AMBER_REQUIRE_UFFD=1 but the userfaultfd backend is unavailable: {why}"
                    )))
                })
            }
            Some(_) => Trial::test(name, || Ok(()))
                .with_kind("needs userfaultfd")
                .with_ignored_flag(true),
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
