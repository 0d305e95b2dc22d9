//! What the CLI tests share: running the `amber` binary, and running one
//! test at a time.

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// What a run of `amber` gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the `amber` binary with `args` and waits for it.
pub fn amber(args: &[&str]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args(args)
        .output()
        .expect("run amber");
    Run {
        code: o.status.code().expect("exit status, not a signal"),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `p` as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Exit status 2 and exactly one line on stderr, `amber: …`, containing `has`.
#[track_caller]
pub fn assert_error(r: &Run, has: &str) {
    assert_eq!(r.code, 2, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "one line: {:?}", r.stderr);
    assert!(r.stderr.starts_with("amber: "), "{:?}", r.stderr);
    assert!(r.stderr.contains(has), "{:?} lacks {has:?}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{:?}", r.stderr);
}

/// Held for the whole of every test that opens a database in this process.
///
/// A database's lock is a `flock` on its file, which belongs to the open
/// file: a child process that another test thread is spawning holds a copy
/// of every descriptor from `fork` until its `exec` closes them
/// (`O_CLOEXEC`), so for that moment it holds the lock too. A test that
/// closed its database and then ran `amber` on it could find the database
/// "in use" (seen under load, about one run in fifteen). One test at a time
/// closes that window; the tests take a fraction of a second each.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
