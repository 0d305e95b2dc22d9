//! `amber inspect` on a database of objects: the decoded schema catalog,
//! `--page N` and `--object PAGE:OFFSET`, and their one-line errors.

use amber::{Db, Options, PBytes, PIndex, PRef, PVec, Persistent, Smart};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mod common;
use common::{amber, assert_error, s, serial};

#[derive(Persistent)]
#[repr(C)]
struct Leaf {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Pair {
    a: PRef<Leaf>,
    b: Option<PRef<Leaf>>,
}

#[derive(Persistent)]
#[persistent(name = "demo::Node")]
#[repr(C)]
struct Node {
    id: u32,
    temp: i32,
    label: [u8; 12],
    _pad: [u8; 4],
    ratio: f64,
    next: Option<PRef<Node>>,
    pair: Pair,
    pairs: [Pair; 2],
    smart: Option<Smart<Leaf>>,
    nums: PVec<u64>,
    name: PBytes,
    idx: PIndex<Leaf>,
}

#[track_caller]
fn has(out: &str, want: &str) {
    assert!(out.contains(want), "output lacks {want:?}:\n{out}");
}

/// Persistent addresses of what the test looks for.
struct Made {
    node: (u64, u64),
    second: (u64, u64),
    leaf: (u64, u64),
}

fn pa(db: &mut Db, p: PRef<impl Persistent>) -> (u64, u64) {
    let tx = db.begin().expect("begin");
    let a = tx.to_smart(p).expect("paddr").paddr();
    tx.abort().expect("abort");
    (a >> 12, a & 4095)
}

fn make(path: &Path, close: bool) -> Made {
    let mut db = Db::create(path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let leaf = tx.alloc(Leaf { v: 7 }).expect("alloc");
    let leaf2 = tx.alloc(Leaf { v: 8 }).expect("alloc");
    let smart = tx.to_smart(leaf2).expect("smart");
    let mk = |id: u32, next| Node {
        id,
        temp: -40,
        label: *b"hello\n\"x\"\0\0\0",
        _pad: [0; 4],
        ratio: 0.5,
        next,
        pair: Pair { a: leaf, b: None },
        pairs: [
            Pair {
                a: leaf2,
                b: Some(leaf),
            },
            Pair { a: leaf, b: None },
        ],
        smart: Some(smart),
        nums: PVec::new(),
        name: PBytes::new(),
        idx: PIndex::new(),
    };
    let second = tx.alloc(mk(2, None)).expect("alloc");
    let node = tx.alloc(mk(1, Some(second))).expect("alloc");
    for i in 0..3 {
        tx.push(node, |n| &mut n.nums, 100 + i).expect("push");
    }
    tx.set_bytes(node, |n| &mut n.name, b"first node")
        .expect("bytes");
    tx.index_insert(node, |n| &mut n.idx, &5, leaf)
        .expect("index");
    tx.set_root("node", node).expect("root");
    tx.commit().expect("commit");
    let made = Made {
        node: pa(&mut db, node),
        second: pa(&mut db, second),
        leaf: pa(&mut db, leaf),
    };
    if close {
        db.close().expect("close");
    } else {
        drop(db); // committed changes stay in the log
    }
    made
}

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("objects.amber")
}

#[test]
fn catalog_is_decoded() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    make(&db, true);
    let r = amber(&["inspect", s(&db)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &r.stdout;
    has(out, "schema catalog: ");
    has(out, "demo::Node (");
    for want in [
        "0  id: u32",
        "4  temp: i32",
        "8  label: [u8; 12]",
        "24  ratio: f64",
        "32  next: Option<PRef<demo::Node>>",
        "40  pair: Pair",
        "56  pairs: [Pair; 2]",
        "88  smart: Option<Smart<Leaf>>",
        "96  nums: PVec<u64>",
        "112  name: PBytes",
        "128  idx: PIndex<Leaf>",
    ] {
        has(out, want);
    }
    has(
        out,
        "[u64] (buffers of vectors and byte strings: elements of u64, 8 byte(s) each)",
    );
    // Nested struct fields, at their offsets in the outer type.
    has(
        out,
        "40  pair: Pair\n        40    a: PRef<Leaf>\n        48    b: Option<PRef<Leaf>>\n",
    );
    has(out, "\"node\": address ");
    has(out, " demo::Node\n");
}

#[test]
fn page_and_object_dumps() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    // Not closed: the dump shows the committed state from the log too.
    let m = make(&db, false);
    let (page, off) = m.node;
    let r = amber(&["inspect", s(&db), "--page", &page.to_string()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &r.stdout;
    has(
        out,
        &format!("page {page}: data block, 1 page(s) of 4096 bytes"),
    );
    // Committed, still in the log only.
    has(
        out,
        "not in the page file yet; shown with the changes committed in the log",
    );
    has(out, "object(s), from block offset 32 to ");
    has(
        out,
        &format!("object {page}:{off} (header at block offset {})", off - 8),
    );
    has(out, "type ");
    has(out, "`demo::Node`, 144 bytes");
    has(out, "id (u32, offset 0): 1\n");
    has(out, "temp (i32, offset 4): -40\n");
    has(
        out,
        "label ([u8; 12], offset 8): \"hello\\n\\\"x\\\"\" + 3 zero byte(s)\n",
    );
    has(out, "ratio (f64, offset 24): 0.5\n");
    has(
        out,
        &format!(
            "next (Option<PRef<demo::Node>>, offset 32): {}:{}\n",
            m.second.0, m.second.1
        ),
    );
    has(
        out,
        &format!("a (PRef<Leaf>, offset 0): {}:{}\n", m.leaf.0, m.leaf.1),
    );
    has(out, "b (Option<PRef<Leaf>>, offset 8): null\n");
    has(out, "pairs ([Pair; 2], offset 56):\n");
    has(
        out,
        "pair (Pair, offset 40):\n      a (PRef<Leaf>, offset 0): ",
    );
    has(out, "[1]:\n");
    has(out, " (smart)\n");
    has(out, "nums (PVec<u64>, offset 96): len 3, cap 4, buffer ");
    has(out, "name (PBytes, offset 112): len 10, cap 10, buffer ");
    has(out, "idx (PIndex<Leaf>, offset 128): len 1, root node ");
    has(out, "`Leaf`, 8 bytes");
    has(out, "v (u64, offset 0): 7\n");
    // The vector's buffer, found through the node's field, as one object.
    let buf = out
        .split("nums (PVec<u64>, offset 96): len 3, cap 4, buffer ")
        .nth(1)
        .and_then(|t| t.lines().next())
        .expect("buffer address")
        .to_string();
    let r = amber(&["inspect", s(&db), "--object", &buf]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has(&r.stdout, "`[u64]`, 32 bytes");
    has(&r.stdout, "4 element(s) of u64: [100, 101, 102, 0]");
    // One object: only it.
    let spec = format!("{page}:{off}");
    let r = amber(&["inspect", s(&db), "--object", &spec]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has(&r.stdout, &format!("object {page}:{off} "));
    assert_eq!(r.stdout.matches("  object ").count(), 1, "{}", r.stdout);
    // An offset inside the object's body finds it too.
    let r = amber(&[
        "inspect",
        s(&db),
        "--object",
        &format!("{page}:{}", off + 20),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has(&r.stdout, &format!("object {page}:{off} "));
}

#[test]
fn free_slots_large_objects_and_damage() {
    let _serial = serial();
    #[derive(Persistent)]
    #[repr(C)]
    struct Big {
        head: u64,
        data: [u8; 9000],
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_in(&dir);
    let (big_page, leaf_page, leaf_off);
    {
        let mut d = Db::create(&db, Options::default()).expect("create");
        let mut tx = d.begin().expect("begin");
        let big = tx
            .alloc(Big {
                head: 42,
                data: [b'z'; 9000],
            })
            .expect("alloc");
        let keep = tx.alloc(Leaf { v: 1 }).expect("alloc");
        let gone = tx.alloc(Leaf { v: 2 }).expect("alloc");
        tx.set_root("big", big).expect("root");
        tx.set_root("keep", keep).expect("root");
        tx.commit().expect("commit");
        (leaf_page, leaf_off) = pa(&mut d, gone);
        let mut tx = d.begin().expect("begin");
        tx.free(gone).expect("free");
        tx.commit().expect("commit");
        big_page = pa(&mut d, big).0;
        d.close().expect("close");
    }
    // A large object: any page of its run shows the block.
    let r = amber(&["inspect", s(&db), "--page", &(big_page + 2).to_string()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has(
        &r.stdout,
        &format!(
            "page {} is page 2 of the 3-page block at page {big_page}",
            big_page + 2
        ),
    );
    has(&r.stdout, "3 page(s) of 4096 bytes (run_len 3)");
    has(&r.stdout, "head (u64, offset 0): 42\n");
    has(&r.stdout, "data ([u8; 9000], offset 8): \"zzzz");
    has(&r.stdout, "(8744 more bytes)");
    // A freed slot.
    let r = amber(&[
        "inspect",
        s(&db),
        "--object",
        &format!("{leaf_page}:{leaf_off}"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has(&r.stdout, "flags 0x01 (free)");
    has(&r.stdout, "freed: its space is reclaimed by `amber gc`");
    // Errors are one line.
    assert_error(
        &amber(&["inspect", s(&db), "--page", "999999"]),
        "page 999999 is not allocated",
    );
    assert_error(
        &amber(&["inspect", s(&db), "--object", "nonsense"]),
        "PAGE:OFFSET",
    );
    assert_error(
        &amber(&["inspect", s(&db), "--object", "2:5000"]),
        "not inside a page",
    );
    assert_error(
        &amber(&["inspect", s(&db), "--object", &format!("{leaf_page}:4000")]),
        "no object at",
    );
    assert_error(
        &amber(&["inspect", s(&db), "--page", "1", "--object", "1:1"]),
        "cannot be used with",
    );
    // A damaged page is said so, and still shown (unverified).
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&db)
        .expect("open");
    let at = leaf_page * 4096 + 100;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).expect("read");
    f.write_all_at(&[b[0] ^ 0xff], at).expect("write");
    drop(f);
    let r = amber(&["inspect", s(&db), "--page", &leaf_page.to_string()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has(&r.stdout, "DAMAGED: ");
    has(&r.stdout, &format!("page {leaf_page}: checksum mismatch"));
    has(&r.stdout, "(showing the bytes in the file, unverified)");
    has(&r.stdout, "MISMATCH, computed");
    // After a clean close, a sound page's file copy checks.
    let r = amber(&["inspect", s(&db), "--page", &big_page.to_string()]);
    has(&r.stdout, "in the page file: LSN ");
    has(&r.stdout, "(ok)\n");
}
