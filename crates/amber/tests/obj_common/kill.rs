//! Crashes through the public API: a child process (this test binary run
//! again) mutates the graph of `graph.rs` on real files and prints
//! `committed N` after each commit returns; the parent kills it with
//! SIGKILL at random instants (mid-transaction, mid-commit, mid-checkpoint,
//! during early logging) and reopens the database: it must hold exactly the
//! state after commit N, or after N + 1 (the commit in flight may have
//! become durable before the child could print it).
//!
//! Transaction N's operations are a function of N and the state after
//! N - 1 (`step`), so the parent replays them on its model; deep
//! verification (`Db::verify_deep`) then checks every pointer of every
//! object, after every round. The child runs with a small cache budget,
//! frequent checkpoints and (SIGSEGV) a small recovery buffer, so that
//! kills land in every path; it also aborts a transaction now and then,
//! and follows every lazy pointer before and after each commit (so that
//! the pages committed hold fields swizzled upon discovery).
//!
//! `AMBER_OBJ_KILLS=N` sets the number of kills (default 50; 200 with
//! `AMBER_OBJ_LONG`).

use super::Cfg;
use super::graph::{GRoot, Model, Op, apply_db, create_root, diff, follow_lazy, refs, root_of};
use super::killer::kill_after_commits;
use super::{check_backend, child_command, child_dir, child_scenario, env_num, long, open, opts};
use amber::internals::io::crash::SplitMix;
use amber::{Db, Options, PRef};
use std::io::Write;
use std::time::Duration;

const MAX_NODES: usize = 80;

/// Transaction `n`'s operations, planned on (and applied to) `model`, which
/// holds the state after transaction `n - 1`.
pub fn step(n: u64, model: &mut Model) -> Vec<Op> {
    let mut rng = SplitMix::new(0x6b11_0000 ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let k = if n == 1 {
        20
    } else {
        1 + rng.below(10) as usize
    };
    let mut ops = if n == 1 {
        (0..k).map(|_| Op::Alloc(None)).collect::<Vec<_>>()
    } else {
        model.plan(&mut rng, k, MAX_NODES)
    };
    if n == 1 {
        ops.iter().for_each(|op| model.apply(op));
    }
    model.apply(&Op::Commit);
    ops.push(Op::Commit);
    ops
}

/// The model after `c` transactions.
pub fn advance(model: &mut Model, c: u64) {
    while model.commits < c {
        let n = model.commits + 1;
        step(n, model);
    }
}

fn child_options(b: Cfg) -> Options {
    let mut o = super::cached(b, 64 << 10);
    if matches!(
        b.backend,
        amber::BackendChoice::MappedUnverified | amber::BackendChoice::Mapped
    ) {
        // It serves no cache budget: each child, a fresh process with the
        // home free, is then served by it.
        o.cache_bytes = None;
    }
    o.recovery_buffer_pages = 4;
    o.store.checkpoint_log_bytes = 48 << 10;
    o
}

/// The child: commits forever, reporting each commit.
fn child(b: Cfg) {
    commit_forever(b, child_options(b), |db| db);
}

/// Opens (or creates) the child's database with `o`, then commits forever,
/// reporting each commit and handing the database to `after` after each
/// (the collection's kill test collects there).
pub fn commit_forever(b: Cfg, options: Options, mut after: impl FnMut(Db) -> Db) {
    let path = child_dir().join("db");
    let mut db = if path.exists() {
        open(&path, options)
    } else {
        let mut db = Db::create(&path, options).expect("create");
        create_root(&mut db);
        db
    };
    check_backend(&db, b);
    let mut root = root_of(&db).expect("root");
    let mut model = Model::default();
    advance(&mut model, db.get(root).commits);
    let out = std::io::stdout();
    {
        let mut o = out.lock();
        writeln!(o, "committed {}", model.commits).expect("stdout");
        o.flush().expect("flush");
    }
    loop {
        let n = model.commits + 1;
        let mut side = SplitMix::new(n ^ 0xab);
        if side.below(6) == 0 {
            // A transaction that aborts: nothing of it may survive.
            let mut scratch = model.clone();
            let k = 1 + side.below(8) as usize;
            let ops = scratch.plan(&mut side, k, MAX_NODES);
            let mut tx = db.begin().expect("begin");
            let mut r = refs(&tx, root);
            for op in &ops {
                apply_db(&mut tx, root, &mut r, op).expect("apply");
            }
            tx.abort().expect("abort");
        }
        let mut next = model.clone();
        let ops = step(n, &mut next);
        let mut tx = db.begin().expect("begin");
        let mut r = refs(&tx, root);
        for op in &ops {
            apply_db(&mut tx, root, &mut r, op).expect("apply");
        }
        // Lazy fields swizzled in the pages being committed (and, below,
        // between transactions): a kill must find them stored unswizzled.
        follow_lazy(&tx, root);
        tx.commit().expect("commit");
        follow_lazy(&db, root);
        model = next;
        {
            let mut o = out.lock();
            writeln!(o, "committed {n}").expect("stdout");
            o.flush().expect("flush");
        }
        db = after(db);
        // A collection moves objects: the root is read again.
        root = root_of(&db).expect("root");
    }
}

/// Kills the child at random instants and checks the database each time.
pub fn run(b: Cfg, test: &str) {
    if child_scenario().as_deref() == Some("kill") {
        child(b);
        return;
    }
    let rounds = env_num("AMBER_OBJ_KILLS", if long() { 200 } else { 50 });
    let mut k = Rounds::new(0x4b1_11ed);
    let mut model = Model::default();
    let mut in_flight = 0;
    for round in 0..rounds {
        let (db, root, flight) = k.next(b, test, "kill", round);
        let got = k.last;
        in_flight += u64::from(flight);
        advance(&mut model, got);
        if let Err(d) = diff(&db, root, &model) {
            panic!("round {round}, after commit {got}: {d}");
        }
        // Every pointer of every object: the model comparison reads only
        // what the model knows (not spare capacity, free slots, index
        // nodes' structure), and pointers that land on the wrong object can
        // still compare equal by chance.
        let deep = db.verify_deep().expect("deep verification runs");
        assert!(
            deep.is_clean(),
            "round {round}, after commit {got}: deep verification: {:#?}",
            deep.findings
        );
        if round % 2 == 0 {
            db.close().expect("close");
        } else {
            drop(db);
        }
    }
    eprintln!(
        "kill test ({b:?}): {rounds} kills, {} commits, {in_flight} kills after an unreported durable commit",
        k.last
    );
    let rep = amber::internals::store::verify::verify(
        std::sync::Arc::new(amber::internals::io::real::RealVfs),
        &k.path,
    )
    .expect("verify runs");
    assert!(rep.is_ok(), "{:?}", rep.problems);
    let deep = amber::inspect::verify_deep(&k.path).expect("deep verification runs");
    assert!(deep.is_clean(), "{:#?}", deep.findings);
    eprintln!(
        "kill test ({b:?}): the last deep verification checked {} pointers of {} objects",
        deep.pointers, deep.objects
    );
}

/// The rounds of a kill test on the graph: each runs the child (this test
/// binary, for a scenario) until it has reported a random number of
/// commits, kills it at a random instant after that, and reopens the
/// database, which must hold the commit the child reported last or the
/// one after it (in flight when it died).
pub struct Rounds {
    pub dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
    err_path: std::path::PathBuf,
    rng: SplitMix,
    /// The commit the database held at the last reopening.
    pub last: u64,
}

impl Rounds {
    /// A fresh directory; `seed` draws the rounds' commits and delays.
    pub fn new(seed: u64) -> Rounds {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        Rounds {
            path: dir.path().join("db"),
            err_path: dir.path().join("child.err"),
            dir,
            rng: SplitMix::new(seed),
            last: 0,
        }
    }

    /// Round `round` of test `test` with the child of `scenario`: the
    /// database reopened, its root, and whether it held the commit in
    /// flight.
    pub fn next(
        &mut self,
        b: Cfg,
        test: &str,
        scenario: &str,
        round: u64,
    ) -> (Db, PRef<GRoot>, bool) {
        let want = 1 + self.rng.below(25);
        let delay = Duration::from_micros(self.rng.below(4000));
        let mut cmd = child_command(test, scenario, self.dir.path());
        let reported = kill_after_commits(&mut cmd, want, delay, &self.err_path, round);
        let db = open(&self.path, opts(b));
        let root = root_of(&db).expect("root");
        let got = db.get(root).commits;
        assert!(
            got == reported || got == reported + 1,
            "round {round}: the child reported commit {reported}, the database holds {got}"
        );
        self.last = got;
        (db, root, got == reported + 1)
    }
}
