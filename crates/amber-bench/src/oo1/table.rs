//! The printed table of `amber bench oo1`: one row per operation, phase (and
//! p), one column per engine; then bytes written per commit (as measured
//! around each commit, and amortized with the installation work), engine
//! facts, and each engine's schema, durability and installation.

use std::fmt::Write as _;

use super::ops::{Op, Phase};
use super::report::{EngineJson, Oo1Report};

impl Oo1Report {
    /// The printed table.
    pub fn table(&self) -> String {
        let engines = self.engine_names();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "OO1: {} parts, seed {}, W = {}; cold cache: {}; Linux {}; {} ({} cores)",
            self.parts,
            self.seed,
            self.locality.window,
            self.cold_cache.name(),
            self.kernel,
            self.machine.cpu,
            self.machine.cores
        );
        let _ = writeln!(
            s,
            "ms per operation, median of {} round(s): cold = iteration 1 in a new process; warm = iteration {}; hot = mean of {} repeats",
            self.rounds,
            1 + self.protocol.warm,
            self.protocol.hot
        );
        let _ = write!(s, "\n{:<26} {:>6}", "operation", "count");
        for e in &engines {
            let _ = write!(s, " {e:>10}");
        }
        s.push('\n');
        for key in self.row_keys() {
            let first = engines.iter().find_map(|e| self.row(e, &key));
            let count = first.map_or("-".to_string(), |r| r.count.to_string());
            let _ = write!(s, "{:<26} {count:>6}", key.label());
            for e in &engines {
                let cell = self
                    .row(e, &key)
                    .map_or("fail".to_string(), |r| fmt_ms(r.ms_reported));
                let _ = write!(s, " {cell:>10}");
            }
            s.push('\n');
        }
        // Bytes written per commit.
        let commit_keys: Vec<RowKey> = self
            .row_keys()
            .into_iter()
            .filter(|k| k.op.commits() && k.phase == Phase::Warm)
            .collect();
        if !commit_keys.is_empty() {
            let _ = write!(
                s,
                "\nbytes written per commit, warm median: wchar / device (block device, machine-wide) / write_bytes (whole folios)\n{:<26} {:>6}",
                "operation", ""
            );
            for e in &engines {
                let _ = write!(s, " {e:>20}");
            }
            s.push('\n');
            for key in commit_keys {
                let _ = write!(s, "{:<26} {:>6}", key.op_label(), "");
                for e in &engines {
                    let cell = self.row(e, &key).map_or("-".to_string(), |r| {
                        format!(
                            "{}/{}/{}",
                            fmt_bytes(r.wchar),
                            fmt_bytes(r.device_bytes),
                            fmt_bytes(r.bytes_written)
                        )
                    });
                    let _ = write!(s, " {cell:>20}");
                }
                s.push('\n');
            }
            let _ = write!(
                s,
                "\namortized per commit: the job's commits, then each engine's installation forced (see the engines below), all bytes and time / commits\nbytes: wchar (bytes passed to write calls: log, page file, metadata) / device (block device, machine-wide); time: ms\n{:<26} {:>6}",
                "operation", "commits"
            );
            for e in &engines {
                let _ = write!(s, " {e:>20}");
            }
            s.push('\n');
            for key in self
                .row_keys()
                .into_iter()
                .filter(|k| k.op.commits() && k.phase == Phase::Warm)
            {
                let commits = engines
                    .iter()
                    .find_map(|e| self.amortized_row(e, &key))
                    .map_or("-".to_string(), |a| a.commits.to_string());
                let _ = write!(s, "{:<26} {commits:>6}", key.op_label());
                for e in &engines {
                    let cell = self.amortized_row(e, &key).map_or("-".to_string(), |a| {
                        format!(
                            "{}/{} {}",
                            fmt_bytes(a.amortized_bytes_per_commit),
                            fmt_bytes(a.amortized_device_bytes_per_commit),
                            fmt_ms(a.amortized_ms_per_commit)
                        )
                    });
                    let _ = write!(s, " {cell:>20}");
                }
                s.push('\n');
            }
            let counted: Vec<&str> = engines
                .iter()
                .copied()
                .filter(|e| {
                    self.results
                        .iter()
                        .any(|r| r.engine == *e && r.log_bytes.is_some())
                })
                .collect();
            if !counted.is_empty() {
                let _ = write!(
                    s,
                    "\nlog bytes per commit by the engine's own count, warm median\n{:<26} {:>6}",
                    "operation", ""
                );
                for e in &counted {
                    let _ = write!(s, " {e:>13}");
                }
                s.push('\n');
                for key in self
                    .row_keys()
                    .into_iter()
                    .filter(|k| k.op.commits() && k.phase == Phase::Warm)
                {
                    let _ = write!(s, "{:<26} {:>6}", key.op_label(), "");
                    for e in &counted {
                        let cell = self
                            .row(e, &key)
                            .map_or("-".to_string(), |r| fmt_bytes(r.log_bytes));
                        let _ = write!(s, " {cell:>13}");
                    }
                    s.push('\n');
                }
            }
        }
        let _ = write!(s, "\n{:<26} {:>6}", "engine", "");
        for e in &engines {
            let _ = write!(s, " {e:>10}");
        }
        s.push('\n');
        let facts: [(&str, EngineFact); 3] = [
            ("build (s)", |e| format!("{:.2}", e.build_ms / 1e3)),
            ("database size", |e| fmt_bytes(Some(e.db_bytes))),
            ("peak RSS", |e| fmt_bytes(e.peak_rss_kib.map(|k| k * 1024))),
        ];
        for (label, f) in facts {
            let _ = write!(s, "{label:<26} {:>6}", "");
            for e in &self.engines {
                let _ = write!(s, " {:>10}", f(e));
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "\nengines (schema; durability; installation forced for the amortized figures):"
        );
        for e in &self.engines {
            let _ = writeln!(
                s,
                "  {:<14} {}\n  {:<14} {}\n  {:<14} {}",
                e.name, e.schema, "", e.durability, "", e.install
            );
        }
        for u in &self.unavailable {
            let _ = writeln!(s, "  {:<14} unavailable: {}", u.engine, u.reason);
        }
        if !self.problems.is_empty() {
            let _ = writeln!(
                s,
                "\n{} PROBLEMS (answers differ from the reference or engines failed):",
                self.problems.len()
            );
            for p in &self.problems {
                let _ = writeln!(s, "  {p}");
            }
        }
        s
    }
}

/// Formats one fact of an engine for the table.
type EngineFact = fn(&EngineJson) -> String;

/// A row of the table: an operation (with p), a phase, or an `open` detail.
#[derive(Clone, Debug, PartialEq)]
pub struct RowKey {
    pub op: Op,
    pub p: Option<f64>,
    pub phase: Phase,
    pub detail: Option<&'static str>,
}

impl RowKey {
    /// `update p=0.05` or `lookup`.
    pub fn op_label(&self) -> String {
        match (self.detail, self.p) {
            (Some(d), _) => d.to_string(),
            (None, Some(p)) => format!("{} p={p}", self.op),
            (None, None) => self.op.to_string(),
        }
    }

    /// `update p=0.05 warm`.
    pub fn label(&self) -> String {
        match self.detail {
            Some(d) => format!("{d} cold"),
            None => format!("{} {}", self.op_label(), self.phase.name()),
        }
    }
}

/// Milliseconds with three significant digits.
pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "-".to_string();
    }
    if ms == 0.0 {
        return "0".to_string();
    }
    let digits = (2 - ms.log10().floor() as i32).clamp(0, 6) as usize;
    format!("{ms:.digits$}")
}

/// Bytes as B, K, M or G (powers of 1024).
pub fn fmt_bytes(bytes: Option<u64>) -> String {
    let Some(b) = bytes else {
        return "-".to_string();
    };
    let b = b as f64;
    if b < 1024.0 {
        format!("{b:.0}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1}M", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", b / (1024.0 * 1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_ms(123.4), "123");
        assert_eq!(fmt_ms(12.34), "12.3");
        assert_eq!(fmt_ms(1.234), "1.23");
        assert_eq!(fmt_ms(0.01234), "0.0123");
        assert_eq!(fmt_ms(0.0), "0");
        assert_eq!(fmt_bytes(Some(512)), "512B");
        assert_eq!(fmt_bytes(Some(4096)), "4.0K");
        assert_eq!(fmt_bytes(None), "-");
    }
}
