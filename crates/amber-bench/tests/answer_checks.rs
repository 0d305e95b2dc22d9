//! The harness's answer checks catch an engine that gets an operation subtly
//! wrong, and pass one that does not.

use std::path::Path;

use amber_bench::oo1::harness::{compare_answers, expected_answers};
use amber_bench::oo1::reference::Reference;
use amber_bench::oo1::{
    Answer, ChildRequest, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GenParams,
    GeneratedDb, Job, NewPart, Op, PartId, Protocol, UpdatePlan, generate, run_job,
};

const PARAMS: GenParams = GenParams {
    parts: 1_000,
    seed: 77,
};
const PROTOCOL: Protocol = Protocol { warm: 2, hot: 1 };

/// Which mistake the test engine makes.
#[derive(Clone, Copy, PartialEq)]
enum Bug {
    None,
    /// Applies every update twice: each answer looks right, the stored values
    /// (seen by the next iterations and the checks) are not.
    UpdateTwice,
    /// Connects inserted parts to the wrong targets: the insert's own answer is
    /// right, the reads after it are not.
    InsertWrongTargets,
}

struct TestFactory(Bug);

struct TestEngine {
    reference: Reference,
    bug: Bug,
}

impl EngineFactory for TestFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "test",
            summary: "the reference evaluator, with an optional bug",
            schema: "the generated database",
            durability: "none",
            install: "none",
            cache_budget: false,
        }
    }

    fn build(
        &self,
        _dir: &Path,
        _db: &GeneratedDb,
        _options: &EngineOptions,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    fn open(&self, _dir: &Path, _options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let db = generate(PARAMS).map_err(EngineError::corrupt)?;
        Ok(Box::new(TestEngine {
            reference: Reference::new(&db),
            bug: self.0,
        }))
    }
}

impl Engine for TestEngine {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        self.reference.lookup(ids)
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.reference.traverse(root)
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        self.reference.reverse(root)
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        if self.bug == Bug::InsertWrongTargets {
            let mut wrong = parts.to_vec();
            for np in &mut wrong {
                for c in &mut np.connections {
                    c.to = if c.from == 1 { 2 } else { 1 };
                }
            }
            return self.reference.insert(&wrong);
        }
        self.reference.insert(parts)
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        if self.bug == Bug::UpdateTwice {
            let answer = self.reference.update(root, plan)?;
            self.reference.update(root, plan)?;
            return Ok(answer);
        }
        self.reference.update(root, plan)
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        Ok(())
    }
}

fn problems(bug: Bug, job: Job) -> Vec<String> {
    let db = generate(PARAMS).expect("valid parameters");
    let expected = expected_answers(&db, job, PROTOCOL).expect("expected answers");
    let request = ChildRequest {
        engine: "test".into(),
        dir: std::env::temp_dir(),
        params: PARAMS,
        job,
        protocol: PROTOCOL,
        options: EngineOptions::default(),
    };
    let result = run_job(&TestFactory(bug), &request).expect("job runs");
    compare_answers(&result, &expected, PROTOCOL)
}

#[test]
fn a_correct_engine_passes_every_job() {
    for job in Job::all(&Op::ALL) {
        assert_eq!(
            problems(Bug::None, job),
            Vec::<String>::new(),
            "{}",
            job.label()
        );
    }
}

#[test]
fn an_engine_that_updates_twice_fails_the_update() {
    let found = problems(
        Bug::UpdateTwice,
        Job {
            op: Op::Update,
            p: Some(0.2),
        },
    );
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|p| p.starts_with("test: update p=0.2")),
        "{found:#?}"
    );
}

#[test]
fn an_engine_that_misplaces_inserted_connections_fails_the_checks() {
    let found = problems(
        Bug::InsertWrongTargets,
        Job {
            op: Op::Insert,
            p: None,
        },
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("reads after the last iteration")),
        "{found:#?}"
    );
}
