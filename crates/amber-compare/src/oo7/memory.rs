//! `memory`: the OO7 database as the harness's model
//! ([`amber_bench::oo7::Model`]): arenas indexed by id, a `BTreeMap` of
//! build dates, a `HashMap` of titles; nothing persisted. `build` writes
//! only the generator's parameters; `open` regenerates the database from
//! them (that is its open time). Commits do nothing.

use std::fs;
use std::path::Path;

use amber_bench::oo7::engine::{EngineError, EngineInfo, EngineOptions};
use amber_bench::oo7::{Model, Oo7Db, Oo7Engine, Oo7Factory, Params, generate};

const PARAMS_FILE: &str = "memory.params";

/// The model's schema, as the table names it.
pub const SCHEMA: &str = "plain Rust structs: Vec arenas indexed by id (the id indexes), an atomic part holding Vec<Connection> and the ids of its incoming parts, bags as Vec<u32>, documents and manuals as String; build dates in a BTreeMap<i32, Vec<u32>>, titles in a HashMap<String, u32>";

/// The `memory` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryFactory;

impl Oo7Factory for MemoryFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "memory",
            summary: "plain Rust structs in memory; nothing persisted, open regenerates from the seed, commit is a no-op",
            schema: SCHEMA,
            durability: "none: persists nothing (the speed limit)",
            install: "none: nothing is persisted",
            cache_budget: false,
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, _options: &EngineOptions) -> Result<(), EngineError> {
        let bytes = postcard::to_allocvec(&db.params)
            .map_err(|e| EngineError::backend("encoding parameters", e))?;
        let path = dir.join(PARAMS_FILE);
        fs::write(&path, bytes)
            .map_err(|e| EngineError::io(format!("writing {}", path.display()), e))
    }

    fn open(
        &self,
        dir: &Path,
        _options: &EngineOptions,
    ) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let path = dir.join(PARAMS_FILE);
        let bytes = fs::read(&path)
            .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
        let params: Params = postcard::from_bytes(&bytes)
            .map_err(|e| EngineError::backend(format!("decoding {}", path.display()), e))?;
        let db = generate(params).map_err(EngineError::corrupt)?;
        Ok(Box::new(Model::new(&db)))
    }
}
