use amber::Persistent;

#[derive(Persistent)]
#[repr(C, align(16))]
struct Wide {
    a: u64,
    b: u64,
}

#[derive(Persistent)]
#[repr(transparent)]
struct Wrapper {
    a: u64,
}

fn main() {}
