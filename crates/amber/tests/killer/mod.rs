//! Killing a child process that reports its commits: shared by the
//! storage-level kill test (`store_kill.rs`) and the object-level one
//! (`obj_common/kill.rs`).
//!
//! The child prints `committed N` after each commit returns (other lines,
//! such as the test harness's, are ignored). A round only counts if the child
//! made progress and died of the kill: a child that never starts, stops by
//! itself or crashes fails the test with its stderr, instead of passing with
//! nothing checked.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The number in a `committed N` line.
fn committed(line: &str) -> Option<u64> {
    let n = line.strip_prefix("committed ")?;
    Some(n.trim().parse().expect("a commit number"))
}

/// Spawns `cmd` (stdout piped, stderr to the file `err`), waits until it has
/// reported `want` commits (at least 1), lets it run for `delay` more, kills
/// it with SIGKILL and returns the last commit it reported, lines written
/// before it died included. Panics, naming `round` and quoting the child's
/// stderr, if it stops before `want` reports or ends other than by the kill.
pub fn kill_after_commits(
    cmd: &mut Command,
    want: u64,
    delay: Duration,
    err: &Path,
    round: u64,
) -> u64 {
    assert!(want >= 1, "a round must wait for at least one commit");
    let err_file = std::fs::File::create(err).expect("the child's stderr file");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(err_file)
        .spawn()
        .expect("spawn the child");
    let stderr = || std::fs::read_to_string(err).unwrap_or_default();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut last = None;
    let mut seen = 0;
    while seen < want {
        match lines.next() {
            Some(Ok(l)) => {
                if let Some(n) = committed(&l) {
                    last = Some(n);
                    seen += 1;
                }
            }
            _ => {
                let status = child.wait().expect("wait");
                panic!(
                    "round {round}: the child stopped by itself ({status}) after {seen} of \
                     {want} commits: {}",
                    stderr()
                );
            }
        }
    }
    std::thread::sleep(delay);
    child.kill().expect("kill");
    // What the child said before dying.
    for l in lines.map_while(Result::ok) {
        if let Some(n) = committed(&l) {
            last = Some(n);
        }
    }
    let status = child.wait().expect("wait");
    if status.signal() != Some(libc::SIGKILL) {
        panic!(
            "round {round}: the child ended with {status}, not by the kill: {}",
            stderr()
        );
    }
    last.expect("at least one commit was seen")
}
