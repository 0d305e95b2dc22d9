//! The reference evaluator: the OO1 operations written as plainly as possible
//! over [`GeneratedDb`], in memory. The harness computes every job's expected
//! answers with it and fails any engine that answers differently.

use super::database::{GeneratedDb, NewPart, PartId};
use super::engine::{Answer, Engine, EngineError, TRAVERSAL_DEPTH, Tally, UpdatePlan};
use super::ops::Op;

/// The generated database plus an incoming-connection index, mutable.
#[derive(Clone, Debug)]
pub struct Reference {
    db: GeneratedDb,
    incoming: Vec<Vec<PartId>>,
}

impl Reference {
    /// A reference evaluator over a copy of `db`.
    pub fn new(db: &GeneratedDb) -> Self {
        Self {
            incoming: db.incoming_lists(),
            db: db.clone(),
        }
    }

    /// The number of parts now in the database.
    pub fn parts(&self) -> usize {
        self.db.parts.len()
    }

    fn visit(&self, id: PartId, tally: &mut Tally) -> Result<(), EngineError> {
        let p = self
            .db
            .part(id)
            .ok_or_else(|| EngineError::MissingPart { id })?;
        tally.visit(id, p.x, p.y, &p.kind);
        Ok(())
    }

    fn walk(
        &self,
        id: PartId,
        depth: u32,
        reverse: bool,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        self.visit(id, tally)?;
        if depth == TRAVERSAL_DEPTH {
            return Ok(());
        }
        if reverse {
            let from = self
                .incoming
                .get((id as usize).wrapping_sub(1))
                .ok_or_else(|| EngineError::MissingPart { id })?;
            for &f in from {
                self.walk(f, depth + 1, reverse, tally)?;
            }
        } else {
            for c in self.db.outgoing(id) {
                self.walk(c.to, depth + 1, reverse, tally)?;
            }
        }
        Ok(())
    }

    fn update_walk(
        &mut self,
        id: PartId,
        depth: u32,
        plan: &UpdatePlan,
        visit: &mut usize,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let index = (id as usize).wrapping_sub(1);
        let part = self
            .db
            .parts
            .get_mut(index)
            .ok_or_else(|| EngineError::MissingPart { id })?;
        tally.visit(id, part.x, part.y, &part.kind);
        if plan.increment_at(*visit) {
            part.x += 1;
            part.y += 1;
            tally.changed();
        }
        *visit += 1;
        if depth == TRAVERSAL_DEPTH {
            return Ok(());
        }
        let targets: Vec<PartId> = self.db.outgoing(id).iter().map(|c| c.to).collect();
        for to in targets {
            self.update_walk(to, depth + 1, plan, visit, tally)?;
        }
        Ok(())
    }
}

impl Engine for Reference {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        for &id in ids {
            self.visit(id, &mut tally)?;
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        self.walk(root, 0, false, &mut tally)?;
        Ok(tally.finish())
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        self.walk(root, 0, true, &mut tally)?;
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        for np in parts {
            if np.part.id as usize != self.db.parts.len() + 1 {
                return Err(EngineError::bad_input(format!(
                    "part {} inserted after part {}",
                    np.part.id,
                    self.db.parts.len()
                )));
            }
            self.db.parts.push(np.part);
            self.db.connections.extend_from_slice(&np.connections);
            self.incoming.push(Vec::new());
            tally.visit(np.part.id, np.part.x, np.part.y, &np.part.kind);
            tally.changed();
        }
        for np in parts {
            for c in &np.connections {
                self.incoming
                    .get_mut((c.to as usize).wrapping_sub(1))
                    .ok_or_else(|| EngineError::MissingPart { id: c.to })?
                    .push(c.from);
            }
        }
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let mut visit = 0;
        self.update_walk(root, 0, plan, &mut visit, &mut tally)?;
        Ok(tally.finish())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oo1::database::{GenParams, generate, new_parts};
    use crate::oo1::engine::TRAVERSAL_VISITS;
    use crate::rng::Rng;

    fn reference() -> Reference {
        let db = generate(GenParams {
            parts: 2_000,
            seed: 11,
        })
        .expect("valid parameters");
        Reference::new(&db)
    }

    #[test]
    fn traversal_visits_3280_parts() {
        let mut r = reference();
        for root in [1, 777, 2_000] {
            assert_eq!(r.traverse(root).expect("traversal").count, TRAVERSAL_VISITS);
        }
    }

    #[test]
    fn update_increments_where_the_plan_says_and_later_visits_see_it() {
        let mut r = reference();
        let before = r.lookup(&[5]).expect("lookup");
        let all = UpdatePlan::new(vec![true; TRAVERSAL_VISITS as usize]);
        let a = r.update(5, &all).expect("update");
        assert_eq!((a.count, a.changed), (TRAVERSAL_VISITS, TRAVERSAL_VISITS));
        let after = r.lookup(&[5]).expect("lookup");
        assert_ne!(before, after);
        let none = UpdatePlan::new(Vec::new());
        let b = r.update(5, &none).expect("update");
        assert_eq!(b.changed, 0);
        let c = r.traverse(5).expect("traversal");
        assert_eq!(
            b.checksum, c.checksum,
            "an update with p = 0 reads what a traversal reads"
        );
    }

    #[test]
    fn insert_updates_the_incoming_index_and_checks_ids() {
        let mut r = reference();
        let params = GenParams {
            parts: 2_000,
            seed: 11,
        };
        let batch = new_parts(params, &mut Rng::seed_from_u64(1), 2_001, 100);
        let before = r.reverse(batch[0].connections[0].to).expect("reverse");
        let a = r.insert(&batch).expect("insert");
        assert_eq!((a.count, a.changed), (100, 100));
        assert_eq!(r.parts(), 2_100);
        let after = r.reverse(batch[0].connections[0].to).expect("reverse");
        assert!(after.count > before.count);
        assert!(matches!(
            r.insert(&batch),
            Err(EngineError::BadInput { .. })
        ));
        assert!(matches!(
            r.lookup(&[5_000]),
            Err(EngineError::MissingPart { id: 5_000 })
        ));
    }
}
