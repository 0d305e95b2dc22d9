//! Migration: a database's objects converted to the program's layouts.
//!
//! An object that grows cannot stay in its slot, and the commit path
//! assumes memory holds the committed image, so a migration is not a silent
//! rewrite on first touch: it is a collection (`gc/`) that converts every
//! kept object as it copies it (`schema/evolve.rs` says how) and writes the
//! new layouts into the catalog, under the same type ids. It is crash-safe
//! as a collection is — the new file is renamed over the old one, so a
//! crash leaves the database as it was or migrated, and running the
//! migration again finishes it. The old layouts are gone from the catalog
//! afterwards, as is every layout no kept object uses.

use super::{CollectStats, rewrite_store};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::io::real::RealVfs;
use crate::io::{OpenMode, Vfs};
use crate::schema::check::Program;
use crate::schema::desc::{FieldKind, StoredType};
use crate::schema::evolve::{Converter, DROPPED, Plan, Wanted};
use crate::schema::schema_file;
use crate::store::{Store, StoreOptions};
use crate::vm::{Field, Persistent};
use std::path::Path;
use std::sync::Arc;

/// The program's layouts a database is to be converted to, with the
/// conversions the program gives for fields whose type changed.
///
/// Name the program's types with [`upgrade`](Self::upgrade) (every type
/// they reach comes along). Each stored layout is then converted to the
/// program's of the same stored name, field by field, matched by name:
/// - a field at another position is moved (reordering needs nothing);
/// - a field the stored layout lacks takes its declared default
///   (`#[persistent(default)]`: zero, empty, `None`; or
///   `#[persistent(default = VALUE)]` for a primitive);
/// - a field renamed takes the value of its earlier name
///   (`#[persistent(renamed_from = "old")]`);
/// - a field whose type changed takes the value a conversion computes
///   ([`convert_field`](Self::convert_field)); a pointer may become an
///   `Option` of itself without one;
/// - a field the program's layout lacks is dropped.
///
/// Anything else is refused before any byte is written, naming the type
/// and the field. Run it with [`Db::migrate`] (consuming the handle, as
/// [`Db::collect`] does) or [`Migration::run_file`] on a closed database.
///
/// ```
/// # fn main() -> amber::Result<()> {
/// use amber::{Db, Migration, Options, Persistent};
/// #[derive(Persistent)]
/// #[repr(C)]
/// struct Task {
///     // Was `u32 prio` before; converted.
///     priority: u64,
///     #[persistent(renamed_from = "finished")]
///     done: u32,
///     // New: zero in migrated objects.
///     #[persistent(default)]
///     effort: u32,
/// }
/// let mut m = Migration::new();
/// m.upgrade::<Task>()?
///     .convert_field::<Task, u32, u64>("priority", u64::from)?;
/// # let dir = std::env::temp_dir().join(format!("amber-migrate-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let path = dir.join("db");
/// let db = Db::open_or_create(&path, Options::default())?;
/// // Nothing to convert here: the handle comes back as it was.
/// let (db, report) = db.migrate(&m)?;
/// assert!(report.changes.is_empty());
/// # drop(db);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Migration {
    wanted: Wanted,
}

/// The largest schema file read: a program's whole schema is a few
/// kilobytes; a length beyond this is not one.
const SCHEMA_FILE_MAX: u64 = 64 << 20;

/// What a migration did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrateStats {
    /// Whether the database was rewritten (false: every stored layout was
    /// already the program's).
    pub rewritten: bool,
    /// What changed, one line per field ("`Task`: field `effort` added (its
    /// default)").
    pub changes: Vec<String>,
    /// The collection that carried it.
    pub collect: CollectStats,
}

/// A value a field conversion reads or returns: a primitive, or an array
/// of them. Sealed.
pub trait Plain: Field + sealed::Sealed {
    /// The value stored little-endian in `b` (exactly its size).
    fn read(b: &[u8]) -> Self;
    /// Stores the value little-endian in `out` (exactly its size).
    fn write(&self, out: &mut [u8]);
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Plain for $t {
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            fn write(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
plain!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl<T: Plain, const N: usize> sealed::Sealed for [T; N] {}
impl<T: Plain, const N: usize> Plain for [T; N]
where
    [T; N]: Field,
{
    fn read(b: &[u8]) -> Self {
        let n = std::mem::size_of::<T>();
        std::array::from_fn(|i| T::read(&b[i * n..(i + 1) * n]))
    }
    fn write(&self, out: &mut [u8]) {
        for (v, o) in self
            .iter()
            .zip(out.chunks_exact_mut(std::mem::size_of::<T>()))
        {
            v.write(o);
        }
    }
}

impl Migration {
    /// An empty migration (converts nothing).
    pub fn new() -> Migration {
        Migration::default()
    }

    /// Adds the program's type `T` and every type it reaches: their stored
    /// objects are converted to these layouts. Refused if two program
    /// types claim one stored name with different layouts.
    pub fn upgrade<T: Persistent>(&mut self) -> Result<&mut Self> {
        self.wanted.add(Program::Struct(&T::DESC))?;
        Ok(self)
    }

    /// Converts field `field` of `T` (added if it was not) from its stored
    /// type `Old` to the program's `New` with `f`, called once per object
    /// (and once per element of a vector or array of `T`).
    pub fn convert_field<T: Persistent, Old: Plain, New: Plain>(
        &mut self,
        field: &str,
        f: impl Fn(Old) -> New + Send + Sync + 'static,
    ) -> Result<&mut Self> {
        self.upgrade::<T>()?;
        let c = Converter {
            from: kind_of::<Old>(),
            to: kind_of::<New>(),
            f: Box::new(move |old, out| f(Old::read(old)).write(out)),
        };
        self.wanted.convert(T::DESC.name, field, c)?;
        Ok(self)
    }

    /// Writes the program's layouts and their evolution (earlier names,
    /// defaults) to a schema file, from which `amber migrate DB --schema
    /// FILE` runs this migration without the program. Refused if the
    /// migration has conversions: they are code, which a file cannot
    /// hold; run such a migration from the program. The file is written
    /// beside `path`, synced and renamed over it: a crash leaves the old
    /// file or the new one.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.save_on(&RealVfs, path.as_ref())
    }

    /// Reads a schema file written by [`save`](Self::save).
    pub fn load(path: impl AsRef<Path>) -> Result<Migration> {
        Self::load_on(&RealVfs, path.as_ref())
    }

    /// [`save`](Self::save) on a given file system (fault injection).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn save_with(&self, vfs: &dyn Vfs, path: &Path) -> Result<()> {
        self.save_on(vfs, path)
    }

    /// [`load`](Self::load) on a given file system (fault injection).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn load_with(vfs: &dyn Vfs, path: &Path) -> Result<Migration> {
        Self::load_on(vfs, path)
    }

    fn save_on(&self, vfs: &dyn Vfs, path: &Path) -> Result<()> {
        if self.wanted.has_conversions() {
            return Err(Error::invalid(
                "this migration converts fields with the program's functions, which a schema \
                 file cannot hold: run it from the program (Db::migrate or Migration::run_file)",
            ));
        }
        let bytes = schema_file::encode(&self.wanted);
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let io = |op: &'static str, at: &Path| {
            let at = at.to_path_buf();
            move |source| Error::Io {
                op,
                path: at,
                source,
            }
        };
        if vfs.exists(&tmp) {
            vfs.remove(&tmp)
                .map_err(io("remove a stale schema file", &tmp))?;
        }
        let f = vfs
            .open(&tmp, OpenMode::CreateNew)
            .map_err(io("create the schema file", &tmp))?;
        f.write_all_at(&bytes, 0)
            .and_then(|()| f.sync_data())
            .map_err(io("write the schema file", &tmp))?;
        drop(f);
        vfs.rename(&tmp, path)
            .map_err(io("put the schema file in place", path))
    }

    fn load_on(vfs: &dyn Vfs, path: &Path) -> Result<Migration> {
        let io = |source| Error::Io {
            op: "read the schema file",
            path: path.to_path_buf(),
            source,
        };
        let f = vfs.open(path, OpenMode::ReadOnly).map_err(io)?;
        let len = f.size().map_err(io)?;
        if len > SCHEMA_FILE_MAX {
            return Err(Error::invalid(format!(
                "{}: {len} bytes is not a schema file (they are at most {SCHEMA_FILE_MAX})",
                path.display()
            )));
        }
        let mut bytes = vec![0u8; len as usize];
        f.read_exact_at(&mut bytes, 0).map_err(io)?;
        let wanted = schema_file::decode(&bytes)
            .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        Ok(Migration { wanted })
    }

    /// What the migration would change in the closed database at `path`,
    /// one line per field, without changing anything.
    pub fn plan_file(&self, path: impl AsRef<Path>) -> Result<Vec<String>> {
        let store = Store::open(Arc::new(RealVfs), path.as_ref(), StoreOptions::default())?;
        Ok(Plan::new(&stored_types(&store)?, &self.wanted)?.changes)
    }

    /// Migrates the database at `path`, which no one may have open (as
    /// [`Db::migrate`] does for an open one).
    pub fn run_file(&self, path: impl AsRef<Path>) -> Result<MigrateStats> {
        self.run_on(Arc::new(RealVfs), path.as_ref())
    }

    /// [`run_file`](Self::run_file) on a given file system (crash model,
    /// fault injection).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn run_file_with(&self, vfs: Arc<dyn Vfs>, path: &Path) -> Result<MigrateStats> {
        self.run_on(vfs, path)
    }

    fn run_on(&self, vfs: Arc<dyn Vfs>, path: &Path) -> Result<MigrateStats> {
        let store = Store::open(vfs.clone(), path, StoreOptions::default())?;
        if !self.changes_anything(&stored_types(&store)?)? {
            return Ok(MigrateStats::default());
        }
        self.rewrite(store, vfs, path)
    }

    /// Migrates the database `store` has open, then drops the store. When
    /// a field was dropped, what only it reached was marked (marking reads
    /// the old layouts) and kept: a second collection reclaims it.
    fn rewrite(&self, store: Store, vfs: Arc<dyn Vfs>, path: &Path) -> Result<MigrateStats> {
        let (mut collect, changes) = rewrite_store(store, Some(&self.wanted))?;
        if changes.iter().any(|c| c.ends_with(DROPPED)) {
            let again = super::collect_on(vfs, path)?;
            collect.objects_live = again.objects_live;
            collect.bytes_live = again.bytes_live;
            collect.tombstones = again.tombstones;
            collect.objects_reclaimed += again.objects_reclaimed;
            collect.bytes_reclaimed += again.bytes_reclaimed;
            collect.pages_after = again.pages_after;
            collect.file_bytes_after = again.file_bytes_after;
            collect.log_bytes_after = again.log_bytes_after;
        }
        Ok(MigrateStats {
            rewritten: true,
            changes,
            collect,
        })
    }

    /// Whether the migration would change the catalog; refuses what it
    /// could not convert.
    fn changes_anything(&self, catalog: &[(u32, StoredType)]) -> Result<bool> {
        let plan = Plan::new(catalog, &self.wanted)?;
        Ok(plan.entries.values().any(|e| e.new != e.old))
    }
}

fn kind_of<T: Field>() -> crate::schema::desc::StoredKind {
    let k: &FieldKind = &T::KIND;
    k.to_stored()
}

/// The catalog's entries, decoded.
fn stored_types(store: &Store) -> Result<Vec<(u32, StoredType)>> {
    store
        .types()
        .into_iter()
        .map(|(id, b)| {
            StoredType::decode(&b).map(|t| (id, t)).map_err(|e| {
                Error::invalid(format!(
                    "schema catalog entry for type id {id} is unreadable: {e}"
                ))
            })
        })
        .collect()
}

impl Db {
    /// Migrates this database to the program's layouts `m` names:
    /// converts every stored object whose layout differs (`Migration`
    /// says how), retires the old layouts, and returns a new handle. When
    /// every stored layout is already the program's, nothing is written
    /// and this handle comes back, so `Db::open(..)?.migrate(&m)?` costs a
    /// catalog comparison on every open and converts only once.
    ///
    /// Converting moves objects, so this consumes the handle as
    /// [`collect`](Self::collect) does — and it is a collection: what the
    /// roots do not reach is reclaimed with it, and the file is compacted.
    /// Crash-safe at every step: a crash leaves the database as it was or
    /// migrated. Refused, before anything is written and with the handle
    /// closed, if a field cannot be converted (it names the type and the
    /// field) or if read-only handles have the database open.
    pub fn migrate(self, m: &Migration) -> Result<(Db, MigrateStats)> {
        if !m.changes_anything(&stored_types(self.local("migration")?)?)? {
            return Ok((self, MigrateStats::default()));
        }
        self.writable("migrate")?;
        let store = self.local("migration")?;
        let vfs = store.vfs().clone();
        let path = store.path().to_path_buf();
        let opts = self.opts.clone();
        let stats = m.rewrite(self.into_store()?, vfs.clone(), &path)?;
        let db = Db::open_on(vfs, &path, opts)?;
        Ok((db, stats))
    }

    /// What [`migrate`](Self::migrate) would change, one line per field,
    /// without changing anything; refused as `migrate` would refuse.
    pub fn migration_plan(&self, m: &Migration) -> Result<Vec<String>> {
        let plan = Plan::new(&stored_types(self.local("a migration plan")?)?, &m.wanted)?;
        Ok(plan.changes)
    }
}
