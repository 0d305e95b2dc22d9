//! The object-layer suite on the mapped-unverified backend (`obj_common`).
mod harness;
mod obj_common;
use amber::BackendChoice;
use obj_common::Cfg;

const B: Cfg = Cfg::new(BackendChoice::MappedUnverified, 4096);
const B8: Cfg = Cfg::new(BackendChoice::MappedUnverified, 8192);
const B16: Cfg = Cfg::new(BackendChoice::MappedUnverified, 16384);

fn main() -> std::process::ExitCode {
    harness::run_uffd(obj_cases!(B, B8, B16))
}
