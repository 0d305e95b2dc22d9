//! `lmdb`: LMDB through heed. Three databases in one environment, keys are
//! big-endian `u32` part ids, values fixed-size records read in place from the
//! memory map ([`crate::record`]):
//!
//! - `parts`: id → part record;
//! - `out`: from → one sorted duplicate per outgoing connection (slot first, so
//!   duplicates come back in slot order), `DUP_SORT | DUP_FIXED`;
//! - `in`: to → one sorted duplicate per incoming connection (from, slot).
//!
//! Commits use LMDB's default durability (checked at open: none of
//! `NO_SYNC`, `NO_META_SYNC`, `MAP_ASYNC`): the data pages are written and
//! fdatasynced, then the meta page is written through a synchronous
//! descriptor, before `commit` returns.

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, NewPart,
    Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use heed::byteorder::BigEndian;
use heed::types::{Bytes, U32};
use heed::{
    CommitOrAbort, Database, DatabaseFlags, Env, EnvFlags, EnvOpenOptions, PutFlags, RoTxn, RwTxn,
};

use crate::record::{PartRef, encode_in, encode_out, encode_part, in_source, out_target};

type Key = U32<BigEndian>;
type Db = Database<'static, Key, Bytes>;

/// The map size: address space reserved for the database, not disk or memory.
const MAP_SIZE: usize = 64 << 30;

/// The `lmdb` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct LmdbFactory;

/// How an LMDB commit is made durable (`lmdb` and `lmdb-inline`).
pub const DURABILITY: &str = "LMDB's default flags (no NO_SYNC, NO_META_SYNC or MAP_ASYNC; checked at open): a commit writes its data pages and fdatasyncs them, then writes the meta page through a synchronous (O_DSYNC) descriptor, before returning";

/// What the harness's installation step does for LMDB.
pub const INSTALL: &str =
    "none: a commit writes its copy-on-write B-tree pages into the data file itself";

/// Opens the environment in `dir`, and checks that no flag skips a commit's
/// sync.
// heed marks opening an environment `unsafe` because a memory-mapped file
// changed behind LMDB's back (by another process, or by a second, unlocked
// environment on the same file) would be undefined behaviour. This is the one
// unsafe call of the comparison engines; the workspace denies unsafe code
// everywhere else.
pub(crate) fn open_env(dir: &Path) -> Result<Env, EngineError> {
    open_env_with(dir, 3)
}

/// [`open_env`] for an environment of up to `max_dbs` named databases
/// (OO7's engine has more than OO1's three).
#[allow(unsafe_code)]
pub(crate) fn open_env_with(dir: &Path, max_dbs: u32) -> Result<Env, EngineError> {
    let mut options = EnvOpenOptions::new();
    options.map_size(MAP_SIZE).max_dbs(max_dbs);
    // The harness gives every process its own copy of the database directory
    // and nothing else writes to it while it is open; LMDB's lock file (default
    // flags: no NO_LOCK, no NO_SYNC) coordinates readers and the writer.
    // SAFETY: no other mapping of these files is modified behind LMDB's back,
    // and heed allows the same path to be opened again in one process.
    let env = unsafe { options.open(dir) }
        .ctx(&format!("opening the LMDB environment {}", dir.display()))?;
    let flags = env.get_flags().ctx("reading the environment's flags")?;
    let unsynced = EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC | EnvFlags::MAP_ASYNC;
    if flags & unsynced.bits() != 0 {
        return Err(EngineError::bad_input(format!(
            "the LMDB environment {} has flags {flags:#x}: NO_SYNC, NO_META_SYNC or MAP_ASYNC would skip a commit's sync",
            dir.display()
        )));
    }
    Ok(env)
}

struct Dbs {
    parts: Db,
    out: Db,
    inc: Db,
}

const DUPS: DatabaseFlags = DatabaseFlags::DUP_SORT.union(DatabaseFlags::DUP_FIXED);

fn create_dbs(env: &Env) -> Result<Dbs, EngineError> {
    let wtxn = env.write_txn().ctx("beginning a write transaction")?;
    let committed = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, heed::Error> {
            let parts = opener
                .database_options()
                .types::<Key, Bytes>()
                .name("parts")
                .create(wtxn)?;
            let out = opener
                .database_options()
                .types::<Key, Bytes>()
                .name("out")
                .flags(DUPS)
                .create(wtxn)?;
            let inc = opener
                .database_options()
                .types::<Key, Bytes>()
                .name("in")
                .flags(DUPS)
                .create(wtxn)?;
            Ok(CommitOrAbort::<_, ()>::Commit((parts, out, inc)))
        })
        .ctx("creating the databases")?;
    let (parts, out, inc) = committed
        .commit()
        .ok_or_else(|| EngineError::corrupt("creating the LMDB databases was aborted"))?;
    Ok(Dbs { parts, out, inc })
}

fn open_dbs(env: &Env) -> Result<Dbs, EngineError> {
    let rtxn = env.read_txn().ctx("beginning a read transaction")?;
    let committed = env
        .open_databases_and_commit(rtxn, |opener, rtxn| -> Result<_, heed::Error> {
            let parts = opener
                .database_options()
                .types::<Key, Bytes>()
                .name("parts")
                .open(rtxn)?;
            let out = opener
                .database_options()
                .types::<Key, Bytes>()
                .name("out")
                .flags(DUPS)
                .open(rtxn)?;
            let inc = opener
                .database_options()
                .types::<Key, Bytes>()
                .name("in")
                .flags(DUPS)
                .open(rtxn)?;
            Ok(CommitOrAbort::<_, ()>::Commit((parts, out, inc)))
        })
        .ctx("opening the databases")?;
    match committed.commit() {
        Some((Some(parts), Some(out), Some(inc))) => Ok(Dbs { parts, out, inc }),
        _ => Err(EngineError::corrupt(
            "the LMDB environment lacks the parts, out or in database",
        )),
    }
}

/// Writes parts and both connection indexes in `wtxn`.
fn put_parts<'a>(
    dbs: &Dbs,
    wtxn: &mut RwTxn<'_>,
    parts: impl Iterator<Item = &'a NewPart> + Clone,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    for np in parts.clone() {
        let p = &np.part;
        // NO_OVERWRITE: inserting an id that exists is an error, not an update.
        dbs.parts
            .put_with_flags(wtxn, PutFlags::NO_OVERWRITE, &p.id, &encode_part(p))
            .ctx(&format!("inserting part {}", p.id))?;
        tally.visit(p.id, p.x, p.y, &p.kind);
        tally.changed();
    }
    for np in parts {
        for (slot, c) in np.connections.iter().enumerate() {
            dbs.out
                .put(wtxn, &c.from, &encode_out(slot as u8, c))
                .ctx("writing an outgoing connection")?;
            dbs.inc
                .put(wtxn, &c.to, &encode_in(c.from, slot as u8))
                .ctx("writing an incoming connection")?;
        }
    }
    Ok(())
}

impl EngineFactory for LmdbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "lmdb",
            summary: "LMDB via heed: parts, out and in databases keyed by big-endian id, fixed-size records read in place (zero-copy), connections as sorted fixed-size duplicates; durable commits",
            schema: "normalised: parts database + out and in connection databases keyed by id (connections as sorted duplicates); a traversal step is two B-tree lookups (the part's connections, then each target part)",
            durability: DURABILITY,
            install: INSTALL,
            cache_budget: false,
        }
    }

    fn build(
        &self,
        dir: &Path,
        db: &GeneratedDb,
        _options: &EngineOptions,
    ) -> Result<(), EngineError> {
        let env = open_env(dir)?;
        let dbs = create_dbs(&env)?;
        let mut wtxn = env.write_txn().ctx("beginning the load")?;
        let batch: Vec<NewPart> = db
            .parts
            .iter()
            .map(|p| {
                let out = db.outgoing(p.id);
                match out {
                    [a, b, c] => Ok(NewPart {
                        part: *p,
                        connections: [*a, *b, *c],
                    }),
                    _ => Err(EngineError::bad_input(format!(
                        "part {} has {} connections",
                        p.id,
                        out.len()
                    ))),
                }
            })
            .collect::<Result<_, _>>()?;
        put_parts(
            &dbs,
            &mut wtxn,
            batch.iter(),
            &mut Tally::for_op(Op::Insert),
        )?;
        wtxn.commit().ctx("committing the load")?;
        env.prepare_for_closing().wait();
        Ok(())
    }

    fn open(&self, dir: &Path, _options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
        let env = open_env(dir)?;
        let dbs = open_dbs(&env)?;
        Ok(Box::new(Lmdb { env, dbs }))
    }
}

/// An open `lmdb` database.
pub struct Lmdb {
    env: Env,
    dbs: Dbs,
}

fn visit(dbs: &Dbs, txn: &RoTxn<'_>, id: PartId, tally: &mut Tally) -> Result<(), EngineError> {
    let bytes = dbs
        .parts
        .get(txn, &id)
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })?;
    let p = PartRef::new(id, bytes)?;
    tally.visit(id, p.x(), p.y(), p.kind());
    Ok(())
}

/// Visits `id` and, below depth 7, walks along `out` (or `in` when `reverse`).
fn walk(
    dbs: &Dbs,
    txn: &RoTxn<'_>,
    id: PartId,
    depth: u32,
    reverse: bool,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    visit(dbs, txn, id, tally)?;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let index = if reverse { &dbs.inc } else { &dbs.out };
    let Some(dups) = index.get_duplicates(txn, &id).ctx("reading connections")? else {
        return Ok(());
    };
    for entry in dups {
        let (_, bytes) = entry.ctx("reading a connection")?;
        let next = if reverse {
            in_source(id, bytes)?
        } else {
            out_target(id, bytes)?
        };
        walk(dbs, txn, next, depth + 1, reverse, tally)?;
    }
    Ok(())
}

fn walk_update(
    dbs: &Dbs,
    wtxn: &mut RwTxn<'_>,
    id: PartId,
    depth: u32,
    plan: &UpdatePlan,
    visit: &mut usize,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let bytes = dbs
        .parts
        .get(wtxn, &id)
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })?;
    let p = PartRef::new(id, bytes)?;
    tally.visit(id, p.x(), p.y(), p.kind());
    if plan.increment_at(*visit) {
        let record = p.incremented();
        dbs.parts.put(wtxn, &id, &record).ctx("writing a part")?;
        tally.changed();
    }
    *visit += 1;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let mut next = [0 as PartId; 3];
    let mut n = 0;
    if let Some(dups) = dbs
        .out
        .get_duplicates(wtxn, &id)
        .ctx("reading connections")?
    {
        for entry in dups {
            let (_, bytes) = entry.ctx("reading a connection")?;
            let slot = next.get_mut(n).ok_or_else(|| {
                EngineError::corrupt(format!("part {id} has more than 3 outgoing connections"))
            })?;
            *slot = out_target(id, bytes)?;
            n += 1;
        }
    }
    for &to in &next[..n] {
        walk_update(dbs, wtxn, to, depth + 1, plan, visit, tally)?;
    }
    Ok(())
}

impl Engine for Lmdb {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let rtxn = self.env.read_txn().ctx("beginning a read transaction")?;
        for &id in ids {
            visit(&self.dbs, &rtxn, id, &mut tally)?;
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let rtxn = self.env.read_txn().ctx("beginning a read transaction")?;
        walk(&self.dbs, &rtxn, root, 0, false, &mut tally)?;
        Ok(tally.finish())
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        let rtxn = self.env.read_txn().ctx("beginning a read transaction")?;
        walk(&self.dbs, &rtxn, root, 0, true, &mut tally)?;
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let mut wtxn = self.env.write_txn().ctx("beginning the insert")?;
        put_parts(&self.dbs, &mut wtxn, parts.iter(), &mut tally)?;
        wtxn.commit().ctx("committing the insert")?;
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let mut wtxn = self.env.write_txn().ctx("beginning the update")?;
        let mut visit = 0;
        walk_update(&self.dbs, &mut wtxn, root, 0, plan, &mut visit, &mut tally)?;
        wtxn.commit().ctx("committing the update")?;
        Ok(tally.finish())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        let Lmdb { env, dbs: _ } = *self;
        env.prepare_for_closing().wait();
        Ok(())
    }
}
