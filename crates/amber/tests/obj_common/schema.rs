//! A layout mismatch at open: the database holds a type under a stored name,
//! the program has a different struct under that name. `check_type`, `root`
//! and allocation must refuse with `Error::SchemaMismatch` naming the type
//! and the field, and the database must stay usable with the right type —
//! also when the changed type is not the one named but one it reaches
//! (`run_reached`): a pointer's target, a struct nested in an array.

use super::Cfg;
use super::{check_backend, open, opts};
use amber::{Db, Error, PRef, Persistent};

mod v1 {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub b: u32,
        pub c: u32,
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Holder")]
    #[repr(C)]
    pub struct Holder {
        pub n: u64,
        pub p: Option<PRef<Shape>>,
    }
}

/// A field added at the end (the size changes too).
mod added {
    use amber::Persistent;

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub b: u32,
        pub c: u32,
        pub d: u64,
    }
}

/// A field inserted before `b`: `b` and `c` move.
mod inserted {
    use amber::Persistent;

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub x: u32,
        pub b: u32,
        pub c: u32,
        pub _pad: [u8; 4],
    }
}

/// Two fields swapped: same size, offsets exchanged.
mod swapped {
    use amber::Persistent;

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub c: u32,
        pub b: u32,
    }
}

/// A field's type changed, same size.
mod retyped {
    use amber::Persistent;

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub b: f32,
        pub c: u32,
    }
}

/// A field's type changed and the struct grew with it.
mod widened {
    use amber::Persistent;

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub b: u64,
        pub c: u32,
        pub _pad: [u8; 4],
    }
}

/// A field removed.
mod removed {
    use amber::Persistent;

    #[derive(Persistent)]
    #[persistent(name = "obj::Shape")]
    #[repr(C)]
    pub struct Shape {
        pub a: u64,
        pub b: u32,
        pub _pad: [u8; 4],
    }
}

/// The holder unchanged, but its pointer's target is the grown `Shape`.
mod retargeted {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Holder")]
    #[repr(C)]
    pub struct Holder {
        pub n: u64,
        pub p: Option<PRef<super::added::Shape>>,
    }
}

/// The holder unchanged, its target `Shape` with two same-size fields
/// swapped (the holder's own descriptor, which records the target's name and
/// size only, is the same).
mod swapped_target {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Holder")]
    #[repr(C)]
    pub struct Holder {
        pub n: u64,
        pub p: Option<PRef<super::swapped::Shape>>,
    }
}

/// Types reached from a root: a link whose first word is a number, and a
/// grid of cells held by value in an array.
mod reach_v1 {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Link")]
    #[repr(C)]
    pub struct Link {
        pub a: u64,
        pub b: u64,
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Cell")]
    #[repr(C)]
    pub struct Cell {
        pub x: u32,
        pub y: u32,
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Grid")]
    #[repr(C)]
    pub struct Grid {
        pub cells: [Cell; 3],
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Top")]
    #[repr(C)]
    pub struct Top {
        pub link: PRef<Link>,
        pub grid: Option<PRef<Grid>>,
    }
}

/// The link's number became a pointer: a stored 0 would be a `PRef` holding
/// null, which safe code must never see.
mod reach_ref {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Link")]
    #[repr(C)]
    pub struct Link {
        pub a: PRef<super::v1::Shape>,
        pub b: u64,
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Top")]
    #[repr(C)]
    pub struct Top {
        pub link: PRef<Link>,
        pub grid: Option<PRef<super::reach_v1::Grid>>,
    }
}

/// The cells in the grid's array have their fields swapped.
mod reach_cells {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Cell")]
    #[repr(C)]
    pub struct Cell {
        pub y: u32,
        pub x: u32,
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Grid")]
    #[repr(C)]
    pub struct Grid {
        pub cells: [Cell; 3],
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Top")]
    #[repr(C)]
    pub struct Top {
        pub link: PRef<super::reach_v1::Link>,
        pub grid: Option<PRef<Grid>>,
    }
}

/// A type the database has never stored, pointing to one it has not stored
/// either: both are fine, and are stored as checked when first allocated.
mod fresh {
    use amber::{PRef, Persistent};

    #[derive(Persistent)]
    #[persistent(name = "obj::Fresh")]
    #[repr(C)]
    pub struct Fresh {
        pub next: Option<PRef<Unstored>>,
    }

    #[derive(Persistent)]
    #[persistent(name = "obj::Unstored")]
    #[repr(C)]
    pub struct Unstored {
        pub v: u64,
    }

    /// A new type reaching the changed `Shape`: allocating it is refused.
    #[derive(Persistent)]
    #[persistent(name = "obj::FreshToShape")]
    #[repr(C)]
    pub struct FreshToShape {
        pub s: Option<PRef<super::swapped::Shape>>,
    }
}

/// Another type entirely.
#[derive(Persistent)]
#[persistent(name = "obj::Other")]
#[repr(C)]
struct Other {
    v: u64,
}

/// Checks that `r` is a schema mismatch for `ty` whose message names every
/// one of `names`.
#[track_caller]
pub fn mismatch<T: std::fmt::Debug>(r: Result<T, Error>, ty: &str, names: &[&str]) -> String {
    match r {
        Err(e @ Error::SchemaMismatch { .. }) => {
            let Error::SchemaMismatch { type_name, what } = &e else {
                unreachable!()
            };
            assert_eq!(type_name, ty, "{e}");
            let msg = e.to_string();
            for n in names {
                assert!(
                    what.contains(&format!("`{n}`")),
                    "the message does not name `{n}`: {msg}"
                );
            }
            msg
        }
        other => panic!("expected a schema mismatch for {ty}, got {other:?}"),
    }
}

/// Every changed layout against the stored one.
fn check_all(db: &mut Db) -> Vec<String> {
    let shape = "obj::Shape";
    let mut msgs = Vec::new();
    macro_rules! case {
        ($m:ident, $fields:expr) => {{
            msgs.push(mismatch(db.check_type::<$m::Shape>(), shape, &$fields));
            let r = db.root::<$m::Shape>("shape");
            msgs.push(mismatch(r, shape, &$fields));
            // Allocating one is refused the same way, and leaves no trace.
            let mut tx = db.begin().expect("begin");
            let e = tx.alloc(zeroed::<$m::Shape>()).map(|_| ());
            msgs.push(mismatch(e, shape, &$fields));
            tx.abort().expect("abort");
        }};
    }
    case!(added, ["d"]);
    case!(inserted, ["x"]);
    case!(swapped, ["c"]);
    case!(retyped, ["b"]);
    case!(widened, ["b"]);
    case!(removed, ["c"]);
    // A pointer field whose target changed layout: the holder's own layout
    // differs only in the target's size (what swizzling reads), so the
    // target's changed field is what is named, with the path to it.
    let m = mismatch(
        db.check_type::<retargeted::Holder>(),
        "obj::Shape",
        &["d", "obj::Holder.p"],
    );
    assert!(m.contains("24") && m.contains("16"), "{m}");
    msgs.push(m);
    msgs.push(mismatch(
        db.root::<retargeted::Holder>("holder"),
        "obj::Shape",
        &["d", "obj::Holder.p"],
    ));
    // A root of another type is refused, naming what it holds.
    let e = db.root::<Other>("shape");
    let m = mismatch(e, "obj::Other", &[]);
    assert!(m.contains("obj::Shape"), "{m}");
    msgs
}

/// A value of `T` with every byte zero (valid for these pointer-free types).
fn zeroed<T: Persistent + FromZeros>() -> T {
    T::zeroed()
}

trait FromZeros {
    fn zeroed() -> Self;
}

macro_rules! zeros {
    ($($t:ty => $e:expr),* $(,)?) => {$(
        impl FromZeros for $t {
            fn zeroed() -> Self { $e }
        }
    )*};
}

zeros!(
    added::Shape => added::Shape { a: 0, b: 0, c: 0, d: 0 },
    inserted::Shape => inserted::Shape { a: 0, x: 0, b: 0, c: 0, _pad: [0; 4] },
    swapped::Shape => swapped::Shape { a: 0, c: 0, b: 0 },
    retyped::Shape => retyped::Shape { a: 0, b: 0.0, c: 0 },
    widened::Shape => widened::Shape { a: 0, b: 0, c: 0, _pad: [0; 4] },
    removed::Shape => removed::Shape { a: 0, b: 0, _pad: [0; 4] },
);

/// Creates with `v1`, reopens, and tries every other layout.
pub fn run(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("schema.amber");
    {
        let mut db = Db::create(&path, opts(b)).expect("create");
        check_backend(&db, b);
        let mut tx = db.begin().expect("begin");
        let s = tx.alloc(v1::Shape { a: 1, b: 2, c: 3 }).expect("alloc");
        let h = tx.alloc(v1::Holder { n: 9, p: Some(s) }).expect("alloc");
        tx.set_root("shape", s).expect("root");
        tx.set_root("holder", h).expect("root");
        tx.commit().expect("commit");
        db.close().expect("close");
    }
    let mut db = open(&path, opts(b));
    let msgs = check_all(&mut db);
    // The right layout still works, before and after the refusals.
    db.check_type::<v1::Shape>().expect("v1 matches");
    let s: PRef<v1::Shape> = db.root("shape").expect("root").expect("set");
    assert_eq!((db.get(s).a, db.get(s).b, db.get(s).c), (1, 2, 3));
    let h: PRef<v1::Holder> = db.root("holder").expect("root").expect("set");
    assert_eq!(db.get(h).p, Some(s));
    let mut tx = db.begin().expect("begin");
    tx.get_mut(s).c = 4;
    tx.alloc(v1::Shape { a: 5, b: 6, c: 7 }).expect("alloc");
    tx.commit().expect("commit");
    db.close().expect("close");
    // And after a reopen: nothing of the refused layouts was stored.
    let mut db = open(&path, opts(b));
    assert_eq!(db.store().types().len(), 2, "only the two v1 types");
    check_all(&mut db);
    let s: PRef<v1::Shape> = db.root("shape").expect("root").expect("set");
    assert_eq!(db.get(s).c, 4);
    db.close().expect("close");
    if std::env::var_os("AMBER_OBJ_SHOW").is_some() {
        for m in msgs {
            eprintln!("{m}");
        }
    }
}

/// Every changed layout reached from an unchanged type: refused by
/// `check_type`, `root` and allocation, naming the reached type, its field
/// and the path to it.
fn check_reached(db: &mut Db) {
    let shape = ["c", "obj::Holder.p"];
    mismatch(
        db.check_type::<swapped_target::Holder>(),
        "obj::Shape",
        &shape,
    );
    mismatch(
        db.root::<swapped_target::Holder>("holder"),
        "obj::Shape",
        &shape,
    );
    let link = ["a", "obj::Top.link"];
    mismatch(db.check_type::<reach_ref::Top>(), "obj::Link", &link);
    mismatch(db.root::<reach_ref::Top>("top"), "obj::Link", &link);
    let cells = ["cells[_].y", "obj::Top.grid"];
    mismatch(db.check_type::<reach_cells::Top>(), "obj::Grid", &cells);
    mismatch(db.root::<reach_cells::Top>("top"), "obj::Grid", &cells);
    let mut tx = db.begin().expect("begin");
    let r = tx.alloc(swapped_target::Holder { n: 0, p: None });
    mismatch(r, "obj::Shape", &shape);
    let r = tx.alloc(fresh::FreshToShape { s: None });
    mismatch(r, "obj::Shape", &["c", "obj::FreshToShape.s"]);
    tx.abort().expect("abort");
}

/// Creates with `v1` and `reach_v1`, reopens, and tries every layout changed
/// behind a pointer; types the database has not stored are accepted and
/// stored as checked.
pub fn run_reached(b: Cfg) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("reached.amber");
    {
        let mut db = Db::create(&path, opts(b)).expect("create");
        check_backend(&db, b);
        let mut tx = db.begin().expect("begin");
        let s = tx.alloc(v1::Shape { a: 1, b: 2, c: 3 }).expect("alloc");
        let h = tx.alloc(v1::Holder { n: 9, p: Some(s) }).expect("alloc");
        let link = tx.alloc(reach_v1::Link { a: 0, b: 5 }).expect("alloc");
        let cell = |i: u32| reach_v1::Cell { x: i, y: 10 + i };
        let grid = tx
            .alloc(reach_v1::Grid {
                cells: [cell(0), cell(1), cell(2)],
            })
            .expect("alloc");
        let top = tx
            .alloc(reach_v1::Top {
                link,
                grid: Some(grid),
            })
            .expect("alloc");
        tx.set_root("holder", h).expect("root");
        tx.set_root("top", top).expect("root");
        tx.commit().expect("commit");
        db.close().expect("close");
    }
    let mut db = open(&path, opts(b));
    check_reached(&mut db);
    // The stored layouts still work.
    let h: PRef<v1::Holder> = db.root("holder").expect("root").expect("set");
    let s = db.get(h).p.expect("target");
    assert_eq!((db.get(s).a, db.get(s).b, db.get(s).c), (1, 2, 3));
    let top: PRef<reach_v1::Top> = db.root("top").expect("root").expect("set");
    assert_eq!(db.get(db.get(top).link).a, 0);
    let grid = db.get(db.get(top).grid.expect("grid"));
    assert_eq!((grid.cells[2].x, grid.cells[2].y), (2, 12));
    // A new type reaching a type not stored either is fine.
    db.check_type::<fresh::Fresh>()
        .expect("nothing stored of it");
    let mut tx = db.begin().expect("begin");
    let f = tx.alloc(fresh::Fresh { next: None }).expect("alloc");
    tx.set_root("fresh", f).expect("root");
    tx.commit().expect("commit");
    let names = |db: &Db| -> Vec<String> {
        db.store()
            .types()
            .iter()
            .map(|(_, d)| {
                amber::internals::schema::desc::StoredType::decode(d)
                    .expect("descriptor")
                    .name
            })
            .collect()
    };
    let stored = names(&db);
    assert!(stored.iter().any(|n| n == "obj::Fresh"), "{stored:?}");
    assert!(!stored.iter().any(|n| n == "obj::Unstored"), "{stored:?}");
    // ... and the reached type is stored when first allocated.
    let mut tx = db.begin().expect("begin");
    let u = tx.alloc(fresh::Unstored { v: 7 }).expect("alloc");
    tx.get_mut(f).next = Some(u);
    tx.commit().expect("commit");
    db.close().expect("close");
    // After a reopen: the same refusals, and the new types as stored.
    let mut db = open(&path, opts(b));
    check_reached(&mut db);
    assert!(names(&db).iter().any(|n| n == "obj::Unstored"));
    let f: PRef<fresh::Fresh> = db.root("fresh").expect("root").expect("set");
    assert_eq!(db.get(db.get(f).next.expect("linked")).v, 7);
    db.close().expect("close");
}
