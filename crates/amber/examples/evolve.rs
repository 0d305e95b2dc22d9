//! Schema evolution, as a program that changes its types meets it: version
//! 1 of a parts library writes a database; version 2 has reordered,
//! renamed, retyped and added fields, is refused with an error naming the
//! change, and migrates the database — once: the next start finds nothing
//! to do.
//!
//! `cargo run --release -p amber --example evolve [PARTS]` (default
//! 100,000). It prints the plan, the migration's time and what it kept,
//! and checks every part afterwards.

use amber::{Db, Migration, Options, PRef, PString, PVec, Persistent, Result, View};
use std::time::Instant;

/// Version 1's types.
mod v1 {
    use super::*;

    #[derive(Persistent)]
    #[repr(C)]
    pub struct Library {
        pub parts: PVec<PRef<Part>>,
    }

    #[derive(Persistent)]
    #[repr(C)]
    pub struct Part {
        pub id: u32,
        pub x: u32,
        pub name: PString,
        pub next: Option<PRef<Part>>,
    }
}

/// Version 2's: `id` widened to u64 (a conversion), `x` renamed `x_mm` and
/// turned into a float (a conversion reading the old name), `revision`
/// added with a value default, `flags` with a zero default, and the fields
/// reordered. `Library` is unchanged, but what it points to grew.
mod v2 {
    use super::*;

    #[derive(Persistent)]
    #[repr(C)]
    pub struct Library {
        pub parts: PVec<PRef<Part>>,
    }

    #[derive(Persistent)]
    #[repr(C)]
    pub struct Part {
        pub name: PString,
        pub next: Option<PRef<Part>>,
        pub id: u64,
        #[persistent(renamed_from = "x")]
        pub x_mm: f64,
        #[persistent(default = 1)]
        pub revision: u32,
        #[persistent(default)]
        pub flags: u32,
    }

    /// The migration from version 1.
    pub fn migration() -> Result<Migration> {
        let mut m = Migration::new();
        m.upgrade::<Library>()?
            .convert_field::<Part, u32, u64>("id", u64::from)?
            .convert_field::<Part, u32, f64>("x_mm", |x| f64::from(x) / 10.0)?;
        Ok(m)
    }
}

fn write_v1(path: &std::path::Path, n: u32) -> Result<()> {
    let mut db = Db::create(path, Options::default())?;
    let mut tx = db.begin()?;
    let lib = tx.alloc(v1::Library { parts: PVec::new() })?;
    let mut prev = None;
    for i in 0..n {
        let p = tx.alloc_with(|tx| {
            Ok(v1::Part {
                id: i,
                x: i * 3,
                name: tx.new_string(&format!("part {i}"))?,
                next: prev,
            })
        })?;
        tx.push(lib, |l| &mut l.parts, p)?;
        prev = Some(p);
    }
    tx.set_root("library", lib)?;
    tx.commit()?;
    db.close()
}

fn main() -> Result<()> {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = std::env::temp_dir().join(format!("amber-evolve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| amber::Error::Io {
        op: "create the example's directory",
        path: dir.clone(),
        source: e,
    })?;
    let path = dir.join("library.amber");
    write_v1(&path, n)?;

    // Version 2 starts. Without a migration its types are refused, naming
    // the first change.
    let db = Db::open(&path, Options::default())?;
    let e = db
        .root::<v2::Library>("library")
        .expect_err("version 1's layout");
    println!("version 2 without a migration: {e}");
    let m = v2::migration()?;
    for line in db.migration_plan(&m)? {
        println!("plan: {line}");
    }
    let t = Instant::now();
    let (db, report) = db.migrate(&m)?;
    println!(
        "migrated {} objects in {:.0} ms: page file {} -> {} bytes",
        report.collect.objects_live,
        t.elapsed().as_secs_f64() * 1e3,
        report.collect.file_bytes_before,
        report.collect.file_bytes_after
    );

    let lib: PRef<v2::Library> = db.root("library")?.expect("the library");
    let parts = db.slice(&db.get(lib).parts);
    assert_eq!(parts.len(), n as usize);
    for (i, &p) in parts.iter().enumerate() {
        let part = db.get(p);
        assert_eq!(db.str(&part.name), format!("part {i}"));
        assert_eq!(part.id, i as u64);
        assert_eq!(part.x_mm, f64::from(i as u32 * 3) / 10.0);
        assert_eq!((part.revision, part.flags), (1, 0));
        assert_eq!(part.next, (i > 0).then(|| parts[i - 1]));
    }
    println!("every part checked");

    // The next start: nothing to convert, the same handle back.
    let t = Instant::now();
    let (db, again) = db.migrate(&m)?;
    assert!(!again.rewritten);
    println!(
        "migrating again: nothing to do ({:.2} ms)",
        t.elapsed().as_secs_f64() * 1e3
    );
    db.close()?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
