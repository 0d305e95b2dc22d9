//! The object-layer suite on the userfaultfd backend (`obj_common`).
mod harness;
mod obj_common;
use amber::BackendChoice;
use obj_common as common;
use obj_common::Cfg;

const B: Cfg = Cfg::new(BackendChoice::Uffd, 4096);
const B8: Cfg = Cfg::new(BackendChoice::Uffd, 8192);
const B16: Cfg = Cfg::new(BackendChoice::Uffd, 16384);

fn main() -> std::process::ExitCode {
    harness::run_uffd(vec![
        ("roundtrip", || common::roundtrip::run(B)),
        ("schema_mismatch", || common::schema::run(B)),
        ("schema_mismatch_behind_pointers", || {
            common::schema::run_reached(B)
        }),
        ("corrupt_page", || common::corrupt::run(B, "corrupt_page")),
        ("pages_beyond_2_pow_32", || common::high::run(B)),
        ("abort_restores_exactly", || common::abort::run(B)),
        ("early_logged_page_rewritten", || {
            common::rbuf::early_logged_page_rewritten(B)
        }),
        ("bigger_than_the_cache", || {
            common::big::run(B, "bigger_than_the_cache")
        }),
        ("null_in_non_null_field", || {
            common::nonnull::run(B, "null_in_non_null_field")
        }),
        ("nullability_mismatch", || common::nonnull::run_schema(B)),
        ("version_1_catalog", || common::nonnull::run_version_1(B)),
        ("commit_failing_at_each_io_call", || {
            common::failing::io_countdown(B)
        }),
        ("commit_of_a_foreign_pointer", || {
            common::failing::foreign_pointer(B)
        }),
        ("commit_over_a_damaged_clean_page", || {
            common::failing::damaged_clean_page(B)
        }),
        ("forgotten_transaction", || common::failing::forgotten(B)),
        ("index_property", || common::index_prop::run(B)),
        ("write_path_property", || {
            common::prop::run(B, None);
        }),
        ("collections_property", || common::collections::run(B)),
        ("damaged_text", || common::collections::damaged_text(B)),
        ("roots_and_counts", || {
            common::collections::roots_and_counts(B)
        }),
        ("killed_during_commits", || {
            common::kill::run(B, "killed_during_commits")
        }),
        ("writes_survive_eviction", || {
            common::eviction::writes_survive_eviction(B)
        }),
        ("cluster_keeps_faulting_block", || {
            common::eviction::cluster_keeps_faulting_block(B, "cluster_keeps_faulting_block")
        }),
        ("early_logged_pages_stay", || {
            common::eviction::early_logged_pages_stay(B)
        }),
        ("concurrent_readers", || {
            common::eviction::concurrent_readers(B, "concurrent_readers")
        }),
        ("stale_freed", || common::stale::freed(B)),
        ("gc_identity", || common::gc::identity(B)),
        ("gc_random_graph", || common::gc::random_graph(B)),
        ("gc_crash_points", || common::gc::crash_points(B)),
        ("gc_killed", || common::gc::killed(B, "gc_killed")),
        ("stale_aborted", || common::stale::aborted(B)),
        ("stale_aborted_then_evicted", || {
            common::stale::aborted_then_evicted(B)
        }),
        ("free_releases_buffers", || {
            common::free::releases_buffers(B)
        }),
        ("free_tree", || common::free::frees_a_tree(B)),
        ("free_index_nodes", || common::free::releases_index_nodes(B)),
        ("free_dropped_elements", || {
            common::free::dropped_elements_release_their_buffers(B)
        }),
        ("index_property_8k", || common::index_prop::run(B8)),
        ("write_path_property_8k", || {
            common::prop::run(B8, None);
        }),
        ("collections_property_8k", || common::collections::run(B8)),
        ("killed_during_commits_8k", || {
            common::kill::run(B8, "killed_during_commits_8k")
        }),
        ("writes_survive_eviction_8k", || {
            common::eviction::writes_survive_eviction(B8)
        }),
        ("cluster_keeps_faulting_block_8k", || {
            common::eviction::cluster_keeps_faulting_block(B8, "cluster_keeps_faulting_block_8k")
        }),
        ("early_logged_pages_stay_8k", || {
            common::eviction::early_logged_pages_stay(B8)
        }),
        ("concurrent_readers_8k", || {
            common::eviction::concurrent_readers(B8, "concurrent_readers_8k")
        }),
        ("stale_freed_8k", || common::stale::freed(B8)),
        ("stale_aborted_8k", || common::stale::aborted(B8)),
        ("stale_aborted_then_evicted_8k", || {
            common::stale::aborted_then_evicted(B8)
        }),
        ("index_property_16k", || common::index_prop::run(B16)),
        ("write_path_property_16k", || {
            common::prop::run(B16, None);
        }),
        ("killed_during_commits_16k", || {
            common::kill::run(B16, "killed_during_commits_16k")
        }),
        ("writes_survive_eviction_16k", || {
            common::eviction::writes_survive_eviction(B16)
        }),
        ("cluster_keeps_faulting_block_16k", || {
            common::eviction::cluster_keeps_faulting_block(B16, "cluster_keeps_faulting_block_16k")
        }),
        ("early_logged_pages_stay_16k", || {
            common::eviction::early_logged_pages_stay(B16)
        }),
        ("concurrent_readers_16k", || {
            common::eviction::concurrent_readers(B16, "concurrent_readers_16k")
        }),
        ("stale_freed_16k", || common::stale::freed(B16)),
        ("stale_aborted_16k", || common::stale::aborted(B16)),
        ("stale_aborted_then_evicted_16k", || {
            common::stale::aborted_then_evicted(B16)
        }),
    ])
}
