//! The options of `amber bench oo7`, parsed without clap so that any front
//! end can forward its arguments (as OO1's).

use std::path::PathBuf;

use super::child::CHILD_SUBCOMMAND;
use super::ops::{OO7_PROTOCOL, Op, Protocol};
use super::params::{Params, Size};
use crate::oo1::BenchError;
use crate::oo1::args::{list, number};

/// **(choice)** Default `--seed`: the year of the OO7 paper.
pub const DEFAULT_SEED: u64 = 1993;

/// **(choice)** Default `--rounds`: three, as OO1 (each cell a median of
/// three runs spaced an engine sweep apart).
pub const DEFAULT_ROUNDS: u32 = 3;

/// The usage text of `amber bench oo7`.
pub const USAGE: &str = "\
usage: amber bench oo7 [options]

Runs the OO7 benchmark (Carey, DeWitt, Naughton 1993) on every engine and prints a table.

options:
  --size S         tiny, small, medium, quickstore-small or quickstore-big (default small)
  --modules N      modules in the database (default: the size's own: 1, or 5 for the QuickStore sizes)
  --engines LIST   comma-separated engines to run, in column order (default: all available)
  --ops LIST       comma-separated operations (default: all): t1,t2a,t2b,t2c,t3a,t3b,t3c,t4,t5,t6,t7,t8,t9,
                   q1,q2,q3,q4,q5,q6,q7,q8,insert,delete
  --schemes LIST   comma-separated update strategies (pd, sd-8, sd-16, sd-32, sd-64, sl-64, wpl, or any
                   name Amber's Strategy parses): each Amber engine runs once per scheme, as ENGINE/SCHEME,
                   on one shared build (default --ops: t2a,t2b,t2c; default --engines: amber)
  --rounds R       run every engine's jobs R times, round-robin; each cell is the median (default 3)
  --warm W         warm iterations per job (default 4)
  --hot H          hot iterations per job, repeating the last warm one's input (default 5)
  --cache-mib M    cache budget in MiB for engines that have one (default: each engine's own)
  --dir DIR        where to build the databases (default: a temporary directory, removed afterwards)
  --json FILE      write the results as JSON
  --plot FILE      write an SVG bar chart (log scale) of the hot times per operation and engine
  --seed S         seed of the database and of every random input (default 1993)
  -h, --help       print this text
";

/// Parsed options of `amber bench oo7`.
#[derive(Clone, Debug, PartialEq)]
pub struct Oo7Args {
    pub size: Size,
    /// `--modules N`; `None` keeps the size's own.
    pub modules: Option<u32>,
    pub engines: Option<Vec<String>>,
    pub ops: Vec<Op>,
    /// `--schemes LIST`: the update strategies the Amber engines run under.
    pub schemes: Option<Vec<String>>,
    pub rounds: u32,
    pub protocol: Protocol,
    pub cache_mib: Option<u64>,
    pub dir: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub seed: u64,
    /// The arguments that make `current_exe()` call
    /// [`run_oo7_child`](super::run_oo7_child).
    pub child_args: Vec<String>,
}

impl Default for Oo7Args {
    fn default() -> Self {
        Self {
            size: Size::Small,
            modules: None,
            engines: None,
            ops: Op::ALL.to_vec(),
            schemes: None,
            rounds: DEFAULT_ROUNDS,
            protocol: OO7_PROTOCOL,
            cache_mib: None,
            dir: None,
            json: None,
            plot: None,
            seed: DEFAULT_SEED,
            child_args: vec![CHILD_SUBCOMMAND.to_string()],
        }
    }
}

impl Oo7Args {
    /// The generator's parameters.
    pub fn params(&self) -> Params {
        let p = self.size.params(self.seed);
        Params {
            modules: self.modules.unwrap_or(p.modules),
            ..p
        }
    }

    /// Parses the arguments that follow `amber bench oo7`.
    pub fn parse(args: &[String]) -> Result<Oo7Args, BenchError> {
        let mut out = Oo7Args::default();
        let mut ops_given = false;
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
                "--size" => {
                    let v = value(flag)?;
                    out.size = Size::from_name(&v).ok_or_else(|| {
                        BenchError::Usage(format!(
                            "unknown size {v:?} (expected tiny, small, medium, quickstore-small, quickstore-big)"
                        ))
                    })?;
                }
                "--modules" => out.modules = Some(number(flag, &value(flag)?)?),
                "--seed" => out.seed = number(flag, &value(flag)?)?,
                "--rounds" => out.rounds = number(flag, &value(flag)?)?,
                "--warm" => out.protocol.warm = number(flag, &value(flag)?)?,
                "--hot" => out.protocol.hot = number(flag, &value(flag)?)?,
                "--cache-mib" => out.cache_mib = Some(number(flag, &value(flag)?)?),
                "--dir" => out.dir = Some(PathBuf::from(value(flag)?)),
                "--json" => out.json = Some(PathBuf::from(value(flag)?)),
                "--plot" => out.plot = Some(PathBuf::from(value(flag)?)),
                "--engines" => out.engines = Some(list(&value(flag)?)),
                "--schemes" => out.schemes = Some(list(&value(flag)?)),
                "--ops" => {
                    ops_given = true;
                    out.ops = list(&value(flag)?)
                        .iter()
                        .map(|name| {
                            Op::from_name(name).ok_or_else(|| {
                                BenchError::Usage(format!("unknown operation {name:?} in --ops"))
                            })
                        })
                        .collect::<Result<_, _>>()?;
                }
                _ => {
                    return Err(BenchError::Usage(format!(
                        "unknown argument {arg:?}\n\n{USAGE}"
                    )));
                }
            }
        }
        if let Some(schemes) = &out.schemes {
            if schemes.is_empty() {
                return Err(BenchError::Usage(
                    "--schemes needs at least one scheme".into(),
                ));
            }
            if !ops_given {
                out.ops = vec![Op::T2a, Op::T2b, Op::T2c];
            }
            if out.engines.is_none() {
                out.engines = Some(vec!["amber".to_string()]);
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
        out.params().validate().map_err(BenchError::Usage)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Oo7Args, BenchError> {
        Oo7Args::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_parse_and_errors_are_clear() {
        assert_eq!(parse(&[]).expect("defaults"), Oo7Args::default());
        let a = parse(&[
            "--size=quickstore-big",
            "--modules",
            "2",
            "--engines",
            "amber,memory",
            "--ops",
            "t1,q8,delete",
            "--rounds",
            "1",
            "--cache-mib",
            "8",
            "--seed",
            "5",
        ])
        .expect("valid");
        assert_eq!(a.params().modules, 2);
        assert_eq!(a.params().comp_per_module, 2_000);
        assert_eq!(a.ops, vec![Op::T1, Op::Q8, Op::Delete]);
        assert_eq!(a.cache_mib, Some(8));
        assert!(
            matches!(parse(&["--size", "huge"]), Err(BenchError::Usage(m)) if m.contains("unknown size"))
        );
        assert!(
            matches!(parse(&["--ops", "t10"]), Err(BenchError::Usage(m)) if m.contains("unknown operation"))
        );
        assert!(
            matches!(parse(&["--modules", "0"]), Err(BenchError::Usage(m)) if m.contains("--modules"))
        );
        assert!(matches!(parse(&["--help"]), Err(BenchError::Help(_))));
        let a = parse(&["--schemes", "pd,sd-8,wpl"]).expect("schemes");
        assert_eq!(a.ops, vec![Op::T2a, Op::T2b, Op::T2c]);
        assert_eq!(a.engines, Some(vec!["amber".to_string()]));
        assert_eq!(a.schemes.as_ref().map(Vec::len), Some(3));
        let a = parse(&[
            "--schemes",
            "pd",
            "--ops",
            "t1",
            "--engines",
            "amber-sigsegv",
        ])
        .expect("schemes");
        assert_eq!(
            (a.ops, a.engines),
            (vec![Op::T1], Some(vec!["amber-sigsegv".to_string()]))
        );
    }
}
