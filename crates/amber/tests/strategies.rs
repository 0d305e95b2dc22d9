//! Update-detection schemes through the public API: each is active at the
//! granularity it promises, all give the same log, and switching between
//! them from one transaction to the next keeps every update.

use amber::{
    CommitStats, Db, Detect, Log, Options, PRef, PString, PVec, Persistent, StoreOptions, Strategy,
    View,
};

#[derive(Persistent)]
#[repr(C)]
struct Part {
    id: u64,
    x: u64,
    y: u64,
    pad: [u64; 13],
    name: PString,
    links: PVec<PRef<Part>>,
}

const SCHEMES: [Detect; 6] = [
    Detect::Pages,
    Detect::Objects,
    Detect::Remsets,
    Detect::Cards { bytes: 16 },
    Detect::Cards { bytes: 256 },
    Detect::Cards { bytes: 4096 },
];

fn opts(detect: Detect) -> Options {
    Options {
        reserve_bytes: 1 << 30,
        strategy: Strategy::detect(detect),
        // One home for every database: a pointer's stored bytes are its
        // persistent address plus the home, so how many bytes a changed
        // pointer changes depends on it (`changed_bytes`, compared across
        // the schemes' databases below).
        store: StoreOptions {
            home: Some(17 << 40),
            ..StoreOptions::default()
        },
        ..Options::default()
    }
}

/// A database of `n` parts in a vector root, committed.
fn build(db: &mut Db, n: u64) -> PRef<Part> {
    let mut tx = db.begin().unwrap();
    let first = tx
        .alloc_with(|tx| {
            Ok(Part {
                id: 0,
                x: 0,
                y: 0,
                pad: [0; 13],
                name: tx.new_string("part 0")?,
                links: tx.new_vec([])?,
            })
        })
        .unwrap();
    let mut prev = first;
    for id in 1..n {
        let p = tx
            .alloc_with(|tx| {
                Ok(Part {
                    id,
                    x: id,
                    y: 0,
                    pad: [id; 13],
                    name: tx.new_string(&format!("part {id}"))?,
                    links: tx.new_vec([])?,
                })
            })
            .unwrap();
        tx.push(prev, |o| &mut o.links, p).unwrap();
        prev = p;
    }
    tx.set_root("first", first).unwrap();
    tx.commit().unwrap();
    first
}

/// The parts in id order: each links to the next (among other links the
/// tests add).
fn parts(db: &Db, first: PRef<Part>) -> Vec<PRef<Part>> {
    let mut out = vec![first];
    loop {
        let last = db.get(*out.last().unwrap());
        let next = db
            .slice(&last.links)
            .iter()
            .find(|&&l| db.get(l).id == last.id + 1);
        match next {
            Some(&n) => out.push(n),
            None => return out,
        }
    }
}

#[test]
fn each_scheme_notes_at_its_granularity() {
    for detect in SCHEMES {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::create(dir.path().join("db"), opts(detect)).unwrap();
        let first = build(&mut db, 50);
        let ps = parts(&db, first);
        // One u64 field of one object.
        let mut tx = db.begin().unwrap();
        *tx.field_mut(ps[20], |p| &p.y) = 7;
        let s = tx.commit().unwrap();
        let object = std::mem::size_of::<Part>() as u64;
        let want = match detect {
            Detect::Pages => 4096,
            Detect::Objects | Detect::Remsets => object,
            Detect::Cards { bytes } => u64::from(bytes),
        };
        assert_eq!(s.noted_bytes, want, "{detect}: bytes noted for one field");
        // A software scheme diffs a sparsely noted page against its
        // barrier's copies; page protection (and a whole noted page) against
        // the committed image.
        let copies = detect.is_software() && want < 4096;
        assert_eq!(s.copy_diffed_blocks, u64::from(copies), "{detect}");
        assert_eq!(s.changed_bytes, 1, "{detect}");
        assert_eq!(db.get(ps[20]).y, 7);
    }
}

/// The database at `path` reopened: per part, its `x`, `pad[pad]`, name
/// and number of links.
fn reopened_state(path: &std::path::Path, pad: usize) -> Vec<(u64, u64, String, usize)> {
    let db = Db::open(path, opts(Detect::Pages)).unwrap();
    parts(&db, db.root("first").unwrap().unwrap())
        .iter()
        .map(|&p| {
            let o = db.get(p);
            (o.x, o.pad[pad], db.str(&o.name).to_string(), o.links.len())
        })
        .collect()
}

/// The same transactions under every scheme: the same log, byte for byte
/// in size, and the same database.
#[test]
fn every_scheme_logs_the_same() {
    let mut logs: Vec<(Detect, Vec<CommitStats>)> = Vec::new();
    let mut states = Vec::new();
    for detect in SCHEMES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut db = Db::create(&path, opts(detect)).unwrap();
        let first = build(&mut db, 200);
        let ps = parts(&db, first);
        let mut stats = Vec::new();
        for round in 0..6u64 {
            let mut tx = db.begin().unwrap();
            for (i, &p) in ps.iter().enumerate() {
                match (i as u64 + round) % 7 {
                    0 => tx.get_mut(p).x += round + 1,
                    1 => *tx.field_mut(p, |o| &o.pad[3]) ^= round,
                    2 => tx
                        .set_str(p, |o| &mut o.name, &format!("{i}/{round}"))
                        .unwrap(),
                    3 if round % 2 == 0 => tx.push(p, |o| &mut o.links, first).unwrap(),
                    4 => {
                        let v = tx.slice_mut(p, |o| &mut o.links);
                        v.reverse();
                    }
                    _ => {}
                }
            }
            stats.push(tx.commit().unwrap());
        }
        drop(db);
        let state = reopened_state(&path, 3);
        assert_eq!(state.len(), 200);
        states.push(state);
        logs.push((detect, stats));
    }
    assert!(
        states.iter().all(|s| *s == states[0]),
        "the schemes left different databases"
    );
    let (base, want) = &logs[0];
    for (detect, got) in &logs[1..] {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                (g.log_bytes, g.minimal_log_bytes, g.changed_bytes),
                (w.log_bytes, w.minimal_log_bytes, w.changed_bytes),
                "commit {i}: {detect} against {base}"
            );
        }
    }
}

/// The log generators: differencing logs the changed bytes, sub-page
/// logging the recorded cards or objects whole, whole-page logging every
/// written page whole; all leave the same database. Whole-page logging
/// still counts the minimal log of its changes, the differencing count.
#[test]
fn log_generators_log_what_they_promise() {
    use amber::internals::wal::{Record, ranges, record::COMMIT_SIZE};
    // One range alone: its record and its entry.
    let (commit, header) = (COMMIT_SIZE as u64, (ranges::RECORD + ranges::ENTRY) as u64);
    let page = Record::Page {
        txid: 1,
        page: 1,
        image: &[0; 4096],
    }
    .encoded_len() as u64;
    let object = std::mem::size_of::<Part>() as u64;
    let cases: [(&str, u64); 6] = [
        ("sd-8", header + 1),
        ("cards-64", header + 1),
        ("sl-64", header + 64),
        ("remsets+sl", header + object),
        ("wpl", page),
        ("cards-16+wpl", page),
    ];
    let (mut states, mut minimal) = (Vec::new(), Vec::new());
    for (name, want) in cases {
        let strategy: Strategy = name.parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut db = Db::create(&path, opts(Detect::Pages)).unwrap();
        let first = build(&mut db, 100);
        let ps = parts(&db, first);
        // One byte of one field: one record of the generator's unit.
        let mut tx = db.begin_with(strategy).unwrap();
        *tx.field_mut(ps[10], |p| &p.pad[5]) ^= 1 << 8;
        let s = tx.commit().unwrap();
        assert_eq!(s.log_bytes, commit + want, "{name}: one field's log");
        if name.ends_with("wpl") {
            assert_eq!(s.minimal_log_bytes, header + 1, "{name}: the minimal log");
        }
        // Then a mixed transaction, and a reopen.
        let mut tx = db.begin_with(strategy).unwrap();
        for (i, &p) in ps.iter().enumerate().step_by(3) {
            tx.get_mut(p).x = 1000 + i as u64;
            tx.set_str(p, |o| &mut o.name, &format!("renamed {i}"))
                .unwrap();
        }
        tx.push(ps[1], |o| &mut o.links, ps[99]).unwrap();
        minimal.push((name, tx.commit().unwrap().minimal_log_bytes));
        drop(db);
        let state = reopened_state(&path, 5);
        assert_eq!(state[10].1, 10 ^ (1 << 8), "{name}");
        states.push(state);
    }
    assert!(
        states.iter().all(|s| *s == states[0]),
        "the log generators left different databases"
    );
    // sd-8 diffs; each whole-page case must count what it found.
    let diffed = minimal[0].1;
    assert!(diffed > header, "{minimal:?}");
    for &(name, m) in minimal.iter().filter(|(n, _)| n.ends_with("wpl")) {
        assert_eq!(m, diffed, "{name}: the mixed transaction's minimal log");
    }
}

/// `auto` runs each transaction under one of its two schemes, tries both
/// when the shape of the transactions changes, and loses no update.
#[test]
fn auto_chooses_per_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts(Detect::Pages)).unwrap();
    let first = build(&mut db, 200);
    let ps = parts(&db, first);
    let mut model: Vec<u64> = (0..200).collect();
    let mut seen = Vec::new();
    for round in 0..60usize {
        // Three shapes: a few parts, every part, every part many times.
        let (every, times) = match round / 20 {
            0 => (37, 1),
            1 => (1, 1),
            _ => (1, 20),
        };
        let mut tx = db.begin_with(Strategy::AUTO).unwrap();
        for _ in 0..times {
            for i in (0..200).step_by(every) {
                *tx.field_mut(ps[i], |o| &o.x) += 1;
                model[i] += 1;
            }
        }
        let s = tx.commit().unwrap();
        assert!(!s.strategy.is_auto(), "the choice made is reported");
        if !seen.contains(&s.strategy) {
            seen.push(s.strategy);
        }
    }
    assert_eq!(seen.len(), 2, "both schemes tried: {seen:?}");
    drop(db);
    let db = Db::open(&path, opts(Detect::Pages)).unwrap();
    for (i, &p) in parts(&db, db.root::<Part>("first").unwrap().unwrap())
        .iter()
        .enumerate()
    {
        assert_eq!(db.get(p).x, model[i], "part {i}");
    }
}

/// After a switch between page protection and a barrier, either way, a
/// transaction that writes one field finds one page written: nothing of
/// the other scheme's records or frame states carries over.
#[test]
fn a_switch_leaves_no_extra_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::create(dir.path().join("db"), opts(Detect::Pages)).unwrap();
    let first = build(&mut db, 300);
    let ps = parts(&db, first);
    for round in 0..6usize {
        for strategy in [Strategy::DEFAULT, Strategy::detect(Detect::Remsets)] {
            // A transaction that writes many pages, then one that writes one.
            let mut tx = db.begin_with(strategy).unwrap();
            for &p in &ps {
                *tx.field_mut(p, |o| &o.y) += 1;
            }
            tx.commit().unwrap();
            let mut tx = db.begin_with(strategy).unwrap();
            *tx.field_mut(ps[round * 7], |o| &o.y) += 1;
            let s = tx.commit().unwrap();
            assert_eq!(s.blocks, 1, "round {round}, {strategy}: {s:?}");
            assert_eq!(s.changed_bytes, 1, "round {round}, {strategy}");
        }
    }
}

/// Alternating schemes from one transaction to the next (and aborting
/// under each) keeps exactly the committed updates.
#[test]
fn switching_schemes_between_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts(Detect::Pages)).unwrap();
    let first = build(&mut db, 100);
    let ps = parts(&db, first);
    let mut model: Vec<u64> = (0..100).collect();
    for round in 0..24usize {
        let detect = match round % 8 {
            6 => Strategy::DEFAULT.with_log(Log::WholePages),
            7 => "sl-32".parse().unwrap(),
            r => Strategy::detect(SCHEMES[r]),
        };
        let mut tx = db.begin_with(detect).unwrap();
        for k in 0..10 {
            let i = (round * 7 + k * 13) % 100;
            tx.get_mut(ps[i]).x += 1;
            if round % 3 != 2 {
                model[i] += 1;
            }
        }
        if round % 3 == 2 {
            tx.abort().unwrap();
        } else {
            tx.commit().unwrap();
        }
        for (i, &p) in ps.iter().enumerate() {
            assert_eq!(db.get(p).x, model[i], "round {round} ({detect}): part {i}");
        }
    }
    assert!(db.stats().detection_switches >= 7);
    drop(db);
    let db = Db::open(&path, opts(Detect::Cards { bytes: 64 })).unwrap();
    for (i, &p) in parts(&db, db.root::<Part>("first").unwrap().unwrap())
        .iter()
        .enumerate()
    {
        assert_eq!(db.get(p).x, model[i], "reopened: part {i}");
    }
}

#[test]
fn bad_strategies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::create(dir.path().join("db"), opts(Detect::Pages)).unwrap();
    let e = db
        .begin_with(Strategy::DEFAULT.with_log(Log::SubPages))
        .expect_err("sub-page logging under page protection");
    assert!(e.to_string().contains("sub-page logging"), "{e}");
    for bytes in [0, 4, 100, 8192] {
        let e = db
            .begin_with(Strategy::detect(Detect::Cards { bytes }))
            .expect_err("refused");
        assert!(e.to_string().contains("card size"), "{e}");
    }
    assert!("cards-32".parse::<Detect>().is_ok());
}
