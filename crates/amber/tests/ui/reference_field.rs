use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
struct Refs {
    shared: &'static u64,
    unique: &'static mut u64,
    raw: *const u64,
}

fn main() {}
