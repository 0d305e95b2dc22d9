//! The vm suite on the userfaultfd backend (its own process).
mod harness;
mod vm_common;
use amber::Backend;
use vm_common as common;

const B: Backend = Backend::Uffd;

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
    harness::run_uffd(vec![
        ("lazy_assignment_and_runs", lazy_assignment_and_runs),
        ("huge_page_numbers", huge_page_numbers),
        (
            "read_faults_from_many_threads",
            read_faults_from_many_threads,
        ),
        (
            "ensure_resident_reports_errors",
            ensure_resident_reports_errors,
        ),
        ("load_of_bad_page_aborts", load_of_bad_page_aborts),
        (
            "load_of_unassigned_frame_aborts",
            load_of_unassigned_frame_aborts,
        ),
        ("evict_then_refault", evict_then_refault),
        ("write_tracking", write_tracking),
        (
            "untracked_frames_are_writable",
            untracked_frames_are_writable,
        ),
        ("copy_in_and_out", copy_in_and_out),
        ("reservation_exhaustion", reservation_exhaustion),
        ("large_frames", large_frames),
        ("drop_and_recreate", drop_and_recreate),
        ("concurrent_first_writes", concurrent_first_writes),
        (
            "load_on_unprepared_thread_works",
            load_on_unprepared_thread_works,
        ),
        ("eviction_races_writers", eviction_races_writers),
        (
            "reservation_aligned_despite_hint",
            reservation_aligned_despite_hint,
        ),
        (
            "abandoned_eviction_keeps_tracking",
            abandoned_eviction_keeps_tracking,
        ),
        (
            "stack_overflow_still_reported",
            stack_overflow_still_reported,
        ),
    ])
}
