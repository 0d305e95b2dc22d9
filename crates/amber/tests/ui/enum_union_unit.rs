use amber::Persistent;

#[derive(Persistent)]
#[repr(C)]
enum Shape {
    Circle(u32),
    Square(u32),
}

#[derive(Persistent)]
#[repr(C)]
union Bits {
    a: u32,
    b: f32,
}

#[derive(Persistent)]
#[repr(C)]
struct Nothing;

#[derive(Persistent)]
#[repr(C)]
struct Empty {}

fn main() {}
