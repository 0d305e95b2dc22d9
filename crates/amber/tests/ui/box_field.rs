use amber::Persistent;
use amber::PRef;

#[derive(Persistent)]
#[repr(C)]
struct Leaf {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Node {
    left: Box<Leaf>,
    right: Option<std::rc::Rc<Leaf>>,
    ok: PRef<Leaf>,
    shared: std::sync::Arc<Leaf>,
}

fn main() {}
