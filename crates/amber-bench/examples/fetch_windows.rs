//! Cold OO1 operations under fixed fetch windows and the adaptive one: the
//! table of docs/design.md, 4.3.
//!
//! Build an OO1 database with `amber bench oo1 --dir D --engines amber
//! [--parts N]`, then
//!
//! ```text
//! cargo run --release -p amber-bench --example fetch_windows -- D/amber/base/oo1.amber N [RUNS]
//! ```
//!
//! For each setting, each run opens the database afresh in this process
//! (its files in the OS page cache) and times one operation: a traversal
//! from a random part, a batch of 1,000 random lookups, or the opening
//! itself with one lookup. Prints the median and the range of the times and
//! the faults and blocks fetched of the last run. The fault backend is
//! Amber's choice, or `AMBER_FAULT_BACKEND=uffd|sigsegv`.

use std::time::Instant;

use amber::{Db, Options, PRef};
use amber_bench::oo1::amber_engine::schema::{CHUNK, Part, ROOT, Root};
use amber_bench::rng::Rng;

fn find(db: &Db, root: PRef<Root>, id: u64) -> Option<PRef<Part>> {
    let i = usize::try_from(id.checked_sub(1)?).ok()?;
    let chunks = db.slice(&db.get(root).chunks);
    db.get(*chunks.get(i / CHUNK)?).parts[i % CHUNK]
}

fn walk(db: &Db, p: PRef<Part>, depth: u32, sum: &mut u64) {
    let part = db.get(p);
    *sum += u64::from(part.id);
    if depth < 7 {
        for to in part.out.iter().filter_map(|o| o.to) {
            walk(db, to, depth + 1, sum);
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Traversal,
    Lookup,
    OpenLookup,
}

/// (ms, faults, fetched) of one run.
fn run(path: &str, opts: &Options, op: Op, ids: &[u64]) -> Result<(f64, u64, u64), String> {
    let t0 = Instant::now();
    let db = Db::open(path, opts.clone()).map_err(|e| e.to_string())?;
    let root: PRef<Root> = db
        .root(ROOT)
        .map_err(|e| e.to_string())?
        .ok_or("no OO1 root")?;
    let t1 = Instant::now();
    let s0 = db.stats();
    let missing = |id| format!("no part {id}");
    let mut sum = 0u64;
    match op {
        Op::Traversal => walk(
            &db,
            find(&db, root, ids[0]).ok_or(missing(ids[0]))?,
            0,
            &mut sum,
        ),
        Op::Lookup => {
            for &id in ids {
                sum += u64::from(db.get(find(&db, root, id).ok_or(missing(id))?).id);
            }
        }
        Op::OpenLookup => {
            sum += u64::from(db.get(find(&db, root, ids[0]).ok_or(missing(ids[0]))?).id)
        }
    }
    let end = Instant::now();
    std::hint::black_box(sum);
    let s1 = db.stats();
    let from = if op == Op::OpenLookup { t0 } else { t1 };
    let ms = (end - from).as_secs_f64() * 1e3;
    db.close().map_err(|e| e.to_string())?;
    Ok((ms, s1.faults - s0.faults, s1.fetched - s0.fetched))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: fetch_windows DB PARTS [RUNS]";
    let path = args.get(1).ok_or(usage)?;
    let parts: u64 = args.get(2).ok_or(usage)?.parse().map_err(|_| usage)?;
    let runs: usize = args
        .get(3)
        .map_or(Ok(21), |r| r.parse().map_err(|_| usage))?;
    let settings: Vec<(String, Options)> = [1, 8, 16, 64]
        .iter()
        .map(|&n| {
            let o = Options {
                fetch_cluster: n,
                fetch_adaptive: false,
                ..Options::default()
            };
            (format!("fixed {n}"), o)
        })
        .chain(std::iter::once((
            "adaptive".to_string(),
            Options::default(),
        )))
        .collect();
    let ops = [
        ("traversal", Op::Traversal),
        ("lookup", Op::Lookup),
        ("open+lookup", Op::OpenLookup),
    ];
    println!("{path}: {parts} parts, {runs} runs; ms median [min-max], faults, fetched");
    for (name, op) in ops {
        for (setting, opts) in &settings {
            let mut rng = Rng::seed_from_u64(1992);
            let mut times = Vec::with_capacity(runs);
            let mut last = (0, 0);
            for _ in 0..runs {
                let ids: Vec<u64> = (0..1000).map(|_| rng.below(parts) + 1).collect();
                let (ms, faults, fetched) = run(path, opts, op, &ids)?;
                times.push(ms);
                last = (faults, fetched);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "{name:12} {setting:9} {:8.3} [{:.3}-{:.3}] {:6} {:6}",
                times[times.len() / 2],
                times[0],
                times[times.len() - 1],
                last.0,
                last.1
            );
        }
    }
    Ok(())
}
