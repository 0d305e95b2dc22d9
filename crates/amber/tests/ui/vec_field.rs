use amber::Persistent;
use amber::PVec;

#[derive(Persistent)]
#[repr(C)]
struct List {
    items: Vec<u32>,
    nested: PVec<Vec<u8>>,
}

fn main() {}
