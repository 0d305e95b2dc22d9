//! The decoder fuzz targets on the stable toolchain: each target's seeds
//! from real databases (4, 8 and 16 KiB pages), then mutated inputs
//! (`fuzz_common`), none of which may panic, abort, hang or allocate more
//! than `fuzz_common::cap_of` allows. The reader table and schema file
//! targets decode their file beside a seed database, as it is.

mod fuzz_common;

use amber::internals::fuzzing::{DECODER_TARGETS, beside_targets};
use fuzz_common::content::Nodes;
use fuzz_common::{Counting, iterations, run};

#[global_allocator]
static ALLOC: Counting = Counting;

fn target(name: &str, default: u64) {
    let (_, t) = DECODER_TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a decoder target");
    run(name, *t, iterations(default));
}

fn beside(name: &str, default: u64) {
    let (_, t) = beside_targets::<Nodes>()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a target beside a database");
    run(name, t, iterations(default));
}

#[test]
fn superblock() {
    target("superblock", 20_000);
}

#[test]
fn log_header() {
    target("log_header", 20_000);
}

#[test]
fn log_records() {
    target("log_records", 3_000);
}

#[test]
fn page() {
    target("page", 5_000);
}

#[test]
fn catalog_entry() {
    target("catalog_entry", 20_000);
}

#[test]
fn catalog_blob() {
    target("catalog_blob", 10_000);
}

#[test]
fn free_space_map() {
    target("free_space_map", 20_000);
}

#[test]
fn root_directory() {
    target("root_directory", 20_000);
}

#[test]
fn swizzle() {
    target("swizzle", 5_000);
}

/// The wire protocol's decoder (a server's and a client's), on one
/// message of every kind, mutated.
#[test]
fn wire_decode() {
    target("wire_decode", 20_000);
}

#[test]
fn reader_table() {
    beside("reader_table", 300);
}

#[test]
fn schema_file() {
    beside("schema_file", 300);
}

/// The schema file target's seeds reach a migration that rewrites: the
/// content's next version, loaded from its schema file, migrates every
/// seed database, and the nodes read back through the next version's
/// types hold their values (the array renamed, the new field zero).
#[test]
fn the_schema_seeds_migrate_the_seed_databases() {
    use amber::internals::fuzzing::{Content, seeds};
    use amber::internals::io::{OpenMode, Vfs};
    use amber::{Db, Migration, PRef, View};
    use fuzz_common::content::{self, next};
    use std::path::Path;
    use std::sync::Arc;

    let schema = Path::new("/next.schema");
    for seed in seeds::cached::<Nodes>() {
        let vfs = seed.materialize();
        Nodes::migration()
            .and_then(|m| m.save_with(&vfs, schema))
            .expect("saved");
        let m = Migration::load_with(&vfs, schema).expect("loaded");
        let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
        let stats = m
            .run_file_with(v.clone(), seeds::db_path())
            .expect("migrated");
        assert!(stats.rewritten, "{stats:?}");
        let db =
            Db::open_with(v, seeds::db_path(), seeds::options(seed.page_size())).expect("opens");
        let top: PRef<next::Top> = db.root(content::ROOT).expect("root").expect("a root");
        let mut n = 0;
        let mut at = db.get(top).head;
        while let Some(p) = at {
            let node = db.get(p);
            assert_eq!(node.labels, content::tags(node.id, node.ver));
            assert_eq!(node.extra, 0);
            assert_eq!(db.str(&node.name), content::name(node.id, node.ver));
            n += 1;
            at = node.next;
        }
        assert_eq!(n, content::NODES);
        assert!(!db.verify_deep().expect("verified").is_damaged());
        // The schema file is where the target's seeds have it.
        assert!(vfs.open(schema, OpenMode::ReadOnly).is_ok());
    }
}
