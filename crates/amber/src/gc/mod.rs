//! Collection: persistence by reachability (Persistent Smalltalk, ZODB's
//! pack). What the named roots reach — through pointer and smart-pointer
//! fields, vector and byte-string buffers and their elements, index nodes
//! and values, as the stored type descriptors lay them out — is kept;
//! everything else, freed or merely unreachable, is reclaimed, and the kept
//! objects are compacted into as few pages as they fit in, so the page file
//! shrinks.
//!
//! Compaction moves objects, so it runs only where no pointer of a running
//! program can be live: on a database no one has open ([`Db::collect_file`],
//! `amber gc`), or through [`Db::collect`], which consumes the handle and
//! returns a new one. Steps (`docs/design.md`, "Collection", argues each
//! crash):
//!
//! 1. The store is opened (recovery runs) or taken over from the closing
//!    `Db`, and checkpointed as at a clean close: the page file holds every
//!    committed change, the log is empty and marked closed. The store keeps
//!    the page file locked to the end.
//! 2. Deep verification runs and keeps its map of object starts
//!    (`inspect/deep`): a database it finds damaged is refused, since
//!    relocating through a wrong pointer would spread the damage.
//! 3. Marking from the roots (`mark.rs`, with `index.rs` for index nodes).
//! 4. Layout and relocation (`pack.rs`): every kept object gets its new
//!    address, then each new block is built and written to `PATH-gc`.
//! 5. The metadata blobs, superblocks, syncs, and the rename of `PATH-gc`
//!    over `PATH` (`file.rs`).

mod file;
mod index;
mod mark;
mod migrate;
mod pack;

pub use migrate::{MigrateStats, Migration, Plain};

use crate::db::Db;
use crate::error::{Error, FileKind, Location, Result};
use crate::format::first_data_page;
use crate::format::meta::RootEntry;
use crate::format::objects::slot_size;
use crate::inspect::deep::Types;
use crate::inspect::deep::map::Blocks;
use crate::inspect::deep::verified_map;
use crate::io::Vfs;
use crate::io::real::RealVfs;
use crate::schema::desc::StoredType;
use crate::schema::evolve::{Plan, Wanted};
use crate::store::alloc::FreeSpace;
use crate::store::{Store, StoreOptions};
use file::NewFile;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// What a collection found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectStats {
    /// Live objects kept (vector buffers and index nodes included).
    pub objects_live: u64,
    /// Their bytes, object headers and padding included.
    pub bytes_live: u64,
    /// Freed objects kept because a live object still points at them (a
    /// dangling reference the program committed): following it must still
    /// be refused as dangling, never reach another object.
    pub tombstones: u64,
    /// Objects reclaimed: unreachable, or freed and no longer pointed at.
    pub objects_reclaimed: u64,
    /// Their bytes, object headers and padding included.
    pub bytes_reclaimed: u64,
    /// Pages of the page file before (superblock pages included).
    pub pages_before: u64,
    /// ... and after.
    pub pages_after: u64,
    /// Length of the page file before (once the checkpoint that starts the
    /// collection has installed every committed change), in bytes.
    pub file_bytes_before: u64,
    /// ... and after.
    pub file_bytes_after: u64,
    /// Length of the log file before, in bytes.
    pub log_bytes_before: u64,
    /// ... and after (the checkpoint that starts a collection empties the
    /// log, and cuts a log grown far past its usual size back).
    pub log_bytes_after: u64,
}

impl Db {
    /// Collects this database: keeps what the named roots reach, reclaims
    /// everything else (freed objects, unreachable objects, buffers no
    /// vector holds any more), compacts what is kept into as few pages as
    /// it fits in, and shrinks the page file. Crash-safe at every step: a
    /// crash leaves either the database as it was or the collected one.
    ///
    /// Compaction moves objects, so this consumes the handle: the database
    /// is closed, collected and opened again with the same options, and the
    /// new handle returned. Pointers (`PRef`) kept from the old handle are
    /// refused when followed, as after any close. A `Smart` held in program
    /// memory (not in an object) across the call is not detected: it may
    /// lead to whatever object was moved to its address (docs/design.md,
    /// "Collection"). Between the close and the reopening another process
    /// may take the database, which the reopening reports as
    /// [`Error::Locked`]. A database that deep verification finds damaged
    /// is refused ([`Error::Corrupt`]) and left as it is. While read-only
    /// handles ([`Db::open_read_only`]) have it open, it is refused
    /// ([`Error::Invalid`]): the collection replaces the page file they
    /// read; readers that open meanwhile wait until the new file is in
    /// place. A refused collection has closed the handle: open the
    /// database again.
    ///
    /// Reads every block three times (verification, marking, copying) and
    /// holds 16 bytes per object plus a role and a new address per object.
    pub fn collect(self) -> Result<(Db, CollectStats)> {
        self.writable("collect")?;
        let store = self.local("collection")?;
        let vfs = store.vfs().clone();
        let path = store.path().to_path_buf();
        let opts = self.opts.clone();
        let store = self.into_store()?;
        let stats = collect_store(store)?;
        let db = Db::open_on(vfs, &path, opts)?;
        Ok((db, stats))
    }

    /// Refuses `op` (which rewrites the file) on a read-only handle.
    pub(crate) fn writable(&self, op: &str) -> Result<()> {
        self.local(op)?.log().map(drop).map_err(|_| {
            Error::invalid(format!(
                "{op} rewrites the database, and this handle is read-only \
                 (Db::open_read_only): open the database writable to {op} it"
            ))
        })
    }

    /// Collects the database at `path`, which no one may have open (as
    /// [`collect`](Self::collect) does for an open one): `amber gc`.
    pub fn collect_file(path: impl AsRef<Path>) -> Result<CollectStats> {
        collect_on(Arc::new(RealVfs), path.as_ref())
    }

    /// Collects the database at `path` on a given file system (crash
    /// model, fault injection).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn collect_file_with(vfs: Arc<dyn Vfs>, path: &Path) -> Result<CollectStats> {
        collect_on(vfs, path)
    }
}

fn collect_on(vfs: Arc<dyn Vfs>, path: &Path) -> Result<CollectStats> {
    collect_store(Store::open(vfs, path, StoreOptions::default())?)
}

/// Collects the database `store` has open (writable), then drops the store.
fn collect_store(store: Store) -> Result<CollectStats> {
    Ok(rewrite_store(store, None)?.0)
}

/// Collects the database `store` has open (writable), converting every
/// object to the layouts `wanted` gives if there are any (a migration),
/// then drops the store. Returns what the migration changed, one line
/// each.
fn rewrite_store(mut store: Store, wanted: Option<&Wanted>) -> Result<(CollectStats, Vec<String>)> {
    let mut stats = CollectStats {
        log_bytes_before: store.file_lengths()?.1,
        ..CollectStats::default()
    };
    store.close_keeping_lock()?;
    // Readers wait (or are refused) until the new file is in place.
    let no_readers = store.exclude_readers()?;
    (stats.file_bytes_before, stats.log_bytes_after) = store.file_lengths()?;
    let path = store.path().to_path_buf();
    let ps = store.page_size();
    stats.pages_before = store.page_count();

    let (report, map, types) = verified_map(&store)?;
    if report.is_damaged() || !report.notes.is_empty() || report.unchecked > 0 {
        let first = report
            .findings
            .iter()
            .find(|f| f.class == crate::inspect::FindingClass::Damage)
            .map_or_else(|| report.notes.join("; "), ToString::to_string);
        return Err(Error::Corrupt {
            file: FileKind::PageFile,
            path,
            at: Location::File,
            what: format!(
                "collect refused: deep verification found {} damaged references and {} \
                 unchecked ({first}); see `amber verify --deep`",
                report.damage, report.unchecked
            ),
        });
    }
    let sb = store.superblock();
    let meta = [sb.fsm_page, sb.roots_page, sb.catalog_page];
    if let Some(b) = map
        .blocks
        .iter()
        .find(|b| b.held != crate::inspect::deep::map::Held::Data && !meta.contains(&b.start))
    {
        return Err(Error::invalid(format!(
            "collect refused: page {} holds a block that is not objects (written through \
             the storage API); collect works on object databases only",
            b.start
        )));
    }
    let catalog: Vec<(u32, StoredType)> = types
        .iter()
        .filter_map(|(id, t)| Some((*id, t.clone()?)))
        .collect();
    let plan = wanted.map(|w| Plan::new(&catalog, w)).transpose()?;
    let new_types: Types = match &plan {
        None => types.clone(),
        Some(p) => p
            .entries
            .iter()
            .map(|(id, e)| (*id, Some(e.new.clone())))
            .collect(),
    };
    let roots = store.roots();
    let mut blocks = Blocks::new(&store);
    let roles = mark::mark(&path, &map, &types, &roots, &mut blocks)?;
    let first = first_data_page(ps);
    let layout = pack::layout(&map, &roles, first, plan.as_ref());
    let to = pack::Target {
        types: &new_types,
        plan: plan.as_ref(),
    };

    let new = NewFile::create(&**store.vfs(), &path, ps)?;
    let mut fsm = FreeSpace::new(first);
    for nb in &layout.blocks {
        let img = pack::build_block(
            nb,
            &map,
            to,
            &roles,
            &layout,
            &mut blocks,
            sb.checkpoint_lsn,
        )?;
        new.write(&[(nb.head, img)])?;
        fsm.allocate_at(nb.head, nb.pages)
            .map_err(Error::internal)?;
    }
    for (s, role) in map.starts.iter().zip(&roles) {
        let bytes = slot_size(s.size as usize) as u64;
        match role {
            Some(_) if s.is_free() => stats.tombstones += 1,
            Some(_) => {
                stats.objects_live += 1;
                stats.bytes_live += bytes;
            }
            None => {
                stats.objects_reclaimed += 1;
                stats.bytes_reclaimed += bytes;
            }
        }
    }
    let moved: BTreeMap<String, RootEntry> = roots
        .into_iter()
        .map(|mut r| {
            if r.addr != 0 {
                r.addr = map
                    .start_index(r.addr)
                    .map(|i| layout.fwd[i])
                    .filter(|&a| a != 0)
                    .ok_or_else(|| {
                        Error::internal(format!("collect: root `{}` not kept", r.name))
                    })?;
            }
            Ok((r.name.clone(), r))
        })
        .collect::<Result<_>>()?;
    let catalog = kept_catalog(&store, &map, &roles, plan.as_ref());
    drop(blocks);
    let vfs = store.vfs().clone();
    let (locked, len) = new.finish(&*vfs, &path, fsm, &moved, &catalog, sb)?;
    stats.file_bytes_after = len;
    stats.pages_after = len / ps as u64;
    // Readers may open the new file; the old store goes (it writes
    // nothing more), then the new file's lock.
    drop(no_readers);
    drop(store);
    drop(locked);
    Ok((stats, plan.map(|p| p.changes).unwrap_or_default()))
}

/// The catalog of the new file: the entries of the types some kept object
/// has — in their new layouts if a migration is carried — and no others:
/// a layout no object uses any more is retired (a program type of that name
/// is defined again when it is next stored).
fn kept_catalog(
    store: &Store,
    map: &crate::inspect::deep::map::ObjectMap,
    roles: &[Option<mark::Role<'_>>],
    plan: Option<&Plan<'_>>,
) -> BTreeMap<u32, Vec<u8>> {
    let used: std::collections::HashSet<u32> = map
        .starts
        .iter()
        .zip(roles)
        .filter(|(_, r)| r.is_some())
        .map(|(s, _)| s.type_id())
        .collect();
    store
        .types()
        .into_iter()
        .filter(|(id, _)| used.contains(id))
        .map(|(id, bytes)| match plan.and_then(|p| p.entries.get(&id)) {
            Some(e) if e.new != e.old => (id, e.new.encode()),
            _ => (id, bytes),
        })
        .collect()
}
