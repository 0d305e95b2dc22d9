use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
struct Guard {
    count: u64,
}

impl Drop for Guard {
    fn drop(&mut self) {}
}

fn main() {}
