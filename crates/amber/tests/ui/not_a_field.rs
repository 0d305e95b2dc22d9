use amber::Persistent;

// Not #[derive(Persistent)].
#[repr(C)]
struct Plain {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Holder {
    plain: Plain,
}

fn main() {}
