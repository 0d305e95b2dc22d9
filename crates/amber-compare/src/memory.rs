//! `memory`: the OO1 database as plain Rust structs in memory ([`Graph`]), with
//! nothing persisted: the speed limit of any engine.
//!
//! `build` writes only the generator's parameters; `open` regenerates the
//! database from them (that is its "open" time). Commits do nothing, so changes
//! live as long as the process.

use std::fs;
use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GenParams, GeneratedDb,
    NewPart, PartId, UpdatePlan, generate,
};

use crate::graph::Graph;

const PARAMS_FILE: &str = "memory.params";

/// The `memory` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryFactory;

impl EngineFactory for MemoryFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "memory",
            summary: "plain Rust structs in memory (arena Vec<Part>, index links); nothing persisted, open regenerates from the seed, commit is a no-op",
            schema: crate::graph::SCHEMA,
            durability: "none: persists nothing (the speed limit)",
            install: "none: nothing is persisted",
            cache_budget: false,
        }
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        _options: &EngineOptions,
    ) -> Result<(), EngineError> {
        let bytes = postcard::to_allocvec(&db.params)
            .map_err(|e| EngineError::backend("encoding parameters", e))?;
        let path = dir.join(PARAMS_FILE);
        fs::write(&path, bytes)
            .map_err(|e| EngineError::io(format!("writing {}", path.display()), e))
    }

    fn open(&self, dir: &Path, _options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let path = dir.join(PARAMS_FILE);
        let bytes = fs::read(&path)
            .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
        let params: GenParams = postcard::from_bytes(&bytes)
            .map_err(|e| EngineError::backend(format!("decoding {}", path.display()), e))?;
        let db = generate(params).map_err(EngineError::corrupt)?;
        Ok(Box::new(Memory {
            graph: Graph::from_generated(&db),
        }))
    }
}

/// An open `memory` database.
pub struct Memory {
    graph: Graph,
}

impl Engine for Memory {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        self.graph.lookup(ids)
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.graph.traverse(root)
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.graph.reverse(root)
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        self.graph.insert(parts)
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        self.graph.update(root, plan)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
