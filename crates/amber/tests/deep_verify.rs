//! Deep verification (`amber::inspect::verify_deep`, `Db::verify_deep`):
//! a clean database holding every kind of pointer reports nothing, with 4,
//! 8 and 16 KiB pages; a database crafted through raw store writes to hold
//! the damage of an earlier misaligned-reservation bug (pointers 0x1000
//! bytes off, in fields, vector elements, smart pointers, index values and
//! roots) and its cousins (wrong type, into the middle of an object, to no
//! object, to a page past the end, a null in a non-null field, a buffer too
//! small, a length past the capacity, an index root at a non-node) has each
//! one found and named by object and field, and nothing else; a pointer to
//! an object the program freed is a dangling reference, not damage.
//!
//! Its own test binary: opening a `Db` may install the SIGSEGV backend's
//! signal handler.

use amber::inspect::{self, DeepReport, FindingClass, Place};
use amber::internals::format::page::{BlockKind, PageHeader};
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};
use amber::{Db, Options, PBytes, PIndex, PRef, PVec, Persistent, Smart};
use std::mem::offset_of;
use std::path::Path;
use std::sync::Arc;

#[derive(Persistent)]
#[repr(C)]
struct Leaf {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Link {
    to: PRef<Part>,
    w: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Part {
    id: u64,
    next: Option<PRef<Part>>,
    leaf: PRef<Leaf>,
    smart: Smart<Leaf>,
    maybe: Option<Smart<Part>>,
    to: PVec<PRef<Part>>,
    opt: PVec<Option<PRef<Part>>>,
    links: PVec<Link>,
    arr: [PRef<Leaf>; 2],
    name: PBytes,
    nums: PVec<u64>,
    idx: PIndex<Leaf>,
}

/// Larger than a 4 KiB page: a block of its own.
#[derive(Persistent)]
#[repr(C)]
struct Blob {
    owner: PRef<Part>,
    data: [u8; 9000],
}

const PARTS: usize = 24;
/// Keys in part 0's index: enough for inner nodes.
const KEYS: u64 = 600;

/// Persistent addresses of what a test looks at.
struct Made {
    parts: Vec<u64>,
    leaves: Vec<u64>,
    blob: u64,
    /// Part 20's `next` target, freed: a dangling reference.
    freed: u64,
}

fn opts(page_size: usize) -> Options {
    Options {
        page_size,
        reserve_bytes: 1 << 30,
        ..Options::default()
    }
}

/// A database of parts using every pointer kind, each part's `next` the
/// following part; part 21 freed while part 20 still points at it when
/// `dangle`, else part 20's `next` cleared first.
fn make(path: &Path, page_size: usize, dangle: bool) -> Made {
    let mut db = Db::create(path, opts(page_size)).expect("create");
    let mut tx = db.begin().expect("begin");
    let leaves: Vec<PRef<Leaf>> = (0..PARTS as u64)
        .map(|v| tx.alloc(Leaf { v }).expect("alloc"))
        .collect();
    let mut parts: Vec<PRef<Part>> = Vec::new();
    for i in 0..PARTS {
        let leaf = leaves[i];
        let p = tx
            .alloc(Part {
                id: i as u64,
                next: None,
                leaf,
                smart: tx.to_smart(leaf).expect("smart"),
                maybe: None,
                to: PVec::new(),
                opt: PVec::new(),
                links: PVec::new(),
                arr: [leaf, leaves[(i + 1) % PARTS]],
                name: PBytes::new(),
                nums: PVec::new(),
                idx: PIndex::new(),
            })
            .expect("alloc");
        parts.push(p);
    }
    for i in 0..PARTS {
        let p = parts[i];
        let q = parts[(i + 1) % PARTS];
        tx.get_mut(p).next = Some(q);
        tx.get_mut(p).maybe = Some(tx.to_smart(q).expect("smart"));
        for k in 0..3 {
            tx.push(p, |x| &mut x.to, parts[(i + k) % PARTS])
                .expect("push");
            tx.push(p, |x| &mut x.opt, (k != 1).then_some(q))
                .expect("push");
            tx.push(p, |x| &mut x.nums, k as u64).expect("push");
        }
        tx.push(p, |x| &mut x.links, Link { to: q, w: 1 })
            .expect("push");
        tx.set_bytes(p, |x| &mut x.name, format!("part {i}").as_bytes())
            .expect("bytes");
        tx.index_insert(p, |x| &mut x.idx, &(i as u64), leaves[i])
            .expect("index");
    }
    for k in 0..KEYS {
        tx.index_insert(
            parts[0],
            |x| &mut x.idx,
            &(1000 + k),
            leaves[k as usize % PARTS],
        )
        .expect("index");
    }
    // A popped element stays in the spare capacity: not part of the value.
    tx.pop(parts[2], |x| &mut x.to);
    let blob = tx
        .alloc(Blob {
            owner: parts[0],
            data: [7; 9000],
        })
        .expect("alloc");
    tx.set_root("first", parts[0]).expect("root");
    tx.set_root("blob", blob).expect("root");
    let made = Made {
        parts: parts.iter().map(|&p| paddr(&tx, p)).collect(),
        leaves: leaves.iter().map(|&l| paddr(&tx, l)).collect(),
        blob: paddr(&tx, blob),
        freed: paddr(&tx, parts[21]),
    };
    tx.commit().expect("commit");
    // Part 21 goes; part 20's pointers to it stay (dangle) or are cleared.
    let (p20, p21) = (parts[20], parts[21]);
    let mut tx = db.begin().expect("begin");
    for (i, &p) in parts.iter().enumerate() {
        if i == 21 {
            continue;
        }
        let keep = dangle && p == p20;
        let n = tx.get_mut(p);
        if n.next == Some(p21) && !keep {
            n.next = None;
        }
        if n.maybe.is_some_and(|m| m.paddr() == made.freed) {
            n.maybe = None;
        }
        let to = tx.slice_mut(p, |x| &mut x.to);
        for slot in to.iter_mut().filter(|s| **s == p21) {
            *slot = p;
        }
        for o in tx.slice_mut(p, |x| &mut x.opt) {
            if *o == Some(p21) {
                *o = None;
            }
        }
        for l in tx.slice_mut(p, |x| &mut x.links) {
            if l.to == p21 {
                l.to = p;
            }
        }
    }
    tx.free(p21).expect("free");
    tx.commit().expect("commit");
    let rep = db.verify_deep().expect("verify_deep on the open database");
    assert_eq!(rep.damage, 0, "{:#?}", rep.findings);
    assert_eq!(rep.dangling, u64::from(dangle), "{:#?}", rep.findings);
    db.close().expect("close");
    made
}

/// The persistent address of `p`.
fn paddr<T: Persistent>(tx: &amber::Tx<'_>, p: PRef<T>) -> u64 {
    tx.to_smart(p).expect("smart").paddr()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

#[test]
fn every_pointer_kind_clean_at_every_page_size() {
    for ps in [4096, 8192, 16384] {
        let dir = tempdir();
        let path = dir.path().join("clean");
        make(&path, ps, false);
        let rep = inspect::verify_deep(&path).expect("verify_deep");
        assert!(rep.is_clean(), "{ps}: {:#?}", rep.findings);
        assert!(rep.notes.is_empty(), "{:?}", rep.notes);
        assert_eq!(rep.unchecked, 0);
        // Every part: next, leaf, smart, maybe (23 of 24 set), arr[2],
        // to (buffer + 3 elements; part 2 popped one), opt (buffer + 2
        // non-null), links (buffer + 1), name, nums, index root + value;
        // part 0's index: 600 more values and its extra nodes; two roots.
        let per_part = 1 + 1 + 1 + 2 + 4 + 3 + 2 + 1 + 1 + 2;
        let at_least = (PARTS - 1) as u64 * per_part + KEYS + 2;
        assert!(
            rep.pointers >= at_least,
            "{ps}: {} pointers checked, expected at least {at_least}",
            rep.pointers
        );
        // Reopened read-write and checked on the open database: the same.
        let db = Db::open(&path, opts(ps)).expect("open");
        let again = db.verify_deep().expect("verify_deep");
        assert_eq!(again.pointers, rep.pointers);
        assert!(again.is_clean(), "{:#?}", again.findings);
        db.close().expect("close");
    }
}

/// A pointer the program stored to an object it then freed: reported as
/// dangling, named, not damage.
#[test]
fn a_freed_target_is_dangling_not_damage() {
    let dir = tempdir();
    let path = dir.path().join("dangle");
    let m = make(&path, 4096, true);
    let rep = inspect::verify_deep(&path).expect("verify_deep");
    assert!(!rep.is_damaged(), "{:#?}", rep.findings);
    assert_eq!(rep.dangling, 1, "{:#?}", rep.findings);
    let f = &rep.findings[0];
    assert_eq!(f.class, FindingClass::Dangling);
    assert_eq!(
        f.place,
        Place::Field {
            object: m.parts[20],
            page: m.parts[20] / 4096,
            offset: m.parts[20] % 4096,
            path: "Part.next".into()
        }
    );
    assert!(f.what.contains("a `Part` the program freed"), "{}", f.what);
    assert!(
        f.what
            .contains(&format!("{}:{}", m.freed / 4096, m.freed % 4096)),
        "{}",
        f.what
    );
}

/// Raw writes into committed objects, as a tool or a bug could make them:
/// valid checksums, wrong pointers. `PRef`s and buffer words are stored as
/// the persistent address plus the database's home ([`Crafter::word`]);
/// smart pointers, index nodes and roots as the address.
struct Crafter {
    store: Store,
    ps: u64,
    home: u64,
}

impl Crafter {
    fn open(path: &Path) -> Crafter {
        let store =
            Store::open(Arc::new(RealVfs), path, StoreOptions::default()).expect("open store");
        let ps = store.page_size() as u64;
        let home = store.home().addr();
        assert_ne!(home, 0, "a database with a home");
        Crafter { store, ps, home }
    }

    /// The stored word of a `PRef` or a buffer to persistent address `a`.
    fn word(&self, a: u64) -> [u8; 8] {
        a.wrapping_add(self.home).to_le_bytes()
    }

    /// The persistent address of the buffer of the vector whose header is
    /// at `addr`.
    fn buffer_at(&self, addr: u64) -> u64 {
        self.u64_at(addr).wrapping_sub(self.home)
    }

    fn write(&self, addr: u64, bytes: &[u8]) {
        let mut tx = self.store.begin().expect("begin");
        tx.write(addr, bytes).expect("write");
        tx.commit().expect("commit");
    }

    fn u64_at(&self, addr: u64) -> u64 {
        let head = self.store.block_of(addr / self.ps).expect("allocated").0;
        let b = self.store.read_block(head).expect("read");
        let at = (addr - head * self.ps) as usize;
        u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
    }

    /// An address inside a data block where no object is: past the
    /// objects of a block with room left.
    fn gap(&self) -> u64 {
        self.store
            .blocks()
            .into_iter()
            .find_map(|(head, pages)| {
                let b = self.store.read_block(head).ok()?;
                let h = PageHeader::read(&b)?;
                let used = u64::from(h.used);
                (h.kind == BlockKind::Data as u8 && used + 64 < u64::from(pages) * self.ps)
                    .then_some(head * self.ps + used + 24)
            })
            .expect("a data block with room")
    }
}

/// One expected finding: the object (or root) and field, and words of the
/// message.
struct Want {
    place: Place,
    says: &'static str,
}

fn field(object: u64, ps: u64, path: &str, says: &'static str) -> Want {
    Want {
        place: Place::Field {
            object,
            page: object / ps,
            offset: object % ps,
            path: path.into(),
        },
        says,
    }
}

/// Every wanted finding is there, as damage, and nothing else.
#[track_caller]
fn check_findings(rep: &DeepReport, want: &[Want]) {
    for w in want {
        let f = rep
            .findings
            .iter()
            .find(|f| f.place == w.place)
            .unwrap_or_else(|| panic!("no finding at {}: {:#?}", w.place, rep.findings));
        assert_eq!(f.class, FindingClass::Damage, "{f}");
        assert!(f.what.contains(w.says), "{f}: lacks {:?}", w.says);
    }
    assert_eq!(
        rep.findings.len(),
        want.len(),
        "unexpected findings: {:#?}",
        rep.findings
    );
    assert_eq!(rep.damage, want.len() as u64);
    assert_eq!(rep.dangling, 0);
}

/// The index node format (`db/index/node.rs`): a 16-byte header, then
/// slots of 16 bytes whose last 8 are the value.
const NODE_VALUES_AT: u64 = 16 + 8;
/// Byte 2 of a node: its kind (1 leaf, 2 inner).
const NODE_KIND_AT: u64 = 2;

fn crafted(ps: usize) {
    let dir = tempdir();
    let path = dir.path().join("crafted");
    let m = make(&path, ps, false);
    let c = Crafter::open(&path);
    let ps = ps as u64;
    let p = &m.parts;
    let off = |f: usize| f as u64;
    let vec_buf = |part: u64, f: usize| c.buffer_at(part + off(f));
    let index_root = |part: u64| c.u64_at(part + off(offset_of!(Part, idx)));
    let mut want = Vec::new();

    // The misaligned-reservation bug: pointers 0x1000 bytes from their
    // targets, in a field, a vector element, a vector of structs, a smart
    // pointer, an index value and a root.
    c.write(p[1] + off(offset_of!(Part, next)), &c.word(p[2] + 0x1000));
    want.push(field(p[1], ps, "Part.next", "holds "));
    let to = vec_buf(p[3], offset_of!(Part, to));
    c.write(to + 8, &c.word(p[4] + 0x1000));
    want.push(field(p[3], ps, "Part.to[1]", "holds "));
    let links = vec_buf(p[4], offset_of!(Part, links));
    c.write(links + off(offset_of!(Link, to)), &c.word(p[5] + 0x1000));
    want.push(field(p[4], ps, "Part.links[0].to", "holds "));
    c.write(
        p[5] + off(offset_of!(Part, smart)),
        &(m.leaves[5] + 0x1000).to_le_bytes(),
    );
    want.push(field(p[5], ps, "Part.smart", "holds "));
    let node = index_root(p[6]);
    c.write(node + NODE_VALUES_AT, &(m.leaves[6] + 0x1000).to_le_bytes());
    want.push(field(p[6], ps, "Part.idx[key 6]", "holds "));
    let mut tx = c.store.begin().expect("begin");
    let r = c.store.root("blob").expect("root");
    tx.set_root("blob", m.blob + 0x1000, r.type_id)
        .expect("root");
    tx.commit().expect("commit");
    want.push(Want {
        place: Place::Root {
            name: "blob".into(),
        },
        says: "holds ",
    });

    // A pointer to an object of another type.
    c.write(p[7] + off(offset_of!(Part, leaf)), &c.word(p[8]));
    want.push(field(
        p[7],
        ps,
        "Part.leaf",
        "`Part` object of 152 bytes, not a `Leaf`",
    ));
    // Into the middle of an object.
    c.write(p[8] + off(offset_of!(Part, next)), &c.word(p[9] + 16));
    want.push(field(
        p[8],
        ps,
        "Part.next",
        "16 bytes into the `Part` object",
    ));
    // Into a block where no object is, and past the end of the database.
    c.write(p[9] + off(offset_of!(Part, next)), &c.word(c.gap()));
    want.push(field(p[9], ps, "Part.next", "holds no object"));
    let end = c.store.page_count() * ps + 40;
    c.write(p[10] + off(offset_of!(Part, arr) + 8), &c.word(end));
    want.push(field(
        p[10],
        ps,
        "Part.arr[1]",
        "past the end of the database",
    ));
    // A null in a non-null field.
    c.write(p[11] + off(offset_of!(Part, leaf)), &0u64.to_le_bytes());
    want.push(field(
        p[11],
        ps,
        "Part.leaf",
        "null in a non-null `PRef<Leaf>`",
    ));
    // A buffer too small for the capacity the vector claims.
    c.write(
        p[12] + off(offset_of!(Part, nums) + 12),
        &1000u32.to_le_bytes(),
    );
    want.push(field(p[12], ps, "Part.nums", "too small for cap 1000"));
    // A length past the capacity.
    c.write(
        p[13] + off(offset_of!(Part, name) + 8),
        &9999u32.to_le_bytes(),
    );
    want.push(field(p[13], ps, "Part.name", "len 9999 is more than cap"));
    // A vector whose buffer is an object of another type.
    c.write(p[14] + off(offset_of!(Part, to)), &c.word(m.leaves[14]));
    want.push(field(p[14], ps, "Part.to", "not a `[PRef<Part>]` buffer"));
    // An index whose root is not a node.
    c.write(p[15] + off(offset_of!(Part, idx)), &p[16].to_le_bytes());
    want.push(field(p[15], ps, "Part.idx", "not an index node"));
    // An index whose length disagrees with its entries.
    c.write(p[16] + off(offset_of!(Part, idx) + 8), &5u64.to_le_bytes());
    want.push(field(
        p[16],
        ps,
        "Part.idx",
        "holds 1 entries, its len says 5",
    ));
    // An index node of an unknown kind.
    let node = index_root(p[19]);
    c.write(node + NODE_KIND_AT, &[9]);
    want.push(field(p[19], ps, "Part.idx", "its kind byte is 9"));
    // A pointer into an object's header.
    c.write(p[17] + off(offset_of!(Part, next)), &c.word(p[18] - 4));
    want.push(field(
        p[17],
        ps,
        "Part.next",
        "inside the header of the `Part` object",
    ));
    // The blob's owner, into the middle of the blob itself.
    c.write(
        m.blob + off(offset_of!(Blob, owner)),
        &c.word(m.blob + 5000),
    );
    want.push(field(
        m.blob,
        ps,
        "Blob.owner",
        "5000 bytes into the `Blob` object",
    ));
    c.store.close().expect("close");

    let rep = inspect::verify_deep(&path).expect("verify_deep");
    check_findings(&rep, &want);
    // A finding names the page and offset of the object and the field.
    let f = rep
        .findings
        .iter()
        .find(|f| matches!(&f.place, Place::Field { object, .. } if *object == p[8]))
        .expect("part 8's finding");
    let (pg, o) = (p[8] / ps, p[8] % ps);
    let (tp, to) = (p[9] / ps, p[9] % ps);
    assert_eq!(
        f.to_string(),
        format!(
            "object {pg}:{o} (page {pg}, offset {o}), field `Part.next`: holds {tp}:{}, \
             16 bytes into the `Part` object at {tp}:{to}",
            to + 16
        )
    );
    // The same on the open database.
    let db = Db::open(&path, opts(ps as usize)).expect("open");
    let open_rep = db.verify_deep().expect("verify_deep");
    assert_eq!(open_rep.findings, rep.findings);
    db.close().expect("close");
}

#[test]
fn crafted_damage_is_found_and_named_4k() {
    crafted(4096);
}

#[test]
fn crafted_damage_is_found_and_named_16k() {
    crafted(16384);
}
