use amber::Persistent;
use std::cell::Cell;
use std::collections::HashMap;

#[derive(Persistent)]
#[repr(C)]
struct Misc {
    map: HashMap<u64, u64>,
    maybe: Option<u64>,
    cell: Cell<u64>,
    counter: std::sync::atomic::AtomicU64,
    pair: (u32, u32),
    callback: fn(),
}

fn main() {}
