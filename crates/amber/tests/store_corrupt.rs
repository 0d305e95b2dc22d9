//! Corruption: a flipped byte in any page, any log record, either superblock
//! copy or either log header copy. `verify` names it; opening either recovers
//! (a damaged twin, a torn log tail) or refuses with a clear error — and a
//! store that opens never returns wrong data.

mod common;

use amber::internals::io::Vfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::{Store, StoreOptions, wal_path};
use amber::{Error, FileKind, Location};
use common::{Model, random_tx};
use std::path::Path;
use std::sync::Arc;

const DB: &str = "/db";

fn opts() -> StoreOptions {
    StoreOptions {
        checkpoint_log_bytes: u64::MAX,
        checkpoint_pending_bytes: usize::MAX,
        ..StoreOptions::default()
    }
}

/// A database with checkpointed history and committed transactions in the
/// log after it. Returns the file system, every committed state after the
/// checkpoint (last = current), and the allocated blocks.
fn build() -> (CrashVfs, Vec<Model>) {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new(DB);
    let mut rng = SplitMix::new(7);
    let s = Store::create(v, p, opts()).unwrap();
    let mut m = Model::default();
    let mut fl = None;
    for _ in 0..12 {
        m = random_tx(&s, &m, &mut rng, &mut fl).unwrap();
    }
    s.checkpoint().unwrap();
    let mut history = vec![m.clone()];
    for _ in 0..8 {
        m = random_tx(&s, &m, &mut rng, &mut fl).unwrap();
        if history.last() != Some(&m) {
            history.push(m.clone());
        }
    }
    drop(s);
    (vfs, history)
}

fn flip(vfs: &CrashVfs, path: &Path, off: u64) {
    let img = vfs.durable_image(path).unwrap();
    vfs.corrupt(path, off, &[img[off as usize] ^ 0x5a]).unwrap();
}

/// After damage: a store that opens must hold a committed state (the last,
/// or the one before when the last batch was cut) wherever it can be read,
/// and refuse to read a damaged block with an error naming that block's page
/// — never return other bytes. A block that reads but differs, a changed set
/// of blocks, roots or types, or a refusal that names nothing is a failure.
fn check_open(vfs: &CrashVfs, history: &[Model], ctx: &str) {
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    match Store::open(v, Path::new(DB), opts()) {
        Err(e) => assert!(
            matches!(e, Error::Corrupt { .. }),
            "{ctx}: open failed without naming damage: {e}"
        ),
        Ok(s) => {
            let n = history.len();
            let found: Vec<_> = history[n.saturating_sub(2)..]
                .iter()
                .map(|m| m.compare(&s))
                .collect();
            let refused_clearly = |unreadable: &Vec<(u64, Error)>| {
                unreadable.iter().all(
                    |(h, e)| matches!(e, Error::Corrupt { at: Location::Page(p), .. } if p == h),
                )
            };
            assert!(
                found.iter().flatten().any(refused_clearly),
                "{ctx}: wrong data after open: {found:?}"
            );
        }
    }
}

#[test]
fn flipped_page_bytes_are_named() {
    let (vfs, history) = build();
    let p = Path::new(DB);
    let blocks = {
        let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
        let s = Store::open(
            v,
            p,
            StoreOptions {
                read_only: true,
                ..opts()
            },
        )
        .unwrap();
        s.blocks()
    };
    let mut rng = SplitMix::new(1);
    let mut dead_bytes = 0;
    let total = blocks.len() * 3;
    for (head, pages) in blocks {
        for _ in 0..3 {
            let (vfs, _) = build();
            let off = head * 4096 + rng.below(u64::from(pages) * 4096);
            if off >= vfs.file_len(p).unwrap() {
                // Allocated after the checkpoint: no page-file image yet.
                dead_bytes += 1;
                continue;
            }
            flip(&vfs, p, off);
            let rep = amber::internals::store::verify::verify(Arc::new(vfs.clone()), p).unwrap();
            let named = rep.problems.iter().any(|e| match e {
                Error::Corrupt {
                    at: Location::Page(x),
                    ..
                } => *x == head,
                Error::Corrupt {
                    at: Location::Meta(_),
                    what,
                    ..
                } => what.contains(&format!("page {head}")),
                _ => false,
            });
            if !named {
                // Only bytes no committed state depends on (a block freed and
                // reallocated since the checkpoint, whose page-file image the
                // next checkpoint overwrites) may go unreported.
                let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
                let s = Store::open(v, p, opts()).unwrap_or_else(|e| {
                    panic!(
                        "flip at byte {off} (block {head}): verify was silent but open failed: {e}"
                    )
                });
                assert!(
                    history.last().unwrap().diff(&s).is_none(),
                    "flip at byte {off} (block {head}): verify was silent but the data changed"
                );
                dead_bytes += 1;
            }
            check_open(&vfs, &history, &format!("page flip at {off}"));
        }
    }
    assert!(
        dead_bytes < total / 2,
        "{dead_bytes} of {total} flips hit dead bytes"
    );
}

#[test]
fn flipped_log_bytes_are_named_or_cut() {
    let p = Path::new(DB);
    let wal = wal_path(p);
    let (vfs, history) = build();
    // The live records: from the checkpoint (the log's base) to the end. What
    // lies after them is older epochs' bytes, which nothing reads.
    let live = {
        let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
        let s = Store::open(
            v,
            p,
            StoreOptions {
                read_only: true,
                ..opts()
            },
        )
        .unwrap();
        let st = s.stats();
        st.end_lsn - st.checkpoint_lsn
    };
    let _ = vfs.file_len(&wal).unwrap();
    let mut rng = SplitMix::new(2);
    let mut corrupt = 0;
    let mut torn = 0;
    for _ in 0..150 {
        let (vfs, _) = build();
        let off = 8192 + rng.below(live);
        flip(&vfs, &wal, off);
        let rep = amber::internals::store::verify::verify(Arc::new(vfs.clone()), p).unwrap();
        let named = rep.problems.iter().any(|e| {
            matches!(
                e,
                Error::Corrupt {
                    file: FileKind::Log,
                    at: Location::Lsn(_),
                    ..
                }
            )
        });
        let cut = rep.notes.iter().any(|n| n.contains("torn tail"));
        assert!(
            named || cut,
            "log flip at {off}: verify said {:?} / {:?}",
            rep.problems,
            rep.notes
        );
        corrupt += u64::from(named);
        torn += u64::from(cut);
        check_open(&vfs, &history, &format!("log flip at {off}"));
    }
    assert!(corrupt > 0 && torn > 0, "corrupt {corrupt}, torn {torn}");
}

#[test]
fn flipped_superblock_or_log_header_is_named_and_survived() {
    let p = Path::new(DB);
    let wal = wal_path(p);
    let mut rng = SplitMix::new(3);
    for (file, slot) in [
        (p.to_path_buf(), 0u64),
        (p.to_path_buf(), 1),
        (wal.clone(), 0),
        (wal.clone(), 1),
    ] {
        for _ in 0..10 {
            let (vfs, history) = build();
            let off = slot * 4096 + rng.below(512);
            flip(&vfs, &file, off);
            let rep = amber::internals::store::verify::verify(Arc::new(vfs.clone()), p).unwrap();
            let want = if file == wal {
                Location::LogHeader(slot as u8)
            } else {
                Location::Superblock(slot as u8)
            };
            assert!(
                rep.problems
                    .iter()
                    .any(|e| matches!(e, Error::Corrupt { at, .. } if *at == want)),
                "flip at {off} of {}: verify said {:?}",
                file.display(),
                rep.problems
            );
            // The twin copy carries the database on.
            let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
            let s = Store::open(v, p, opts()).unwrap();
            assert!(history.last().unwrap().diff(&s).is_none());
            drop(s);
            // ... and the writable open rewrote the damaged copy.
            let rep = amber::internals::store::verify::verify(Arc::new(vfs), p).unwrap();
            assert!(rep.is_ok(), "after repair: {:?}", rep.problems);
        }
    }
}

/// Superblock copies whose generation (checksums right) is the last one a
/// write can follow: a checkpoint would write a copy no open accepts, and
/// the database would not open again (the fuzz target `recovery` found
/// it). The checkpoint is refused as damage instead, naming the
/// superblock, and so is an open that would need one; nothing is written
/// over the copies.
#[test]
fn the_last_generation_refuses_a_checkpoint_as_damage() {
    use amber::internals::format::page::BlockKind;
    use amber::internals::format::superblock::{SLOT_OFFSETS, Superblock};
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let path = Path::new("/gen.amber");
    let s = Store::create(v.clone(), path, opts()).expect("create");
    s.close().expect("close");
    for off in SLOT_OFFSETS {
        let mut b = vec![0u8; 512];
        let f = vfs
            .open(path, amber::internals::io::OpenMode::ReadWrite)
            .expect("open");
        f.read_exact_at(&mut b, off).expect("read superblock");
        let mut sb = Superblock::decode(&b).expect("decode");
        sb.generation = u64::MAX - 1;
        f.write_all_at(&sb.encode(), off).expect("write superblock");
        f.sync_data().expect("sync");
    }
    let s = Store::open(v.clone(), path, opts()).expect("the last generation opens");
    let mut tx = s.begin().expect("begin");
    let page = tx.alloc(1, BlockKind::Raw).expect("alloc");
    tx.commit().expect("a commit needs no new superblock");
    let e = s
        .checkpoint()
        .expect_err("a checkpoint would write generation u64::MAX");
    assert!(
        matches!(
            e,
            Error::Corrupt {
                file: FileKind::PageFile,
                ..
            }
        ) && e.to_string().contains("leaves no room for a newer copy"),
        "{e}"
    );
    assert!(s.read_block(page).is_ok(), "the commit is applied");
    drop(s);
    // Recovery would end in a checkpoint: refused the same way.
    let e = Store::open(v, path, opts()).expect_err("recovery's checkpoint is refused");
    assert!(
        matches!(
            e,
            Error::Corrupt {
                file: FileKind::PageFile,
                at: Location::Superblock(_),
                ..
            }
        ) && e.to_string().contains("leaves no room for a newer copy"),
        "{e}"
    );
}
