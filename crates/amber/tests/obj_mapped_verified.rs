//! The object-layer suite on the `mapped` backend (`obj_common`): the page
//! file mapped at home, each window of pages checked at its first touch.
mod harness;
mod obj_common;
use amber::BackendChoice;
use obj_common::Cfg;

const B: Cfg = Cfg::new(BackendChoice::Mapped, 4096);
const B8: Cfg = Cfg::new(BackendChoice::Mapped, 8192);
const B16: Cfg = Cfg::new(BackendChoice::Mapped, 16384);

fn main() -> std::process::ExitCode {
    harness::run_uffd(obj_cases!(B, B8, B16))
}
