//! Amber's OO7 engines: `amber` (the default fault backend) and
//! `amber-sigsegv`, over the schema of [`schema`].
//!
//! Reads are `View` calls on the open `Db` (plain loads once the pages are
//! resident); every changing operation is one `Tx`, committed once
//! (`fdatasync` of the log). T2 writes through `field_mut` (x, then y: a
//! software barrier notes those 8 bytes, not the part), T3 moves the part
//! in the `PMultiIndex` of build dates, T5 replaces the document's text
//! with `set_str`, the structural insert allocates with
//! [`load`]'s functions (as the build does), and the structural delete
//! unlinks the composite part from its base assemblies' bags (`retain`),
//! its titles and dates from the indexes, and `free`s the document, the
//! atomic parts and the composite part (each with the vectors and strings
//! it owns).
//!
//! **(choice)** `free`, not `free_tree`: every OO7 object points back up
//! (an atomic part to its composite part, a composite part to the base
//! assemblies using it), so `free_tree` from a composite part would free
//! the assembly hierarchy too.
//!
//! **(choice)** The build commits every [`BUILD_BATCH`] composite parts
//! (their atomic parts first, together, then their connection vectors and
//! the composite parts), then the documents in batches of the same size,
//! then each module (assemblies, bags, manual): documents come after every
//! graph so that T1's pages hold atomic parts and connections only, and
//! atomic parts fill pages of their own (51 to a page) so that T2 and T3
//! dirty as few pages as they can.

pub mod schema;

mod load;
mod ops;

use std::path::{Path, PathBuf};

use amber::{BackendChoice, CommitStats, Db, Options, PRef, Strategy};

use self::schema::{AtomicPart, ROOT, Root};
use crate::oo7::engine::{
    EngineError, EngineInfo, EngineOptions, Oo7Engine, Oo7Factory, ResultExt,
};
use crate::oo7::generate::Oo7Db;

/// The database file inside the engine's directory.
pub const FILE: &str = "oo7.amber";

/// Composite parts per build transaction.
pub const BUILD_BATCH: usize = 100;

/// Amber's OO7 schema, as the table names it.
pub const SCHEMA: &str = "objects linked by PRef: atomic parts hold their connections (PVec of target PRef, kind, length) and incoming PRefs; bags are PVecs of PRefs; documents and manuals PStrings; atomic parts, composite parts, base assemblies and modules by id PVecs of PRefs indexed by id (the atomic parts' one flat vector, 10,000 PRefs per module), atomic parts by build date a PMultiIndex<_, i32>; documents by title a PIndex<_, String>";

/// Makes Amber OO7 databases with one fault backend, opened under one
/// update strategy.
#[derive(Clone, Copy, Debug)]
pub struct AmberOo7Factory {
    name: &'static str,
    summary: &'static str,
    backend: BackendChoice,
    /// How the opened database detects updates and generates its log;
    /// `None`: the database's default.
    strategy: Option<Strategy>,
    /// The engine whose build this one shares (a scheme of it).
    base: &'static str,
}

impl AmberOo7Factory {
    /// `amber`: the backend Amber chooses.
    pub const DEFAULT: AmberOo7Factory = AmberOo7Factory {
        name: "amber",
        summary: "Amber, default fault backend (userfaultfd where available): PRefs swizzled at fault time, reads are plain loads; commit logs changed bytes and fdatasyncs the log",
        backend: BackendChoice::Auto,
        strategy: None,
        base: "amber",
    };

    /// `amber-sigsegv`: the SIGSEGV backend.
    pub const SIGSEGV: AmberOo7Factory = AmberOo7Factory {
        name: "amber-sigsegv",
        summary: "Amber as `amber`, with the SIGSEGV fault backend",
        backend: BackendChoice::Sigsegv,
        strategy: None,
        base: "amber-sigsegv",
    };

    fn options(&self, cache_mib: Option<u64>) -> Options {
        Options {
            backend: self.backend,
            cache_bytes: cache_mib.map(|m| m << 20),
            strategy: self.strategy.unwrap_or_default(),
            ..Options::default()
        }
    }
}

fn file(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

impl Oo7Factory for AmberOo7Factory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: self.name,
            summary: self.summary,
            schema: SCHEMA,
            durability: crate::oo1::amber_engine::DURABILITY,
            install: crate::oo1::amber_engine::INSTALL,
            cache_budget: true,
        }
    }

    fn build_of(&self) -> &'static str {
        self.base
    }

    fn with_scheme(&self, scheme: &str) -> Result<Box<dyn Oo7Factory>, String> {
        let strategy: Strategy = scheme.parse().map_err(|e| format!("{e}"))?;
        // The names live as long as the run (a few per run).
        let name: &'static str = Box::leak(format!("{}/{scheme}", self.base).into_boxed_str());
        let summary: &'static str = Box::leak(
            format!("{}, update strategy {scheme} ({strategy})", self.summary).into_boxed_str(),
        );
        Ok(Box::new(AmberOo7Factory {
            name,
            summary,
            strategy: Some(strategy),
            ..*self
        }))
    }

    fn build(&self, dir: &Path, db: &Oo7Db, _options: &EngineOptions) -> Result<(), EngineError> {
        let path = file(dir);
        let mut adb =
            Db::create(&path, self.options(None)).ctx(&format!("creating {}", path.display()))?;
        let mut tx = adb.begin().ctx("beginning the build")?;
        let root = load::create_root(&mut tx, db.params.document_size)?;
        tx.set_root(ROOT, root).ctx("naming the root")?;
        tx.commit().ctx("committing the root")?;
        let k = db.params.conn_per_atomic as usize;
        for batch in db.composites.chunks(BUILD_BATCH) {
            let mut tx = adb.begin().ctx("beginning the build")?;
            // The batch's atomic parts, every composite part's in turn:
            // their ids follow one another (`add_atomics` checks).
            let per = db.params.atomic_per_comp as usize;
            let first = batch.first().map_or(0, |c| (c.first_atomic - 1) as usize);
            let parts = db
                .atomics
                .get(first..first + batch.len() * per)
                .ok_or_else(|| EngineError::bad_input("a batch's atomic parts are missing"))?;
            let refs = load::add_atomics(&mut tx, root, parts)?;
            for (c, refs) in batch.iter().zip(refs.chunks(per)) {
                let first = (c.first_atomic - 1) as usize * k;
                let conns = &db.connections[first..first + refs.len() * k];
                load::add_links(&mut tx, root, c, refs, conns)?;
            }
            tx.commit().ctx("committing the build")?;
        }
        for batch in db.composites.chunks(BUILD_BATCH) {
            let mut tx = adb.begin().ctx("beginning the build")?;
            for c in batch {
                let r = load::composite(&tx, root, c.id)?;
                load::add_document(&mut tx, root, r, db.params.document_size)?;
            }
            tx.commit().ctx("committing the documents")?;
        }
        for m in &db.modules {
            let mut tx = adb.begin().ctx("beginning the build")?;
            load::add_module(&mut tx, root, db, m)?;
            tx.commit().ctx("committing a module")?;
        }
        adb.close().ctx("closing the database")
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let path = file(dir);
        let db = Db::open(&path, self.options(options.cache_mib))
            .ctx(&format!("opening {}", path.display()))?;
        db.check_type::<AtomicPart>()
            .ctx("checking the atomic part type")?;
        let root = db
            .root::<Root>(ROOT)
            .ctx("reading the root")?
            .ok_or_else(|| {
                EngineError::corrupt(format!("{} has no root {ROOT:?}", path.display()))
            })?;
        Ok(Box::new(AmberOo7 {
            db,
            root,
            scratch: ops::Scratch::default(),
            last_commit: None,
        }))
    }
}

/// An open Amber OO7 database.
pub struct AmberOo7 {
    db: Db,
    root: PRef<Root>,
    /// A graph walk's visited set and stack, reused.
    scratch: ops::Scratch,
    last_commit: Option<CommitStats>,
}

impl AmberOo7 {
    /// A client of the OO7 database served at `url` (`amber bench oo7
    /// --server`: QuickStore's client-server experiment).
    pub fn connect(url: &str, options: Options) -> Result<AmberOo7, EngineError> {
        let db = Db::connect(url, options).ctx(&format!("connecting to {url}"))?;
        let root = (db.root::<Root>(ROOT).ctx("reading the root")?)
            .ok_or_else(|| EngineError::corrupt(format!("{url} has no root {ROOT:?}")))?;
        Ok(AmberOo7 {
            db,
            root,
            scratch: ops::Scratch::default(),
            last_commit: None,
        })
    }

    /// What the last changing operation's commit did.
    pub fn last_commit(&self) -> Option<CommitStats> {
        self.last_commit
    }

    /// The fault backend the database is served by.
    pub fn backend(&self) -> amber::Backend {
        self.db.backend()
    }
}
