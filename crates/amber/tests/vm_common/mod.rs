//! The vm test suite, run once per backend by `vm_uffd.rs` and `vm_sigsegv.rs`
//! (separate binaries, so each process installs only the handlers it tests).
//!
//! Faults are triggered the way a program triggers them: by plain loads and
//! stores through raw pointers into the reservation, hence the unsafe code.
#![allow(unsafe_code, dead_code)]

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use amber::internals::vm::{
    Backend, BackendChoice, FaultError, FaultKind, FaultService, FrameNo, FrameSpace, InstallAs,
    Installer, VmConfig, VmError,
};

/// Byte `i` of page `page`, as the toy store holds it.
pub fn pattern(page: u64, i: usize) -> u8 {
    (page ^ (page >> 32) ^ (page >> 13) ^ (i as u64).wrapping_mul(7) ^ (i as u64 >> 8)) as u8
}

/// A store whose page `p` holds `pattern(p, ..)`, and which can be told to fail one page.
pub struct Toy {
    pub fail_page: AtomicU64,
    pub fills: AtomicUsize,
    pub first_writes: AtomicUsize,
    /// Set if `first_write` ever saw content that was not the page's clean pattern.
    pub bad_clean: AtomicBool,
    /// Pages "committed" by a test: served with these bytes instead of the
    /// pattern.
    pub saved: Mutex<HashMap<u64, Vec<u8>>>,
}

impl Toy {
    pub fn new() -> Arc<Toy> {
        Arc::new(Toy {
            fail_page: AtomicU64::new(u64::MAX),
            fills: AtomicUsize::new(0),
            first_writes: AtomicUsize::new(0),
            bad_clean: AtomicBool::new(false),
            saved: Mutex::new(HashMap::new()),
        })
    }
}

impl FaultService for Toy {
    fn missing(&self, frame: FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError> {
        let space = inst.space();
        let (head, idx, len) = space.page_of(frame).ok_or(FaultError::new(
            u64::MAX,
            FaultKind::Internal,
            "no page",
        ))?;
        let fs = space.frame_size();
        let fail = self.fail_page.load(Ordering::Relaxed);
        if (head..head + u64::from(len)).contains(&fail) {
            return Err(FaultError::new(
                fail,
                FaultKind::Internal,
                "checksum mismatch (injected)",
            ));
        }
        let mut buf = vec![0u8; fs * len as usize];
        for (k, b) in buf.iter_mut().enumerate() {
            *b = pattern(head + (k / fs) as u64, k % fs);
        }
        let saved = self.saved.lock().expect("saved pages");
        for (i, page) in buf.chunks_mut(fs).enumerate() {
            if let Some(img) = saved.get(&(head + i as u64)) {
                page.copy_from_slice(img);
            }
        }
        drop(saved);
        self.fills.fetch_add(1, Ordering::Relaxed);
        inst.install(frame - idx, &buf, InstallAs::Clean)
            .map_err(|e| FaultError::new(head, FaultKind::Internal, e.to_string()))?;
        Ok(())
    }

    fn first_write(&self, frame: FrameNo, clean: &[u8]) {
        self.first_writes.fetch_add(1, Ordering::Relaxed);
        // The toy knows nothing of frames; the first byte tells which page
        // pattern to expect only through the test, so check self-consistency:
        // a clean frame never holds the marker the tests write.
        if clean.contains(&0xEE) && clean.iter().all(|&b| b == 0xEE) {
            self.bad_clean.store(true, Ordering::Relaxed);
        }
        let _ = frame;
    }
}

pub fn config(backend: Backend) -> VmConfig {
    VmConfig {
        backend: match backend {
            Backend::Uffd => BackendChoice::Uffd,
            Backend::Sigsegv => BackendChoice::Sigsegv,
            // Needs a page file (`vm_mapped.rs`).
            Backend::MappedUnverified => BackendChoice::MappedUnverified,
            Backend::Mapped => BackendChoice::Mapped,
        },
        reserve_bytes: 1 << 30,
        ..VmConfig::default()
    }
}

/// A FrameSpace on `backend`. (Where the kernel cannot run the userfaultfd
/// backend, its suites' harness reports every test ignored without running
/// it: `tests/harness`.)
pub fn space_with(backend: Backend, cfg: VmConfig, toy: &Arc<Toy>) -> Arc<FrameSpace> {
    let s = FrameSpace::new(cfg, toy.clone()).unwrap_or_else(|e| panic!("FrameSpace::new: {e}"));
    assert_eq!(s.backend(), backend);
    s
}

pub fn space(backend: Backend) -> (Arc<FrameSpace>, Arc<Toy>) {
    let toy = Toy::new();
    (space_with(backend, config(backend), &toy), toy)
}

pub fn load(space: &FrameSpace, f: FrameNo, off: usize) -> u8 {
    // SAFETY: the address is inside the live reservation of `space`; the load
    // faults the frame in (or aborts the process with a message).
    unsafe { std::ptr::read_volatile((space.frame_addr(f) + off) as *const u8) }
}

pub fn store(space: &FrameSpace, f: FrameNo, off: usize, v: u8) {
    // SAFETY: as in load; the frame is resident and the test owns its content.
    unsafe { std::ptr::write_volatile((space.frame_addr(f) + off) as *mut u8, v) }
}

pub fn load_u64(space: &FrameSpace, f: FrameNo, off: usize) -> u64 {
    // SAFETY: as in load; `off` is 8-aligned and inside the frame.
    unsafe { std::ptr::read_volatile((space.frame_addr(f) + off) as *const u64) }
}

pub fn store_u64(space: &FrameSpace, f: FrameNo, off: usize, v: u64) {
    // SAFETY: as in store; `off` is 8-aligned and inside the frame.
    unsafe { std::ptr::write_volatile((space.frame_addr(f) + off) as *mut u64, v) }
}

fn check_frame(space: &FrameSpace, f: FrameNo, page: u64) {
    for off in (0..space.frame_size())
        .step_by(97)
        .chain([space.frame_size() - 1])
    {
        assert_eq!(
            load(space, f, off),
            pattern(page, off),
            "frame {f} page {page} offset {off}"
        );
    }
}

pub fn lazy_assignment_and_runs(b: Backend) {
    let (s, toy) = space(b);
    assert_eq!(s.lookup(7), None);
    let f7 = s.assign(7, 1).expect("assign");
    assert_eq!(s.lookup(7), Some(f7));
    assert_eq!(s.assign(7, 1).expect("again"), f7);
    assert_eq!(s.page_of(f7), Some((7, 0, 1)));
    let run = s.assign(100, 4).expect("run");
    for i in 0..4u32 {
        assert_eq!(s.lookup(100 + u64::from(i)), Some(run + i));
        assert_eq!(s.page_of(run + i), Some((100, i, 4)));
    }
    assert_eq!(s.assign(102, 1).expect("inside run"), run + 2);
    assert!(matches!(s.assign(101, 3), Err(VmError::RunConflict { .. })));
    assert!(matches!(s.assign(99, 2), Err(VmError::RunConflict { .. })));
    assert_eq!(s.frame_at(s.frame_addr(run + 3) + 5), Some(run + 3));
    assert_eq!(s.frame_at(s.base().wrapping_sub(1)), None);
    // Nothing is fetched until touched; touching page 102 fetches the whole run.
    assert_eq!(toy.fills.load(Ordering::Relaxed), 0);
    assert!(!s.is_resident(run));
    check_frame(&s, run + 2, 102);
    assert_eq!(toy.fills.load(Ordering::Relaxed), 1);
    for i in 0..4u32 {
        assert!(s.is_resident(run + i));
        check_frame(&s, run + i, 100 + u64::from(i));
    }
    assert_eq!(toy.fills.load(Ordering::Relaxed), 1);
}

pub fn huge_page_numbers(b: Backend) {
    let (s, _toy) = space(b);
    let pages = [
        1u64 << 32,
        (1 << 32) + 1,
        1 << 40,
        0xFFFF_FFFF_FFFF_0000,
        u64::MAX - 2,
    ];
    let frames: Vec<FrameNo> = pages
        .iter()
        .map(|&p| s.assign(p, 1).expect("assign"))
        .collect();
    for (&p, &f) in pages.iter().zip(&frames) {
        assert_eq!(s.lookup(p), Some(f));
        assert_eq!(s.page_of(f), Some((p, 0, 1)));
        check_frame(&s, f, p);
    }
    assert_eq!(s.lookup((1 << 32) + 2), None);
    assert_eq!(s.lookup(1 << 32 ^ 1 << 33), None);
    assert!(matches!(
        s.assign(u64::MAX, 1),
        Err(VmError::BadPage { .. })
    ));
}

pub fn read_faults_from_many_threads(b: Backend) {
    let (s, toy) = space(b);
    let n = 256u32;
    let first = s.assign(5000, 1).expect("assign");
    for p in 1..u64::from(n) {
        s.assign(5000 + p * 3, 1).expect("assign");
    }
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, barrier) = (s.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for k in 0..n {
                    let f = first + (k + t as u32 * 61) % n;
                    let page = s.page_of(f).expect("assigned").0;
                    check_frame(&s, f, page);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("reader thread");
    }
    // Concurrent faults on one frame may each fetch it, but every frame was
    // fetched at least once and at most once per thread.
    let fills = toy.fills.load(Ordering::Relaxed);
    assert!(
        fills >= n as usize && fills <= n as usize * threads,
        "fills {fills}"
    );
}

pub fn ensure_resident_reports_errors(b: Backend) {
    let (s, toy) = space(b);
    let f = s.assign(42, 1).expect("assign");
    toy.fail_page.store(42, Ordering::Relaxed);
    let e = s.ensure_resident(f).expect_err("must fail");
    assert_eq!(e.page, 42);
    assert!(e.message.contains("checksum"), "{e}");
    assert!(!s.is_resident(f));
    let mut buf = [0u8; 8];
    assert!(matches!(s.copy_out(f, 0, &mut buf), Err(VmError::Fault(_))));
    toy.fail_page.store(u64::MAX, Ordering::Relaxed);
    s.ensure_resident(f).expect("now fine");
    assert!(s.is_resident(f));
    check_frame(&s, f, 42);
    // A frame that was never assigned is an error too, not a crash.
    assert!(s.ensure_resident(s.frame_count() - 1).is_err());
}

/// Runs `scenario` in a child copy of this test binary and returns its status and stderr.
pub fn in_child(test_name: &str, scenario: &str) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env("AMBER_VM_CHILD", scenario)
        .output()
        .expect("spawn child");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn child_scenario() -> Option<String> {
    std::env::var("AMBER_VM_CHILD").ok()
}

/// The child side: dereference a pointer into a page whose fetch fails.
pub fn load_of_bad_page(b: Backend) {
    let (s, toy) = space(b);
    let f = s.assign(77, 1).expect("assign");
    toy.fail_page.store(77, Ordering::Relaxed);
    let v = load(&s, f, 10);
    eprintln!("load returned {v}: should have aborted");
    std::process::exit(3);
}

/// The child side: dereference a pointer into a frame no page was assigned to.
pub fn load_of_unassigned_frame(b: Backend) {
    let (s, _toy) = space(b);
    s.assign(1, 1).expect("assign");
    let v = load(&s, 1000, 0);
    eprintln!("load returned {v}: should have aborted");
    std::process::exit(3);
}

pub fn check_aborted(status: std::process::ExitStatus, stderr: &str, expect: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "status {status:?}, stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(expect),
        "stderr lacks {expect:?}:\n{stderr}"
    );
}

pub fn evict_then_refault(b: Backend) {
    let (s, toy) = space(b);
    let f = s.assign(9, 2).expect("assign");
    check_frame(&s, f, 9);
    check_frame(&s, f + 1, 10);
    assert_eq!(toy.fills.load(Ordering::Relaxed), 1);
    s.evict(f, 2).expect("evict");
    assert!(!s.is_resident(f) && !s.is_resident(f + 1));
    check_frame(&s, f + 1, 10);
    check_frame(&s, f, 9);
    assert_eq!(toy.fills.load(Ordering::Relaxed), 2);
    assert!(matches!(
        s.evict(s.assigned_frames(), 1),
        Err(VmError::BadFrame { .. })
    ));
}

pub fn write_tracking(b: Backend) {
    let (s, toy) = space(b);
    let base = s.assign(300, 1).expect("assign");
    for p in 1..8 {
        s.assign(300 + p, 1).expect("assign");
    }
    for f in base..base + 8 {
        let _ = load(&s, f, 0);
    }
    assert_eq!(s.take_written().expect("take"), Vec::<FrameNo>::new());
    for f in [base + 1, base + 3, base + 5] {
        store(&s, f, 17, 0xEE);
        store(&s, f, 18, 0xEE);
    }
    assert_eq!(
        s.take_written().expect("take"),
        vec![base + 1, base + 3, base + 5]
    );
    assert_eq!(s.take_written().expect("take"), Vec::<FrameNo>::new());
    // The writes stuck, and re-protection catches the next write.
    assert_eq!(load(&s, base + 3, 17), 0xEE);
    store(&s, base + 3, 0, 1);
    store(&s, base + 6, 0, 2);
    assert_eq!(s.take_written().expect("take"), vec![base + 3, base + 6]);
    if b == Backend::Sigsegv {
        assert_eq!(toy.first_writes.load(Ordering::Relaxed), 5);
        assert!(!toy.bad_clean.load(Ordering::Relaxed));
    }
    // write_protect_all forgets pending writes.
    store(&s, base + 7, 0, 3);
    s.write_protect_all().expect("wp all");
    assert_eq!(s.take_written().expect("take"), Vec::<FrameNo>::new());
    // A brand-new page installed dirty is reported.
    let n = s.assign(900, 1).expect("assign");
    let data = vec![0x5Au8; s.frame_size()];
    assert_eq!(s.install(n, &data, InstallAs::Dirty).expect("install"), 1);
    assert_eq!(load(&s, n, 4), 0x5A);
    assert_eq!(s.take_written().expect("take"), vec![n]);
    // Installing over a resident frame does nothing.
    assert_eq!(s.install(n, &data, InstallAs::Clean).expect("install"), 0);
    // Evicting a written frame drops it from the written set.
    store(&s, base, 0, 9);
    s.evict(base, 1).expect("evict");
    assert_eq!(s.take_written().expect("take"), Vec::<FrameNo>::new());
}

pub fn untracked_frames_are_writable(b: Backend) {
    let toy = Toy::new();
    let cfg = VmConfig {
        track_writes: false,
        ..config(b)
    };
    let s = space_with(b, cfg, &toy);
    let f = s.assign(1, 1).expect("assign");
    store(&s, f, 0, 7);
    assert_eq!(load(&s, f, 0), 7);
    assert!(matches!(s.take_written(), Err(VmError::NotTracking)));
    assert_eq!(toy.first_writes.load(Ordering::Relaxed), 0);
}

pub fn copy_in_and_out(b: Backend) {
    let (s, _toy) = space(b);
    let fs = s.frame_size();
    let f = s.assign(60, 2).expect("assign");
    // copy_out faults the frames in through the service, in this thread.
    let mut buf = vec![0u8; 100];
    s.copy_out(f, fs - 50, &mut buf)
        .expect("copy_out across frames");
    for (k, &v) in buf.iter().enumerate() {
        let at = fs - 50 + k;
        assert_eq!(v, pattern(60 + (at / fs) as u64, at % fs));
    }
    // copy_in is visible through pointers and is not a tracked write.
    s.take_written().expect("take");
    s.copy_in(f, fs - 2, &[1, 2, 3, 4]).expect("copy_in");
    assert_eq!(
        [
            load(&s, f, fs - 2),
            load(&s, f, fs - 1),
            load(&s, f + 1, 0),
            load(&s, f + 1, 1)
        ],
        [1, 2, 3, 4]
    );
    assert_eq!(s.take_written().expect("take"), Vec::<FrameNo>::new());
    // ... but does not hide a program write either.
    store(&s, f + 1, 100, 9);
    s.copy_in(f + 1, 0, &[5]).expect("copy_in");
    assert_eq!(s.take_written().expect("take"), vec![f + 1]);
    let mut one = [0u8; 1];
    s.copy_out(f + 1, 100, &mut one).expect("copy_out");
    assert_eq!(one[0], 9);
    assert!(matches!(
        s.copy_out(f + 1, fs - 1, &mut [0u8; 2]),
        Err(VmError::OutOfBounds { .. })
    ));
    assert!(matches!(
        s.copy_in(f + 2, 0, &[0u8; 1]),
        Err(VmError::OutOfBounds { .. })
    ));
}

pub fn reservation_exhaustion(b: Backend) {
    let toy = Toy::new();
    let cfg = VmConfig {
        reserve_bytes: 16 * 4096,
        ..config(b)
    };
    let s = space_with(b, cfg, &toy);
    assert_eq!(s.frame_count(), 16);
    s.assign(0, 10).expect("10 frames");
    s.assign(100, 6).expect("6 more");
    match s.assign(200, 1) {
        Err(e @ VmError::Exhausted { .. }) => assert!(e.to_string().contains("exhausted"), "{e}"),
        other => panic!("expected exhaustion, got {other:?}"),
    }
    assert_eq!(s.lookup(5), Some(5));
}

pub fn large_frames(b: Backend) {
    let toy = Toy::new();
    let cfg = VmConfig {
        frame_size: 16 * 1024,
        ..config(b)
    };
    let s = space_with(b, cfg, &toy);
    let f = s.assign(3, 1).expect("assign");
    let g = s.assign(4, 1).expect("assign");
    check_frame(&s, f, 3);
    check_frame(&s, g, 4);
    store(&s, g, 16 * 1024 - 1, 1);
    assert_eq!(s.take_written().expect("take"), vec![g]);
    s.evict(f, 2).expect("evict");
    check_frame(&s, f, 3);
}

pub fn drop_and_recreate(b: Backend) {
    for _ in 0..3 {
        let (s, _toy) = space(b);
        let f = s.assign(1, 1).expect("assign");
        check_frame(&s, f, 1);
    }
}

/// Child side: install every other frame read-only until `mprotect` runs out
/// of VMAs; exits 0 if the error was the clear MapCount one, 2 if the limit
/// was never reached (a raised `vm.max_map_count`).
pub fn map_count_exhaustion(b: Backend) {
    let (s, _toy) = space(b);
    let n = 140_000u32;
    let first = s.assign(0, n).expect("assign");
    let data = vec![1u8; s.frame_size()];
    // Three written frames in one writable range, to be write-protected
    // one at a time once the limit is reached (a split: two more ranges).
    let w = s.assign(1 << 40, 3).expect("assign");
    let dirty = vec![2u8; 3 * s.frame_size()];
    s.install(w, &dirty, InstallAs::Dirty)
        .expect("install dirty");
    for k in (0..n).step_by(2) {
        match s.install(first + k, &data, InstallAs::Clean) {
            Ok(_) => {}
            Err(e @ VmError::MapCount { .. }) => {
                eprintln!("after {} frames: {e}", k / 2);
                let remedy = |m: &str| m.contains("vm.max_map_count") && m.contains("userfaultfd");
                assert!(remedy(&e.to_string()), "{e}");
                // The frame that failed is still not resident and the space usable.
                assert!(!s.is_resident(first + k));
                assert_eq!(load(&s, first + k - 2, 0), 1);
                // Fetching a page of its own in the middle of an
                // inaccessible range is an error, with the remedy, not a
                // crash. (Not a frame of the big run: installing the rest
                // of that block would merge ranges, not split them.)
                let _spacer = s.assign(1 << 41, 1).expect("assign");
                let lone = s.assign(1 << 42, 1).expect("assign");
                let err = s.ensure_resident(lone).expect_err("no room for it");
                assert!(remedy(&err.message), "{err}");
                // Write-protecting one of the written frames would split
                // their range: an error, and the frame stays written.
                match s.write_protect(w + 1, 1) {
                    Err(e @ VmError::MapCount { .. }) => assert!(remedy(&e.to_string())),
                    other => panic!("write_protect at the limit: {other:?}"),
                }
                assert_eq!(s.peek_written().expect("peek"), vec![w, w + 1, w + 2]);
                store(&s, w + 1, 0, 3);
                assert_eq!(load(&s, w + 1, 0), 3);
                std::process::exit(0);
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    panic!("{n} frames made readable one by one without reaching vm.max_map_count");
}

pub fn concurrent_first_writes(b: Backend) {
    let (s, toy) = space(b);
    let n = 64u32;
    let first = s.assign(10_000, n).expect("assign");
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, barrier) = (s.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for k in 0..n {
                    store(&s, first + (k + t as u32 * 17) % n, t, 0xEE);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("writer thread");
    }
    assert_eq!(
        s.take_written().expect("take"),
        (first..first + n).collect::<Vec<_>>()
    );
    if b == Backend::Sigsegv {
        // Exactly one first_write per frame, however many threads raced.
        assert_eq!(toy.first_writes.load(Ordering::Relaxed), n as usize);
    }
    for k in 0..n {
        for t in 0..threads {
            assert_eq!(load(&s, first + k, t), 0xEE);
        }
    }
}

/// Child side: threads that were started before the frame space existed,
/// and one started with the smallest stack the platform allows, touch
/// pages: plain loads and first writes, no preparation (the SIGSEGV
/// handler once needed a large alternate signal stack on every thread).
pub fn load_on_unprepared_thread(b: Backend) {
    let (s, _toy) = space(b);
    let f = s.assign(5, 1).expect("assign");
    let g = s.assign(6, 1).expect("assign");
    let s2 = s.clone();
    let v = std::thread::Builder::new()
        .stack_size(libc::PTHREAD_STACK_MIN)
        .spawn(move || {
            let v = load(&s2, f, 0);
            store(&s2, g, 3, 0xEE);
            v
        })
        .expect("spawn")
        .join()
        .expect("thread");
    assert_eq!(v, pattern(5, 0));
    assert_eq!(load(&s, g, 3), 0xEE);
    assert_eq!(s.take_written().expect("take"), vec![g]);
    std::process::exit(0);
}

/// Writers keep a counter in each of their frames while another thread
/// "commits" what was written (take_written, then the frames' bytes become
/// the toy store's) and evicts every clean frame, over and over. A write
/// that `evict_clean` discarded (found clean, written, then dropped) comes
/// back as the committed value: the writer sees its counter go back. With
/// userfaultfd the kernel resolves first writes without telling Amber, so
/// this exercises the write-protect window of `evict_clean`, and its
/// SIGSEGV handler for writes that hit it.
pub fn eviction_races_writers(b: Backend) {
    let (s, toy) = space(b);
    s.set_writers(true);
    let n = 32u32;
    // One-frame blocks on neighbouring frames (evicted one by one).
    let first = s.assign(30_000, 1).expect("assign");
    for k in 1..n {
        assert_eq!(
            s.assign(30_000 + u64::from(k), 1).expect("assign"),
            first + k
        );
    }
    // Until this many evictions happened while the writers ran (or time
    // is up: a slow machine still checks what it managed).
    let target = 3_000;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let done = AtomicBool::new(false);
    let lost = AtomicUsize::new(0);
    let evicted = AtomicUsize::new(0);
    let s = &*s;
    let finals: Vec<Vec<(FrameNo, u64)>> = std::thread::scope(|sc| {
        let writers: Vec<_> = (0..2u32)
            .map(|t| {
                let (done, lost) = (&done, &lost);
                sc.spawn(move || {
                    let mine: Vec<FrameNo> = (t..n).step_by(2).map(|k| first + k).collect();
                    let mut last = vec![None; mine.len()];
                    let mut round = 0u64;
                    while !done.load(Ordering::Acquire) {
                        round += 1;
                        for (i, &f) in mine.iter().enumerate() {
                            let v = load_u64(s, f, 64);
                            if last[i].is_some_and(|w| w != v) {
                                lost.fetch_add(1, Ordering::Relaxed);
                            }
                            store_u64(s, f, 64, round);
                            last[i] = Some(round);
                        }
                    }
                    mine.iter().map(|&f| (f, round)).collect::<Vec<_>>()
                })
            })
            .collect();
        let (toy, evicted, done) = (&toy, &evicted, &done);
        sc.spawn(move || {
            let fs = s.frame_size();
            while evicted.load(Ordering::Relaxed) < target && std::time::Instant::now() < deadline {
                let written = s.take_written().expect("take_written");
                for f in written {
                    let mut img = vec![0u8; fs];
                    s.copy_out(f, 0, &mut img).expect("copy_out");
                    let page = s.page_of(f).expect("assigned").0;
                    toy.saved.lock().expect("saved").insert(page, img);
                }
                for f in first..first + n {
                    if s.evict_clean(f, 1).expect("evict_clean") {
                        evicted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            done.store(true, Ordering::Release);
        });
        writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect()
    });
    let evicted = evicted.load(Ordering::Relaxed);
    eprintln!("{b}: {evicted} evictions raced with the writers");
    assert!(
        evicted > 0,
        "the evictor never evicted: the test raced nothing"
    );
    assert_eq!(
        lost.load(Ordering::Relaxed),
        0,
        "writes were discarded by eviction"
    );
    for (f, round) in finals.into_iter().flatten() {
        assert_eq!(load_u64(s, f, 64), round, "frame {f}");
    }
}

/// An eviction abandoned because part of its block was written leaves the
/// rest of the block tracked: a later write to a page it found clean is
/// still noticed. (With userfaultfd the victim was made read-only and
/// writable again around the check; the pages' own write protection must
/// survive that. With SIGSEGV the frames it claimed are given back.)
pub fn abandoned_eviction_keeps_tracking(b: Backend) {
    let (s, _toy) = space(b);
    s.set_writers(true);
    let f = s.assign(40_000, 2).expect("assign");
    check_frame(&s, f, 40_000);
    assert_eq!(s.take_written().expect("take"), Vec::<FrameNo>::new());
    store(&s, f + 1, 5, 0xEE);
    assert!(!s.evict_clean(f, 2).expect("evict_clean"), "half written");
    assert!(s.is_resident(f) && s.is_resident(f + 1));
    store(&s, f, 7, 0xEE);
    assert_eq!(s.take_written().expect("take"), vec![f, f + 1]);
    assert_eq!((load(&s, f, 7), load(&s, f + 1, 5)), (0xEE, 0xEE));
    // Clean now (as if committed): it goes, and a write after it is not
    // lost either (it lands on the page fetched again).
    assert!(s.evict_clean(f, 2).expect("evict_clean"));
    assert!(!s.is_resident(f) && !s.is_resident(f + 1));
    store(&s, f, 9, 1);
    assert_eq!(s.take_written().expect("take"), vec![f]);
}

/// The reservation is offered a place that is 4 KiB- but not
/// frame-aligned (an address hint just past a 1 MiB boundary of a free
/// area): it must come out aligned to the frame size anyway, and frame
/// addresses and offsets must round-trip.
pub fn reservation_aligned_despite_hint(b: Backend) {
    let mut placed_at_hint = 0;
    for fs in [8192usize, 16384, 65536] {
        for _attempt in 0..5 {
            let area = free_area(4 << 20, 1 << 20);
            let hint = area + 4096;
            let toy = Toy::new();
            let cfg = VmConfig {
                frame_size: fs,
                reserve_bytes: 64 * fs as u64,
                address_hint: hint,
                ..config(b)
            };
            let s = space_with(b, cfg, &toy);
            assert_eq!(
                s.base() % fs,
                0,
                "{b}: base {:#x}, frame size {fs}",
                s.base()
            );
            let f = s.assign(3, 1).expect("assign");
            let g = s.assign(1 << 33, 2).expect("assign run");
            for (fr, page) in [(f, 3), (g, 1 << 33), (g + 1, (1 << 33) + 1)] {
                let a = s.frame_addr(fr);
                assert_eq!(a % fs, 0);
                for off in [0, 8, 4096, fs - 8] {
                    assert_eq!(s.frame_at(a + off), Some(fr));
                }
                assert_eq!(s.page_of(fr).map(|(h, i, _)| h + u64::from(i)), Some(page));
                check_frame(&s, fr, page);
            }
            // Placed where asked (rounded up to the frame size), unless
            // another thread of this process took the area meanwhile.
            if s.base() == hint.next_multiple_of(fs) {
                placed_at_hint += 1;
                break;
            }
        }
    }
    assert!(placed_at_hint > 0, "the address hint was never honoured");
}

/// The start of a free, `align`-aligned area of `len` bytes (mapped and
/// unmapped at once: free unless another thread maps there meanwhile).
fn free_area(len: usize, align: usize) -> usize {
    // SAFETY: a fresh anonymous mapping, unmapped before returning; nothing
    // else refers to it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len + align,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        libc::munmap(p, len + align);
        (p as usize).next_multiple_of(align)
    }
}

/// Child side: with Amber's SIGSEGV handler installed (every backend
/// installs it), a thread that overflows its stack must still be reported
/// by Rust's own handler, which Amber's chains to for addresses outside its
/// reservations (on the thread's alternate signal stack: SA_ONSTACK).
pub fn stack_overflow(b: Backend) {
    let (s, _toy) = space(b);
    let f = s.assign(8, 1).expect("assign");
    assert_eq!(load(&s, f, 0), pattern(8, 0));
    fn deep(n: u64) -> u64 {
        let pad = std::hint::black_box([n; 64]);
        if n == u64::MAX {
            0
        } else {
            deep(n + 1) + pad[7]
        }
    }
    let h = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| deep(0))
        .expect("spawn");
    let v = h.join();
    eprintln!("the recursion returned {v:?}: it should have overflowed");
    std::process::exit(3);
}
