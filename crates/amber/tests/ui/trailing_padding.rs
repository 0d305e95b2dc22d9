use amber::Persistent;

// 4 bytes of padding after `small`.
#[derive(Persistent)]
#[repr(C)]
struct Trailing {
    big: u64,
    small: u32,
}

fn main() {}
