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

/// `amber serve ARGS --listen 127.0.0.1:0` started as a child, logging at
/// `info` to a pipe: the child, the address it listens on, its first log
/// line (which names the address) and the rest of its log.
#[allow(dead_code)] // Not every test binary starts a server.
pub fn serve(
    args: &[&str],
) -> (
    std::process::Child,
    std::net::SocketAddr,
    String,
    std::io::BufReader<std::process::ChildStderr>,
) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_amber"))
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("amber serve started");
    let mut log = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    log.read_line(&mut line).expect("a log line");
    let addr = line
        .split_whitespace()
        .last()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (child, addr, line, log)
}
