//! The vm suite on the SIGSEGV backend (its own process: it installs a handler).
mod harness;
mod vm_common;
use amber::Backend;
use vm_common as common;

const B: Backend = Backend::Sigsegv;

fn lazy_assignment_and_runs() {
    common::lazy_assignment_and_runs(B);
}
fn huge_page_numbers() {
    common::huge_page_numbers(B);
}
fn read_faults_from_many_threads() {
    common::read_faults_from_many_threads(B);
}
fn ensure_resident_reports_errors() {
    common::ensure_resident_reports_errors(B);
}
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
fn load_of_unassigned_frame_aborts() {
    if common::child_scenario().is_some() {
        return common::load_of_unassigned_frame(B);
    }
    let (status, stderr) = common::in_child("load_of_unassigned_frame_aborts", "unassigned");
    common::check_aborted(status, &stderr, "amber: fatal: access to frame 1000");
}
fn evict_then_refault() {
    common::evict_then_refault(B);
}
fn write_tracking() {
    common::write_tracking(B);
}
fn untracked_frames_are_writable() {
    common::untracked_frames_are_writable(B);
}
fn copy_in_and_out() {
    common::copy_in_and_out(B);
}
fn reservation_exhaustion() {
    common::reservation_exhaustion(B);
}
fn large_frames() {
    common::large_frames(B);
}
fn drop_and_recreate() {
    common::drop_and_recreate(B);
}
fn map_count_exhaustion_is_a_clear_error() {
    if common::child_scenario().is_some() {
        return common::map_count_exhaustion(B);
    }
    let (status, stderr) = common::in_child("map_count_exhaustion_is_a_clear_error", "map_count");
    assert!(status.success(), "status {status:?}, stderr:\n{stderr}");
    assert!(stderr.contains("vm.max_map_count"), "{stderr}");
}
fn concurrent_first_writes() {
    common::concurrent_first_writes(B);
}
fn load_on_unprepared_thread_works() {
    if common::child_scenario().is_some() {
        return common::load_on_unprepared_thread(B);
    }
    let (status, stderr) = common::in_child("load_on_unprepared_thread_works", "unprepared");
    assert!(status.success(), "status {status:?}, stderr:\n{stderr}");
}
fn eviction_races_writers() {
    common::eviction_races_writers(B);
}
fn reservation_aligned_despite_hint() {
    common::reservation_aligned_despite_hint(B);
}
fn abandoned_eviction_keeps_tracking() {
    common::abandoned_eviction_keeps_tracking(B);
}
fn stack_overflow_still_reported() {
    if common::child_scenario().is_some() {
        return common::stack_overflow(B);
    }
    let (status, stderr) = common::in_child("stack_overflow_still_reported", "overflow");
    common::check_aborted(status, &stderr, "has overflowed its stack");
}

fn main() -> std::process::ExitCode {
    use harness::Needs;
    harness::run(vec![
        (
            "lazy_assignment_and_runs",
            lazy_assignment_and_runs,
            Needs::Nothing,
        ),
        ("huge_page_numbers", huge_page_numbers, Needs::Nothing),
        (
            "read_faults_from_many_threads",
            read_faults_from_many_threads,
            Needs::Nothing,
        ),
        (
            "ensure_resident_reports_errors",
            ensure_resident_reports_errors,
            Needs::Nothing,
        ),
        (
            "load_of_bad_page_aborts",
            load_of_bad_page_aborts,
            Needs::Nothing,
        ),
        (
            "load_of_unassigned_frame_aborts",
            load_of_unassigned_frame_aborts,
            Needs::Nothing,
        ),
        ("evict_then_refault", evict_then_refault, Needs::Nothing),
        ("write_tracking", write_tracking, Needs::Nothing),
        (
            "untracked_frames_are_writable",
            untracked_frames_are_writable,
            Needs::Nothing,
        ),
        ("copy_in_and_out", copy_in_and_out, Needs::Nothing),
        (
            "reservation_exhaustion",
            reservation_exhaustion,
            Needs::Nothing,
        ),
        ("large_frames", large_frames, Needs::Nothing),
        ("drop_and_recreate", drop_and_recreate, Needs::Nothing),
        (
            "map_count_exhaustion_is_a_clear_error",
            map_count_exhaustion_is_a_clear_error,
            Needs::DefaultMapCount,
        ),
        (
            "concurrent_first_writes",
            concurrent_first_writes,
            Needs::Nothing,
        ),
        (
            "load_on_unprepared_thread_works",
            load_on_unprepared_thread_works,
            Needs::Nothing,
        ),
        (
            "eviction_races_writers",
            eviction_races_writers,
            Needs::Nothing,
        ),
        (
            "reservation_aligned_despite_hint",
            reservation_aligned_despite_hint,
            Needs::Nothing,
        ),
        (
            "abandoned_eviction_keeps_tracking",
            abandoned_eviction_keeps_tracking,
            Needs::Nothing,
        ),
        (
            "stack_overflow_still_reported",
            stack_overflow_still_reported,
            Needs::Nothing,
        ),
    ])
}
