use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
struct Person {
    name: String,
    id: u64,
}

fn main() {}
