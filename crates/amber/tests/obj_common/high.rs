//! Persistent addresses beyond 2^32 pages (Texas's huge address spaces),
//! on the sparse crash-model file system.
//!
//! The object layer's allocator takes the lowest free pages, so the test
//! places the blocks itself with the storage API (`StoreTx::alloc_at`): data
//! blocks at pages 2^32 + 5, 2^33 + 77, 2^44 + 11 and a three-page run at
//! 2^40 + 3, each seeded with one object (header and body written as the
//! object layer writes them) and named by a root. Everything else goes
//! through the object API: `alloc_near` fills those pages with objects,
//! `set_bytes` puts byte strings beside them, and plain pointers, smart
//! pointers and a large object link high pages to each other and to low
//! ones. Committed, recovered from the log after a crash, checkpointed into
//! the sparse file at a clean close, reopened and traversed; the page numbers
//! are checked to really be above 2^32.

use super::Cfg;
use super::{check_backend, opts};
use amber::internals::format::objects::{encode_header, slot_size};
use amber::internals::format::page::{BlockKind, HEADER_SIZE, USED_OFFSET};
use amber::internals::io::crash::CrashVfs;
use amber::internals::store::{Store, StoreOptions};
use amber::{Db, PBytes, PRef, Persistent, Smart};
use std::path::Path;
use std::sync::Arc;

#[derive(Persistent)]
#[repr(C)]
pub struct HNode {
    pub id: u64,
    pub next: Option<PRef<HNode>>,
    pub big: Option<PRef<HBig>>,
    pub smart: Option<Smart<HNode>>,
    pub name: PBytes,
    pub payload: [u64; 4],
}

#[derive(Persistent)]
#[repr(C)]
pub struct HBig {
    pub id: u64,
    pub back: Option<PRef<HNode>>,
    pub data: [u8; 9000],
}

const PS: u64 = 4096;
const TWO32: u64 = 1 << 32;
/// (root name, first page, pages, first id of the objects placed there).
const SEEDS: [(&str, u64, u32, u64); 3] = [
    ("hA", TWO32 + 5, 1, 100),
    ("hB", (1 << 33) + 77, 1, 200),
    ("hD", (1 << 44) + 11, 1, 400),
];
const BIG_PAGE: u64 = (1 << 40) + 3;
const PER_PAGE: u64 = 10;

fn node(id: u64) -> HNode {
    HNode {
        id,
        next: None,
        big: None,
        smart: None,
        name: PBytes::new(),
        payload: [id, !id, id * 3, 7],
    }
}

fn name(id: u64) -> Vec<u8> {
    format!("node {id} lives above 2^32 pages").into_bytes()
}

fn big_data(i: usize) -> u8 {
    (i * 13 + 5) as u8
}

/// Writes one object (`body`) of catalog type `type_id` as the only object
/// of the fresh data block at `page`, and names it `root`.
fn seed(s: &Store, root: &str, page: u64, pages: u32, type_id: u32, body: &[u8]) {
    let mut tx = s.begin().expect("begin");
    tx.alloc_at(page, pages, BlockKind::Data).expect("alloc_at");
    let base = page * PS;
    let hdr = HEADER_SIZE as u64;
    tx.write(base + hdr, &encode_header(type_id, 0, body.len() as u32))
        .expect("header");
    tx.write(base + hdr + 8, body).expect("body");
    let used = (HEADER_SIZE + slot_size(body.len())) as u32;
    tx.write(base + USED_OFFSET as u64, &used.to_le_bytes())
        .expect("used");
    tx.set_root(root, base + hdr + 8, type_id).expect("root");
    tx.commit().expect("commit");
}

/// What the traversal must find: ids in order, and which of them lie high.
fn expected_ids() -> Vec<u64> {
    let mut ids = vec![1];
    for &(_, _, _, first) in &SEEDS {
        ids.extend(first..=first + PER_PAGE);
    }
    ids
}

/// Builds the graph; returns the persistent address of every node in chain
/// order.
fn build(vfs: &CrashVfs, path: &Path, b: Cfg) -> Vec<u64> {
    let v: Arc<CrashVfs> = Arc::new(vfs.clone());
    // 1. Object API: define the types (a low node and a low large object).
    {
        let mut db = Db::create_with(v.clone(), path, opts(b)).expect("create");
        check_backend(&db, b);
        let mut tx = db.begin().expect("begin");
        let low = tx.alloc(node(1)).expect("alloc");
        let big = tx
            .alloc(HBig {
                id: 0,
                back: None,
                data: [0; 9000],
            })
            .expect("alloc");
        tx.set_root("low", low).expect("root");
        tx.set_root("lowbig", big).expect("root");
        tx.commit().expect("commit");
        db.close().expect("close");
    }
    // 2. Storage API: data blocks far above 2^32 pages, one object each.
    {
        let s = Store::open(v.clone(), path, StoreOptions::default()).expect("open store");
        let node_type = s.root("low").expect("low").type_id;
        let big_type = s.root("lowbig").expect("lowbig").type_id;
        for &(root, page, pages, first) in &SEEDS {
            let mut body = vec![0u8; std::mem::size_of::<HNode>()];
            body[..8].copy_from_slice(&first.to_le_bytes());
            seed(&s, root, page, pages, node_type, &body);
        }
        let mut body = vec![0u8; std::mem::size_of::<HBig>()];
        body[..8].copy_from_slice(&900u64.to_le_bytes());
        seed(&s, "hC", BIG_PAGE, 3, big_type, &body);
        s.close().expect("close store");
    }
    // 3. Object API again: fill the high pages and link everything.
    let mut db = Db::open_with(v, path, opts(b)).expect("open");
    let low: PRef<HNode> = db.root("low").expect("root").expect("low");
    let big: PRef<HBig> = db.root("hC").expect("root").expect("hC");
    assert_eq!(db.get(big).id, 900);
    let seeds: Vec<PRef<HNode>> = SEEDS
        .iter()
        .map(|&(root, ..)| db.root(root).expect("root").expect("seed"))
        .collect();
    let mut tx = db.begin().expect("begin");
    let mut chain = vec![low];
    for (&(_, _, _, first), &seed) in SEEDS.iter().zip(&seeds) {
        assert_eq!(tx.get(seed).id, first);
        chain.push(seed);
        for id in first + 1..=first + PER_PAGE {
            let n = tx.alloc_near(node(id), seed).expect("alloc_near");
            chain.push(n);
        }
    }
    let mut paddrs = Vec::new();
    for (i, &n) in chain.iter().enumerate() {
        let next = chain.get(i + 1).copied();
        let smart = match i {
            0 => None,
            _ => Some(tx.to_smart(chain[i - 1]).expect("smart")),
        };
        let id = tx.get(n).id;
        {
            let g = tx.get_mut(n);
            g.next = next;
            g.smart = smart;
            g.payload = [id, !id, id * 3, 7];
            if (200..300).contains(&id) || i == 0 {
                g.big = Some(big);
            }
        }
        tx.set_bytes(n, |g| &mut g.name, &name(id)).expect("name");
        paddrs.push(tx.to_smart(n).expect("paddr").paddr());
    }
    {
        let g = tx.get_mut(big);
        g.back = Some(chain[1]);
        for (i, d) in g.data.iter_mut().enumerate() {
            *d = big_data(i);
        }
    }
    for (i, &pa) in paddrs.iter().enumerate().skip(1) {
        assert!(pa / PS > TWO32, "node {i} at page {}", pa / PS);
    }
    tx.commit().expect("commit");
    drop(db); // a crash: the next open replays the log at these addresses
    paddrs
}

/// Traverses from the low root and checks every node, pointer and page.
fn check(db: &mut Db, paddrs: &[u64]) {
    let ids = expected_ids();
    let low: PRef<HNode> = db.root("low").expect("root").expect("low");
    let big: PRef<HBig> = db.root("hC").expect("root").expect("hC");
    let mut chain = Vec::new();
    let mut at = Some(low);
    while let Some(p) = at {
        chain.push(p);
        at = db.get(p).next;
    }
    let got: Vec<u64> = chain.iter().map(|&p| db.get(p).id).collect();
    assert_eq!(got, ids);
    for (i, &p) in chain.iter().enumerate() {
        let n = db.get(p);
        let id = n.id;
        assert_eq!(n.payload, [id, !id, id * 3, 7], "node {id}");
        assert_eq!(db.bytes(&n.name), &name(id)[..], "node {id} name");
        match n.smart {
            None => assert_eq!(i, 0),
            Some(s) => {
                assert_eq!(s.paddr(), paddrs[i - 1], "node {id} smart");
                assert!(std::ptr::eq(
                    db.smart(s).expect("smart"),
                    db.get(chain[i - 1])
                ));
            }
        }
        let want_big = (200..300).contains(&id) || i == 0;
        assert_eq!(n.big, want_big.then_some(big), "node {id} big");
    }
    let g = db.get(big);
    assert_eq!((g.id, g.back), (900, Some(chain[1])));
    assert!(g.data.iter().enumerate().all(|(i, &d)| d == big_data(i)));
    // The page numbers really are above 2^32.
    let tx = db.begin().expect("begin");
    for (i, &p) in chain.iter().enumerate() {
        let pa = tx.to_smart(p).expect("paddr").paddr();
        assert_eq!(pa, paddrs[i], "node {i} moved");
        if i > 0 {
            assert!(pa >> 12 > TWO32, "node {i} at page {}", pa >> 12);
        }
    }
    let pa = tx.to_smart(big).expect("paddr").paddr();
    assert_eq!(pa >> 12, BIG_PAGE);
    tx.abort().expect("abort");
    // The byte strings went beside their objects, high too; the committed
    // bytes hold their persistent addresses.
    let mut high_names = 0;
    for &pa in &paddrs[1..] {
        let (head, _) = db.store().block_of(pa / PS).expect("block");
        let raw = db.store().read_block(head).expect("read");
        let at = (pa - head * PS) as usize + std::mem::offset_of!(HNode, name);
        let buf = u64::from_le_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
        high_names += usize::from(buf / PS > TWO32);
    }
    assert!(
        high_names >= 30,
        "{high_names} byte strings above 2^32 pages"
    );
}

pub fn run(b: Cfg) {
    let vfs = CrashVfs::new();
    let path = Path::new("/high.amber");
    let paddrs = build(&vfs, path, b);
    let highest = paddrs.iter().max().expect("some") / PS;
    assert!(highest > 1 << 44, "highest page {highest}");
    let v: Arc<CrashVfs> = Arc::new(vfs.clone());
    // After a crash: recovery replays records addressed above 2^44 bytes.
    let mut db = Db::open_with(v.clone(), path, opts(b)).expect("open");
    check(&mut db, &paddrs);
    // An update in place in a high page, committed and checkpointed.
    let hb: PRef<HNode> = db.root("hB").expect("root").expect("hB");
    let mut tx = db.begin().expect("begin");
    tx.get_mut(hb).payload[3] = 7;
    tx.commit().expect("commit");
    db.close().expect("close");
    // After a clean close: everything is in the sparse page file.
    let mut db = Db::open_with(v.clone(), path, opts(b)).expect("open");
    assert_eq!(db.store().stats().pending_blocks, 0);
    check(&mut db, &paddrs);
    db.close().expect("close");
    let rep = amber::internals::store::verify::verify(v, path).expect("verify runs");
    assert!(rep.is_ok(), "{:?}", rep.problems);
}
