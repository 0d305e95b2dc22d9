//! What the server (and `amber bench`, which measures servers) reads of a
//! process from `/proc`: its CPU time and its memory.

use std::fs;

/// A size field of `/proc/PID/status` (`pid` a number, or `self`), such as
/// `VmRSS:` or `VmHWM:`, in KiB.
pub fn status_kib(pid: &str, key: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU time process `pid` (a number, or `self`) has used, user and
/// system, over all its threads (exited ones included), in seconds, at
/// clock-tick resolution (`/proc/PID/stat`).
pub fn cpu_time_s(pid: &str) -> Option<f64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}
