use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
struct Cell<T> {
    value: T,
}

#[derive(Persistent)]
#[repr(C)]
struct Borrowed<'a> {
    value: u64,
    _life: std::marker::PhantomData<&'a ()>,
}

fn main() {}
