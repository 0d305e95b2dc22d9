use amber::Persistent;

#[derive(Persistent)]
struct Point {
    x: i32,
    y: i32,
}

fn main() {}
