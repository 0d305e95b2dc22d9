//! `redb`: OO7 in redb tables keyed by id with secondary-index tables
//! ([`super::kv`]'s layout); every write transaction with
//! `Durability::Immediate` and `--cache-mib` as the cache size, as OO1's
//! `redb` engine ([`crate::redb::begin_write`], [`crate::redb::builder`]).

use std::path::Path;

use amber_bench::oo7::engine::{Answer, EngineError, EngineInfo, EngineOptions, ResultExt};
use amber_bench::oo7::{Oo7Db, Oo7Engine, Oo7Factory};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};

use super::kv::{self, KvEngine, KvRead, KvStore, KvWrite, T, Visit};
use crate::redb::{DURABILITY, INSTALL, begin_write, builder};

const DB_FILE: &str = "oo7.redb";

type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

fn def(t: T) -> Def {
    TableDefinition::new(t.name())
}

/// The `redb` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedbFactory;

impl Oo7Factory for RedbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "redb",
            summary: "redb: a table per class keyed by id and secondary-index tables; Durability::Immediate commits",
            schema: kv::SCHEMA,
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: true,
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, options: &EngineOptions) -> Result<(), EngineError> {
        let path = dir.join(DB_FILE);
        let database = builder(options)
            .create(&path)
            .ctx(&format!("creating {}", path.display()))?;
        let mut store = Redb { database };
        store.write(&mut |w| {
            kv::load(w, db)?;
            Ok(Answer::default())
        })?;
        Ok(())
    }

    fn open(&self, dir: &Path, options: &EngineOptions) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return Err(EngineError::io(
                format!("opening {}", path.display()),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        let database = builder(options)
            .open(&path)
            .ctx(&format!("opening {}", path.display()))?;
        Ok(Box::new(KvEngine {
            store: Box::new(Redb { database }),
        }))
    }
}

/// An open redb OO7 database.
pub struct Redb {
    database: Database,
}

fn index(t: T) -> usize {
    T::ALL.iter().position(|&x| x == t).unwrap_or(0)
}

fn scan_table<R: ReadableTable<&'static [u8], &'static [u8]>>(
    table: &R,
    lo: &[u8],
    hi: &[u8],
    f: &mut Visit<'_>,
) -> Result<(), EngineError> {
    for e in table.range::<&[u8]>(lo..hi).ctx("scanning a table")? {
        let (k, v) = e.ctx("reading a table")?;
        f(k.value(), v.value())?;
    }
    Ok(())
}

struct Reader {
    tables: Vec<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>,
}

impl KvRead for Reader {
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.tables[index(t)]
            .get(key)
            .ctx("reading a table")?
            .map(|g| g.value().to_vec()))
    }
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError> {
        scan_table(&self.tables[index(t)], lo, hi, f)
    }
}

struct Writer<'t> {
    tables: Vec<Table<'t, &'static [u8], &'static [u8]>>,
}

impl KvRead for Writer<'_> {
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.tables[index(t)]
            .get(key)
            .ctx("reading a table")?
            .map(|g| g.value().to_vec()))
    }
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError> {
        scan_table(&self.tables[index(t)], lo, hi, f)
    }
}

impl KvWrite for Writer<'_> {
    fn put(&mut self, t: T, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        self.tables[index(t)]
            .insert(key, value)
            .ctx("writing a table")?;
        Ok(())
    }
    fn del(&mut self, t: T, key: &[u8]) -> Result<(), EngineError> {
        self.tables[index(t)].remove(key).ctx("writing a table")?;
        Ok(())
    }
}

impl KvStore for Redb {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn KvRead) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let rtxn = self.database.begin_read().ctx("beginning a read")?;
        let tables = T::ALL
            .iter()
            .map(|&t| rtxn.open_table(def(t)).ctx("opening a table"))
            .collect::<Result<_, _>>()?;
        f(&Reader { tables })
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn KvWrite) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let wtxn = begin_write(&self.database, "beginning a write")?;
        let answer = {
            let tables = T::ALL
                .iter()
                .map(|&t| wtxn.open_table(def(t)).ctx("opening a table"))
                .collect::<Result<_, _>>()?;
            f(&mut Writer { tables })?
        };
        wtxn.commit().ctx("committing")?;
        Ok(answer)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
