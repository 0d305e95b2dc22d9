//! What the cargo-fuzz targets share: the seed databases' content (the
//! file the stable tests use, included by path), and the mutator.
//!
//! Each target is `target!(NAME)`: libFuzzer calls Amber's entry point
//! `NAME` (`amber::internals::fuzzing`) with each input, and mutates
//! inputs half the time with its own mutator and half the time with
//! Amber's (`fuzzing::mutate`), which aims at the offsets where the
//! formats keep their lengths, counts and kinds, and sets or clears the
//! flag asking the entry point to reseal checksums.

#[path = "../../crates/amber/tests/fuzz_common/content.rs"]
pub mod content;

use amber::internals::fuzzing::{DECODER_TARGETS, Target, beside_targets, file_targets, mutate};
use amber::internals::io::crash::SplitMix;

pub use libfuzzer_sys;

/// The entry point of target `name`.
pub fn entry(name: &str) -> Target {
    DECODER_TARGETS
        .iter()
        .copied()
        .chain(file_targets::<content::Nodes>())
        .chain(beside_targets::<content::Nodes>())
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
}

/// Where target `name` keeps its reseal flag (bit 0 of that byte), if
/// anywhere.
fn flag_at(name: &str) -> Option<usize> {
    match name {
        "superblock" | "log_header" => Some(512),
        "catalog_entry" | "catalog_blob" | "root_directory" | "wire_decode" => None,
        "open_and_read" | "verify_deep" | "recovery" | "migrate_collect" | "reader_table"
        | "schema_file" => Some(0),
        _ => Some(1),
    }
}

/// libFuzzer's custom mutator for target `name`: half the time
/// libFuzzer's own, else Amber's structure-aware one.
pub fn mutate(name: &str, data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let mut rng = SplitMix::new(u64::from(seed));
    if rng.below(2) == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let mut v = data[..size].to_vec();
    let hot = mutate::hot_offsets(name, &v);
    mutate::mutate(&mut rng, &mut v, &hot, max_size);
    if let Some(at) = flag_at(name)
        && at < v.len()
        && rng.below(4) == 0
    {
        v[at] ^= 1;
    }
    let n = v.len().min(max_size);
    data[..n].copy_from_slice(&v[..n]);
    n
}

/// A cargo-fuzz target calling Amber's entry point `$name`, with the
/// structure-aware mutator.
#[macro_export]
macro_rules! target {
    ($name:ident) => {
        $crate::libfuzzer_sys::fuzz_target!(|data: &[u8]| {
            static T: std::sync::OnceLock<amber::internals::fuzzing::Target> =
                std::sync::OnceLock::new();
            (T.get_or_init(|| $crate::entry(stringify!($name))))(data)
        });
        $crate::libfuzzer_sys::fuzz_mutator!(|data: &mut [u8],
                                              size: usize,
                                              max_size: usize,
                                              seed: u32| {
            $crate::mutate(stringify!($name), data, size, max_size, seed)
        });
    };
}
