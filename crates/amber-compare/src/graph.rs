//! The OO1 database as plain Rust structs: an arena `Vec<Part>` indexed by
//! `id − 1`, connections holding arena indices. The `memory` engine keeps it in
//! memory; the `snapshot` engine serialises it whole.

use amber_bench::oo1::{
    Answer, EngineError, GeneratedDb, Kind, NewPart, Op, PartId, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use serde::{Deserialize, Serialize};

/// The layout, as the OO1 table names it (`memory` and `snapshot`).
pub const SCHEMA: &str = "inline, in memory: an arena Vec<Part> indexed by id - 1, a part holding its 3 outgoing connections (target index, kind, length) and a Vec of the indices of the parts connecting to it; a traversal step is one indexed load";

/// An outgoing connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conn {
    /// Arena index of the target (`id − 1`).
    pub to: u32,
    pub kind: Kind,
    pub length: i32,
}

/// A part with its outgoing connections (in slot order) and the arena indices
/// of the parts connecting to it (in (from, slot) order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub kind: Kind,
    pub x: i32,
    pub y: i32,
    pub build: i64,
    pub out: [Conn; 3],
    pub incoming: Vec<u32>,
}

/// The arena: part `id` is `parts[id − 1]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    pub parts: Vec<Part>,
}

impl Graph {
    /// The graph of a generated database.
    pub fn from_generated(db: &GeneratedDb) -> Graph {
        let mut parts: Vec<Part> = db
            .parts
            .iter()
            .map(|p| {
                let out = db.outgoing(p.id);
                let conn = |slot: usize| {
                    out.get(slot).map_or(
                        Conn {
                            to: 0,
                            kind: [0; 10],
                            length: 0,
                        },
                        |c| Conn {
                            to: c.to.saturating_sub(1),
                            kind: c.kind,
                            length: c.length,
                        },
                    )
                };
                Part {
                    kind: p.kind,
                    x: p.x,
                    y: p.y,
                    build: p.build,
                    out: [conn(0), conn(1), conn(2)],
                    incoming: Vec::new(),
                }
            })
            .collect();
        for c in &db.connections {
            if let Some(p) = parts.get_mut((c.to as usize).wrapping_sub(1)) {
                p.incoming.push(c.from.saturating_sub(1));
            }
        }
        Graph { parts }
    }

    /// Checks that every arena index is in range (after loading from a file).
    pub fn validate(&self) -> Result<(), EngineError> {
        let n = self.parts.len();
        for (i, p) in self.parts.iter().enumerate() {
            let bad = p
                .out
                .iter()
                .map(|c| c.to)
                .chain(p.incoming.iter().copied())
                .find(|&t| t as usize >= n);
            if let Some(t) = bad {
                return Err(EngineError::corrupt(format!(
                    "part {} refers to arena index {t}, but there are {n} parts",
                    i + 1
                )));
            }
        }
        Ok(())
    }

    fn index(&self, id: PartId) -> Result<usize, EngineError> {
        let i = (id as usize).wrapping_sub(1);
        if i < self.parts.len() {
            Ok(i)
        } else {
            Err(EngineError::MissingPart { id })
        }
    }

    pub fn lookup(&self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        for &id in ids {
            let p = &self.parts[self.index(id)?];
            tally.visit(id, p.x, p.y, &p.kind);
        }
        Ok(tally.finish())
    }

    pub fn traverse(&self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        self.walk_out(self.index(root)?, 0, &mut tally);
        Ok(tally.finish())
    }

    // Indices were checked on insert and on load, so indexing cannot fail.
    fn walk_out(&self, i: usize, depth: u32, tally: &mut Tally) {
        let p = &self.parts[i];
        tally.visit(i as PartId + 1, p.x, p.y, &p.kind);
        if depth < TRAVERSAL_DEPTH {
            for c in &p.out {
                self.walk_out(c.to as usize, depth + 1, tally);
            }
        }
    }

    pub fn reverse(&self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        self.walk_in(self.index(root)?, 0, &mut tally);
        Ok(tally.finish())
    }

    fn walk_in(&self, i: usize, depth: u32, tally: &mut Tally) {
        let p = &self.parts[i];
        tally.visit(i as PartId + 1, p.x, p.y, &p.kind);
        if depth < TRAVERSAL_DEPTH {
            for &from in &p.incoming {
                self.walk_in(from as usize, depth + 1, tally);
            }
        }
    }

    pub fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let mut visit = 0;
        let root = self.index(root)?;
        self.walk_update(root, 0, plan, &mut visit, &mut tally);
        Ok(tally.finish())
    }

    fn walk_update(
        &mut self,
        i: usize,
        depth: u32,
        plan: &UpdatePlan,
        visit: &mut usize,
        tally: &mut Tally,
    ) {
        let p = &mut self.parts[i];
        tally.visit(i as PartId + 1, p.x, p.y, &p.kind);
        if plan.increment_at(*visit) {
            p.x += 1;
            p.y += 1;
            tally.changed();
        }
        *visit += 1;
        if depth < TRAVERSAL_DEPTH {
            let out = p.out;
            for c in &out {
                self.walk_update(c.to as usize, depth + 1, plan, visit, tally);
            }
        }
    }

    /// Appends the parts (dense ids continuing the arena), then links their
    /// connections both ways. Nothing is changed if the batch is invalid.
    pub fn insert(&mut self, batch: &[NewPart]) -> Result<Answer, EngineError> {
        let first = self.parts.len() + 1;
        let last = self.parts.len() + batch.len();
        for (k, np) in batch.iter().enumerate() {
            if np.part.id as usize != first + k {
                return Err(EngineError::bad_input(format!(
                    "part {} inserted where part {} was expected",
                    np.part.id,
                    first + k
                )));
            }
            if let Some(c) = np
                .connections
                .iter()
                .find(|c| c.to == 0 || c.to as usize > last)
            {
                return Err(EngineError::MissingPart { id: c.to });
            }
        }
        let mut tally = Tally::for_op(Op::Insert);
        for np in batch {
            let conn = |slot: usize| Conn {
                to: np.connections[slot].to - 1,
                kind: np.connections[slot].kind,
                length: np.connections[slot].length,
            };
            self.parts.push(Part {
                kind: np.part.kind,
                x: np.part.x,
                y: np.part.y,
                build: np.part.build,
                out: [conn(0), conn(1), conn(2)],
                incoming: Vec::new(),
            });
            tally.visit(np.part.id, np.part.x, np.part.y, &np.part.kind);
            tally.changed();
        }
        for np in batch {
            for c in &np.connections {
                self.parts[c.to as usize - 1].incoming.push(np.part.id - 1);
            }
        }
        Ok(tally.finish())
    }
}
