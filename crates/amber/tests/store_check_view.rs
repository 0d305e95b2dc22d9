//! `Store::check_in_view`, the `mapped` backend's check of a window read
//! where the page file lies in memory (docs/design.md §4.3.1): each block's
//! checksum verified in the view, a damaged block named while its
//! neighbours pass, and no check at all (the caller reads the cluster
//! instead) when a block has changes the page file does not hold yet or
//! the view does not reach it.

use amber::Error;
use amber::internals::format::PageNo;
use amber::internals::format::page::BlockKind;
use amber::internals::io::Vfs;
use amber::internals::io::crash::CrashVfs;
use amber::internals::store::{ClusterBlock, Store, StoreOptions};
use std::path::Path;
use std::sync::Arc;

const PS: usize = 4096;

/// What one call saw: the blocks `(head, pages, at, good)` given to the
/// check, the span's length, and how many times the check ran.
#[derive(Default)]
struct Seen {
    blocks: Vec<(PageNo, u32, usize, Result<(), String>)>,
    span: usize,
    calls: u32,
}

/// `check_in_view` over pages `[from, from + pages)` of the page-file
/// image `file` (the view: None past its end).
fn check(s: &Store, file: &[u8], from: PageNo, pages: u64) -> (bool, Seen) {
    let view = |page: PageNo, n: u64| {
        let (a, b) = (page as usize * PS, (page + n) as usize * PS);
        file.get(a..b)
    };
    let mut seen = Seen::default();
    let mut record = |blocks: &[ClusterBlock], span: &[u8]| {
        seen.calls += 1;
        seen.span = span.len();
        seen.blocks = blocks
            .iter()
            .map(|b| {
                let good = b.image.as_ref().map(|_| ()).map_err(Error::to_string);
                (b.head, b.pages, b.at, good)
            })
            .collect();
    };
    let served = s.check_in_view(from, pages, &view, &mut record);
    (served, seen)
}

#[test]
fn checksums_are_verified_in_the_view_and_pending_blocks_are_left_to_a_read() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(
        v,
        p,
        StoreOptions {
            page_size: PS,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let mut tx = s.begin().unwrap();
    let a = tx.alloc(1, BlockKind::Data).unwrap();
    let b = tx.alloc(2, BlockKind::Data).unwrap();
    let c = tx.alloc(1, BlockKind::Data).unwrap();
    tx.commit().unwrap();
    s.checkpoint().unwrap();
    let from = a.min(b).min(c);
    let file = vfs.durable_image(p).unwrap();

    // All three in the page file: verified there, each where it lies.
    let (served, seen) = check(&s, &file, from, 4);
    assert!(served);
    assert_eq!(seen.calls, 1);
    assert_eq!(seen.span, 4 * PS);
    let mut want: Vec<(PageNo, u32)> = vec![(a, 1), (b, 2), (c, 1)];
    want.sort_unstable();
    let got: Vec<(PageNo, u32)> = seen.blocks.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(got, want);
    for (head, _, at, good) in &seen.blocks {
        assert_eq!(*at, (*head - from) as usize * PS);
        assert!(good.is_ok(), "block {head}: {good:?}");
    }

    // A damaged byte in b's second page: b is refused naming its page and
    // the checksum, its neighbours pass.
    let mut damaged = file.clone();
    damaged[(b as usize + 1) * PS + 100] ^= 0x5a;
    let (served, seen) = check(&s, &damaged, from, 4);
    assert!(served);
    for (head, _, _, good) in &seen.blocks {
        if *head == b {
            let m = good.as_ref().unwrap_err();
            assert!(
                m.contains(&format!("page {b}")) && m.contains("checksum"),
                "{m}"
            );
        } else {
            assert!(good.is_ok(), "block {head}: {good:?}");
        }
    }

    // A view that does not reach the blocks: nothing checked.
    let (served, seen) = check(&s, &file[..(from as usize + 2) * PS], from, 4);
    assert!(!served);
    assert_eq!(seen.calls, 0);

    // A committed change not checkpointed yet: the page file does not hold
    // c's committed image, so the window is left to a read of the cluster.
    let mut tx = s.begin().unwrap();
    tx.write(c * PS as u64 + 64, &[7u8; 8]).unwrap();
    tx.commit().unwrap();
    let (served, seen) = check(&s, &file, from, 4);
    assert!(!served);
    assert_eq!(seen.calls, 0);
    // After the checkpoint, the file holds it again.
    s.checkpoint().unwrap();
    let file = vfs.durable_image(p).unwrap();
    let (served, seen) = check(&s, &file, from, 4);
    assert!(served);
    assert!(seen.blocks.iter().all(|x| x.3.is_ok()));
}
