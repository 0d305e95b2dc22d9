//! Amber's benchmarks, run by `amber bench …`.
//!
//! - [`oo1`]: the Object Operations Benchmark, its engine contract and harness;
//! - [`oo7`]: the OO7 benchmark: its generator, operations, engines and harness;
//! - [`storage`]: commit latency and recovery time of the storage layer;
//! - [`churn`]: file size under allocate/free churn, and what a collection gives back;
//! - [`epvm`]: White & DeWitt's object faulting and swizzling architectures
//!   (CESM, EPVM 1.0 with and without swizzling, Amber's mapping) on OO1;
//! - [`texas`]: Kakkad & Wilson's traversal sets: all-raw, smart-index and
//!   all-smart pointers over 45 OO1 traversals;
//! - [`hot`]: a hot traversal of resident persistent objects against plain Rust structs;
//! - [`index`]: a `PIndex` of string keys against redb on the same keys;
//! - [`faults`]: the cost of a cold fault per page, per backend and fetch cluster;
//! - [`update`]: the write path: commit cost split into detect / diff / write, log bytes
//!   against the minimum, and the first write to a clean page, per backend;
//! - [`readers`]: a read-only handle's hot traversal and refresh beside a
//!   writer process;
//! - [`serve_blocking`]: a fetch cluster read through the storage server on
//!   loopback against the store read directly;
//! - [`server`]: OO1 through `amber serve` against the same database opened
//!   locally;
//! - [`backend`]: the `--backend uffd|sigsegv|both` option;
//! - [`rng`]: the deterministic random generator every benchmark draws from;
//! - [`procfs`]: I/O counters, peak RSS and machine facts from `/proc`, and
//!   dropping the OS page cache;
//! - [`sys`]: the kernel, machine and file system a result was measured on;
//! - [`json`]: JSON output for the storage benches.
#![deny(clippy::unwrap_used)]

pub mod backend;
pub mod churn;
pub mod detect;
pub mod epvm;
pub mod faults;
pub mod hot;
pub mod index;
pub mod json;
pub mod olsim;
pub mod oo1;
pub mod oo7;
pub mod procfs;
pub mod readers;
pub mod rng;
pub mod serve_blocking;
pub mod server;
pub mod server_writes;
pub mod storage;
pub mod sys;
pub mod texas;
pub mod update;
