//! `redb` and `redb-inline`: OO7 in redb tables keyed by id, in
//! [`super::kv`]'s normalised or inline layout; every write transaction with
//! `Durability::Immediate` and `--cache-mib` as the cache size, as OO1's
//! `redb` engine ([`crate::redb::begin_write`], [`crate::redb::builder`]).

use std::path::Path;

use amber_bench::oo7::engine::{Answer, EngineError, EngineInfo, EngineOptions, ResultExt};
use amber_bench::oo7::{Oo7Db, Oo7Engine, Oo7Factory};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};

use super::inline::Inline;
use super::kv::{KvEngine, KvRead, KvStore, KvWrite, Layout, T, Visit};
use super::normalised::Normalised;
use crate::redb::{DURABILITY, INSTALL, begin_write, builder};

const DB_FILE: &str = "oo7.redb";

type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

fn def(t: T) -> Def {
    TableDefinition::new(t.name())
}

/// A redb engine: a name and a layout.
#[derive(Clone, Copy)]
pub struct RedbFactory {
    name: &'static str,
    summary: &'static str,
    layout: &'static dyn Layout,
}

impl RedbFactory {
    /// `redb`: the normalised layout.
    pub const NORMALISED: RedbFactory = RedbFactory {
        name: "redb",
        summary: "redb: a table per class keyed by id and secondary-index tables; Durability::Immediate commits",
        layout: &Normalised,
    };
    /// `redb-inline`: the inline layout.
    pub const INLINE: RedbFactory = RedbFactory {
        name: "redb-inline",
        summary: "redb: a table per class keyed by id, each record holding its relationships (connections, bags, sub-assemblies, parts, users); date and title index tables; Durability::Immediate commits",
        layout: &Inline,
    };
}

impl Oo7Factory for RedbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: self.name,
            summary: self.summary,
            schema: self.layout.schema(),
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
        let mut store = Redb {
            database,
            tables: self.layout.tables(),
        };
        store.write(&mut |w| {
            self.layout.load(w, db)?;
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
            store: Box::new(Redb {
                database,
                tables: self.layout.tables(),
            }),
            layout: self.layout,
        }))
    }
}

/// An open redb OO7 database.
pub struct Redb {
    database: Database,
    /// The layout's tables, in the order the transactions open them.
    tables: &'static [T],
}

/// Where table `t` is in `tables`.
fn index(tables: &[T], t: T) -> Result<usize, EngineError> {
    tables
        .iter()
        .position(|&x| x == t)
        .ok_or_else(|| EngineError::corrupt(format!("no {} table in this layout", t.name())))
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
    names: &'static [T],
    tables: Vec<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>,
}

impl KvRead for Reader {
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.tables[index(self.names, t)?]
            .get(key)
            .ctx("reading a table")?
            .map(|g| g.value().to_vec()))
    }
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError> {
        scan_table(&self.tables[index(self.names, t)?], lo, hi, f)
    }
}

struct Writer<'t> {
    names: &'static [T],
    tables: Vec<Table<'t, &'static [u8], &'static [u8]>>,
}

impl KvRead for Writer<'_> {
    fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.tables[index(self.names, t)?]
            .get(key)
            .ctx("reading a table")?
            .map(|g| g.value().to_vec()))
    }
    fn scan(&self, t: T, lo: &[u8], hi: &[u8], f: &mut Visit<'_>) -> Result<(), EngineError> {
        scan_table(&self.tables[index(self.names, t)?], lo, hi, f)
    }
}

impl KvWrite for Writer<'_> {
    fn put(&mut self, t: T, key: &[u8], value: &[u8]) -> Result<(), EngineError> {
        self.tables[index(self.names, t)?]
            .insert(key, value)
            .ctx("writing a table")?;
        Ok(())
    }
    fn del(&mut self, t: T, key: &[u8]) -> Result<(), EngineError> {
        self.tables[index(self.names, t)?]
            .remove(key)
            .ctx("writing a table")?;
        Ok(())
    }
}

impl KvStore for Redb {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn KvRead) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let rtxn = self.database.begin_read().ctx("beginning a read")?;
        let tables = self
            .tables
            .iter()
            .map(|&t| rtxn.open_table(def(t)).ctx("opening a table"))
            .collect::<Result<_, _>>()?;
        f(&Reader {
            names: self.tables,
            tables,
        })
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn KvWrite) -> Result<Answer, EngineError>,
    ) -> Result<Answer, EngineError> {
        let wtxn = begin_write(&self.database, "beginning a write")?;
        let answer = {
            let tables = self
                .tables
                .iter()
                .map(|&t| wtxn.open_table(def(t)).ctx("opening a table"))
                .collect::<Result<_, _>>()?;
            f(&mut Writer {
                names: self.tables,
                tables,
            })?
        };
        wtxn.commit().ctx("committing")?;
        Ok(answer)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
