use amber::Persistent;

#[derive(Persistent)]
#[repr(C, packed)]
struct Packed {
    a: u8,
    b: u64,
}

fn main() {}
