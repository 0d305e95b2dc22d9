//! The vm layer under a real database on the SIGSEGV backend (its own
//! process; see `vm_db_common`).
mod harness;
mod vm_db_common;
use amber::BackendChoice;
use vm_db_common as common;

const B: BackendChoice = BackendChoice::Sigsegv;

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

fn out_of_map_entries() {
    common::locks::out_of_map_entries(B, "out_of_map_entries");
}

fn main() -> std::process::ExitCode {
    use harness::Needs;
    harness::run(vec![
        (
            "readers_of_a_cold_graph",
            readers_of_a_cold_graph,
            Needs::Nothing,
        ),
        (
            "writers_in_one_transaction",
            writers_in_one_transaction,
            Needs::Nothing,
        ),
        ("fault_holding_a_lock", fault_holding_a_lock, Needs::Nothing),
        (
            "large_pages_round_trip",
            large_pages_round_trip,
            Needs::Nothing,
        ),
        (
            "out_of_map_entries",
            out_of_map_entries,
            Needs::DefaultMapCount,
        ),
    ])
}
