//! The vm layer under a real database on the userfaultfd backend (its own
//! process; see `vm_db_common`).
mod harness;
mod vm_db_common;
use amber::BackendChoice;
use vm_db_common as common;

const B: BackendChoice = BackendChoice::Uffd;

fn readers_of_a_cold_graph() {
    common::threads::readers_of_a_cold_graph(B);
}

fn writers_in_one_transaction() {
    common::threads::writers_in_one_transaction(B);
}

fn fault_holding_a_lock() {
    common::locks::fault_holding_a_lock(B, "fault_holding_a_lock");
}

fn large_pages_round_trip() {
    common::pages::large_pages_round_trip(B);
}

fn main() -> std::process::ExitCode {
    harness::run_uffd(vec![
        ("readers_of_a_cold_graph", readers_of_a_cold_graph),
        ("writers_in_one_transaction", writers_in_one_transaction),
        ("fault_holding_a_lock", fault_holding_a_lock),
        ("large_pages_round_trip", large_pages_round_trip),
    ])
}
