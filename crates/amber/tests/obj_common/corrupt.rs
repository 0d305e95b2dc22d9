//! A corrupt page met during a traversal. A byte of a data page (and one in
//! the second page of a three-page object) is flipped in the closed
//! database's file; after reopening, `try_get` on a pointer into the page is
//! an error naming the page, every time, while objects on other pages stay
//! readable; a plain `get` traversal into it ends the process with a message
//! naming the page (run in a child). Never wrong data.

use super::Cfg;
use super::{
    cached, check_backend, child_dir, child_scenario, mapped_backend, open, opts, paddr_of,
    page_of, run_child,
};
use amber::Location;
use amber::{Db, Error, Options, PRef, PVec, Persistent};
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

#[derive(Persistent)]
#[repr(C)]
pub struct Chain {
    pub v: u64,
    pub next: Option<PRef<Chain>>,
    pub payload: [u8; 48],
}

#[derive(Persistent)]
#[repr(C)]
pub struct Bulky {
    pub id: u64,
    pub data: [u8; 9000],
}

#[derive(Persistent)]
#[repr(C)]
pub struct ChainRoot {
    pub head: Option<PRef<Chain>>,
    pub all: PVec<PRef<Chain>>,
    pub big: Option<PRef<Bulky>>,
}

const NODES: u64 = 600;
const VICTIM_NODE: usize = 300;

fn payload(i: u64) -> [u8; 48] {
    [i as u8; 48]
}

/// Builds the chain; returns (page of every node, head page of the big object).
fn build(path: &Path, b: Cfg) -> (Vec<u64>, u64) {
    let mut db = Db::create(path, opts(b)).expect("create");
    check_backend(&db, b);
    let mut tx = db.begin().expect("begin");
    let root = tx
        .alloc(ChainRoot {
            head: None,
            all: PVec::new(),
            big: None,
        })
        .expect("alloc");
    let mut nodes = Vec::new();
    let mut prev: Option<PRef<Chain>> = None;
    for i in 0..NODES {
        let n = tx
            .alloc(Chain {
                v: i,
                next: None,
                payload: payload(i),
            })
            .expect("alloc");
        match prev {
            Some(p) => tx.get_mut(p).next = Some(n),
            None => tx.get_mut(root).head = Some(n),
        }
        prev = Some(n);
        nodes.push(n);
    }
    let big = tx
        .alloc(Bulky {
            id: 77,
            data: [7; 9000],
        })
        .expect("alloc");
    tx.get_mut(root).big = Some(big);
    tx.set_root("chain", root).expect("root");
    tx.commit().expect("commit");
    // The directory of nodes in a later transaction: its buffers land after
    // the chain's pages.
    let mut tx = db.begin().expect("begin");
    for &n in &nodes {
        tx.push(root, |r| &mut r.all, n).expect("push");
    }
    tx.commit().expect("commit");
    let pages: Vec<u64> = nodes.iter().map(|&n| page_of(&mut db, n)).collect();
    let big_page = page_of(&mut db, big);
    let ps = db.page_size() as u64;
    assert_eq!(db.store().block_of(big_page), Some((big_page, 3)));
    // The root and the directory's buffer are on other pages than the victim.
    let root_pa = paddr_of(&mut db, root);
    let root_page = root_pa / ps;
    let raw = db.store().read_block(root_page).expect("read");
    let at = (root_pa % ps) as usize + std::mem::offset_of!(ChainRoot, all);
    let buf = u64::from_le_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
    let victim = pages[VICTIM_NODE];
    assert!(root_page != victim && buf / ps != victim, "layout moved");
    db.close().expect("close");
    (pages, big_page)
}

/// Flips one byte of the page file.
fn flip(path: &Path, off: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the page file");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).expect("read");
    b[0] ^= 0x10;
    f.write_all_at(&b, off).expect("write");
    f.sync_all().expect("sync");
}

/// Checks that `r` reports damage at page `page`; returns the message.
#[track_caller]
pub fn names_page<T>(r: Result<T, Error>, page: u64) -> String {
    match r {
        Ok(_) => panic!("read from damaged page {page} succeeded"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                matches!(&e, Error::Corrupt { at: Location::Page(p), .. } if *p == page),
                "expected damage at page {page}: {e:?}"
            );
            assert!(msg.contains(&format!("page {page}")), "{msg}");
            msg
        }
    }
}

/// `try_get` along the chain and through the directory.
fn try_traverse(path: &Path, o: Options, pages: &[u64], big_page: u64) {
    let want = mapped_backend(o.backend).0;
    let db = open(path, o);
    if child_scenario().as_deref() == Some("corrupt-try") {
        assert_eq!(db.backend(), want, "{}", db.backend_reason());
    }
    let victim = pages[VICTIM_NODE];
    let root: PRef<ChainRoot> = db.root("chain").expect("root").expect("set");
    let r = db.try_get(root).expect("root page is sound");
    let mut at = r.head;
    let mut i = 0usize;
    while let Some(p) = at {
        if pages[i] == victim {
            names_page(db.try_get(p), victim);
            // Again: still an error, never the damaged bytes.
            names_page(db.try_get(p), victim);
            break;
        }
        let n = db.try_get(p).expect("sound page");
        assert_eq!((n.v, n.payload), (i as u64, payload(i as u64)));
        at = n.next;
        i += 1;
    }
    assert_eq!(i, pages.iter().position(|&p| p == victim).expect("victim"));
    // Every node through the directory: the victim's fail, the others read.
    let all = db.slice(&r.all).to_vec();
    assert_eq!(all.len(), NODES as usize);
    let mut bad = 0;
    for (i, &p) in all.iter().enumerate() {
        if pages[i] == victim {
            names_page(db.try_get(p), victim);
            bad += 1;
        } else {
            let n = db.try_get(p).expect("sound page");
            assert_eq!((n.v, n.payload), (i as u64, payload(i as u64)));
        }
    }
    assert!(bad > 10, "{bad} nodes on the victim page");
    // A large object damaged in its second page: the error names its first.
    names_page(db.try_get(r.big.expect("big")), big_page);
    drop(db);
}

/// Builds, damages, and reads back with `try_get` (in this process) and
/// `get` (in a child, which must die naming the page).
pub fn run(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("corrupt-try") {
        // At home, mapped (a fresh process): `try_get` checks what it
        // reaches as a fetch would.
        let layout = std::fs::read_to_string(child_dir().join("layout")).expect("layout");
        let mut nums = layout
            .split_whitespace()
            .map(|w| w.parse::<u64>().expect("a page"));
        let big_page = nums.next().expect("the big object's page");
        let pages: Vec<u64> = nums.collect();
        try_traverse(&child_dir().join("db"), opts(b), &pages, big_page);
        println!("checked reads refused");
        return;
    }
    if child_scenario().as_deref() == Some("corrupt") {
        // A plain traversal: it must not complete (unless unverified).
        let db = open(&child_dir().join("db"), opts(b));
        let root: PRef<ChainRoot> = db.root("chain").expect("root").expect("set");
        let mut at = db.get(root).head;
        let mut sum = 0u64;
        while let Some(p) = at {
            let n = db.get(p);
            sum = sum.wrapping_add(n.v);
            at = n.next;
        }
        println!("traversal completed, sum {sum}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (pages, big_page) = build(&path, b);
    let ps = 4096u64;
    let victim = pages[VICTIM_NODE];
    flip(&path, victim * ps + 1000);
    flip(&path, (big_page + 1) * ps + 100);
    try_traverse(&path, opts(b), &pages, big_page);
    // With neighbours fetched on each fault (the damaged page among them)
    // and a small cache.
    let o = Options {
        fetch_cluster: 4,
        ..cached(b, 32 << 10)
    };
    try_traverse(&path, o, &pages, big_page);

    let layout: Vec<String> = std::iter::once(big_page)
        .chain(pages.iter().copied())
        .map(|p| p.to_string())
        .collect();
    std::fs::write(dir.path().join("layout"), layout.join(" ")).expect("write layout");
    let out = run_child(test, "corrupt", dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if matches!(
        b.backend,
        amber::BackendChoice::MappedUnverified | amber::BackendChoice::Mapped
    ) {
        // At home (a fresh process), `try_get` refuses the damaged pages.
        let tried = run_child(test, "corrupt-try", dir.path());
        let said = String::from_utf8_lossy(&tried.stdout);
        assert!(
            said.contains("checked reads refused"),
            "{said}{}",
            String::from_utf8_lossy(&tried.stderr)
        );
    }
    if b.backend == amber::BackendChoice::MappedUnverified {
        // Pages are not checked when first read (the name says so): the
        // plain traversal reads the damaged payload and completes, and
        // `amber verify` names both pages; `try_get` refuses them.
        assert!(
            out.status.success() && stdout.contains("traversal completed"),
            "{stdout}{stderr}"
        );
        let r = amber::inspect::verify(&path).expect("verify");
        for page in [victim, big_page] {
            let named = r
                .problems
                .iter()
                .any(|e| matches!(e, Error::Corrupt { at: Location::Page(p), .. } if *p == page));
            assert!(named, "verify does not name page {page}: {:?}", r.problems);
        }
        return;
    }
    assert!(
        !out.status.success() && !stdout.contains("traversal completed"),
        "a traversal through damaged page {victim} completed: {stdout}"
    );
    assert_eq!(out.status.signal(), Some(6), "SIGABRT expected: {stderr}");
    if std::env::var_os("AMBER_OBJ_SHOW").is_some() {
        eprintln!("child ({}): {stderr}", out.status);
    }
    let want = format!("amber: fatal: page {victim}: ");
    assert!(stderr.contains(&want), "stderr lacks {want:?}: {stderr}");
    assert!(stderr.contains("checksum"), "{stderr}");
}
