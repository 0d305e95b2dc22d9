//! Real processes: a child commits transactions on real files and reports
//! each commit on stdout; the parent kills it with SIGKILL at random instants
//! (mid-commit, mid-checkpoint) and checks that every transaction the child
//! reported is present and nothing beyond the one in flight.
//!
//! The child is this test binary re-run with `AMBER_KILL_DIR` set; a round
//! fails unless the child reported a new commit and died of the kill
//! (`killer`).

mod killer;

use amber::internals::format::page::{BlockKind, HEADER_SIZE};
use amber::internals::io::Vfs;
use amber::internals::io::crash::SplitMix;
use amber::internals::io::real::RealVfs;
use amber::internals::store::{Store, StoreOptions};
use killer::kill_after_commits;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const SLOTS: u64 = 512;
const PER_BLOCK: u64 = 64;

fn opts() -> StoreOptions {
    StoreOptions {
        // Checkpoints every few dozen commits, so kills land in them too.
        checkpoint_log_bytes: 16 << 10,
        ..StoreOptions::default()
    }
}

fn open_or_create(p: &Path) -> Store {
    let v: Arc<dyn Vfs> = Arc::new(RealVfs);
    if p.exists() {
        return Store::open(v, p, opts()).expect("open");
    }
    let s = Store::create(v, p, opts()).expect("create");
    let mut tx = s.begin().expect("begin");
    // One contiguous run: the counter's page, then the slots' pages.
    let first = tx
        .alloc(1 + (SLOTS / PER_BLOCK) as u32, BlockKind::Raw)
        .expect("alloc");
    tx.set_root(
        "counter",
        first * s.page_size() as u64 + HEADER_SIZE as u64,
        0,
    )
    .expect("root");
    tx.commit().expect("commit");
    s
}

fn counter_addr(s: &Store) -> u64 {
    s.root("counter").expect("root").addr
}

fn slot_addr(s: &Store, slot: u64) -> u64 {
    let first = counter_addr(s) / s.page_size() as u64;
    let block = first + 1 + slot / PER_BLOCK;
    block * s.page_size() as u64 + HEADER_SIZE as u64 + (slot % PER_BLOCK) * 8
}

fn read_u64(s: &Store, addr: u64) -> u64 {
    let ps = s.page_size() as u64;
    let (head, _) = s.block_of(addr / ps).expect("allocated");
    let b = s.read_block(head).expect("read");
    let o = (addr - head * ps) as usize;
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

#[test]
fn child_writer() {
    let Ok(dir) = std::env::var("AMBER_KILL_DIR") else {
        return;
    };
    let p = Path::new(&dir).join("db");
    let s = open_or_create(&p);
    let mut n = read_u64(&s, counter_addr(&s));
    let out = std::io::stdout();
    loop {
        n += 1;
        let mut tx = s.begin().expect("begin");
        tx.write(slot_addr(&s, n % SLOTS), &n.to_le_bytes())
            .expect("write");
        // Some filler, so the log grows and checkpoints come round.
        tx.write(slot_addr(&s, (n * 7) % SLOTS), &n.to_le_bytes())
            .expect("write");
        tx.write(counter_addr(&s), &n.to_le_bytes()).expect("write");
        tx.commit().expect("commit");
        let mut o = out.lock();
        writeln!(o, "committed {n}").expect("stdout");
        o.flush().expect("flush");
    }
}

#[test]
fn sigkill_during_commits() {
    let rounds: u64 = std::env::var("AMBER_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let p = dir.path().join("db");
    let exe = std::env::current_exe().expect("exe");
    let mut rng = SplitMix::new(0x5eed);
    let mut last = 0u64;
    let mut in_flight_kept = 0;
    let err = dir.path().join("child.err");
    for round in 0..rounds {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--exact",
            "child_writer",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("AMBER_KILL_DIR", dir.path());
        let want = 1 + rng.below(40);
        let delay = Duration::from_micros(rng.below(3000));
        let reported = kill_after_commits(&mut cmd, want, delay, &err, round);
        assert!(
            reported > last,
            "round {round}: the child reported commit {reported}, no progress past {last}"
        );
        last = reported;
        let s = open_or_create(&p);
        let c = read_u64(&s, counter_addr(&s));
        assert!(
            c == last || c == last + 1,
            "round {round}: the child reported commit {last}, the database holds {c}"
        );
        for slot in 0..SLOTS {
            let got = read_u64(&s, slot_addr(&s, slot));
            // The latest transaction that wrote this slot (as the primary or
            // the filler write).
            let want = (1..=c)
                .rev()
                .find(|m| m % SLOTS == slot || (m * 7) % SLOTS == slot)
                .unwrap_or(0);
            assert_eq!(got, want, "round {round}: slot {slot} after commit {c}");
        }
        in_flight_kept += u64::from(c == last + 1);
        last = c;
        drop(s);
    }
    eprintln!(
        "{rounds} kills, {last} commits, {in_flight_kept} kills after an unreported durable commit"
    );
    let rep = amber::internals::store::verify::verify(Arc::new(RealVfs), &p).expect("verify runs");
    assert!(rep.is_ok(), "{:?}", rep.problems);
}
