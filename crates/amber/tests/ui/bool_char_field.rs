use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
struct Flags {
    done: bool,
    letter: char,
    _pad: [u8; 3],
}

fn main() {}
