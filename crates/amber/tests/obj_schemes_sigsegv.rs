//! The write-path suites under software detection schemes on the SIGSEGV
//! backend (its own process: it installs a signal handler), where frames
//! are made writable by `mprotect` at install instead of write-protected
//! (`obj_schemes.rs` runs every scheme on userfaultfd).
mod obj_common;
use amber::{BackendChoice, Detect, Log};
use obj_common as common;
use obj_common::Cfg;

const B: Cfg = Cfg::new(BackendChoice::Sigsegv, 4096);
const REMSETS: Cfg = B.with(Detect::Remsets);
const CARDS_64: Cfg = B.with(Detect::Cards { bytes: 64 });
const OBJECTS: Cfg = B.with(Detect::Objects);
const SL_16: Cfg = B.with(Detect::Cards { bytes: 16 }).log(Log::SubPages);
const WPL: Cfg = B.log(Log::WholePages);

#[test]
fn write_path_property_sl_16() {
    common::prop::run(SL_16, None);
}

#[test]
fn write_path_property_wpl() {
    common::prop::run(WPL, None);
}

#[test]
fn killed_during_commits_wpl() {
    common::kill::run(WPL, "killed_during_commits_wpl");
}

#[test]
fn lazy_never_logged_wpl() {
    common::lazy::never_logged(WPL);
}

#[test]
fn lazy_never_logged_cards_64() {
    common::lazy::never_logged(CARDS_64);
}

#[test]
fn write_path_property_remsets() {
    common::prop::run(REMSETS, None);
}

#[test]
fn write_path_property_cards_64() {
    common::prop::run(CARDS_64, None);
}

#[test]
fn write_path_property_objects() {
    common::prop::run(OBJECTS, None);
}

#[test]
fn collections_property_cards_64() {
    common::collections::run(CARDS_64);
}

#[test]
fn abort_restores_exactly_remsets() {
    common::abort::run(REMSETS);
}

#[test]
fn writes_survive_eviction_cards_64() {
    common::eviction::writes_survive_eviction(CARDS_64);
}

#[test]
fn killed_during_commits_remsets() {
    common::kill::run(REMSETS, "killed_during_commits_remsets");
}
