//! Whole-page logging in the store: the WPL table (committed page images
//! left in the log), their installation from the log, and the restart that
//! rebuilds the table by one backward scan, against a model of the
//! committed state — with page and range records mixed on the same pages,
//! across commits, checkpoints, reopenings and crashes.

mod common;

use amber::Error;
use amber::internals::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use amber::internals::format::{PageNo, crc};
use amber::internals::io::Vfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::{Store, StoreOptions, wal_path};
use amber::internals::wal::header::RECORDS_START;
use common::Model;
use std::path::Path;
use std::sync::Arc;

const PS: usize = 4096;

fn opts() -> StoreOptions {
    StoreOptions {
        page_size: PS,
        // Checkpoints when the tests ask, or when a test's log grows past
        // a few dozen page images.
        checkpoint_log_bytes: 200_000,
        ..StoreOptions::default()
    }
}

/// A page image of random bytes, and the model's view of it once written
/// as page `i` of `img` (the store keeps its header fields but `used`).
fn page_image(rng: &mut SplitMix, img: &mut [u8], i: usize) -> Vec<u8> {
    let mut pimg: Vec<u8> = (0..PS).map(|_| rng.next_u64() as u8).collect();
    if i == 0 {
        pimg[..USED_OFFSET].copy_from_slice(&img[..USED_OFFSET]);
        pimg[USED_OFFSET + 4..HEADER_SIZE].copy_from_slice(&img[USED_OFFSET + 4..HEADER_SIZE]);
    }
    img[i * PS..(i + 1) * PS].copy_from_slice(&pimg);
    pimg
}

/// One random transaction weighted to whole pages and ranges on the same
/// few blocks (pages, then ranges over them, then pages again), with some
/// allocations, frees and early logging. Mirrors it in a copy of `model`.
fn wpl_tx(
    s: &Store,
    model: &Model,
    rng: &mut SplitMix,
    in_flight: &mut Option<Model>,
) -> Result<Model, Error> {
    let mut m = model.clone();
    let mut tx = s.begin()?;
    for _ in 0..1 + rng.below(6) {
        let pick = (!m.blocks.is_empty()).then(|| {
            let i = rng.below(m.blocks.len() as u64) as usize;
            *m.blocks.keys().nth(i).expect("non-empty")
        });
        match (rng.below(100), pick) {
            (0..=9, _) | (_, None) => {
                let pages = 1 + rng.below(3) as u32;
                let head = tx.alloc(pages, BlockKind::Raw)?;
                let mut img = vec![0u8; pages as usize * PS];
                page::format(&mut img, BlockKind::Raw, head, pages);
                m.blocks.insert(head, img);
            }
            (10..=13, Some(k)) if m.blocks.len() > 3 => {
                tx.free(k)?;
                m.blocks.remove(&k);
            }
            (14..=54, Some(k)) => {
                let img = m.blocks.get_mut(&k).expect("picked");
                let i = rng.below((img.len() / PS) as u64) as usize;
                let pimg = page_image(rng, img, i);
                tx.write_page(k + i as u64, &pimg)?;
            }
            (55..=94, Some(k)) => {
                let img = m.blocks.get_mut(&k).expect("picked");
                let room = img.len() - HEADER_SIZE;
                let max = if rng.below(6) == 0 { 6000 } else { 60 };
                let len = (1 + rng.below(max) as usize).min(room);
                let off = HEADER_SIZE + rng.below((room - len + 1) as u64) as usize;
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                tx.write(k * PS as u64 + off as u64, &data)?;
                img[off..off + len].copy_from_slice(&data);
            }
            _ => tx.log_early()?,
        }
    }
    if rng.below(8) == 0 {
        tx.abort();
        return Ok(model.clone());
    }
    *in_flight = Some(m.clone());
    tx.commit()?;
    *in_flight = None;
    Ok(m)
}

/// Ranges, a page image, ranges again on one page of an installed block,
/// across a reopen without a checkpoint (the restart) and a checkpoint (the
/// installation from the log): LSN order wins each time.
#[test]
fn page_and_range_records_on_one_page_apply_in_lsn_order() {
    let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
    let p = Path::new("/db");
    let s = Store::create(vfs.clone(), p, opts()).unwrap();
    let mut tx = s.begin().unwrap();
    let head = tx.alloc(2, BlockKind::Raw).unwrap();
    tx.commit().unwrap();
    s.checkpoint().unwrap();
    let mut want = s.read_block(head).unwrap();
    let at = |off: usize| head * PS as u64 + off as u64;
    // Page 1: a range, then the whole page, then a range over part of it.
    let mut tx = s.begin().unwrap();
    tx.write(at(PS + 100), &[1; 300]).unwrap();
    tx.commit().unwrap();
    let image = vec![7u8; PS];
    let mut tx = s.begin().unwrap();
    tx.write_page(head + 1, &image).unwrap();
    tx.commit().unwrap();
    want[PS..].copy_from_slice(&image);
    let mut tx = s.begin().unwrap();
    tx.write(at(PS + 200), &[2; 50]).unwrap();
    // The first page too, its header kept but `used`.
    let mut first = vec![5u8; PS];
    first[USED_OFFSET..USED_OFFSET + 4].copy_from_slice(&64u32.to_le_bytes());
    tx.write_page(head, &first).unwrap();
    tx.commit().unwrap();
    want[PS + 200..PS + 250].fill(2);
    want[USED_OFFSET..USED_OFFSET + 4].copy_from_slice(&64u32.to_le_bytes());
    want[HEADER_SIZE..PS].fill(5);
    // The store's own header fields (checksum, LSN) change at installation.
    let same = |s: &Store, when: &str| {
        let got = s.read_block(head).unwrap();
        let used = USED_OFFSET..USED_OFFSET + 4;
        assert_eq!(got[used.clone()], want[used], "{when}: used");
        let differ = (HEADER_SIZE..got.len()).find(|&i| got[i] != want[i]);
        assert_eq!(differ, None, "{when}: first byte that differs");
    };
    same(&s, "live");
    assert_eq!(
        s.stats().logged_pages,
        2,
        "both pages' images stay in the log"
    );

    // The restart: a crash, no checkpoint since.
    drop(s);
    let s = Store::open(
        vfs.clone(),
        p,
        StoreOptions {
            checkpoint_on_close: false,
            ..opts()
        },
    )
    .unwrap();
    let r = s.recovery_report();
    assert!(r.backward_records >= 6, "{r:?}");
    assert_eq!(r.superseded, 1, "the range before the page image: {r:?}");
    assert_eq!(r.logged_pages, 2, "{r:?}");
    same(&s, "after the restart");
    // The open's checkpoint (on the checkpointer thread, after the open
    // returned) installed both pages from the log.
    s.wait_for_checkpointer();
    let st = s.stats();
    assert_eq!((st.logged_pages, st.wpl_installed_pages), (0, 2), "{st:?}");
    assert_eq!(st.wpl_installed_log_bytes, 2 * (PS as u64 + 24));
    same(&s, "installed");
}

/// A log longer than one chunk of the recovery scan, ranges first: the
/// first pass replays the chunks before the first page record, the backward
/// scan builds the table from the end, the redo resumes where the first
/// pass stopped; the result is the committed state.
#[test]
fn a_long_log_resumes_the_redo_at_the_first_page_record() {
    let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
    let p = Path::new("/db");
    let big = StoreOptions {
        checkpoint_log_bytes: 64 << 20,
        ..opts()
    };
    let s = Store::create(vfs.clone(), p, big.clone()).unwrap();
    let mut rng = SplitMix::new(7);
    let mut model = Model::default();
    let mut none = None;
    while model.blocks.len() < 4 {
        model = wpl_tx(&s, &model, &mut rng, &mut none).unwrap();
    }
    s.checkpoint().unwrap();
    let heads: Vec<PageNo> = model.blocks.keys().copied().collect();
    // About 1.3 MB of ranges, then pages and ranges mixed.
    for i in 0..320u64 {
        let k = heads[i as usize % heads.len()];
        let data: Vec<u8> = (0..4000).map(|_| rng.next_u64() as u8).collect();
        let mut tx = s.begin().unwrap();
        tx.write(k * PS as u64 + HEADER_SIZE as u64, &data).unwrap();
        tx.commit().unwrap();
        model.blocks.get_mut(&k).unwrap()[HEADER_SIZE..HEADER_SIZE + 4000].copy_from_slice(&data);
    }
    for _ in 0..20 {
        model = wpl_tx(&s, &model, &mut rng, &mut none).unwrap();
    }
    drop(s);
    let s = Store::open(vfs.clone(), p, big).unwrap();
    let r = s.recovery_report();
    assert!(r.superseded > 0, "{r:?}");
    // The first chunk's records were replayed before the backward scan,
    // which read only the records after them.
    assert!(r.resumed_at.is_some_and(|at| at > r.from_lsn), "{r:?}");
    assert!(
        r.backward_records > 20 && r.backward_records < r.records,
        "{r:?}"
    );
    if let Some(d) = model.diff(&s) {
        panic!("{d}");
    }
}

/// Random WPL-heavy transactions against the model, with checkpoints,
/// reopenings after a crash-free drop (the backward-scan restart) and clean
/// closes; the store reads back the model after every step.
#[test]
fn wpl_transactions_match_the_model() {
    let seeds: u64 = std::env::var("AMBER_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let (mut restarts, mut superseded, mut installed) = (0, 0, 0);
    for seed in 0..seeds {
        let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
        let p = Path::new("/db");
        let mut rng = SplitMix::new(seed);
        let mut s = Store::create(vfs.clone(), p, opts()).unwrap();
        let mut model = Model::default();
        let mut in_flight = None;
        for step in 0..50 {
            match rng.below(12) {
                0 => {
                    s.checkpoint().unwrap();
                }
                1 => {
                    drop(s);
                    s = Store::open(vfs.clone(), p, opts()).unwrap();
                    let r = s.recovery_report();
                    restarts += u64::from(r.backward_records > 0);
                    superseded += r.superseded;
                }
                2 => {
                    s.close().unwrap();
                    s = Store::open(vfs.clone(), p, opts()).unwrap();
                }
                _ => model = wpl_tx(&s, &model, &mut rng, &mut in_flight).unwrap(),
            }
            s.wait_for_checkpointer();
            installed = installed.max(s.stats().wpl_installed_pages);
            if let Some(d) = model.diff(&s) {
                panic!("seed {seed} step {step}: {d}");
            }
        }
    }
    assert!(
        restarts > 0 && superseded > 0 && installed > 0,
        "the model stopped reaching the WPL paths: {restarts} restarts, {superseded} \
         superseded, {installed} installed"
    );
}

/// Crash-model points during WPL commits and during checkpoints installing
/// logged pages (every write since the last sync kept, dropped or torn at
/// random): recovery by the backward scan gives the last acknowledged state,
/// or that state plus the commit in flight; some runs crash again during
/// the recovery's own checkpoint.
#[test]
fn crashes_during_wpl_commits_and_installations_recover_the_last_commit() {
    let points: u64 = std::env::var("AMBER_WPL_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let (mut restarts, mut in_installation) = (0, 0);
    for seed in 0..points {
        let vfs = CrashVfs::new();
        let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
        let p = Path::new("/db");
        let mut rng = SplitMix::new(seed);
        let s = Store::create(v.clone(), p, opts()).unwrap();
        let mut model = Model::default();
        let mut in_flight = None;
        for _ in 0..3 + rng.below(6) {
            model = wpl_tx(&s, &model, &mut rng, &mut in_flight).unwrap();
        }
        s.checkpoint().unwrap();
        vfs.crash_after(1 + rng.below(60));
        let mut ack = model.clone();
        for _ in 0..30 {
            let r = if rng.below(5) == 0 {
                let logged = s.stats().logged_pages;
                let r = s.checkpoint().map(|_| ack.clone());
                if r.is_err() && logged > 0 {
                    in_installation += 1;
                }
                r
            } else {
                wpl_tx(&s, &ack, &mut rng, &mut in_flight)
            };
            match r {
                Ok(m) => ack = m,
                Err(_) => break,
            }
        }
        drop(s);
        vfs.crash(seed ^ 0x5EED);
        if rng.below(4) == 0 {
            // Crash again during the recovery's checkpoint.
            vfs.crash_after(1 + rng.below(12));
            let _ = Store::open(v.clone(), p, opts());
            vfs.crash(seed ^ 0xBAD);
        }
        let s = Store::open(v.clone(), p, opts())
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        restarts += u64::from(s.recovery_report().backward_records > 0);
        let lost = ack.diff(&s);
        let kept = in_flight.as_ref().and_then(|m| m.diff(&s));
        if lost.is_some() && (in_flight.is_none() || kept.is_some()) {
            panic!(
                "seed {seed}: recovered state is neither the acknowledged one ({lost:?}) nor the in-flight one ({kept:?})"
            );
        }
        let report = amber::internals::store::verify::verify(v.clone(), p).unwrap();
        assert!(
            report.problems.is_empty(),
            "seed {seed}: {:?}",
            report.problems
        );
    }
    assert!(
        restarts > 0 && in_installation > 0,
        "the crash points stopped reaching WPL restarts ({restarts}) or installations \
         ({in_installation})"
    );
}

/// The page record a WPL table entry points at, damaged in the log: reading
/// the block and installing it fail with `Corrupt` naming the page and the
/// record, and the failed checkpoint leaves the store as it was.
#[test]
fn a_damaged_logged_image_names_the_page() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, opts()).unwrap();
    let mut tx = s.begin().unwrap();
    let head = tx.alloc(2, BlockKind::Raw).unwrap();
    tx.commit().unwrap();
    s.checkpoint().unwrap();
    let base = s.stats().checkpoint_lsn;
    let mut tx = s.begin().unwrap();
    tx.write_page(head + 1, &[3u8; PS]).unwrap();
    let info = tx.commit().unwrap();
    // The page record sits just before the commit record.
    let rec = info.commit_lsn - (PS as u64 + 24);
    let off = RECORDS_START + (rec - base) + 2000;
    vfs.corrupt(&wal_path(p), off, &[0xEE]).unwrap();
    let named = |e: &Error| {
        let m = e.to_string();
        assert!(matches!(e, Error::Corrupt { .. }), "{m}");
        assert!(m.contains(&format!("page {}", head + 1)), "{m}");
        assert!(m.contains(&format!("LSN {rec}")), "{m}");
    };
    named(&s.read_block(head).unwrap_err());
    let mut buf = Vec::new();
    let cluster = s.read_cluster(head, 2, &mut buf);
    named(cluster[0].image.as_ref().unwrap_err());
    named(&s.checkpoint().unwrap_err());
    // Still usable, and still refusing the damaged page.
    assert_eq!(s.stats().logged_pages, 1);
    named(&s.read_block(head).unwrap_err());
    let mut tx = s.begin().unwrap();
    tx.write(head * PS as u64 + 100, b"still").unwrap();
    tx.commit().unwrap();
}

/// Rewrites both log header copies as format version 1.
fn as_version_1(vfs: &CrashVfs, p: &Path) {
    let wal = wal_path(p);
    let log = vfs.durable_image(&wal).unwrap();
    for off in [0usize, 4096] {
        let mut slot = log[off..off + 512].to_vec();
        slot[8..12].copy_from_slice(&1u32.to_le_bytes());
        let c = crc(&slot[..508]);
        slot[508..].copy_from_slice(&c.to_le_bytes());
        vfs.corrupt(&wal, off as u64, &slot).unwrap();
    }
}

/// A version-1 log (records without the length trailer) opens when a clean
/// close vouched its epoch empty, and the first commit makes it version 2;
/// one with records to recover is refused, naming the version and what to
/// do.
#[test]
fn an_older_version_log_opens_only_when_empty() {
    let vfs = CrashVfs::new();
    let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
    let p = Path::new("/db");
    let s = Store::create(v.clone(), p, opts()).unwrap();
    let mut tx = s.begin().unwrap();
    let head: PageNo = tx.alloc(1, BlockKind::Raw).unwrap();
    tx.commit().unwrap();
    s.close().unwrap();
    as_version_1(&vfs, p);
    let verified = amber::internals::store::verify::verify(v.clone(), p).unwrap();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    let s = Store::open(v.clone(), p, opts()).unwrap();
    let mut tx = s.begin().unwrap();
    tx.write(head * PS as u64 + 100, b"v2").unwrap();
    tx.commit().unwrap();
    drop(s);
    let s = Store::open(v.clone(), p, opts()).unwrap();
    assert_eq!(&s.read_block(head).unwrap()[100..102], b"v2");
    // Records after the checkpoint, then the header says version 1.
    let mut tx = s.begin().unwrap();
    tx.write(head * PS as u64 + 100, b"v1").unwrap();
    tx.commit().unwrap();
    drop(s);
    as_version_1(&vfs, p);
    let e = Store::open(v.clone(), p, opts()).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, Error::NotADatabase { .. }), "{m}");
    assert!(
        m.contains("version 1") && m.contains("close it cleanly"),
        "{m}"
    );
}
