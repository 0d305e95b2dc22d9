//! The object-layer suites that exercise the write path, run once per
//! software update-detection scheme and per log generator (`obj_common`,
//! with `Cfg::with` and `Cfg::log`) on the userfaultfd backend; `obj_schemes_sigsegv.rs` runs them on the
//! SIGSEGV backend. Debug builds check every commit's log against a
//! whole-page diff (`commit.rs`), so a write that bypassed the barrier
//! fails the commit that would have lost it.
mod harness;
mod obj_common;
use amber::{BackendChoice, Detect, Log, Strategy};
use obj_common as common;
use obj_common::Cfg;

const B: Cfg = Cfg::new(BackendChoice::Uffd, 4096);
const OBJECTS: Cfg = B.with(Detect::Objects);
const REMSETS: Cfg = B.with(Detect::Remsets);
const CARDS_16: Cfg = B.with(Detect::Cards { bytes: 16 });
const CARDS_256: Cfg = B.with(Detect::Cards { bytes: 256 });
const CARDS_4096: Cfg = B.with(Detect::Cards { bytes: 4096 });
const SD_8: Cfg = B.with(Detect::Cards { bytes: 8 });
const SL_64: Cfg = B.with(Detect::Cards { bytes: 64 }).log(Log::SubPages);
const REMSETS_SL: Cfg = REMSETS.log(Log::SubPages);
const WPL: Cfg = B.log(Log::WholePages);
const AUTO: Cfg = B.under(Strategy::AUTO);
const REMSETS_8K: Cfg = Cfg::new(BackendChoice::Uffd, 8192).with(Detect::Remsets);

/// The cases of one scheme, each named `case_scheme`.
macro_rules! cases {
    ($scheme:literal, $c:expr) => {
        vec![
            (
                concat!("write_path_property_", $scheme),
                (|| {
                    common::prop::run($c, None);
                }) as fn(),
            ),
            (
                concat!("collections_property_", $scheme),
                (|| common::collections::run($c)) as fn(),
            ),
            (
                concat!("index_property_", $scheme),
                (|| common::index_prop::run($c)) as fn(),
            ),
            (
                concat!("copy_property_", $scheme),
                (|| common::copy::prop($c)) as fn(),
            ),
            (
                concat!("copy_logged_", $scheme),
                (|| common::copy::logged($c)) as fn(),
            ),
            (
                concat!("roundtrip_", $scheme),
                (|| common::roundtrip::run($c)) as fn(),
            ),
            (
                concat!("abort_restores_exactly_", $scheme),
                (|| common::abort::run($c)) as fn(),
            ),
            (
                concat!("forgotten_transaction_", $scheme),
                (|| common::failing::forgotten($c)) as fn(),
            ),
            (
                concat!("commit_failing_at_each_io_call_", $scheme),
                (|| common::failing::io_countdown($c)) as fn(),
            ),
            (
                concat!("killed_during_commits_", $scheme),
                (|| common::kill::run($c, concat!("killed_during_commits_", $scheme))) as fn(),
            ),
            (
                concat!("writes_survive_eviction_", $scheme),
                (|| common::eviction::writes_survive_eviction($c)) as fn(),
            ),
            (
                concat!("free_tree_", $scheme),
                (|| common::free::frees_a_tree($c)) as fn(),
            ),
            (
                concat!("stale_aborted_", $scheme),
                (|| common::stale::aborted($c)) as fn(),
            ),
            (
                concat!("lazy_never_logged_", $scheme),
                (|| common::lazy::never_logged($c)) as fn(),
            ),
            (
                concat!("gc_random_graph_", $scheme),
                (|| common::gc::random_graph($c)) as fn(),
            ),
        ]
    };
}

fn main() -> std::process::ExitCode {
    let mut all = Vec::new();
    all.extend(cases!("objects", OBJECTS));
    all.extend(cases!("remsets", REMSETS));
    all.extend(cases!("cards_16", CARDS_16));
    all.extend(cases!("cards_256", CARDS_256));
    all.extend(cases!("cards_4096", CARDS_4096));
    all.extend(cases!("sd_8", SD_8));
    all.extend(cases!("sl_64", SL_64));
    all.extend(cases!("wpl", WPL));
    all.extend(cases!("auto", AUTO));
    all.extend(
        cases!("remsets_sl", REMSETS_SL)
            .into_iter()
            .filter(|(n, _)| {
                n.starts_with("write_path") || n.starts_with("killed") || n.starts_with("abort")
            }),
    );
    // Other page sizes: the property test and the kill test (the others
    // assume 4 KiB pages in places).
    all.extend(
        cases!("remsets_8k", REMSETS_8K)
            .into_iter()
            .filter(|(n, _)| n.starts_with("write_path") || n.starts_with("killed")),
    );
    harness::run_uffd(all)
}
