use amber::Persistent;
use amber::{Lazy, PIndex, PRef, Smart};

#[derive(Persistent)]
#[repr(C)]
struct Holder {
    to_prim: PRef<u64>,
    to_array: Option<Smart<[u8; 4]>>,
    index: PIndex<u32>,
    boxed: Option<Box<u64>>,
    lazy_prim: Lazy<u32>,
    maybe_lazy: Option<Lazy<Holder>>,
}

fn main() {}
