//! `snapshot`: the [`Graph`] structs serialised whole with serde + postcard.
//! `open` reads and decodes the whole file; every commit encodes the whole
//! graph, writes it to a temporary file, fsyncs it, renames it over the
//! snapshot and fsyncs the directory (so a crash leaves the old or the new
//! snapshot, never a torn one).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, NewPart,
    PartId, UpdatePlan,
};

use crate::graph::Graph;

pub(crate) const SNAPSHOT_FILE: &str = "snapshot.postcard";
const TEMP_FILE: &str = "snapshot.postcard.tmp";

/// The `snapshot` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotFactory;

impl EngineFactory for SnapshotFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "snapshot",
            summary: "the memory engine's structs serialised whole with serde+postcard: read whole at open, written whole + fsync + rename at every commit",
            schema: crate::graph::SCHEMA,
            durability: "the whole graph written to a temporary file, fsynced, renamed over the snapshot, the directory fsynced, at every commit",
            install: "none: every commit writes the whole database",
            cache_budget: false,
        }
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        _options: &EngineOptions,
    ) -> Result<(), EngineError> {
        save(dir, &Graph::from_generated(db))
    }

    fn open(&self, dir: &Path, _options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let path = dir.join(SNAPSHOT_FILE);
        let bytes = fs::read(&path)
            .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
        let graph: Graph = postcard::from_bytes(&bytes)
            .map_err(|e| EngineError::backend(format!("decoding {}", path.display()), e))?;
        graph.validate()?;
        Ok(Box::new(Snapshot {
            dir: dir.to_path_buf(),
            graph,
        }))
    }
}

/// Writes `graph` durably as the snapshot of `dir` (OO7's `snapshot`
/// engine writes its model with it too).
pub(crate) fn save<T: serde::Serialize>(dir: &Path, graph: &T) -> Result<(), EngineError> {
    let bytes = postcard::to_allocvec(graph)
        .map_err(|e| EngineError::backend("encoding the snapshot", e))?;
    let temp = dir.join(TEMP_FILE);
    let io = |what: &str, path: &Path| {
        let context = format!("{what} {}", path.display());
        move |e| EngineError::io(context, e)
    };
    let mut file = File::create(&temp).map_err(io("creating", &temp))?;
    file.write_all(&bytes).map_err(io("writing", &temp))?;
    file.sync_all().map_err(io("syncing", &temp))?;
    drop(file);
    let target = dir.join(SNAPSHOT_FILE);
    fs::rename(&temp, &target).map_err(io("renaming over", &target))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing the directory", dir))
}

/// An open `snapshot` database.
pub struct Snapshot {
    dir: PathBuf,
    graph: Graph,
}

impl Engine for Snapshot {
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
        let answer = self.graph.insert(parts)?;
        save(&self.dir, &self.graph)?;
        Ok(answer)
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let answer = self.graph.update(root, plan)?;
        save(&self.dir, &self.graph)?;
        Ok(answer)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}
