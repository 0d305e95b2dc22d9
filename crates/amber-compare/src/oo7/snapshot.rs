//! `snapshot`: the `memory` engine's model serialised whole with serde +
//! postcard: read and decoded whole at open; every committing operation
//! writes the whole model to a temporary file, fsyncs it, renames it over
//! the snapshot and fsyncs the directory (OO1's `snapshot` writer).

use std::fs;
use std::path::{Path, PathBuf};

use amber_bench::oo7::engine::{Answer, EngineError, EngineInfo, EngineOptions};
use amber_bench::oo7::{Model, NewComposite, Oo7Db, Oo7Engine, Oo7Factory, Traversal};

use crate::snapshot::{SNAPSHOT_FILE, save};

/// The `snapshot` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotFactory;

impl Oo7Factory for SnapshotFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "snapshot",
            summary: "the memory engine's structs serialised whole with serde+postcard: read whole at open, written whole + fsync + rename at every commit",
            schema: super::memory::SCHEMA,
            durability: "the whole model written to a temporary file, fsynced, renamed over the snapshot, the directory fsynced, at every commit",
            install: "none: every commit writes the whole database",
            cache_budget: false,
        }
    }

    fn build(&self, dir: &Path, db: &Oo7Db, _options: &EngineOptions) -> Result<(), EngineError> {
        save(dir, &Model::new(db))
    }

    fn open(
        &self,
        dir: &Path,
        _options: &EngineOptions,
    ) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let path = dir.join(SNAPSHOT_FILE);
        let bytes = fs::read(&path)
            .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
        let model: Model = postcard::from_bytes(&bytes)
            .map_err(|e| EngineError::backend(format!("decoding {}", path.display()), e))?;
        Ok(Box::new(Snapshot {
            dir: dir.to_path_buf(),
            model,
        }))
    }
}

/// An open `snapshot` database.
pub struct Snapshot {
    dir: PathBuf,
    model: Model,
}

impl Snapshot {
    /// `answer`, once the model is saved.
    fn saved(&self, answer: Result<Answer, EngineError>) -> Result<Answer, EngineError> {
        let answer = answer?;
        save(&self.dir, &self.model)?;
        Ok(answer)
    }
}

impl Oo7Engine for Snapshot {
    fn traverse(&mut self, module: u32, t: Traversal) -> Result<Answer, EngineError> {
        let answer = self.model.traverse(module, t);
        if t.update().is_some() {
            self.saved(answer)
        } else {
            answer
        }
    }
    fn documents(&mut self, module: u32, update: bool) -> Result<Answer, EngineError> {
        let answer = self.model.documents(module, update);
        if update { self.saved(answer) } else { answer }
    }
    fn up(&mut self, atomics: &[u32]) -> Result<Answer, EngineError> {
        self.model.up(atomics)
    }
    fn manual(&mut self, module: u32, scan: bool) -> Result<Answer, EngineError> {
        self.model.manual(module, scan)
    }
    fn lookup(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        self.model.lookup(ids)
    }
    fn date_range(&mut self, lo: i32, hi: i32) -> Result<Answer, EngineError> {
        self.model.date_range(lo, hi)
    }
    fn by_title(&mut self, titles: &[String]) -> Result<Answer, EngineError> {
        self.model.by_title(titles)
    }
    fn q5(&mut self) -> Result<Answer, EngineError> {
        self.model.q5()
    }
    fn q6(&mut self) -> Result<Answer, EngineError> {
        self.model.q6()
    }
    fn scan(&mut self) -> Result<Answer, EngineError> {
        Ok(self.model.scan())
    }
    fn join(&mut self) -> Result<Answer, EngineError> {
        Ok(self.model.join())
    }
    fn insert(&mut self, parts: &[NewComposite]) -> Result<Answer, EngineError> {
        let answer = self.model.insert(parts);
        self.saved(answer)
    }
    fn delete(&mut self, ids: &[u32]) -> Result<Answer, EngineError> {
        let answer = self.model.delete(ids);
        self.saved(answer)
    }
    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
