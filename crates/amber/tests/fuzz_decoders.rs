//! The decoder fuzz targets on the stable toolchain: each target's seeds
//! from real databases (4, 8 and 16 KiB pages), then mutated inputs
//! (`fuzz_common`), none of which may panic, abort, hang or allocate more
//! than `fuzz_common::cap_of` allows.

mod fuzz_common;

use amber::internals::fuzzing::DECODER_TARGETS;
use fuzz_common::{Counting, iterations, run};

#[global_allocator]
static ALLOC: Counting = Counting;

fn target(name: &str, default: u64) {
    let (_, t) = DECODER_TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a decoder target");
    run(name, *t, iterations(default));
}

#[test]
fn superblock() {
    target("superblock", 20_000);
}

#[test]
fn log_header() {
    target("log_header", 20_000);
}

#[test]
fn log_records() {
    target("log_records", 3_000);
}

#[test]
fn page() {
    target("page", 5_000);
}

#[test]
fn catalog_entry() {
    target("catalog_entry", 20_000);
}

#[test]
fn catalog_blob() {
    target("catalog_blob", 10_000);
}

#[test]
fn free_space_map() {
    target("free_space_map", 20_000);
}

#[test]
fn root_directory() {
    target("root_directory", 20_000);
}

#[test]
fn swizzle() {
    target("swizzle", 5_000);
}
