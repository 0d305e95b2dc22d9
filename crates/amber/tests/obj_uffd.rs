//! The object-layer suite on the userfaultfd backend (`obj_common`).
mod obj_common;
use amber::BackendChoice;
use obj_common as common;

const B: BackendChoice = BackendChoice::Uffd;

#[test]
fn writes_survive_eviction() {
    common::eviction::writes_survive_eviction(B);
}

#[test]
fn cluster_keeps_faulting_block() {
    common::eviction::cluster_keeps_faulting_block(B, "cluster_keeps_faulting_block");
}

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
fn freed_slot_reused_once() {
    common::abort::freed_slot_reused_once(B);
}

#[test]
fn early_logged_pages_stay() {
    common::eviction::early_logged_pages_stay(B);
}

#[test]
fn early_logged_page_rewritten() {
    common::rbuf::early_logged_page_rewritten(B);
}

#[test]
fn write_path_property() {
    common::prop::run(B, None);
}

#[test]
fn killed_during_commits() {
    common::kill::run(B, "killed_during_commits");
}

#[test]
fn bigger_than_the_cache() {
    common::big::run(B, "bigger_than_the_cache");
}

#[test]
fn concurrent_readers() {
    common::eviction::concurrent_readers(B, "concurrent_readers");
}

#[test]
fn freed_slot_reused_once_with_cluster() {
    common::abort::freed_slot_reused_once_with_cluster(B);
}

#[test]
fn null_in_non_null_field() {
    common::nonnull::run(B, "null_in_non_null_field");
}

#[test]
fn nullability_mismatch() {
    common::nonnull::run_schema(B);
}

#[test]
fn version_1_catalog() {
    common::nonnull::run_version_1(B);
}
