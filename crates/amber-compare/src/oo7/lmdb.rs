//! `lmdb`: OO7 in LMDB databases (through heed) keyed by id with
//! secondary-index databases ([`super::kv`]'s layout); OO1's environment
//! ([`crate::lmdb::open_env_with`]: default flags, checked, so every commit
//! syncs).

use std::ops::Bound;
use std::path::Path;

use amber_bench::oo7::engine::{Answer, EngineError, EngineInfo, EngineOptions, ResultExt};
use amber_bench::oo7::{Oo7Db, Oo7Engine, Oo7Factory};
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, RoTxn, RwTxn};

use super::kv::{self, KvEngine, KvRead, KvStore, KvWrite, T, Visit};
use crate::lmdb::{DURABILITY, INSTALL, open_env_with};

type Db = Database<'static, Bytes, Bytes>;
type Dbs = [Db; T::ALL.len()];

/// The `lmdb` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct LmdbFactory;

fn create_dbs(env: &Env) -> Result<Dbs, EngineError> {
    let wtxn = env.write_txn().ctx("beginning a write transaction")?;
    let committed = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
            let mut dbs = Vec::new();
            for t in T::ALL {
                dbs.push(opener.create_database::<Bytes, Bytes>(wtxn, Some(t.name()))?);
            }
            let dbs: [_; T::ALL.len()] = dbs
                .try_into()
                .map_err(|_| heed::Error::Io(std::io::Error::other("database count")))?;
            Ok(CommitOrAbort::<_, ()>::Commit(dbs))
        })
        .ctx("creating the databases")?;
    committed
        .commit()
        .ok_or_else(|| EngineError::corrupt("creating the LMDB databases was aborted"))
}

fn open_dbs(env: &Env) -> Result<Dbs, EngineError> {
    let rtxn = env.read_txn().ctx("beginning a read transaction")?;
    let committed = env
        .open_databases_and_commit(rtxn, |opener, rtxn| -> Result<_, heed::Error> {
            let mut dbs = Vec::new();
            for t in T::ALL {
                dbs.push(opener.open_database::<Bytes, Bytes>(rtxn, Some(t.name()))?);
            }
            let dbs: [_; T::ALL.len()] = dbs
                .try_into()
                .map_err(|_| heed::Error::Io(std::io::Error::other("database count")))?;
            Ok(CommitOrAbort::<_, ()>::Commit(dbs))
        })
        .ctx("opening the databases")?;
    let dbs = committed
        .commit()
        .ok_or_else(|| EngineError::corrupt("opening the LMDB databases was aborted"))?;
    let mut out = Vec::new();
    for (db, t) in dbs.into_iter().zip(T::ALL) {
        out.push(db.ok_or_else(|| {
            EngineError::corrupt(format!(
                "the LMDB environment lacks the {} database",
                t.name()
            ))
        })?);
    }
    out.try_into()
        .map_err(|_| EngineError::corrupt("the LMDB database count"))
}

impl Oo7Factory for LmdbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "lmdb",
            summary: "LMDB via heed: a database per class keyed by id and secondary-index databases; default (synced) commits",
            schema: kv::SCHEMA,
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: false,
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, _options: &EngineOptions) -> Result<(), EngineError> {
        let env = open_env_with(dir, T::ALL.len() as u32)?;
        let dbs = create_dbs(&env)?;
        let mut store = Lmdb { env, dbs };
        store.write(&mut |w| {
            kv::load(w, db)?;
            Ok(Answer::default())
        })?;
        Ok(())
    }

    fn open(
        &self,
        dir: &Path,
        _options: &EngineOptions,
    ) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let env = open_env_with(dir, T::ALL.len() as u32)?;
        let dbs = open_dbs(&env)?;
        Ok(Box::new(KvEngine {
            store: Box::new(Lmdb { env, dbs }),
        }))
    }
}

/// An open LMDB OO7 environment.
pub struct Lmdb {
    env: Env,
    dbs: Dbs,
}

fn db(dbs: &Dbs, t: T) -> &Db {
    &dbs[T::ALL.iter().position(|&x| x == t).unwrap_or(0)]
}

fn get(dbs: &Dbs, txn: &RoTxn, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
    Ok(db(dbs, t)
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
    for e in db(dbs, t).range(txn, &range).ctx("scanning a database")? {
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
        db(self.dbs, t)
            .put(self.txn, key, value)
            .ctx("writing a database")
    }
    fn del(&mut self, t: T, key: &[u8]) -> Result<(), EngineError> {
        db(self.dbs, t)
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
