//! Facts about the machine a benchmark ran on, recorded with every result:
//! the kernel, the CPU and memory, and the file system under a directory
//! (a number measured on tmpfs says nothing about a disk).

use std::fs;
use std::path::Path;

/// The kernel release, as `uname -r` prints it.
pub fn kernel() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// CPU model, logical CPUs, architecture and memory, in one line.
pub fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|r| r.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
        })
        .map_or(0.0, |kib| kib as f64 / (1024.0 * 1024.0));
    format!(
        "{model}, {cpus} CPUs, {}, {mem_gib:.1} GiB RAM",
        std::env::consts::ARCH
    )
}

/// The file system holding `path`: its type and device, from the longest
/// mount point of `/proc/self/mountinfo` that contains the path.
pub fn filesystem(path: &Path) -> String {
    let Ok(canon) = path.canonicalize() else {
        return "unknown".to_string();
    };
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return "unknown".to_string();
    };
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        // id parent major:minor root mount-point options [optional...] - type source super-options
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(mp), Some(dash)) = (fields.get(4), fields.iter().position(|f| *f == "-")) else {
            continue;
        };
        let mp = unescape(mp);
        if !canon.starts_with(&mp) {
            continue;
        }
        let fstype = fields.get(dash + 1).copied().unwrap_or("?");
        let source = fields.get(dash + 2).copied().unwrap_or("?");
        let len = mp.len();
        // Later lines win on a tie: they are mounted over earlier ones.
        if best.as_ref().is_none_or(|(l, _)| len >= *l) {
            best = Some((len, format!("{fstype} ({source} on {mp})")));
        }
    }
    best.map_or_else(|| "unknown".to_string(), |(_, s)| s)
}

/// Whether `path` lies on a memory file system, where `fdatasync` does
/// nothing and the numbers say nothing about a disk.
pub fn is_memory_fs(path: &Path) -> bool {
    let fs = filesystem(path);
    fs.starts_with("tmpfs") || fs.starts_with("ramfs")
}

/// Mount points escape space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(v) = b
                .get(i + 1..i + 4)
                .and_then(|o| std::str::from_utf8(o).ok())
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_there() {
        assert!(!kernel().is_empty());
        assert!(machine().contains("CPUs"));
        assert_ne!(filesystem(Path::new("/")), "unknown");
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
