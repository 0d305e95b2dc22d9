//! `amber bench index`: a `PIndex` of string keys against redb.

use super::{COMPARE_HINT, check_json_target, parse, write_json};
use crate::error::CliError;
use amber_bench::index::{self, IndexConfig, IndexPeer};
use clap::Parser;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Options of `amber bench index`.
#[derive(Debug, Parser)]
#[command(
    name = "amber bench index",
    about = "A PIndex<Record, String> of random string keys against redb on the same keys: random hot lookups, all keys inserted in one transaction, single-insert transactions (each synced); medians, ratios Amber / redb"
)]
struct IndexArgs {
    /// Keys loaded.
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Single-insert transactions, each synced.
    #[arg(long, default_value_t = 1_000)]
    tx_inserts: usize,
    /// Random lookups per timed batch.
    #[arg(long, default_value_t = 100_000)]
    lookups: usize,
    /// Timed lookup batches per engine (medians are reported).
    #[arg(long, default_value_t = 11)]
    runs: usize,
    /// Seed of the keys and the lookup sample.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the databases (default: the working directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// The peer of `amber bench index`: redb when the CLI is built with the
/// `compare` feature.
fn index_peer() -> Option<Box<dyn IndexPeer>> {
    #[cfg(feature = "compare")]
    return Some(Box::new(amber_compare::index_peer::RedbIndex::default()));
    #[cfg(not(feature = "compare"))]
    None
}

/// `amber bench index [ARGS]...`.
pub(super) fn run(args: &[String], out: &mut String) -> Result<(), CliError> {
    let a: IndexArgs = parse("index", args)?;
    check_json_target(a.json.as_deref())?;
    let peer = index_peer();
    let alone = peer.is_none();
    let r = index::index(
        &IndexConfig {
            keys: a.keys,
            tx_inserts: a.tx_inserts,
            lookups: a.lookups,
            runs: a.runs,
            seed: a.seed,
            dir: a.dir,
        },
        peer,
    )?;
    out.push_str(&r.table());
    write_json(a.json.as_deref(), |p| amber_bench::json::write(p, &r), out)?;
    if alone {
        let _ = writeln!(out, "note: {COMPARE_HINT}");
    }
    Ok(())
}
