//! The options of `amber bench oo7 --server`, and the client cache
//! settings.

use std::path::PathBuf;

use serde::Serialize;

use super::super::client::CLIENT_SUBCOMMAND;
use super::super::ops::Op;
use super::super::params::Size;
use crate::oo1::BenchError;
use crate::oo1::args::{list, number};
use amber::Scheme;

/// The usage text of `amber bench oo7 --server`.
pub const USAGE: &str = "\
usage: amber bench oo7 --server [options]

QuickStore's client-server experiment: clients 1..N, client i on module 2i, each running one traversal
again and again as separate transactions through an `amber serve` in this process.

options:
  --clients LIST   numbers of clients, or A..B (default 1..5)
  --size S         tiny, small, medium, quickstore-small or quickstore-big (default quickstore-small);
                   the database has at least as many modules as the most clients
  --schemes LIST   pd-esm, sd-esm, sl-esm, pd-redo, wpl, auto, and the peers postgres and
                   postgres-recursive (T1 only; built with --features compare) (default: all)
  --ops LIST       t1, t2a, t2b, t2c (default: all four)
  --cache LIST     unconstrained, constrained (default: both)
  --backend B      sigsegv (QuickStore's recovery buffer; the default) or uffd
  --seconds S      measured time per cell (default 5)
  --warmup N       unmeasured transactions per client first (default 2)
  --dir DIR        where to build the database (default: a temporary directory)
  --json FILE      write the results as JSON
  --plot DIR       write the paper's figures as measured, one SVG each, into DIR (made if missing)
  --seed S         seed of the database (default 1993)
";

/// Parsed options of `amber bench oo7 --server`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientsArgs {
    pub clients: Vec<u32>,
    pub size: Size,
    pub schemes: Vec<Column>,
    pub ops: Vec<Op>,
    pub caches: Vec<Cache>,
    pub backend: String,
    pub seconds: f64,
    pub warmup: u32,
    pub dir: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// Where the charts go ([`charts`](super::plot::charts)).
    pub plot: Option<PathBuf>,
    pub seed: u64,
    /// The arguments that make `current_exe()` run a client
    /// ([`run_client`](super::client::run_client)).
    pub child_args: Vec<String>,
}

/// The peers' names in `--schemes` (each provided by a [`Peer`] the CLI
/// hands in).
///
/// [`Peer`]: super::Peer
pub const PEERS: [&str; 2] = ["postgres", "postgres-recursive"];

/// A column of the experiment: one of Amber's recovery schemes, or a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    Amber(Scheme),
    /// A peer's form, one of [`PEERS`].
    Peer(&'static str),
}

impl Column {
    /// Its name in the rows' `scheme`.
    pub fn name(&self) -> String {
        match self {
            Column::Amber(s) => s.name().to_string(),
            Column::Peer(p) => p.to_string(),
        }
    }

    /// Every column: Amber's schemes, then the peers.
    fn all() -> Vec<Column> {
        let amber = Scheme::ALL.iter().map(|&s| Column::Amber(s));
        amber
            .chain(PEERS.iter().map(|&p| Column::Peer(p)))
            .collect()
    }

    fn parse(name: &str) -> Result<Column, BenchError> {
        if let Some(&p) = PEERS.iter().find(|&&p| p == name) {
            return Ok(Column::Peer(p));
        }
        name.parse()
            .map(Column::Amber)
            .map_err(|e: amber::Error| usage(format!("{e}, or a peer: {}", PEERS.join(", "))))
    }
}

/// The client cache settings of the paper's §5.1 and §5.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    Unconstrained,
    Constrained,
}

impl Cache {
    pub fn name(self) -> &'static str {
        match self {
            Cache::Unconstrained => "unconstrained",
            Cache::Constrained => "constrained",
        }
    }

    /// The recovery buffer for a module of `module_bytes`, in pages.
    pub fn recovery_buffer_pages(self, module_bytes: u64, page_size: u64) -> usize {
        let bytes = match self {
            Cache::Unconstrained => module_bytes * 18 / 10 / 3,
            Cache::Constrained => module_bytes * 12 / 10 / 16,
        };
        (bytes / page_size).max(1) as usize
    }
}

fn usage(m: String) -> BenchError {
    BenchError::Usage(format!("{m}\n\n{USAGE}"))
}

impl ClientsArgs {
    /// Parses the arguments that follow `amber bench oo7` (with
    /// `--server` among them).
    pub fn parse(args: &[String]) -> Result<ClientsArgs, BenchError> {
        let mut a = ClientsArgs {
            clients: (1..=5).collect(),
            size: Size::QuickstoreSmall,
            schemes: Column::all(),
            ops: vec![Op::T1, Op::T2a, Op::T2b, Op::T2c],
            caches: vec![Cache::Unconstrained, Cache::Constrained],
            backend: "sigsegv".into(),
            seconds: 5.0,
            warmup: 2,
            dir: None,
            json: None,
            plot: None,
            seed: crate::oo7::args::DEFAULT_SEED,
            child_args: vec![CLIENT_SUBCOMMAND.into()],
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| usage(format!("{flag} needs a value")))
            };
            match flag {
                "-h" | "--help" => return Err(BenchError::Help(USAGE.to_string())),
                "--server" => {}
                "--clients" => a.clients = client_counts(&value()?)?,
                "--size" => {
                    let v = value()?;
                    a.size =
                        Size::from_name(&v).ok_or_else(|| usage(format!("unknown size {v:?}")))?;
                }
                "--schemes" => {
                    a.schemes = (list(&value()?).iter().map(|s| Column::parse(s)))
                        .collect::<Result<_, _>>()?;
                }
                "--ops" => {
                    a.ops = (list(&value()?).iter())
                        .map(|n| match Op::from_name(n) {
                            Some(op @ (Op::T1 | Op::T2a | Op::T2b | Op::T2c)) => Ok(op),
                            _ => Err(usage(format!("--ops: {n:?} is not t1, t2a, t2b or t2c"))),
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--cache" => {
                    a.caches = (list(&value()?).iter())
                        .map(|n| match n.as_str() {
                            "unconstrained" => Ok(Cache::Unconstrained),
                            "constrained" => Ok(Cache::Constrained),
                            _ => Err(usage(format!(
                                "--cache: {n:?} is not unconstrained or constrained"
                            ))),
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--backend" => {
                    a.backend = value()?;
                    if !["sigsegv", "uffd"].contains(&a.backend.as_str()) {
                        return Err(usage(format!("--backend {}: sigsegv or uffd", a.backend)));
                    }
                }
                "--seconds" => a.seconds = number(flag, &value()?)?,
                "--warmup" => a.warmup = number(flag, &value()?)?,
                "--dir" => a.dir = Some(PathBuf::from(value()?)),
                "--json" => a.json = Some(PathBuf::from(value()?)),
                "--plot" => a.plot = Some(PathBuf::from(value()?)),
                "--seed" => a.seed = number(flag, &value()?)?,
                _ => return Err(usage(format!("unknown argument {arg:?}"))),
            }
        }
        if a.schemes.is_empty() || a.ops.is_empty() || a.caches.is_empty() {
            return Err(usage(
                "--schemes, --ops and --cache each need one at least".into(),
            ));
        }
        if a.seconds.is_nan() || a.seconds <= 0.0 {
            return Err(usage("--seconds needs a time above 0".into()));
        }
        Ok(a)
    }
}

/// `1..5`, or `1,2,4`: numbers of clients, each 1 to 64.
fn client_counts(text: &str) -> Result<Vec<u32>, BenchError> {
    let counts: Vec<u32> = match text.split_once("..") {
        Some((lo, hi)) => (number("--clients", lo)?..=number("--clients", hi)?).collect(),
        None => (list(text).iter().map(|n| number("--clients", n))).collect::<Result<_, _>>()?,
    };
    if counts.is_empty() || counts.iter().any(|&n| n == 0 || n > 64) {
        return Err(usage(format!("--clients {text}: numbers from 1 to 64")));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ClientsArgs, BenchError> {
        ClientsArgs::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_parse_and_errors_are_clear() {
        let a = parse(&["--server"]).expect("defaults");
        assert_eq!(
            (a.clients.clone(), a.schemes.len(), a.size),
            (vec![1, 2, 3, 4, 5], 8, Size::QuickstoreSmall)
        );
        let a = parse(&[
            "--server",
            "--clients",
            "2..3",
            "--schemes",
            "wpl,pd-redo,postgres",
            "--ops",
            "t2a",
            "--cache",
            "constrained",
        ])
        .expect("valid");
        assert_eq!(a.clients, vec![2, 3]);
        assert_eq!(
            a.schemes,
            vec![
                Column::Amber(Scheme::Wpl),
                Column::Amber(Scheme::PdRedo),
                Column::Peer("postgres")
            ]
        );
        assert_eq!(
            (a.ops.clone(), a.caches.clone()),
            (vec![Op::T2a], vec![Cache::Constrained])
        );
        assert!(
            matches!(parse(&["--clients", "0"]), Err(BenchError::Usage(m)) if m.contains("1 to 64"))
        );
        assert!(
            matches!(parse(&["--schemes", "esm"]), Err(BenchError::Usage(m)) if m.contains("pd-esm") && m.contains("postgres"))
        );
        assert!(matches!(parse(&["--ops", "t3a"]), Err(BenchError::Usage(m)) if m.contains("t2a")));
        let big = parse(&["--size", "quickstore-big", "--backend", "uffd"]).expect("valid");
        assert_eq!(
            (big.size, big.backend.as_str()),
            (Size::QuickstoreBig, "uffd")
        );
        assert!(matches!(
            parse(&["--backend", "x"]),
            Err(BenchError::Usage(_))
        ));
        assert_eq!(
            Cache::Constrained.recovery_buffer_pages(16 * 4096 * 10, 4096),
            12
        );
        assert_eq!(
            Cache::Unconstrained.recovery_buffer_pages(15 * 4096 * 10, 4096),
            90
        );
    }
}
