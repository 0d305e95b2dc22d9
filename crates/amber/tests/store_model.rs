//! Property test: random transactions (writes, whole pages, allocations,
//! frees, roots, types, early logging, commits, aborts, checkpoints,
//! reopenings) against an in-memory model; after every step (and the
//! automatic checkpoint it triggered) the store reads back what the model
//! says.

mod common;

use amber::internals::io::Vfs;
use amber::internals::io::crash::{CrashVfs, SplitMix};
use amber::internals::store::{Store, StoreOptions};
use common::{Model, random_tx};
use std::path::Path;
use std::sync::Arc;

fn small_opts() -> StoreOptions {
    // Tiny limits so that automatic checkpoints happen often.
    StoreOptions {
        checkpoint_log_bytes: 20_000,
        checkpoint_pending_bytes: 64 << 10,
        ..StoreOptions::default()
    }
}

#[test]
fn random_transactions_match_the_model() {
    let seeds: u64 = std::env::var("AMBER_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    for seed in 0..seeds {
        let vfs: Arc<dyn Vfs> = Arc::new(CrashVfs::new());
        let p = Path::new("/db");
        let mut rng = SplitMix::new(seed);
        let mut s = Store::create(vfs.clone(), p, small_opts()).unwrap();
        let mut model = Model::default();
        let mut in_flight = None;
        for step in 0..60 {
            match rng.below(20) {
                0 => {
                    s.checkpoint().unwrap();
                }
                1 => {
                    drop(s);
                    s = Store::open(vfs.clone(), p, small_opts()).unwrap();
                }
                2 => {
                    s.close().unwrap();
                    s = Store::open(vfs.clone(), p, small_opts()).unwrap();
                    assert_eq!(
                        s.recovery_report().records,
                        0,
                        "clean close leaves an empty log"
                    );
                }
                _ => model = random_tx(&s, &model, &mut rng, &mut in_flight).unwrap(),
            }
            // An automatic checkpoint may be running on the checkpointer
            // thread; its new metadata blobs are allocated blocks until it
            // ends, which the comparison of allocated blocks would count.
            s.wait_for_checkpointer();
            if let Some(d) = model.diff(&s) {
                panic!("seed {seed} step {step}: {d}");
            }
        }
        s.close().unwrap();
        let rep = amber::internals::store::verify::verify(vfs.clone(), p).unwrap();
        assert!(rep.is_ok(), "seed {seed}: verify: {:?}", rep.problems);
    }
}
