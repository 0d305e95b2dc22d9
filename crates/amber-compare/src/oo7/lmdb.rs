//! `lmdb` and `lmdb-inline`: OO7 in LMDB databases (through heed) keyed by
//! id, in [`super::kv`]'s normalised or inline layout; OO1's environment
//! ([`crate::lmdb::open_env_with`]: default flags, checked, so every commit
//! syncs).

use std::ops::Bound;
use std::path::Path;

use amber_bench::oo7::engine::{Answer, EngineError, EngineInfo, EngineOptions, ResultExt};
use amber_bench::oo7::{Oo7Db, Oo7Engine, Oo7Factory};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, RoTxn, RwTxn};

use super::inline::Inline;
use super::kv::{KvEngine, KvRead, KvStore, KvWrite, Layout, T, Visit};
use super::normalised::Normalised;
use crate::lmdb::{DURABILITY, INSTALL, open_env_with};

type Db = Database<'static, Bytes, Bytes>;
/// The databases, in [`T::ALL`]'s order: those of the layout's tables.
type Dbs = [Option<Db>; T::ALL.len()];

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
        summary: "LMDB via heed: a database per class keyed by id and secondary-index databases; default (synced) commits",
        layout: &Normalised,
    };
    /// `lmdb-inline`: the inline layout.
    pub const INLINE: LmdbFactory = LmdbFactory {
        name: "lmdb-inline",
        summary: "LMDB via heed: a database per class keyed by id, each record holding its relationships (connections, bags, sub-assemblies, parts, users); date and title index databases; default (synced) commits",
        layout: &Inline,
    };
}

fn create_dbs(env: &Env, tables: &[T]) -> Result<Dbs, EngineError> {
    let wtxn = env.write_txn().ctx("beginning a write transaction")?;
    let committed = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
            let mut dbs = [None; T::ALL.len()];
            for (slot, t) in dbs.iter_mut().zip(T::ALL) {
                if tables.contains(&t) {
                    *slot = Some(opener.create_database::<Bytes, Bytes>(wtxn, Some(t.name()))?);
                }
            }
            Ok(CommitOrAbort::<_, ()>::Commit(dbs))
        })
        .ctx("creating the databases")?;
    committed
        .commit()
        .ok_or_else(|| EngineError::corrupt("creating the LMDB databases was aborted"))
}

fn open_dbs(env: &Env, tables: &[T]) -> Result<Dbs, EngineError> {
    let rtxn = env.read_txn().ctx("beginning a read transaction")?;
    let committed = env
        .open_databases_and_commit(rtxn, |opener, rtxn| -> Result<_, heed::Error> {
            let mut dbs = [None; T::ALL.len()];
            for (slot, t) in dbs.iter_mut().zip(T::ALL) {
                if tables.contains(&t) {
                    *slot = Some(opener.open_database::<Bytes, Bytes>(rtxn, Some(t.name()))?);
                }
            }
            Ok(CommitOrAbort::<_, ()>::Commit(dbs))
        })
        .ctx("opening the databases")?;
    let opened = committed
        .commit()
        .ok_or_else(|| EngineError::corrupt("opening the LMDB databases was aborted"))?;
    let mut dbs: Dbs = [None; T::ALL.len()];
    for ((slot, db), t) in dbs.iter_mut().zip(opened).zip(T::ALL) {
        if let Some(db) = db {
            *slot = Some(db.ok_or_else(|| {
                EngineError::corrupt(format!(
                    "the LMDB environment lacks the {} database",
                    t.name()
                ))
            })?);
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
    env: Env,
    dbs: Dbs,
}

fn db(dbs: &Dbs, t: T) -> Result<&Db, EngineError> {
    T::ALL
        .iter()
        .position(|&x| x == t)
        .and_then(|i| dbs[i].as_ref())
        .ok_or_else(|| EngineError::corrupt(format!("no {} database in this layout", t.name())))
}

fn get(dbs: &Dbs, txn: &RoTxn, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
    Ok(db(dbs, t)?
        .get(txn, key)
        .ctx("reading a database")?
        .map(<[u8]>::to_vec))
}

fn scan(
    dbs: &Dbs,
    txn: &RoTxn,
    t: T,
    lo: &[u8],
    hi: &[u8],
    f: &mut Visit<'_>,
) -> Result<(), EngineError> {
    // LMDB refuses an empty key, even as a bound.
    let start = if lo.is_empty() {
        Bound::Unbounded
    } else {
        Bound::Included(lo)
    };
    let range = (start, Bound::Excluded(hi));
    for e in db(dbs, t)?.range(txn, &range).ctx("scanning a database")? {
        let (k, v) = e.ctx("reading a database")?;
        f(k, v)?;
    }
    Ok(())
}

struct Reader<'a> {
    dbs: &'a Dbs,
    txn: &'a RoTxn<'a>,
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
    txn: &'a mut RwTxn<'e>,
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
        db(self.dbs, t)?
            .put(self.txn, key, value)
            .ctx("writing a database")
    }
    fn del(&mut self, t: T, key: &[u8]) -> Result<(), EngineError> {
        db(self.dbs, t)?
            .delete(self.txn, key)
            .ctx("writing a database")?;
        Ok(())
    }
}

impl KvStore for Lmdb {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn KvRead) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let rtxn = self.env.read_txn().ctx("beginning a read")?;
        f(&Reader {
            dbs: &self.dbs,
            txn: &rtxn,
        })
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn KvWrite) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let mut wtxn = self.env.write_txn().ctx("beginning a write")?;
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
