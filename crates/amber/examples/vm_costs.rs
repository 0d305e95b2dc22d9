//! Median costs of the vm module's events, per fault backend.
//!
//! Run: `cargo run --release -p amber --example vm_costs [pages]`
//!
//! Faults are triggered by plain loads and stores, as a program would, made
//! through the frame space's `Access` (one bounds check each). Not a test:
//! numbers on a shared machine drift, and the ratios between backends are
//! what matter.

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use amber::internals::vm::{
    Access, BackendChoice, FaultError, FaultKind, FaultService, FrameNo, FrameSpace, InstallAs,
    Installer, VmConfig,
};

/// Fills a page with one memcpy from a prepared image; on first write copies
/// the clean page into a preallocated recovery buffer (as QuickStore's PD).
struct Bench {
    image: Vec<u8>,
    recovery: Mutex<Vec<u8>>,
}

impl FaultService for Bench {
    fn missing(&self, frame: FrameNo, inst: &mut Installer<'_>) -> Result<(), FaultError> {
        let (head, idx, len) = inst.space().page_of(frame).ok_or(FaultError::new(
            0,
            FaultKind::Internal,
            "unassigned",
        ))?;
        let n = inst.space().frame_size() * len as usize;
        inst.install(frame - idx, &self.image[..n], InstallAs::Clean)
            .map(|_| ())
            .map_err(|e| FaultError::new(head, FaultKind::Internal, e.to_string()))
    }

    fn first_write(&self, _frame: FrameNo, clean: &[u8]) {
        if let Ok(mut r) = self.recovery.lock() {
            r[..clean.len()].copy_from_slice(clean);
        }
    }
}

/// A load of the byte at `addr`, which faults if its frame is not resident.
fn load(acc: &Access, addr: usize) -> u8 {
    *black_box(acc.obj::<u8>(addr as u64))
}

/// A store to the byte at `addr`, which faults if its frame is not resident
/// or write-protected.
fn store(acc: &mut Access, addr: usize, v: u8) {
    *black_box(acc.obj_mut::<u8>(addr as u64)) = v;
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.2} µs", d.as_nanos() as f64 / 1000.0)
}

struct Row {
    name: String,
    cold_burst: Duration,
    cold_isolated: Duration,
    first_write: Duration,
    scan_per_page: Duration,
    evict_refault: Duration,
    /// `evict_clean` of a clean page and a touch, outside a transaction and
    /// inside one (writers: userfaultfd write-protects the victim first).
    evict_clean_refault: [Duration; 2],
}

fn measure(name: &str, choice: BackendChoice, spin: Duration, pages: u32) -> Option<Row> {
    let fs = 4096;
    let service = Arc::new(Bench {
        image: vec![0xA5; fs * 4],
        recovery: Mutex::new(vec![0; fs * 4]),
    });
    let cfg = VmConfig {
        backend: choice,
        reserve_bytes: 4 << 30,
        service_spin: spin,
        ..VmConfig::default()
    };
    let s = match FrameSpace::new(cfg, service) {
        Ok(s) => s,
        Err(e) => {
            println!("{name}: unavailable: {e}");
            return None;
        }
    };
    let mut acc = Access::take(&s).expect("a new frame space's access");
    let frames: Vec<FrameNo> = (0..u64::from(pages))
        .map(|p| s.assign(p * 2 + 1, 1).expect("assign"))
        .collect();

    // Cold read faults, back to back (a traversal).
    let mut t = Vec::with_capacity(frames.len());
    for &f in &frames {
        let a = s.frame_addr(f);
        let t0 = Instant::now();
        black_box(load(&acc, a));
        t.push(t0.elapsed());
    }
    let cold_burst = median(t);

    // First write to a clean (write-protected) resident page.
    s.take_written().expect("take");
    let mut t = Vec::with_capacity(frames.len());
    for &f in &frames {
        let a = s.frame_addr(f) + 8;
        let t0 = Instant::now();
        store(&mut acc, a, 1);
        t.push(t0.elapsed());
    }
    let first_write = median(t);

    // take_written over all resident pages, one in ten written.
    let mut t = Vec::new();
    for round in 0..21 {
        for &f in frames.iter().skip(round % 10).step_by(10) {
            store(&mut acc, s.frame_addr(f), 2);
        }
        let t0 = Instant::now();
        let w = s.take_written().expect("take");
        t.push(t0.elapsed() / pages);
        black_box(w);
    }
    let scan_per_page = median(t);

    // Evict one page and touch it again.
    let mut t = Vec::with_capacity(frames.len());
    for &f in &frames {
        let a = s.frame_addr(f);
        let t0 = Instant::now();
        s.evict(f, 1).expect("evict");
        black_box(load(&acc, a));
        t.push(t0.elapsed());
    }
    let evict_refault = median(t);

    // The same through evict_clean (the pager's eviction), without and
    // with threads that may be writing.
    let mut evict_clean_refault = [Duration::ZERO; 2];
    for (i, writers) in [false, true].into_iter().enumerate() {
        s.set_writers(writers);
        s.take_written().expect("take");
        let mut t = Vec::with_capacity(frames.len());
        for &f in &frames {
            let a = s.frame_addr(f);
            let t0 = Instant::now();
            assert!(s.evict_clean(f, 1).expect("evict_clean"));
            black_box(load(&acc, a));
            t.push(t0.elapsed());
        }
        evict_clean_refault[i] = median(t);
    }

    // Isolated cold faults: the program was idle (1 ms) before each one.
    let mut t = Vec::new();
    for &f in frames.iter().take(200) {
        s.evict(f, 1).expect("evict");
        std::thread::sleep(Duration::from_millis(1));
        let a = s.frame_addr(f);
        let t0 = Instant::now();
        black_box(load(&acc, a));
        t.push(t0.elapsed());
    }
    let cold_isolated = median(t);

    Some(Row {
        name: name.to_string(),
        cold_burst,
        cold_isolated,
        first_write,
        scan_per_page,
        evict_refault,
        evict_clean_refault,
    })
}

fn main() {
    let pages: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4000);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.to_string())
        })
        .unwrap_or_default();
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "vm_costs: {pages} pages of 4 KiB; Linux {}; {ncpu} CPUs; {cpu}",
        kernel.trim()
    );
    let configs: [(&str, BackendChoice, Duration); 6] = [
        (
            "sigsegv, service blocking",
            BackendChoice::Sigsegv,
            Duration::ZERO,
        ),
        (
            "sigsegv, spin 200 µs then block (default)",
            BackendChoice::Sigsegv,
            Duration::from_micros(200),
        ),
        (
            "sigsegv, always spinning",
            BackendChoice::Sigsegv,
            Duration::MAX,
        ),
        ("uffd, blocking read", BackendChoice::Uffd, Duration::ZERO),
        (
            "uffd, spin 200 µs then block (default)",
            BackendChoice::Uffd,
            Duration::from_micros(200),
        ),
        ("uffd, always spinning", BackendChoice::Uffd, Duration::MAX),
    ];
    let rows: Vec<Row> = configs
        .iter()
        .filter_map(|&(n, c, s)| measure(n, c, s, pages))
        .collect();
    println!(
        "{:<44} {:>11} {:>11} {:>10} {:>15} {:>14} {:>14} {:>14}",
        "backend",
        "cold fault",
        "cold, idle",
        "1st write",
        "take_written/pg",
        "evict+refault",
        "evict_clean+rf",
        "…, writers"
    );
    for r in rows {
        println!(
            "{:<44} {:>11} {:>11} {:>10} {:>15} {:>14} {:>14} {:>14}",
            r.name,
            us(r.cold_burst),
            us(r.cold_isolated),
            us(r.first_write),
            format!("{} ns", r.scan_per_page.as_nanos()),
            us(r.evict_refault),
            us(r.evict_clean_refault[0]),
            us(r.evict_clean_refault[1])
        );
    }
}
