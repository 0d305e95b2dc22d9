//! `amber verify --deep`: a sound database passes; a pointer 0x1000 bytes
//! off its target (what the misaligned-reservation bug of issue 11 wrote,
//! with valid checksums) passes the plain `verify` but fails `--deep` with
//! exit status 1 and a line naming the object and the field; a dangling
//! reference the program stored is reported with exit status 0.

use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};
use amber::{Db, Options, PRef, PVec, Persistent};
use std::mem::offset_of;
use std::path::Path;
use std::sync::Arc;

mod common;
use common::{amber, assert_error, s, serial};

#[derive(Persistent)]
#[repr(C)]
struct Part {
    id: u64,
    next: Option<PRef<Part>>,
    to: PVec<PRef<Part>>,
    fill: [u64; 40],
}

/// Persistent addresses of parts 0..8 of a database of 16 KiB pages (each
/// part's `next` the following one, `to` holding it too); part 7 is freed
/// and, when `dangle`, part 6 still points at it.
fn make(path: &Path, dangle: bool) -> Vec<u64> {
    let o = Options {
        page_size: 16384,
        reserve_bytes: 1 << 30,
        ..Options::default()
    };
    let mut db = Db::create(path, o).expect("create");
    let mut tx = db.begin().expect("begin");
    let parts: Vec<PRef<Part>> = (0..8)
        .map(|id| {
            tx.alloc(Part {
                id,
                next: None,
                to: PVec::new(),
                fill: [id; 40],
            })
            .expect("alloc")
        })
        .collect();
    for i in 0..7 {
        tx.get_mut(parts[i]).next = Some(parts[i + 1]);
        tx.push(parts[i], |p| &mut p.to, parts[i + 1])
            .expect("push");
    }
    tx.set_root("first", parts[0]).expect("root");
    let addrs = parts
        .iter()
        .map(|&p| tx.to_smart(p).expect("paddr").paddr())
        .collect();
    tx.commit().expect("commit");
    let mut tx = db.begin().expect("begin");
    if !dangle {
        tx.get_mut(parts[6]).next = None;
    }
    tx.pop(parts[6], |p| &mut p.to);
    tx.free(parts[7]).expect("free");
    tx.commit().expect("commit");
    db.close().expect("close");
    addrs
}

#[test]
fn verify_deep_finds_pointers_a_page_off() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("parts.amber");
    let parts = make(&db, false);
    let r = amber(&["verify", "--deep", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("deep: checked "), "{}", r.stdout);
    assert!(r.stdout.ends_with(": no damage found\n"), "{}", r.stdout);

    // Part 2's `next` and part 4's `to[0]`, 0x1000 bytes past their targets
    // (stored as the persistent address plus the database's home, as the
    // vector's buffer word is: docs/design.md §1.1).
    let store = Store::open(Arc::new(RealVfs), &db, StoreOptions::default()).expect("open");
    let home = store.home();
    let stored = |a: u64| home.stored(a).expect("stored form").to_le_bytes();
    let mut tx = store.begin().expect("begin");
    let next = stored(parts[3] + 0x1000);
    tx.write(parts[2] + offset_of!(Part, next) as u64, &next)
        .expect("write");
    let head = store.block_of(parts[4] / 16384).expect("block").0;
    let image = store.read_block(head).expect("read");
    let at = (parts[4] + offset_of!(Part, to) as u64 - head * 16384) as usize;
    let buf = home.paddr(u64::from_le_bytes(
        image[at..at + 8].try_into().expect("8 bytes"),
    ));
    tx.write(buf, &stored(parts[5] + 0x1000)).expect("write");
    tx.commit().expect("commit");
    store.close().expect("close");

    // Checksums are valid: the plain verify sees nothing.
    let r = amber(&["verify", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let r = amber(&["verify", "--deep", s(&db)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let damage: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("damage: "))
        .collect();
    assert_eq!(damage.len(), 2, "{}", r.stdout);
    let (p2, p4) = (parts[2], parts[4]);
    let (t3, t5) = (parts[3] + 0x1000, parts[5] + 0x1000);
    let at = |a: u64| format!("{}:{}", a / 16384, a % 16384);
    let object = |a: u64| {
        format!(
            "object {} (page {}, offset {})",
            at(a),
            a / 16384,
            a % 16384
        )
    };
    assert!(
        damage[0].starts_with(&format!(
            "damage: {}, field `Part.next`: holds {}, ",
            object(p2),
            at(t3)
        )),
        "{}",
        damage[0]
    );
    assert!(
        damage[1].starts_with(&format!(
            "damage: {}, field `Part.to[0]`: holds {}, ",
            object(p4),
            at(t5)
        )),
        "{}",
        damage[1]
    );
    assert!(r.stdout.ends_with(": 2 problem(s)\n"), "{}", r.stdout);
    // Beside a writer holding the database open, it reads a snapshot and
    // finds the same; a missing file is a one-line error.
    {
        let _held = Store::open(Arc::new(RealVfs), &db, StoreOptions::default()).expect("open");
        let again = amber(&["verify", "--deep", s(&db)]);
        assert_eq!(again.code, 1, "{}{}", again.stdout, again.stderr);
        assert!(
            again.stdout.ends_with(": 2 problem(s)\n"),
            "{}",
            again.stdout
        );
    }
    let missing = dir.path().join("missing.amber");
    assert_error(&amber(&["verify", "--deep", s(&missing)]), "no such file");
}

#[test]
fn verify_deep_reports_dangling_references_without_failing() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("dangling.amber");
    let parts = make(&db, true);
    let r = amber(&["verify", "--deep", s(&db)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let p6 = parts[6];
    let p7 = parts[7];
    let want = format!(
        "dangling: object {}:{} (page {}, offset {}), field `Part.next`: holds {}:{}, a `Part` the program freed\n",
        p6 / 16384,
        p6 % 16384,
        p6 / 16384,
        p6 % 16384,
        p7 / 16384,
        p7 % 16384
    );
    assert!(r.stdout.contains(&want), "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "no damage found; 1 dangling reference(s) to objects the program freed (not damage)"
        ),
        "{}",
        r.stdout
    );
}
