//! The README's example, compiled and run.
use amber::{Db, Options, PRef, PVec, Persistent};

#[derive(Persistent)]
#[repr(C)]
struct Part {
    id: u32,
    _pad: [u8; 4],
    x: i64,
    to: [Option<PRef<Part>>; 3],
    incoming: PVec<PRef<Part>>,
}

#[test]
fn readme_example() -> amber::Result<()> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("parts.amber");
    let mut db = Db::create(&path, Options::default())?;
    let mut tx = db.begin()?;
    let a = tx.alloc(Part {
        id: 1,
        _pad: [0; 4],
        x: 10,
        to: [None; 3],
        incoming: PVec::new(),
    })?;
    let b = tx.alloc_near(
        Part {
            id: 2,
            _pad: [0; 4],
            x: 20,
            to: [Some(a), None, None],
            incoming: PVec::new(),
        },
        a,
    )?;
    tx.push(a, |p| &mut p.incoming, b)?;
    tx.set_root("first", b)?;
    tx.commit()?;

    let b: PRef<Part> = db.root("first")?.expect("root");
    let a = db.get(b).to[0].expect("linked");
    assert_eq!(db.get(a).x, 10);

    let mut tx = db.begin()?;
    tx.get_mut(a).x += 1;
    tx.commit()?;
    assert_eq!(db.slice(&db.get(a).incoming), &[b]);
    db.close()
}
