use amber::Persistent;

#[derive(Persistent)]
#[persistent(name = "")]
#[repr(C)]
struct EmptyName {
    v: u64,
}

#[derive(Persistent)]
#[persistent(rename = "X")]
#[repr(C)]
struct UnknownOption {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct OnField {
    #[persistent(name = "w")]
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct TwoDefaults {
    #[persistent(default, default = 3)]
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct ValueOnAVector {
    #[persistent(default = 3)]
    v: amber::PVec<u64>,
}

fn main() {}
