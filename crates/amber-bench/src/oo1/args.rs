//! The options of `amber bench oo1`, parsed without clap so that any front end
//! can forward its arguments.

use std::path::PathBuf;

use super::child::CHILD_SUBCOMMAND;
use super::error::BenchError;
use super::ops::{Op, Protocol};

/// Default `--parts`: OO1's small database.
pub const DEFAULT_PARTS: u32 = 20_000;

/// **(choice)** Default `--seed`: the year of Cattell & Skeen's paper.
pub const DEFAULT_SEED: u64 = 1992;

/// **(choice)** Default `--rounds`: three, so that one stretch of noise from
/// outside (another tenant of the machine's cores, the kernel's writeback)
/// cannot decide a cell: each cell is the median of three runs spaced an
/// engine-sweep apart.
pub const DEFAULT_ROUNDS: u32 = 3;

/// The usage text of `amber bench oo1`.
pub const USAGE: &str = "\
usage: amber bench oo1 [options]

Runs the OO1 benchmark (Cattell & Skeen 1992) on every engine and prints a table.

options:
  --parts N        parts in the database (default 20000; 200000 is OO1's large database)
  --engines LIST   comma-separated engines to run, in column order (default: all available)
  --ops LIST       comma-separated operations: lookup,traversal,reverse,insert,update,open (default: all)
  --dir DIR        where to build the databases (default: a temporary directory, removed afterwards)
  --cache-mib M    cache budget in MiB for engines that have one (default: each engine's own)
  --json FILE      write the results as JSON
  --plot FILE      write an SVG bar chart (log scale) of cold/warm/hot per operation and engine
  --seed S         seed of the database and of every random input (default 1992)
  --rounds R       run every engine's jobs R times, round-robin; each cell is the median over rounds (default 3)
  --drop-caches    drop the OS page cache before every cold iteration, where permitted
  -h, --help       print this text
";

/// Parsed options of `amber bench oo1`.
#[derive(Clone, Debug, PartialEq)]
pub struct Oo1Args {
    /// `--parts N`.
    pub parts: u32,
    /// `--engines LIST`; `None` runs every engine given to the harness.
    pub engines: Option<Vec<String>>,
    /// `--ops LIST`.
    pub ops: Vec<Op>,
    /// `--dir DIR`; `None` uses a temporary directory.
    pub dir: Option<PathBuf>,
    /// `--cache-mib M`.
    pub cache_mib: Option<u64>,
    /// `--json FILE`.
    pub json: Option<PathBuf>,
    /// `--plot FILE`.
    pub plot: Option<PathBuf>,
    /// `--seed S`.
    pub seed: u64,
    /// `--drop-caches`.
    pub drop_caches: bool,
    /// `--rounds R`: sweeps over every engine and job.
    pub rounds: u32,
    /// Iterations per job; OO1's protocol unless a test asks for fewer.
    pub protocol: Protocol,
    /// The arguments that make `std::env::current_exe()` call
    /// [`run_oo1_child`](super::run_oo1_child); by default just
    /// [`CHILD_SUBCOMMAND`]. A front end whose hidden subcommand sits elsewhere
    /// (for example `amber bench __oo1-child`) sets this.
    pub child_args: Vec<String>,
}

impl Default for Oo1Args {
    fn default() -> Self {
        Self {
            parts: DEFAULT_PARTS,
            engines: None,
            ops: Op::ALL.to_vec(),
            dir: None,
            cache_mib: None,
            json: None,
            plot: None,
            seed: DEFAULT_SEED,
            drop_caches: false,
            rounds: DEFAULT_ROUNDS,
            protocol: Protocol::OO1,
            child_args: vec![CHILD_SUBCOMMAND.to_string()],
        }
    }
}

impl Oo1Args {
    /// Parses the arguments that follow `amber bench oo1`. `--help` gives
    /// [`BenchError::Help`] with the usage text.
    pub fn parse(args: &[String]) -> Result<Oo1Args, BenchError> {
        let mut out = Oo1Args::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            let mut value = |name: &str| -> Result<String, BenchError> {
                match &inline {
                    Some(v) => Ok(v.clone()),
                    None => it.next().cloned().ok_or_else(|| {
                        BenchError::Usage(format!("{name} needs a value\n\n{USAGE}"))
                    }),
                }
            };
            match flag {
                "-h" | "--help" => return Err(BenchError::Help(USAGE.to_string())),
                "--parts" => out.parts = number(flag, &value(flag)?)?,
                "--seed" => out.seed = number(flag, &value(flag)?)?,
                "--rounds" => out.rounds = number(flag, &value(flag)?)?,
                "--cache-mib" => out.cache_mib = Some(number(flag, &value(flag)?)?),
                "--dir" => out.dir = Some(PathBuf::from(value(flag)?)),
                "--json" => out.json = Some(PathBuf::from(value(flag)?)),
                "--plot" => out.plot = Some(PathBuf::from(value(flag)?)),
                "--engines" => out.engines = Some(list(&value(flag)?)),
                "--ops" => {
                    out.ops = list(&value(flag)?)
                        .iter()
                        .map(|name| {
                            Op::from_name(name).ok_or_else(|| {
                                BenchError::Usage(format!(
                                    "unknown operation {name:?} in --ops (expected lookup, traversal, reverse, insert, update, open)"
                                ))
                            })
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--drop-caches" if inline.is_none() => out.drop_caches = true,
                _ => {
                    return Err(BenchError::Usage(format!(
                        "unknown argument {arg:?}\n\n{USAGE}"
                    )));
                }
            }
        }
        if out.engines.as_ref().is_some_and(|e| e.is_empty()) {
            return Err(BenchError::Usage(
                "--engines needs at least one engine".into(),
            ));
        }
        if out.rounds == 0 {
            return Err(BenchError::Usage(
                "--rounds needs at least one round".into(),
            ));
        }
        if out.ops.is_empty() {
            return Err(BenchError::Usage(
                "--ops needs at least one operation".into(),
            ));
        }
        Ok(out)
    }
}

/// A number, allowing `_` and `,` as digit separators (`200_000`).
pub(crate) fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, BenchError> {
    let digits: String = text.chars().filter(|c| *c != '_' && *c != ',').collect();
    digits.parse().map_err(|_| {
        BenchError::Usage(format!(
            "{flag} expects a non-negative integer, got {text:?}"
        ))
    })
}

/// A comma-separated list, blanks dropped.
pub(crate) fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Oo1Args, BenchError> {
        Oo1Args::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).expect("no arguments parse");
        assert_eq!(a, Oo1Args::default());
        assert_eq!(a.parts, 20_000);
        assert_eq!(a.child_args, vec![CHILD_SUBCOMMAND.to_string()]);
    }

    #[test]
    fn every_option() {
        let a = parse(&[
            "--parts",
            "200_000",
            "--engines=sqlite,lmdb",
            "--ops",
            "lookup,update",
            "--dir",
            "/tmp/x",
            "--cache-mib",
            "64",
            "--json",
            "r.json",
            "--plot=r.svg",
            "--seed",
            "7",
            "--drop-caches",
            "--rounds",
            "5",
        ])
        .expect("valid arguments");
        assert_eq!(a.parts, 200_000);
        assert_eq!(
            a.engines,
            Some(vec!["sqlite".to_string(), "lmdb".to_string()])
        );
        assert_eq!(a.ops, vec![Op::Lookup, Op::Update]);
        assert_eq!(a.dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(a.cache_mib, Some(64));
        assert_eq!(a.json, Some(PathBuf::from("r.json")));
        assert_eq!(a.plot, Some(PathBuf::from("r.svg")));
        assert_eq!(a.seed, 7);
        assert!(a.drop_caches);
        assert_eq!(a.rounds, 5);
    }

    #[test]
    fn errors_are_clear() {
        assert!(
            matches!(parse(&["--parts"]), Err(BenchError::Usage(m)) if m.contains("needs a value"))
        );
        assert!(
            matches!(parse(&["--parts", "many"]), Err(BenchError::Usage(m)) if m.contains("integer"))
        );
        assert!(
            matches!(parse(&["--frobnicate"]), Err(BenchError::Usage(m)) if m.contains("unknown argument"))
        );
        assert!(
            matches!(parse(&["--ops", "scan"]), Err(BenchError::Usage(m)) if m.contains("unknown operation"))
        );
        assert!(
            matches!(parse(&["--rounds", "0"]), Err(BenchError::Usage(m)) if m.contains("at least one round"))
        );
        assert!(matches!(parse(&["--help"]), Err(BenchError::Help(_))));
    }
}
