//! The whole-file fuzz targets on the stable toolchain: the seed databases
//! (4, 8 and 16 KiB pages, cleanly closed and crashed with commits in the
//! log), then mutated ones, opened and read back, deep-verified and
//! recovered (`fuzz_common`). None may panic, abort, hang or allocate more
//! than `fuzz_common::cap_of` allows; without resealed checksums, every
//! node read back must be one that was committed.

mod fuzz_common;

use amber::Db;
use amber::internals::fuzzing::{Bundle, Content, FILE_TARGETS, file_targets, seeds};
use amber::internals::io::Vfs;
use fuzz_common::content::{NODES, Nodes};
use fuzz_common::{Counting, corpus, iterations, run};
use std::sync::Arc;

#[global_allocator]
static ALLOC: Counting = Counting;

fn target(name: &str, default: u64) {
    let (_, t) = file_targets::<Nodes>()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a whole-file target");
    run(name, t, iterations(default));
}

/// The seeds themselves read back whole: the root, and every node with its
/// string and vector through the list and again through the index (so the
/// mutated runs start from databases where every read path is taken).
#[test]
fn seeds_read_back_whole() {
    let seeds_of = corpus().iter().filter(|(t, _)| *t == FILE_TARGETS[0]);
    let mut n = 0;
    for (_, data) in seeds_of {
        let b = Bundle::decode(data);
        let vfs: Arc<dyn Vfs> = Arc::new(b.materialize());
        let db = Db::open_with(vfs, seeds::db_path(), seeds::options(b.page_size()))
            .expect("a seed opens");
        assert_eq!(Nodes::read(&db, true), 1 + 2 * NODES as usize);
        n += 1;
    }
    assert_eq!(n, 6, "4, 8 and 16 KiB pages, closed and crashed");
}

#[test]
fn open_and_read() {
    target("open_and_read", 400);
}

#[test]
fn verify_deep() {
    target("verify_deep", 400);
}

#[test]
fn recovery() {
    target("recovery", 400);
}
