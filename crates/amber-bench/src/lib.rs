//! Amber's benchmarks, run by `amber bench …`.
//!
//! - [`oo1`]: the Object Operations Benchmark, its engine contract and harness;
//! - [`rng`]: the deterministic random generator every benchmark draws from;
//! - [`procfs`]: I/O counters, peak RSS and machine facts from `/proc`.
#![deny(clippy::unwrap_used)]

pub mod oo1;
pub mod procfs;
pub mod rng;
