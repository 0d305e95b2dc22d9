//! `lmdb` and `lmdb-inline`: OO7 in LMDB databases (through lmdb-rkv) keyed by
//! id, in [`super::kv`]'s normalised or inline layout; OO1's environment
//! ([`crate::lmdb::open_env_with`]: default flags, checked, so every commit
//! syncs).

use std::path::Path;

use amber_bench::oo7::engine::{Answer, EngineError, EngineInfo, EngineOptions, ResultExt};
use amber_bench::oo7::{Oo7Db, Oo7Engine, Oo7Factory};
use lmdb_rkv::{
    Cursor, Database, DatabaseFlags, Environment, RoTransaction, RwTransaction, Transaction,
    WriteFlags,
};

use super::inline::Inline;
use super::kv::{KvEngine, KvRead, KvStore, KvWrite, Layout, T, Visit};
use super::normalised::Normalised;
use crate::lmdb::{DURABILITY, INSTALL, open_db, open_env_with};

/// The databases, in [`T::ALL`]'s order: those of the layout's tables.
type Dbs = [Option<Database>; T::ALL.len()];

/// An LMDB engine: a name and a layout.
#[derive(Clone, Copy)]
pub struct LmdbFactory {
    name: &'static str,
    summary: &'static str,
    layout: &'static dyn Layout,
}

impl LmdbFactory {
    /// `lmdb`: the normalised layout.
    pub const NORMALISED: LmdbFactory = LmdbFactory {
        name: "lmdb",
        summary: "LMDB via lmdb-rkv: a database per class keyed by id and secondary-index databases; default (synced) commits",
        layout: &Normalised,
    };
    /// `lmdb-inline`: the inline layout.
    pub const INLINE: LmdbFactory = LmdbFactory {
        name: "lmdb-inline",
        summary: "LMDB via lmdb-rkv: a database per class keyed by id, each record holding its relationships (connections, bags, sub-assemblies, parts, users); date and title index databases; default (synced) commits",
        layout: &Inline,
    };
}

fn create_dbs(env: &Environment, tables: &[T]) -> Result<Dbs, EngineError> {
    let mut dbs = [None; T::ALL.len()];
    for (slot, t) in dbs.iter_mut().zip(T::ALL) {
        if tables.contains(&t) {
            *slot = Some(
                env.create_db(Some(t.name()), DatabaseFlags::empty())
                    .ctx("creating the databases")?,
            );
        }
    }
    Ok(dbs)
}

fn open_dbs(env: &Environment, tables: &[T]) -> Result<Dbs, EngineError> {
    let mut dbs = [None; T::ALL.len()];
    for (slot, t) in dbs.iter_mut().zip(T::ALL) {
        if tables.contains(&t) {
            *slot = Some(open_db(env, t.name())?);
        }
    }
    Ok(dbs)
}

impl Oo7Factory for LmdbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: self.name,
            summary: self.summary,
            schema: self.layout.schema(),
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: false,
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, _options: &EngineOptions) -> Result<(), EngineError> {
        let tables = self.layout.tables();
        let env = open_env_with(dir, tables.len() as u32)?;
        let dbs = create_dbs(&env, tables)?;
        let mut store = Lmdb { env, dbs };
        store.write(&mut |w| {
            self.layout.load(w, db)?;
            Ok(Answer::default())
        })?;
        Ok(())
    }

    fn open(
        &self,
        dir: &Path,
        _options: &EngineOptions,
    ) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let tables = self.layout.tables();
        let env = open_env_with(dir, tables.len() as u32)?;
        let dbs = open_dbs(&env, tables)?;
        Ok(Box::new(KvEngine {
            store: Box::new(Lmdb { env, dbs }),
            layout: self.layout,
        }))
    }
}

/// An open LMDB OO7 environment.
pub struct Lmdb {
    env: Environment,
    dbs: Dbs,
}

fn db(dbs: &Dbs, t: T) -> Result<Database, EngineError> {
    T::ALL
        .iter()
        .position(|&x| x == t)
        .and_then(|i| dbs[i])
        .ok_or_else(|| EngineError::corrupt(format!("no {} database in this layout", t.name())))
}

fn get(
    dbs: &Dbs,
    txn: &impl Transaction,
    t: T,
    key: &[u8],
) -> Result<Option<Vec<u8>>, EngineError> {
    Ok(crate::lmdb::get(txn, db(dbs, t)?, key)
        .ctx("reading a database")?
        .map(<[u8]>::to_vec))
}

fn scan(
    dbs: &Dbs,
    txn: &impl Transaction,
    t: T,
    lo: &[u8],
    hi: &[u8],
    f: &mut Visit<'_>,
) -> Result<(), EngineError> {
    let mut cursor = txn.open_ro_cursor(db(dbs, t)?).ctx("scanning a database")?;
    // LMDB refuses an empty key, even as a bound.
    let entries = if lo.is_empty() {
        cursor.iter_start()
    } else {
        cursor.iter_from(lo)
    };
    for e in entries {
        let (k, v) = e.ctx("reading a database")?;
        if k >= hi {
            break;
        }
        f(k, v)?;
    }
    Ok(())
}

struct Reader<'a> {
    dbs: &'a Dbs,
    txn: &'a RoTransaction<'a>,
}

impl KvRead for Reader<'_> {
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        get(self.dbs, self.txn, t, key)
    }
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError> {
        scan(self.dbs, self.txn, t, lo, hi, f)
    }
}

struct Writer<'a, 'e> {
    dbs: &'a Dbs,
    txn: &'a mut RwTransaction<'e>,
}

impl KvRead for Writer<'_, '_> {
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        get(self.dbs, self.txn, t, key)
    }
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError> {
        scan(self.dbs, self.txn, t, lo, hi, f)
    }
}

impl KvWrite for Writer<'_, '_> {
    fn put(&mut self, t: T, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        let db = db(self.dbs, t)?;
        self.txn
            .put(db, &key, &value, WriteFlags::empty())
            .ctx("writing a database")
    }
    fn del(&mut self, t: T, key: &[u8]) -> Result<(), EngineError> {
        let db = db(self.dbs, t)?;
        match self.txn.del(db, &key, None) {
            // Deleting a key that is not there is not an error.
            Err(lmdb_rkv::Error::NotFound) => Ok(()),
            deleted => deleted.ctx("writing a database"),
        }
    }
}

impl KvStore for Lmdb {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn KvRead) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let rtxn = self.env.begin_ro_txn().ctx("beginning a read")?;
        f(&Reader {
            dbs: &self.dbs,
            txn: &rtxn,
        })
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn KvWrite) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let mut wtxn = self.env.begin_rw_txn().ctx("beginning a write")?;
        let answer = f(&mut Writer {
            dbs: &self.dbs,
            txn: &mut wtxn,
        })?;
        wtxn.commit().ctx("committing")?;
        Ok(answer)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
