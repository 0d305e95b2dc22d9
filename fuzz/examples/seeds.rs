//! Writes the seed corpus of every target: `cargo run --release --example
//! seeds [DIR]` (default `corpus/`, beside this crate's Cargo.toml), one
//! directory per target. The seed databases are written through Amber's
//! API at 4, 8 and 16 KiB pages, closed and crashed
//! (`amber::internals::fuzzing::seed_corpus`); each run makes new database
//! ids, so the files differ from run to run but not in kind.

use amber::internals::fuzzing::seed_corpus;
use amber_fuzz::content::Nodes;
use std::path::PathBuf;

fn main() -> amber::Result<()> {
    let dir = std::env::args().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        PathBuf::from,
    );
    let mut n = 0;
    for (i, (target, input)) in seed_corpus::<Nodes>()?.into_iter().enumerate() {
        let d = dir.join(target);
        let write = std::fs::create_dir_all(&d)
            .and_then(|()| std::fs::write(d.join(format!("seed-{i:04}")), &input));
        if let Err(e) = write {
            eprintln!("cannot write the corpus in {}: {e}", d.display());
            std::process::exit(1);
        }
        n += 1;
    }
    println!("{n} seeds in {}", dir.display());
    Ok(())
}
