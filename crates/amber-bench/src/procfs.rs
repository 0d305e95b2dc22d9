//! What the benchmarks read from `/proc`: I/O counters, peak RSS, CPU time,
//! load and the CPU; and dropping the OS page cache where the machine allows
//! it.

use std::fs;
use std::io::{self, Write};

/// The write counters of `/proc/self/io`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Bytes passed to `write`-like system calls (including to the page cache).
    pub wchar: u64,
    /// Bytes this process caused to be sent to the storage layer, accounted when
    /// page-cache folios are dirtied. With large folios (ext4 on Linux 6.x) a
    /// 4 KiB write into a cached file can account a whole folio (up to 2 MiB),
    /// so this overstates in-place writes; see [`BlockDevice`].
    pub write_bytes: u64,
}

impl IoCounters {
    /// This process's counters, or `None` where `/proc/self/io` is missing
    /// (kernels without task I/O accounting).
    pub fn now() -> Option<IoCounters> {
        Self::of("self")
    }

    /// The counters of process `pid` (a number, or `self`): its threads',
    /// the exited ones', and those of the children it has waited for (the
    /// kernel adds a child's counters to its parent's when the parent
    /// reaps it). Another user's process needs root.
    pub fn of(pid: &str) -> Option<IoCounters> {
        let text = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
        Some(IoCounters {
            wchar: field(&text, "wchar:")?,
            write_bytes: field(&text, "write_bytes:")?,
        })
    }

    /// The sum of two processes' counters.
    fn plus(self, other: IoCounters) -> IoCounters {
        IoCounters {
            wchar: self.wchar + other.wchar,
            write_bytes: self.write_bytes + other.write_bytes,
        }
    }

    /// The counts between `self` (earlier) and `later`.
    pub fn delta(self, later: IoCounters) -> IoCounters {
        IoCounters {
            wchar: later.wchar.saturating_sub(self.wchar),
            write_bytes: later.write_bytes.saturating_sub(self.write_bytes),
        }
    }
}

/// The block device holding a directory, for counting the bytes actually sent
/// to it (`/sys/dev/block/MAJ:MIN/stat`, sectors written). The count is
/// machine-wide: every process writing to the device adds to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    stat: std::path::PathBuf,
}

impl BlockDevice {
    /// The device of `path`, or `None` when it is not a block device with
    /// statistics (tmpfs, overlay and other virtual file systems).
    pub fn of(path: &std::path::Path) -> Option<BlockDevice> {
        use std::os::unix::fs::MetadataExt;
        let dev = fs::metadata(path).ok()?.dev();
        // The kernel's dev_t encoding (glibc's gnu_dev_major / gnu_dev_minor).
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let stat = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
        let device = BlockDevice { stat };
        device.written_bytes().map(|_| device)
    }

    /// Bytes written to the device since boot (sectors written × 512).
    pub fn written_bytes(&self) -> Option<u64> {
        let text = fs::read_to_string(&self.stat).ok()?;
        let sectors: u64 = text.split_whitespace().nth(6)?.parse().ok()?;
        Some(sectors * 512)
    }
}

/// The first number after `key` at the start of a line of `text`.
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// A server process and its descendants: the processes doing an engine's
/// work outside the measured process (PostgreSQL's postmaster and the
/// backends and background workers it forks), whose writes and memory the
/// benchmarks count as the engine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessTree {
    root: u32,
}

impl ProcessTree {
    /// The tree of processes under (and including) `root`.
    pub fn new(root: u32) -> ProcessTree {
        ProcessTree { root }
    }

    /// The root's process id.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// The root and its live descendants, root first; `None` when the root
    /// is gone.
    pub fn pids(&self) -> Option<Vec<u32>> {
        fs::metadata(format!("/proc/{}", self.root)).ok()?;
        let mut parent_of = Vec::new();
        for entry in fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            // `PID (COMM) STATE PPID …`: the command may hold spaces and
            // parentheses, so the fields start after the last `)`.
            let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
                continue; // exited since the directory was read
            };
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
        let mut tree = vec![self.root];
        let mut i = 0;
        while i < tree.len() {
            let parent = tree[i];
            tree.extend(
                parent_of
                    .iter()
                    .filter(|&&(_, pp)| pp == parent)
                    .map(|&(p, _)| p),
            );
            i += 1;
        }
        Some(tree)
    }

    /// The write counters of the whole tree: the root's (which hold those
    /// of the children it has reaped) plus every live descendant's. A
    /// process that exits between the two reads is missed until its
    /// parent reaps it, a few bytes of one sample.
    pub fn io(&self) -> Option<IoCounters> {
        let mut total = IoCounters::default();
        for pid in self.pids()? {
            if let Some(io) = IoCounters::of(&pid.to_string()) {
                total = total.plus(io);
            }
        }
        Some(total)
    }

    /// The CPU time of the whole tree so far, seconds: every live
    /// process's user and system time, plus the time of the children the
    /// root has waited for (`cutime`, `cstime` of `/proc/ROOT/stat`), so
    /// that a process that exits (a PostgreSQL backend whose client
    /// disconnected) still counts. One that exits between the reads and
    /// is not yet reaped is missed, a tick or so.
    pub fn cpu_time_s(&self) -> Option<f64> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.root)).ok()?;
        // Fields after the command: utime is the 12th, cstime the 15th.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        let reaped: u64 = (fields.get(13..15)?.iter())
            .map(|f| f.parse::<u64>().ok())
            .sum::<Option<u64>>()?;
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let live: f64 = (self.pids()?.iter())
            .filter_map(|pid| cpu_time_s_of(&pid.to_string()))
            .sum();
        Some(live + reaped as f64 / ticks)
    }

    /// The memory the tree holds now, in KiB: the sum of every process's
    /// proportional set size (`Pss` of `/proc/PID/smaps_rollup`), which
    /// shares each shared page among the processes mapping it, so that
    /// shared memory (PostgreSQL's buffer pool) counts once.
    pub fn memory_kib(&self) -> Option<u64> {
        let mut total = 0;
        for pid in self.pids()? {
            let text = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok();
            total += text.and_then(|t| field(&t, "Pss:")).unwrap_or(0);
        }
        Some(total)
    }
}

/// This process's peak resident set size (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    peak_rss_kib_of("self")
}

/// The peak resident set size of process `pid` (a number, or `self`), in
/// KiB.
pub fn peak_rss_kib_of(pid: &str) -> Option<u64> {
    amber_server::procfs::status_kib(pid, "VmHWM:")
}

/// CPU time this process has used, user and system, over all its threads
/// (exited ones included), in seconds, at clock-tick resolution
/// (`/proc/self/stat`).
pub fn cpu_time_s() -> Option<f64> {
    cpu_time_s_of("self")
}

/// [`cpu_time_s`] of process `pid` (a number, or `self`).
pub fn cpu_time_s_of(pid: &str) -> Option<f64> {
    amber_server::procfs::cpu_time_s(pid)
}

/// CPU time this process has used, user and system, over all its threads
/// (exited ones included), in nanoseconds: the kernel's
/// `CLOCK_PROCESS_CPUTIME_ID`, which sums each thread's scheduler runtime
/// exactly, where [`cpu_time_s`] has the clock tick's resolution. The
/// user/system split is not given: the kernel apportions it by sampling
/// at each tick, so at this resolution only the sum is exact.
pub fn cpu_time_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// Minor page faults this process has taken (`/proc/self/stat`, field
/// 10): with the mapped backend, the kernel's faults on the page cache.
pub fn minor_faults() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// The load average over the last minute (`/proc/loadavg`): how many
/// threads were running or waiting for a CPU, on average.
pub fn load_average() -> Option<f64> {
    fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The machine's CPU time so far, every process's, in clock ticks
/// (`/proc/stat`'s first line): `[busy, all, iowait]`, busy being user,
/// nice, system, irq, softirq and steal, all adding idle and iowait.
pub fn machine_cpu_ticks() -> Option<[u64; 3]> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|f| f.parse().ok())
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some([busy, busy + at(3) + at(4), at(4)])
}

/// The CPU model name from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Total memory in KiB (`MemTotal`).
pub fn mem_total_kib() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    field(&text, "MemTotal:")
}

const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// Whether this process may drop the OS page cache.
pub fn can_drop_caches() -> bool {
    fs::OpenOptions::new().write(true).open(DROP_CACHES).is_ok()
}

/// Writes dirty data back and drops the OS page cache, dentries and inodes
/// (`sync; echo 3 > /proc/sys/vm/drop_caches`; needs root).
pub fn drop_caches() -> io::Result<()> {
    // `sync` first: dirty pages cannot be dropped.
    let status = std::process::Command::new("sync").status()?;
    if !status.success() {
        return Err(io::Error::other("sync failed"));
    }
    let mut f = fs::OpenOptions::new().write(true).open(DROP_CACHES)?;
    f.write_all(b"3\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_fields() {
        let text = "rchar: 10\nwchar: 20\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(field(text, "wchar:"), Some(20));
        assert_eq!(field(text, "write_bytes:"), Some(4096));
        assert_eq!(field(text, "missing:"), None);
        let status = "Name:\tx\nVmHWM:\t    2252 kB\n";
        assert_eq!(field(status, "VmHWM:"), Some(2252));
    }

    #[test]
    fn finds_the_device_of_the_temporary_directory() {
        // Not every machine has one (tmpfs); where there is, it counts.
        if let Some(dev) = BlockDevice::of(&std::env::temp_dir()) {
            assert!(dev.written_bytes().is_some());
        }
    }

    #[test]
    fn a_process_tree_keeps_the_cpu_of_children_that_exited() {
        let me = ProcessTree::new(std::process::id());
        let before = me.cpu_time_s().expect("this process");
        // A child that burns CPU, then exits and is waited for.
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(status.success());
        let child = cpu_time_s_of("self").zip(me.cpu_time_s());
        let (own, tree) = child.expect("times");
        assert!(tree - before >= 0.05, "{before} -> {tree}");
        assert!(
            tree > own + 0.05,
            "the child's time is the tree's: {own} {tree}"
        );
    }

    #[test]
    fn a_process_tree_counts_its_children() {
        let me = ProcessTree::new(std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let pids = me.pids().expect("this process");
        assert_eq!(pids[0], std::process::id());
        assert!(pids.contains(&child.id()), "{pids:?}");
        assert!(me.io().is_some());
        assert!(me.memory_kib().is_some_and(|k| k > 0));
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(ProcessTree::new(child.id()).pids().is_none());
    }

    #[test]
    fn reads_this_process() {
        if let Some(io) = IoCounters::now() {
            assert_eq!(io.delta(io), IoCounters::default());
        }
        assert!(cores() >= 1);
        let a = cpu_time_s().expect("/proc/self/stat");
        let ns = cpu_time_ns();
        assert!(ns > 0 && cpu_time_ns() >= ns);
        assert!(cpu_time_s().expect("/proc/self/stat") >= a);
        assert!(load_average().is_some_and(|l| l >= 0.0));
    }
}
