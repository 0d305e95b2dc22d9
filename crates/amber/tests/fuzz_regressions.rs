//! Inputs that broke a fuzz target's contract once, each run through its
//! target (named by the file name's prefix: `TARGET-what.bin`) with the
//! same checks as the fuzzing runs: no panic, no allocation beyond the
//! target's cap. Every bug the fuzzers found has its input here.

mod fuzz_common;

use amber::internals::fuzzing::{DECODER_TARGETS, Target, beside_targets, file_targets};
use fuzz_common::content::Nodes;
use fuzz_common::{Counting, cap_of, check_input};

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn every_regression_input_keeps_the_contract() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let targets: Vec<(&str, Target)> = DECODER_TARGETS
        .iter()
        .copied()
        .chain(file_targets::<Nodes>())
        .chain(beside_targets::<Nodes>())
        .collect();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the regression inputs")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for (i, path) in files.iter().enumerate() {
        let file = path.file_name().and_then(|n| n.to_str()).expect("a name");
        let (name, target) = targets
            .iter()
            .find(|(n, _)| file.starts_with(&format!("{n}-")))
            .unwrap_or_else(|| panic!("{file} names no target"));
        let input = std::fs::read(path).expect("readable");
        check_input(name, *target, &input, i as u64, cap_of(name));
    }
}
