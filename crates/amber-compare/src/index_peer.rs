//! The peer of `amber bench index`: a redb table from the string key to a
//! u64, written as a careful redb user would: one write transaction per
//! commit with `Durability::Immediate` ([`crate::redb::DURABILITY`]), and a
//! batch of lookups in one read transaction with the table opened once.

use std::path::Path;

use amber_bench::index::IndexPeer;
use amber_bench::storage::BenchError;
use redb::{Database, Durability, ReadableDatabase, TableDefinition, WriteTransaction};

const TABLE: TableDefinition<&str, u64> = TableDefinition::new("index");

/// redb as the index benchmark's peer.
#[derive(Default)]
pub struct RedbIndex {
    db: Option<Database>,
}

fn err(what: &str) -> impl FnOnce(redb::Error) -> BenchError + '_ {
    move |e| BenchError::new(format!("redb: {what}: {e}"))
}

impl RedbIndex {
    fn db(&self) -> Result<&Database, BenchError> {
        self.db
            .as_ref()
            .ok_or_else(|| BenchError::new("redb: no database created"))
    }

    fn write(&self) -> Result<WriteTransaction, BenchError> {
        let mut w = self
            .db()?
            .begin_write()
            .map_err(|e| err("begin_write")(e.into()))?;
        w.set_durability(Durability::Immediate)
            .map_err(|e| err("set_durability")(e.into()))?;
        Ok(w)
    }

    fn insert(
        &self,
        pairs: impl Iterator<Item = (impl AsRef<str>, u64)>,
    ) -> Result<(), BenchError> {
        let w = self.write()?;
        {
            let mut t = w
                .open_table(TABLE)
                .map_err(|e| err("open_table")(e.into()))?;
            for (k, v) in pairs {
                t.insert(k.as_ref(), v)
                    .map_err(|e| err("insert")(e.into()))?;
            }
        }
        w.commit().map_err(|e| err("commit")(e.into()))
    }
}

impl IndexPeer for RedbIndex {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn durability(&self) -> &'static str {
        crate::redb::DURABILITY
    }

    fn create(&mut self, dir: &Path) -> Result<(), BenchError> {
        let db = Database::create(dir.join("index.redb")).map_err(|e| err("create")(e.into()))?;
        self.db = Some(db);
        Ok(())
    }

    fn insert_all(&mut self, keys: &[String]) -> Result<(), BenchError> {
        self.insert(keys.iter().zip(0u64..))
    }

    fn insert_one(&mut self, key: &str, v: u64) -> Result<(), BenchError> {
        self.insert(std::iter::once((key, v)))
    }

    fn lookup(&mut self, keys: &[&str]) -> Result<u64, BenchError> {
        let r = self
            .db()?
            .begin_read()
            .map_err(|e| err("begin_read")(e.into()))?;
        let t = r
            .open_table(TABLE)
            .map_err(|e| err("open_table")(e.into()))?;
        let mut sum = 0u64;
        for k in keys {
            let v = t
                .get(*k)
                .map_err(|e| err("get")(e.into()))?
                .ok_or_else(|| BenchError::new(format!("redb: key {k:?} missing")))?;
            sum = sum.wrapping_add(v.value());
        }
        Ok(sum)
    }
}
