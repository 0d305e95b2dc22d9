//! The object-layer suite on the SIGSEGV backend (its own process: it installs a signal handler) (`obj_common`).
mod obj_common;
use amber::BackendChoice;
use obj_common as common;
use obj_common::Cfg;

const B: Cfg = Cfg::new(BackendChoice::Sigsegv, 4096);
const B8: Cfg = Cfg::new(BackendChoice::Sigsegv, 8192);
const B16: Cfg = Cfg::new(BackendChoice::Sigsegv, 16384);

#[test]
fn roundtrip() {
    common::roundtrip::run(B);
}

#[test]
fn schema_mismatch() {
    common::schema::run(B);
}

#[test]
fn schema_mismatch_behind_pointers() {
    common::schema::run_reached(B);
}

#[test]
fn corrupt_page() {
    common::corrupt::run(B, "corrupt_page");
}

#[test]
fn pages_beyond_2_pow_32() {
    common::high::run(B);
}

#[test]
fn abort_restores_exactly() {
    common::abort::run(B);
}

#[test]
fn early_logged_page_rewritten() {
    common::rbuf::early_logged_page_rewritten(B);
}

#[test]
fn bigger_than_the_cache() {
    common::big::run(B, "bigger_than_the_cache");
}

#[test]
fn null_in_non_null_field() {
    common::nonnull::run(B, "null_in_non_null_field");
}

#[test]
fn lazy_never_logged() {
    common::lazy::never_logged(B);
}

#[test]
fn lazy_mixed_granularity() {
    common::lazy::mixed_granularity(B);
}

#[test]
fn lazy_discovery() {
    common::lazy::discovery(B);
}

#[test]
fn lazy_concurrent() {
    common::lazy::concurrent(B);
}

#[test]
fn nullability_mismatch() {
    common::nonnull::run_schema(B);
}

#[test]
fn version_1_catalog() {
    common::nonnull::run_version_1(B);
}

#[test]
fn commit_failing_at_each_io_call() {
    common::failing::io_countdown(B);
}

#[test]
fn commit_of_a_foreign_pointer() {
    common::failing::foreign_pointer(B);
}

#[test]
fn commit_over_a_damaged_clean_page() {
    common::failing::damaged_clean_page(B);
}

#[test]
fn forgotten_transaction() {
    common::failing::forgotten(B);
}

#[test]
fn index_property() {
    common::index_prop::run(B);
}

#[test]
fn write_path_property() {
    common::prop::run(B, None);
}

#[test]
fn collections_property() {
    common::collections::run(B);
}

#[test]
fn damaged_text() {
    common::collections::damaged_text(B);
}

#[test]
fn roots_and_counts() {
    common::collections::roots_and_counts(B);
}

#[test]
fn killed_during_commits() {
    common::kill::run(B, "killed_during_commits");
}

#[test]
fn writes_survive_eviction() {
    common::eviction::writes_survive_eviction(B);
}

#[test]
fn cluster_keeps_faulting_block() {
    common::eviction::cluster_keeps_faulting_block(B, "cluster_keeps_faulting_block");
}

#[test]
fn early_logged_pages_stay() {
    common::eviction::early_logged_pages_stay(B);
}

#[test]
fn concurrent_readers() {
    common::eviction::concurrent_readers(B, "concurrent_readers");
}

#[test]
fn stale_freed() {
    common::stale::freed(B);
}

#[test]
fn gc_identity() {
    common::gc::identity(B);
}

#[test]
fn gc_random_graph() {
    common::gc::random_graph(B);
}

#[test]
fn gc_crash_points() {
    common::gc::crash_points(B);
}

#[test]
fn gc_killed() {
    common::gc::killed(B, "gc_killed");
}

#[test]
fn stale_aborted() {
    common::stale::aborted(B);
}

#[test]
fn stale_aborted_then_evicted() {
    common::stale::aborted_then_evicted(B);
}

#[test]
fn free_releases_buffers() {
    common::free::releases_buffers(B);
}

#[test]
fn free_tree() {
    common::free::frees_a_tree(B);
}

#[test]
fn free_index_nodes() {
    common::free::releases_index_nodes(B);
}

#[test]
fn free_dropped_elements() {
    common::free::dropped_elements_release_their_buffers(B);
}

#[test]
fn index_property_8k() {
    common::index_prop::run(B8);
}

#[test]
fn write_path_property_8k() {
    common::prop::run(B8, None);
}

#[test]
fn collections_property_8k() {
    common::collections::run(B8);
}

#[test]
fn killed_during_commits_8k() {
    common::kill::run(B8, "killed_during_commits_8k");
}

#[test]
fn writes_survive_eviction_8k() {
    common::eviction::writes_survive_eviction(B8);
}

#[test]
fn cluster_keeps_faulting_block_8k() {
    common::eviction::cluster_keeps_faulting_block(B8, "cluster_keeps_faulting_block_8k");
}

#[test]
fn early_logged_pages_stay_8k() {
    common::eviction::early_logged_pages_stay(B8);
}

#[test]
fn concurrent_readers_8k() {
    common::eviction::concurrent_readers(B8, "concurrent_readers_8k");
}

#[test]
fn stale_freed_8k() {
    common::stale::freed(B8);
}

#[test]
fn stale_aborted_8k() {
    common::stale::aborted(B8);
}

#[test]
fn stale_aborted_then_evicted_8k() {
    common::stale::aborted_then_evicted(B8);
}

#[test]
fn index_property_16k() {
    common::index_prop::run(B16);
}

#[test]
fn write_path_property_16k() {
    common::prop::run(B16, None);
}

#[test]
fn killed_during_commits_16k() {
    common::kill::run(B16, "killed_during_commits_16k");
}

#[test]
fn writes_survive_eviction_16k() {
    common::eviction::writes_survive_eviction(B16);
}

#[test]
fn cluster_keeps_faulting_block_16k() {
    common::eviction::cluster_keeps_faulting_block(B16, "cluster_keeps_faulting_block_16k");
}

#[test]
fn early_logged_pages_stay_16k() {
    common::eviction::early_logged_pages_stay(B16);
}

#[test]
fn concurrent_readers_16k() {
    common::eviction::concurrent_readers(B16, "concurrent_readers_16k");
}

#[test]
fn stale_freed_16k() {
    common::stale::freed(B16);
}

#[test]
fn stale_aborted_16k() {
    common::stale::aborted(B16);
}

#[test]
fn stale_aborted_then_evicted_16k() {
    common::stale::aborted_then_evicted(B16);
}

#[test]
fn write_path_property_recovery_buffer_overflow() {
    common::prop::run(B, Some(1));
}

#[test]
fn copy_property() {
    common::copy::prop(B);
}

#[test]
fn copy_eager() {
    common::copy::eager(B);
}

#[test]
fn copy_logged() {
    common::copy::logged(B);
}

#[test]
fn copy_abort() {
    common::copy::abort(B);
}

#[test]
fn copy_killed() {
    common::copy::kill(B, "copy_killed");
}
