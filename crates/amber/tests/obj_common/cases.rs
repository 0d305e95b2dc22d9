//! The object-layer suite's cases for a harness binary (`obj_uffd.rs`,
//! `obj_mapped.rs`): one list, so that every backend runs every case.

/// The cases on `$b` (4 KiB pages), `$b8` and `$b16` (8 and 16 KiB), as
/// `(name, body)` for `harness::run_uffd`.
#[macro_export]
macro_rules! obj_cases {
    ($b:expr, $b8:expr, $b16:expr) => {
        vec![
            ("roundtrip", || $crate::obj_common::roundtrip::run($b)),
            ("schema_mismatch", || $crate::obj_common::schema::run($b)),
            ("schema_mismatch_behind_pointers", || {
                $crate::obj_common::schema::run_reached($b)
            }),
            ("corrupt_page", || {
                $crate::obj_common::corrupt::run($b, "corrupt_page")
            }),
            ("pages_beyond_2_pow_32", || {
                $crate::obj_common::high::run($b)
            }),
            ("abort_restores_exactly", || {
                $crate::obj_common::abort::run($b)
            }),
            ("early_logged_page_rewritten", || {
                $crate::obj_common::rbuf::early_logged_page_rewritten($b)
            }),
            ("bigger_than_the_cache", || {
                $crate::obj_common::big::run($b, "bigger_than_the_cache")
            }),
            ("null_in_non_null_field", || {
                $crate::obj_common::nonnull::run($b, "null_in_non_null_field")
            }),
            ("nullability_mismatch", || {
                $crate::obj_common::nonnull::run_schema($b)
            }),
            ("version_1_catalog", || {
                $crate::obj_common::nonnull::run_version_1($b)
            }),
            ("commit_failing_at_each_io_call", || {
                $crate::obj_common::failing::io_countdown($b)
            }),
            ("commit_of_a_foreign_pointer", || {
                $crate::obj_common::failing::foreign_pointer($b)
            }),
            ("commit_over_a_damaged_clean_page", || {
                $crate::obj_common::failing::damaged_clean_page($b)
            }),
            ("forgotten_transaction", || {
                $crate::obj_common::failing::forgotten($b)
            }),
            ("lazy_never_logged", || {
                $crate::obj_common::lazy::never_logged($b)
            }),
            ("lazy_mixed_granularity", || {
                $crate::obj_common::lazy::mixed_granularity($b)
            }),
            ("lazy_discovery", || $crate::obj_common::lazy::discovery($b)),
            ("lazy_concurrent", || {
                $crate::obj_common::lazy::concurrent($b)
            }),
            ("index_property", || $crate::obj_common::index_prop::run($b)),
            ("write_path_property", || {
                $crate::obj_common::prop::run($b, None);
            }),
            ("collections_property", || {
                $crate::obj_common::collections::run($b)
            }),
            ("damaged_text", || {
                $crate::obj_common::collections::damaged_text($b)
            }),
            ("roots_and_counts", || {
                $crate::obj_common::collections::roots_and_counts($b)
            }),
            ("killed_during_commits", || {
                $crate::obj_common::kill::run($b, "killed_during_commits")
            }),
            ("copy_oc_and_pc", || $crate::obj_common::copy::oc_and_pc($b)),
            ("copy_swizzling", || $crate::obj_common::copy::swizzling($b)),
            ("copy_eager", || $crate::obj_common::copy::eager($b)),
            ("copy_eviction", || $crate::obj_common::copy::eviction($b)),
            ("copy_logged", || $crate::obj_common::copy::logged($b)),
            ("copy_abort", || $crate::obj_common::copy::abort($b)),
            ("copy_nullable_smart", || {
                $crate::obj_common::copy::nullable_smart($b)
            }),
            ("copy_property", || $crate::obj_common::copy::prop($b)),
            ("copy_killed", || {
                $crate::obj_common::copy::kill($b, "copy_killed")
            }),
            ("writes_survive_eviction", || {
                $crate::obj_common::eviction::writes_survive_eviction($b)
            }),
            ("cluster_keeps_faulting_block", || {
                $crate::obj_common::eviction::cluster_keeps_faulting_block(
                    $b,
                    "cluster_keeps_faulting_block",
                )
            }),
            ("early_logged_pages_stay", || {
                $crate::obj_common::eviction::early_logged_pages_stay($b)
            }),
            ("concurrent_readers", || {
                $crate::obj_common::eviction::concurrent_readers($b, "concurrent_readers")
            }),
            ("stale_freed", || $crate::obj_common::stale::freed($b)),
            ("gc_identity", || $crate::obj_common::gc::identity($b)),
            ("gc_random_graph", || {
                $crate::obj_common::gc::random_graph($b)
            }),
            ("gc_crash_points", || {
                $crate::obj_common::gc::crash_points($b)
            }),
            ("gc_killed", || {
                $crate::obj_common::gc::killed($b, "gc_killed")
            }),
            ("stale_aborted", || $crate::obj_common::stale::aborted($b)),
            ("stale_aborted_then_evicted", || {
                $crate::obj_common::stale::aborted_then_evicted($b)
            }),
            ("free_releases_buffers", || {
                $crate::obj_common::free::releases_buffers($b)
            }),
            ("free_tree", || $crate::obj_common::free::frees_a_tree($b)),
            ("free_index_nodes", || {
                $crate::obj_common::free::releases_index_nodes($b)
            }),
            ("free_dropped_elements", || {
                $crate::obj_common::free::dropped_elements_release_their_buffers($b)
            }),
            ("index_property_8k", || {
                $crate::obj_common::index_prop::run($b8)
            }),
            ("write_path_property_8k", || {
                $crate::obj_common::prop::run($b8, None);
            }),
            ("collections_property_8k", || {
                $crate::obj_common::collections::run($b8)
            }),
            ("killed_during_commits_8k", || {
                $crate::obj_common::kill::run($b8, "killed_during_commits_8k")
            }),
            ("writes_survive_eviction_8k", || {
                $crate::obj_common::eviction::writes_survive_eviction($b8)
            }),
            ("cluster_keeps_faulting_block_8k", || {
                $crate::obj_common::eviction::cluster_keeps_faulting_block(
                    $b8,
                    "cluster_keeps_faulting_block_8k",
                )
            }),
            ("early_logged_pages_stay_8k", || {
                $crate::obj_common::eviction::early_logged_pages_stay($b8)
            }),
            ("concurrent_readers_8k", || {
                $crate::obj_common::eviction::concurrent_readers($b8, "concurrent_readers_8k")
            }),
            ("stale_freed_8k", || $crate::obj_common::stale::freed($b8)),
            ("stale_aborted_8k", || {
                $crate::obj_common::stale::aborted($b8)
            }),
            ("stale_aborted_then_evicted_8k", || {
                $crate::obj_common::stale::aborted_then_evicted($b8)
            }),
            ("index_property_16k", || {
                $crate::obj_common::index_prop::run($b16)
            }),
            ("write_path_property_16k", || {
                $crate::obj_common::prop::run($b16, None);
            }),
            ("killed_during_commits_16k", || {
                $crate::obj_common::kill::run($b16, "killed_during_commits_16k")
            }),
            ("writes_survive_eviction_16k", || {
                $crate::obj_common::eviction::writes_survive_eviction($b16)
            }),
            ("cluster_keeps_faulting_block_16k", || {
                $crate::obj_common::eviction::cluster_keeps_faulting_block(
                    $b16,
                    "cluster_keeps_faulting_block_16k",
                )
            }),
            ("early_logged_pages_stay_16k", || {
                $crate::obj_common::eviction::early_logged_pages_stay($b16)
            }),
            ("concurrent_readers_16k", || {
                $crate::obj_common::eviction::concurrent_readers($b16, "concurrent_readers_16k")
            }),
            ("stale_freed_16k", || $crate::obj_common::stale::freed($b16)),
            ("stale_aborted_16k", || {
                $crate::obj_common::stale::aborted($b16)
            }),
            ("stale_aborted_then_evicted_16k", || {
                $crate::obj_common::stale::aborted_then_evicted($b16)
            }),
        ]
    };
}
