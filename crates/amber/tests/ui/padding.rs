use amber::Persistent;

// 3 bytes of padding between `tag` and `value`.
#[derive(Persistent)]
#[repr(C)]
struct Padded {
    tag: u8,
    value: u32,
}

fn main() {}
