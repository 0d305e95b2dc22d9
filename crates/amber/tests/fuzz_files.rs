//! The whole-file fuzz targets on the stable toolchain: the seed databases
//! (4, 8 and 16 KiB pages, cleanly closed and crashed with commits in the
//! log), then mutated ones, opened and read back, deep-verified and
//! recovered (`fuzz_common`). None may panic, abort, hang or allocate more
//! than `fuzz_common::cap_of` allows; without resealed checksums, every
//! node read back must be one that was committed.

mod fuzz_common;

use amber::Db;
use amber::internals::fuzzing::{
    BESIDE_TARGETS, Bundle, Content, DECODER_TARGETS, FILE_TARGETS, file_targets, seeds,
};
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
    let (mut n, mut version_2) = (0, 0);
    for (_, data) in seeds_of {
        let b = Bundle::decode(data);
        if b.log[8..12] == 2u32.to_le_bytes() {
            version_2 += 1;
        }
        let vfs: Arc<dyn Vfs> = Arc::new(b.materialize());
        let db = Db::open_with(vfs, seeds::db_path(), seeds::options(b.page_size()))
            .expect("a seed opens");
        assert_eq!(Nodes::read(&db, true), 1 + 2 * NODES as usize);
        n += 1;
    }
    assert_eq!(
        (n, version_2),
        (7, 1),
        "4, 8 and 16 KiB pages, closed and crashed, and a crashed one with a version-2 log"
    );
}

/// The seeds collect and migrate whole (so that `migrate_collect`'s
/// mutated runs start from databases where both rewrites succeed): every
/// node kept, then read back through the next version's types.
#[test]
fn seeds_collect_and_migrate_whole() {
    for b in seeds::cached::<Nodes>() {
        let vfs: Arc<dyn Vfs> = Arc::new(b.materialize());
        let db = Db::open_with(vfs, seeds::db_path(), seeds::options(b.page_size()))
            .expect("a seed opens");
        let (db, stats) = db.collect().expect("a seed collects");
        assert!(stats.objects_live > 2 * NODES, "{stats:?}");
        assert_eq!(Nodes::read(&db, true), 1 + 2 * NODES as usize);
        let m = Nodes::migration().expect("the next version");
        let (db, stats) = db.migrate(&m).expect("a seed migrates");
        assert!(stats.rewritten, "{stats:?}");
        assert_eq!(Nodes::read_next(&db, true), 1 + 2 * NODES as usize);
    }
}

/// Every target has seeds, the block targets from each page size; with
/// `AMBER_FUZZ_CORPUS=DIR` they are written to `DIR/TARGET/seed-N`, the
/// cargo-fuzz corpus (`fuzz/corpus` is where `cargo fuzz run` looks).
#[test]
fn seed_corpus() {
    let names = DECODER_TARGETS
        .iter()
        .map(|(n, _)| *n)
        .chain(FILE_TARGETS)
        .chain(BESIDE_TARGETS);
    for name in names {
        let n = corpus().iter().filter(|(t, _)| *t == name).count();
        assert!(n > 0, "no seeds for {name}");
    }
    for code in 0..3u8 {
        let pages = corpus()
            .iter()
            .filter(|(t, s)| *t == "page" && s.first() == Some(&code))
            .count();
        assert!(pages > 4, "{pages} page seeds of page size code {code}");
    }
    let Some(dir) = std::env::var_os("AMBER_FUZZ_CORPUS") else {
        return;
    };
    for (i, (target, input)) in corpus().iter().enumerate() {
        let d = std::path::Path::new(&dir).join(target);
        std::fs::create_dir_all(&d).expect("the corpus directory");
        std::fs::write(d.join(format!("seed-{i:04}")), input).expect("a seed written");
    }
}

#[test]
fn open_and_read() {
    target("open_and_read", 1000);
}

#[test]
fn verify_deep() {
    target("verify_deep", 1000);
}

#[test]
fn recovery() {
    target("recovery", 1000);
}

#[test]
fn migrate_collect() {
    target("migrate_collect", 200);
}
