//! The mapped backend's frame space (`vm/mapped.rs`, `vm/mapped_writes.rs`)
//! on a real file, driven as the object layer drives it: the file read
//! through memory without the service, writes found (and found once, then
//! again after another write), `copy_in` not counted as a write, pages given
//! back to the file after a "checkpoint" wrote it, space discarded to
//! zeros, and frames past the file's end mapped from it once it has grown;
//! with checks (`mapped`), each window checked once at its first touch.
//!
//! Loads and stores go through raw pointers into the reservation, as a
//! program's do, hence the unsafe code. Its own binary: a frame space
//! registers with the process-wide SIGSEGV handler.
#![allow(unsafe_code)]

use amber::internals::vm::{
    Backend, BackendChoice, FaultError, FaultService, FrameNo, FrameSpace, InstallAs, Installer,
    MappedFile, VmConfig,
};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const PS: usize = 4096;
const PAGES: u64 = 300;

/// Counts the blocks it is asked to check; every block is sound.
#[derive(Default)]
struct Checks(AtomicUsize);

impl FaultService for Checks {
    fn missing(&self, _frame: FrameNo, _inst: &mut Installer<'_>) -> Result<(), FaultError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn first_write(&self, _frame: FrameNo, _clean: &[u8]) {}
}

fn byte_of(page: u64, version: u8) -> u8 {
    (page as u8).wrapping_mul(3).wrapping_add(version)
}

fn page_image(page: u64, version: u8) -> Vec<u8> {
    vec![byte_of(page, version); PS]
}

fn read(fs: &FrameSpace, f: FrameNo, at: usize) -> u8 {
    assert!(at < PS);
    // SAFETY: frame `f` lies in the reservation, which is readable
    // everywhere with `mapped-unverified`; with `mapped` a frame not yet
    // checked faults and is checked (or the process aborts) first.
    unsafe { std::ptr::read_volatile((fs.frame_addr(f) + at) as *const u8) }
}

fn write(fs: &FrameSpace, f: FrameNo, at: usize, v: u8) {
    assert!(at < PS);
    // SAFETY: as for `read`; writable everywhere; nothing else refers to
    // these bytes.
    unsafe { std::ptr::write_volatile((fs.frame_addr(f) + at) as *mut u8, v) }
}

/// A page file of `PAGES` pages (version 0 of each) in `dir`.
fn page_file(dir: &std::path::Path) -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.join("pages"))
        .expect("create");
    for p in 0..PAGES {
        file.write_all_at(&page_image(p, 0), p * PS as u64)
            .expect("write");
    }
    file
}

/// A frame space of `backend` mapping `file` at `home`, or None (said why)
/// on a kernel without what the mapped backends need.
fn mapped_space(
    backend: Backend,
    choice: BackendChoice,
    home: usize,
    file: &std::fs::File,
    service: Arc<dyn FaultService>,
) -> Option<Arc<FrameSpace>> {
    let cfg = VmConfig {
        backend: choice,
        reserve_bytes: 1 << 30,
        home,
        file: Ok(MappedFile {
            fd: file.as_raw_fd(),
            len: PAGES * PS as u64,
        }),
        ..VmConfig::default()
    };
    let fs = FrameSpace::new(cfg, service).expect("frame space");
    if fs.backend() != backend {
        // A kernel without PAGEMAP_SCAN: the suite has nothing to test.
        assert!(
            std::env::var("AMBER_REQUIRE_UFFD").map_or(true, |v| v != "1"),
            "{}",
            fs.backend_reason()
        );
        eprintln!("skipped: {}", fs.backend_reason());
        return None;
    }
    Some(fs)
}

#[test]
fn the_file_through_memory_and_writes_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = page_file(dir.path());
    let home = 52usize << 40;
    let checks = Arc::new(Checks::default());
    let unverified = (Backend::MappedUnverified, BackendChoice::MappedUnverified);
    let Some(fs) = mapped_space(unverified.0, unverified.1, home, &file, checks.clone()) else {
        return;
    };
    assert!(fs.at_home());
    assert_eq!(fs.base(), home);
    // The file, read by plain loads: the kernel serves them, not Amber.
    for p in 0..PAGES {
        assert_eq!(read(&fs, p as FrameNo, 100), byte_of(p, 0), "page {p}");
    }
    // Past the file: zeros.
    assert_eq!(read(&fs, PAGES as FrameNo + 3, 0), 0);
    assert_eq!(
        checks.0.load(Ordering::Relaxed),
        0,
        "no fault reached the service"
    );
    // A checked copy out asks the service once per frame.
    let mut buf = vec![0u8; PS];
    fs.copy_out(7, 0, &mut buf).expect("copy out");
    fs.copy_out(7, 0, &mut buf).expect("copy out");
    assert_eq!(buf, page_image(7, 0));
    assert_eq!(checks.0.load(Ordering::Relaxed), 1);
    assert!(fs.take_written().expect("written").is_empty());

    // A write is found, once; written again (its window now watched), found
    // again; a page of the same window never written is not.
    write(&fs, 7, 10, 0xAB);
    write(&fs, 200, 10, 0xCD);
    assert_eq!(fs.take_written().expect("written"), vec![7, 200]);
    assert_eq!(fs.copies().expect("copies"), vec![7, 200]);
    assert!(fs.take_written().expect("written").is_empty());
    write(&fs, 7, 11, 0xAC);
    assert_eq!(fs.peek_written().expect("written"), vec![7]);
    assert_eq!(fs.take_written().expect("written"), vec![7]);
    assert!(fs.take_written().expect("written").is_empty());
    assert_eq!(read(&fs, 8, 0), byte_of(8, 0));

    // `copy_in` is no program write: not listed, in a watched window or in
    // an unwatched one (watched then, the program's own copy there still
    // listed).
    fs.copy_in(9, 0, &[1, 2, 3]).expect("copy in");
    write(&fs, 130, 0, 9);
    fs.copy_in(131, 0, &[4, 5]).expect("copy in");
    assert_eq!(read(&fs, 131, 1), 5);
    assert_eq!(fs.take_written().expect("written"), vec![130]);
    write(&fs, 131, 3, 6);
    assert_eq!(fs.take_written().expect("written"), vec![131]);

    // A "checkpoint" writes pages 7 and 200 as memory has them; given back
    // to the file, they read it (and what it says next).
    let mut img7 = page_image(7, 0);
    img7[10] = 0xAB;
    img7[11] = 0xAC;
    file.write_all_at(&img7, 7 * PS as u64).expect("write");
    fs.to_file(&[(7, 1)]).expect("to file");
    assert_eq!(read(&fs, 7, 11), 0xAC);
    file.write_all_at(&[0x55], 7 * PS as u64 + 11)
        .expect("write");
    assert_eq!(read(&fs, 7, 11), 0x55, "page 7 reads the file again");
    assert_eq!(read(&fs, 200, 10), 0xCD, "page 200 keeps its copy");
    assert!(fs.take_written().expect("written").is_empty());
    write(&fs, 7, 12, 1);
    assert_eq!(
        fs.take_written().expect("written"),
        vec![7],
        "still watched"
    );

    // Discarded: zeros, whatever the file says.
    fs.discard(20, 2).expect("discard");
    assert_eq!((read(&fs, 20, 0), read(&fs, 21, 4095)), (0, 0));
    assert!(fs.take_written().expect("written").is_empty());

    // Past the file's end, a new block (installed first, as the object
    // layer installs every block it allocates): found written; once the
    // file has grown over it, given back, it reads the file.
    let f = PAGES as FrameNo + 2;
    fs.install(f, &vec![0u8; PS], InstallAs::Dirty)
        .expect("install");
    write(&fs, f, 0, 0x77);
    assert_eq!(fs.take_written().expect("written"), vec![f]);
    let mut grown = vec![0u8; PS];
    grown[0] = 0x77;
    file.write_all_at(&grown, u64::from(f) * PS as u64)
        .expect("write");
    fs.to_file(&[(f, 1)]).expect("to file");
    file.write_all_at(&[0x78], u64::from(f) * PS as u64)
        .expect("write");
    assert_eq!(read(&fs, f, 0), 0x78, "the grown file is mapped there");
    assert!(fs.take_written().expect("written").is_empty());
    write(&fs, f, 1, 1);
    assert_eq!(fs.take_written().expect("written"), vec![f]);
}

#[derive(amber::Persistent)]
#[repr(C)]
struct Cell {
    v: u64,
    next: Option<amber::PRef<Cell>>,
}

/// Through a database: a commit's copies stay until a checkpoint has
/// installed them, then the next `begin` gives them back to the file, and
/// the values read the same before and after, and in a new session.
#[test]
fn copies_go_back_to_the_file_after_a_checkpoint() {
    use amber::{Db, Options, PRef, StoreOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let opts = Options {
        backend: BackendChoice::MappedUnverified,
        reserve_bytes: 1 << 30,
        store: StoreOptions {
            home: Some(53 << 40),
            ..StoreOptions::default()
        },
        ..Options::default()
    };
    let mut db = Db::create(&path, opts.clone()).expect("create");
    if db.backend() != Backend::MappedUnverified {
        eprintln!("skipped: {}", db.backend_reason());
        return;
    }
    let mut tx = db.begin().expect("begin");
    let mut head: Option<PRef<Cell>> = None;
    for v in 0..2000u64 {
        head = Some(tx.alloc(Cell { v, next: head }).expect("alloc"));
    }
    tx.set_root("head", head.expect("cells")).expect("root");
    tx.commit().expect("commit");
    let sum = |db: &Db| {
        let mut at: Option<PRef<Cell>> = db.root("head").expect("root");
        let mut s = 0u64;
        while let Some(p) = at {
            s += db.get(p).v;
            at = db.get(p).next;
        }
        s
    };
    assert_eq!(sum(&db), (0..2000).sum::<u64>());
    let written = db.frame_space().copies().expect("copies");
    assert!(written.len() > 10, "the new blocks are copies: {written:?}");
    // No checkpoint yet: a new transaction keeps them.
    db.begin().expect("begin").abort().expect("abort");
    assert_eq!(db.frame_space().copies().expect("copies"), written);
    db.checkpoint().expect("checkpoint");
    db.begin().expect("begin").abort().expect("abort");
    assert!(
        db.frame_space().copies().expect("copies").is_empty(),
        "given back"
    );
    assert_eq!(sum(&db), (0..2000).sum::<u64>(), "read from the file now");
    // Written again, committed: found and kept.
    let h: PRef<Cell> = db.root("head").expect("root").expect("head");
    let mut tx = db.begin().expect("begin");
    tx.get_mut(h).v += 1_000_000;
    let st = tx.commit().expect("commit");
    assert_eq!(st.blocks, 1, "{st:?}");
    assert_eq!(sum(&db), (0..2000).sum::<u64>() + 1_000_000);
    db.close().expect("close");
    let db = Db::open(&path, opts).expect("reopen");
    assert_eq!(sum(&db), (0..2000).sum::<u64>() + 1_000_000);
}

/// The `mapped` backend's service as the object layer's is, but without
/// reading anything: a first touch checks every frame of the faulting
/// frame's check window (counted), and frame `bad` is damaged.
struct WindowChecks {
    calls: AtomicUsize,
    bad: FrameNo,
}

impl FaultService for WindowChecks {
    fn missing(&self, frame: FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let fs = inst.space();
        let (lo, end) = fs.check_window(frame).expect("a mapped space with checks");
        for f in (lo..end).filter(|&f| f != self.bad) {
            fs.note_checked(f);
        }
        if frame == self.bad {
            return Err(FaultError {
                page: u64::from(frame),
                kind: amber::internals::vm::FaultKind::Corrupt,
                message: "damaged on purpose".into(),
            });
        }
        Ok(())
    }

    fn first_write(&self, _frame: FrameNo, _clean: &[u8]) {}
}

/// `mapped`: a window is checked once, at its first touch, however many of
/// its pages are read and however often; a damaged frame stays closed (a
/// checked read is an error every time) while its window's other frames
/// read; writes are found as without checks.
#[test]
fn windows_are_checked_once_at_first_touch() {
    use amber::internals::vm::CHECK_WINDOW;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = page_file(dir.path());
    let bad = 2 * CHECK_WINDOW + 5;
    let checks = Arc::new(WindowChecks {
        calls: AtomicUsize::new(0),
        bad,
    });
    let verified = (Backend::Mapped, BackendChoice::Mapped);
    let Some(fs) = mapped_space(verified.0, verified.1, 54 << 40, &file, checks.clone()) else {
        return;
    };
    let calls = || checks.calls.load(Ordering::Relaxed);
    assert_eq!(calls(), 0, "nothing is checked before it is touched");
    // Every page of the first two windows, twice, in an order that comes
    // back to each window: one check per window.
    for _ in 0..2 {
        for p in (0..2 * CHECK_WINDOW).rev() {
            assert_eq!(read(&fs, p, 100), byte_of(u64::from(p), 0), "page {p}");
        }
    }
    assert_eq!(calls(), 2, "one check per window, not per page or per read");
    // The damaged frame's window: its other frames read after one check.
    let w = 2 * CHECK_WINDOW;
    for p in (w..w + CHECK_WINDOW).filter(|&p| p != bad) {
        assert_eq!(read(&fs, p, 7), byte_of(u64::from(p), 0), "page {p}");
    }
    assert_eq!(calls(), 3);
    // The damaged frame itself: an error each time, never its bytes.
    let mut buf = vec![0u8; PS];
    for _ in 0..2 {
        let e = fs.copy_out(bad, 0, &mut buf).expect_err("a damaged frame");
        assert!(e.to_string().contains("damaged on purpose"), "{e}");
    }
    assert_eq!(calls(), 5, "a damaged frame is checked again at each try");
    // A write into an unchecked window: checked first, then found.
    let f = 10 * CHECK_WINDOW + 3;
    write(&fs, f, 0, 0xEE);
    assert_eq!(calls(), 6);
    write(&fs, 7, 0, 0xEF);
    assert_eq!(fs.take_written().expect("written"), vec![7, f]);
    assert_eq!(
        (read(&fs, f, 0), read(&fs, f, 1)),
        (0xEE, byte_of(u64::from(f), 0))
    );
    // Given back to the file, discarded: readable without a new check.
    let mut img = page_image(7, 0);
    img[0] = 0xEF;
    file.write_all_at(&img, 7 * PS as u64).expect("write");
    fs.to_file(&[(7, 1)]).expect("to file");
    assert_eq!(read(&fs, 7, 0), 0xEF);
    fs.discard(20, 2).expect("discard");
    assert_eq!(read(&fs, 20, 0), 0);
    // A new block past the file's end is installed, not checked.
    let n = PAGES as FrameNo + 2;
    fs.install(n, &vec![3u8; PS], InstallAs::Dirty)
        .expect("install");
    assert_eq!(read(&fs, n, 9), 3);
    write(&fs, n, 0, 4);
    assert_eq!(fs.take_written().expect("written"), vec![n]);
    assert_eq!(calls(), 6, "nothing else was checked");
}

/// `mapped`: the checks' view of the page file (`file_view`) reads the
/// file's bytes as the page cache holds them — a write to the file seen at
/// once, the program's private copies not — refuses what lies past the
/// file's end, and reads again after `release_view`; `mapped-unverified`
/// has none.
#[test]
fn the_checks_view_reads_the_file_within_its_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = page_file(dir.path());
    let checks = Arc::new(Checks::default());
    let verified = (Backend::Mapped, BackendChoice::Mapped);
    let Some(fs) = mapped_space(verified.0, verified.1, 55 << 40, &file, checks.clone()) else {
        return;
    };
    let v = fs.file_view(3, 2).expect("pages in the file");
    assert_eq!(v.len(), 2 * PS);
    assert!(v[..PS].iter().all(|&b| b == byte_of(3, 0)));
    assert!(v[PS..].iter().all(|&b| b == byte_of(4, 0)));
    assert!(fs.file_view(PAGES - 1, 1).is_some());
    assert!(fs.file_view(PAGES - 1, 2).is_none(), "past the file's end");
    assert!(fs.file_view(u64::MAX / 2, 2).is_none());
    // A checkpoint's write in place is what the view reads; a private copy
    // (a program write, checked first) is not.
    file.write_all_at(&page_image(3, 1), 3 * PS as u64)
        .expect("write");
    assert_eq!(fs.file_view(3, 1).expect("view")[7], byte_of(3, 1));
    write(&fs, 4, 7, 0xEE);
    assert_eq!(read(&fs, 4, 7), 0xEE);
    assert_eq!(fs.file_view(4, 1).expect("view")[7], byte_of(4, 0));
    fs.release_view(3, 2);
    assert_eq!(
        fs.file_view(3, 1).expect("view")[7],
        byte_of(3, 1),
        "mapped again"
    );
    drop(fs);
    let unverified = (Backend::MappedUnverified, BackendChoice::MappedUnverified);
    let Some(fs) = mapped_space(unverified.0, unverified.1, 56 << 40, &file, checks) else {
        return;
    };
    assert!(fs.file_view(3, 1).is_none(), "no checks, no view");
}
