//! A layout mismatch at open: the database holds a type under a stored name,
//! the program has a different struct under that name. `check_type`, `root`
//! and allocation must refuse with `Error::SchemaMismatch` naming the type
//! and the field, and the database must stay usable with the right type.

use super::{check_backend, open, opts};
use amber::vm::BackendChoice;
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
fn mismatch<T: std::fmt::Debug>(r: Result<T, Error>, ty: &str, names: &[&str]) -> String {
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
    // differs in the target's size (what swizzling reads).
    let m = mismatch(
        db.check_type::<retargeted::Holder>(),
        "obj::Holder",
        &["p", "obj::Shape"],
    );
    assert!(m.contains("24") && m.contains("16"), "{m}");
    msgs.push(m);
    msgs.push(mismatch(
        db.root::<retargeted::Holder>("holder"),
        "obj::Holder",
        &["p"],
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
pub fn run(b: BackendChoice) {
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
