//! The vm layer under a real database on the userfaultfd backend (its own
//! process; see `vm_db_common`).
mod vm_db_common;
use amber::BackendChoice;
use vm_db_common as common;

const B: BackendChoice = BackendChoice::Uffd;

#[test]
fn readers_of_a_cold_graph() {
    common::threads::readers_of_a_cold_graph(B);
}

#[test]
fn writers_in_one_transaction() {
    common::threads::writers_in_one_transaction(B);
}

#[test]
fn fault_holding_a_lock() {
    common::locks::fault_holding_a_lock(B, "fault_holding_a_lock");
}

#[test]
fn large_pages_round_trip() {
    common::pages::large_pages_round_trip(B);
}
