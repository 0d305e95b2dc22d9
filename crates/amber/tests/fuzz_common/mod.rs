//! The stable-toolchain runs of the fuzz targets: a deterministic mutation
//! loop over each target's seeds, with an allocator that records the
//! largest single allocation, so that the contract's memory bound is
//! checked without libFuzzer.
//!
//! `AMBER_FUZZ_ITERS=N` sets the mutated inputs per target (the default
//! keeps each target to a few seconds); `AMBER_FUZZ_SEED=S` starts the
//! random sequence elsewhere. A failing input is written to
//! `target/tmp/fuzz-failures/` and can be replayed with
//! `cargo fuzz run TARGET FILE` or the target's entry point.
#![allow(dead_code)]

mod alloc;
pub mod content;

pub use alloc::{Counting, largest, reset_largest};

use amber::internals::fuzzing::{self, Target, mutate};
use amber::internals::io::crash::SplitMix;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Every target's seeds, built once per test binary.
pub fn corpus() -> &'static [(&'static str, Vec<u8>)] {
    static C: OnceLock<Vec<(&'static str, Vec<u8>)>> = OnceLock::new();
    C.get_or_init(|| {
        fuzzing::seed_corpus::<content::Nodes>().expect("the seed databases are written")
    })
}

/// The mutated inputs per target: `AMBER_FUZZ_ITERS`, else `default`.
pub fn iterations(default: u64) -> u64 {
    std::env::var("AMBER_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct RunStats {
    /// Inputs run.
    pub inputs: u64,
    /// The largest allocation, and the input length it was made for.
    pub largest: (usize, usize),
    /// The slowest input.
    pub slowest: Duration,
}

/// Runs `target` on each of its seeds, then on `n` mutated inputs (each a
/// seed, or an earlier mutated input, with 1 to 4 changes), each input
/// also with checksums resealed where the target's format says how.
/// Checks each input with [`check_input`] and the target's [`cap_of`],
/// and returns what it saw.
pub fn run(name: &str, target: Target, n: u64) -> RunStats {
    let cap = cap_of(name);
    // One target at a time: the largest allocation is counted across
    // threads (a target's own helper threads included).
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let seeds: Vec<&Vec<u8>> = corpus()
        .iter()
        .filter(|(t, _)| *t == name)
        .map(|(_, s)| s)
        .collect();
    assert!(!seeds.is_empty(), "no seeds for {name}");
    let start: u64 = std::env::var("AMBER_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut rng = SplitMix::new(
        start
            ^ name
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31) ^ u64::from(b)),
    );
    let mut stats = RunStats::default();
    let mut one = |input: &[u8], i: u64| {
        let (big, took) = check_input(name, target, input, i, cap);
        stats.inputs += 1;
        if big > stats.largest.0 {
            stats.largest = (big, input.len());
        }
        stats.slowest = stats.slowest.max(took);
    };
    for (i, s) in seeds.iter().enumerate() {
        one(s, i as u64);
    }
    let mut pool: Vec<Vec<u8>> = seeds.iter().map(|s| s.to_vec()).collect();
    for i in 0..n {
        let pick = rng.below(pool.len() as u64) as usize;
        let mut input = pool[pick].clone();
        let hot = mutate::hot_offsets(name, &input);
        let max_len = input.len() + 4096;
        mutate::mutate(&mut rng, &mut input, &hot, max_len);
        // Half the inputs have their checksums resealed (the flag every
        // target's format keeps in a fixed place).
        reseal_flag(name, &mut input, rng.below(2) == 0);
        one(&input, seeds.len() as u64 + i);
        // Keep some mutants to mutate further (a crude form of what a
        // coverage-guided fuzzer keeps).
        if rng.below(8) == 0 && pool.len() < 256 {
            pool.push(input);
        }
    }
    eprintln!(
        "{name}: {} inputs, largest allocation {} bytes (input of {} bytes), slowest input {:?}",
        stats.inputs, stats.largest.0, stats.largest.1, stats.slowest
    );
    stats
}

/// Runs `target` on one input (number `i`), checking that it does not
/// panic and that no allocation exceeds `cap(input length)`; returns the
/// largest allocation and the time taken. A failing input is saved.
pub fn check_input(
    name: &str,
    target: Target,
    input: &[u8],
    i: u64,
    cap: fn(usize) -> usize,
) -> (usize, Duration) {
    reset_largest();
    let t = Instant::now();
    let r = std::panic::catch_unwind(|| target(input));
    let took = t.elapsed();
    if r.is_err() {
        let path = save_failure(name, i, input);
        panic!(
            "{name}: input {i} broke the contract (saved to {})",
            path.display()
        );
    }
    let big = largest();
    if big > cap(input.len()) {
        let path = save_failure(name, i, input);
        panic!(
            "{name}: input {i} of {} bytes made an allocation of {big} bytes (saved to {})",
            input.len(),
            path.display()
        );
    }
    (big, took)
}

/// The largest allocation a target may make for an input of `len` bytes:
/// 16 times the input, plus 2 MiB (the log scan's read buffer: a chunk
/// and the longest record), plus for the targets that load a schema
/// catalog the registry's table of 8 bytes per type id (2^24 ids at most:
/// 128 MiB), plus for the targets that open a database 64 MiB (what
/// opening allocates whatever its size), plus for those whose log is
/// mutated the fresh blocks its allocation records ask for (recovery holds
/// a fresh block's image as the committing transaction held it,
/// docs/design.md §9: at most `FRESH_MAX`, beyond which they skip the
/// input).
pub fn cap_of(name: &str) -> fn(usize) -> usize {
    const TABLE: usize = 8 << 24;
    const FRESH: usize = fuzzing::FRESH_MAX as usize;
    match name {
        "catalog_blob" | "swizzle" => |len| 16 * len + (2 << 20) + TABLE,
        n if fuzzing::FILE_TARGETS.contains(&n) => |len| 16 * len + (66 << 20) + TABLE + FRESH,
        n if fuzzing::BESIDE_TARGETS.contains(&n) => |len| 16 * len + (66 << 20) + TABLE,
        _ => |len| 16 * len + (2 << 20),
    }
}

/// Sets or clears the reseal flag of an input of target `name`.
fn reseal_flag(name: &str, input: &mut Vec<u8>, on: bool) {
    let at = match name {
        "superblock" | "log_header" => 512,
        "catalog_entry" | "catalog_blob" | "root_directory" | "wire_decode" => return,
        n if fuzzing::FILE_TARGETS.contains(&n) || fuzzing::BESIDE_TARGETS.contains(&n) => 0,
        _ => 1,
    };
    if input.len() <= at {
        input.resize(at + 1, 0);
    }
    input[at] = (input[at] & !1) | u8::from(on);
}

fn save_failure(name: &str, i: u64, input: &[u8]) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}-{i}.bin"));
    let _ = std::fs::write(&path, input);
    path
}
