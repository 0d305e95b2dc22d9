use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
struct Counts {
    len: usize,
    delta: isize,
    wide: u128,
}

fn main() {}
