//! The fault benchmark's database: pages of small objects whose pointers
//! reach other pages, and a directory of the first object of every page, so
//! that the measurement can touch every page without touching any other.

use std::path::Path;

use amber::{Db, Options, PRef, PVec, Persistent};

use crate::rng::Rng;
use crate::storage::BenchError;

/// An object of the fault benchmark's pages: 24 bytes, two pointers.
#[derive(Persistent)]
#[persistent(name = "faults::Node")]
#[repr(C)]
pub struct Node {
    pub value: u64,
    pub next: Option<PRef<Node>>,
    pub far: Option<PRef<Node>>,
}

/// The directory: the first object of every page, in page order.
#[derive(Persistent)]
#[persistent(name = "faults::Dir")]
#[repr(C)]
pub struct Dir {
    pub pages: PVec<PRef<Node>>,
}

/// Builds the database: objects until `pages` pages are filled, their
/// pointers, and the directory.
pub(super) fn build(path: &Path, pages: u64, seed: u64) -> Result<u64, BenchError> {
    let mut db = Db::create(path, Options::default())?;
    let ps = db.page_size() as u64;
    let mut tx = db.begin()?;
    let mut nodes = Vec::new();
    let mut firsts = Vec::new();
    let mut last_page = None;
    loop {
        let n = tx.alloc(Node {
            value: nodes.len() as u64,
            next: None,
            far: None,
        })?;
        let page = n.addr() / ps;
        if last_page != Some(page) {
            if firsts.len() as u64 == pages {
                // The first object of one page too many: it stays, unlisted.
                break;
            }
            firsts.push(n);
            last_page = Some(page);
        }
        nodes.push(n);
    }
    let mut rng = Rng::seed_from_u64(seed);
    for i in 0..nodes.len() {
        let far = nodes[rng.below(nodes.len() as u64) as usize];
        let node = tx.get_mut(nodes[i]);
        node.next = nodes.get(i + 1).copied();
        node.far = Some(far);
    }
    let dir = tx.alloc(Dir { pages: PVec::new() })?;
    for &f in &firsts {
        tx.push(dir, |d| &mut d.pages, f)?;
    }
    tx.set_root("dir", dir)?;
    tx.commit()?;
    db.close()?;
    Ok(nodes.len() as u64 / pages.max(1))
}
