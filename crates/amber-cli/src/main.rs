//! The `amber` command.
fn main() {}
