//! The vm suite on the SIGSEGV backend (its own process: it installs a handler).
mod vm_common;
use amber::Backend;
use vm_common as common;

const B: Backend = Backend::Sigsegv;

#[test]
fn lazy_assignment_and_runs() {
    common::lazy_assignment_and_runs(B);
}
#[test]
fn huge_page_numbers() {
    common::huge_page_numbers(B);
}
#[test]
fn read_faults_from_many_threads() {
    common::read_faults_from_many_threads(B);
}
#[test]
fn ensure_resident_reports_errors() {
    common::ensure_resident_reports_errors(B);
}
#[test]
fn load_of_bad_page_aborts() {
    if common::child_scenario().is_some() {
        return common::load_of_bad_page(B);
    }
    let (status, stderr) = common::in_child("load_of_bad_page_aborts", "bad_page");
    common::check_aborted(
        status,
        &stderr,
        "amber: fatal: page 77: checksum mismatch (injected)",
    );
}
#[test]
fn load_of_unassigned_frame_aborts() {
    if common::child_scenario().is_some() {
        return common::load_of_unassigned_frame(B);
    }
    let (status, stderr) = common::in_child("load_of_unassigned_frame_aborts", "unassigned");
    common::check_aborted(status, &stderr, "amber: fatal: access to frame 1000");
}
#[test]
fn evict_then_refault() {
    common::evict_then_refault(B);
}
#[test]
fn write_tracking() {
    common::write_tracking(B);
}
#[test]
fn untracked_frames_are_writable() {
    common::untracked_frames_are_writable(B);
}
#[test]
fn copy_in_and_out() {
    common::copy_in_and_out(B);
}
#[test]
fn reservation_exhaustion() {
    common::reservation_exhaustion(B);
}
#[test]
fn large_frames() {
    common::large_frames(B);
}
#[test]
fn drop_and_recreate() {
    common::drop_and_recreate(B);
}
#[test]
fn map_count_exhaustion_is_a_clear_error() {
    if common::child_scenario().is_some() {
        return common::map_count_exhaustion(B);
    }
    let (status, stderr) = common::in_child("map_count_exhaustion_is_a_clear_error", "map_count");
    if status.code() == Some(2) {
        eprintln!("skipping: vm.max_map_count is raised on this host");
        return;
    }
    assert!(status.success(), "status {status:?}, stderr:\n{stderr}");
    assert!(stderr.contains("vm.max_map_count"), "{stderr}");
}
#[test]
fn concurrent_first_writes() {
    common::concurrent_first_writes(B);
}
#[test]
fn load_on_unprepared_thread_works() {
    if common::child_scenario().is_some() {
        return common::load_on_unprepared_thread(B);
    }
    let (status, stderr) = common::in_child("load_on_unprepared_thread_works", "unprepared");
    assert!(status.success(), "status {status:?}, stderr:\n{stderr}");
}
#[test]
fn eviction_races_writers() {
    common::eviction_races_writers(B);
}
#[test]
fn reservation_aligned_despite_hint() {
    common::reservation_aligned_despite_hint(B);
}
#[test]
fn abandoned_eviction_keeps_tracking() {
    common::abandoned_eviction_keeps_tracking(B);
}
#[test]
fn stack_overflow_still_reported() {
    if common::child_scenario().is_some() {
        return common::stack_overflow(B);
    }
    let (status, stderr) = common::in_child("stack_overflow_still_reported", "overflow");
    common::check_aborted(status, &stderr, "has overflowed its stack");
}
