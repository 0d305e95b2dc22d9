//! `lmdb`: LMDB through lmdb-rkv. Three databases in one environment, keys
//! are big-endian `u32` part ids, values fixed-size records read in place
//! from the memory map ([`crate::record`]):
//!
//! - `parts`: id → part record;
//! - `out`: from → one sorted duplicate per outgoing connection (slot first, so
//!   duplicates come back in slot order), `DUP_SORT | DUP_FIXED`;
//! - `in`: to → one sorted duplicate per incoming connection (from, slot).
//!
//! Commits use LMDB's default durability (none of `NO_SYNC`,
//! `NO_META_SYNC`, `MAP_ASYNC`: see [`ENV_FLAGS`]): the data pages are
//! written and fdatasynced, then the meta page is written through a
//! synchronous descriptor, before `commit` returns.
//!
//! The binding is lmdb-rkv rather than heed because lmdb-rkv opens an
//! environment with a safe function, where heed's asks its caller to
//! vouch for the file (a function marked as such in Rust): the workspace
//! keeps such code to Amber's virtual-memory module. The
//! hazard heed marks is LMDB's own — a mapped file changed behind its back,
//! or one environment opened twice in one process — and it is the
//! harness's to avoid either way: every process gets its own copy of a
//! database directory, nothing else writes to it while it is open, and each
//! engine here closes its environment (drops it) before the same directory
//! is opened again.

use std::path::Path;

use amber_bench::oo1::{
    Answer, Engine, EngineError, EngineFactory, EngineInfo, EngineOptions, GeneratedDb, NewPart,
    Op, PartId, ResultExt, TRAVERSAL_DEPTH, Tally, UpdatePlan,
};
use lmdb_rkv::{
    Cursor, Database, DatabaseFlags, Environment, EnvironmentFlags, RoCursor, RoTransaction,
    RwTransaction, Transaction, WriteFlags,
};

use crate::record::{PartRef, encode_in, encode_out, encode_part, in_source, out_target};

/// The map size: address space reserved for the database, not disk or memory.
const MAP_SIZE: usize = 64 << 30;

/// The flags every LMDB environment of the comparison engines is opened
/// with: LMDB's defaults. LMDB takes an environment's flags from the open
/// call alone (and `mdb_env_set_flags`, which lmdb-rkv does not offer); the
/// files store none of the sync flags, so these are all of them, and the
/// assertion below refuses, at compile time, any that would skip a commit's
/// sync. (heed read them back after open; lmdb-rkv has no safe way to.)
pub(crate) const ENV_FLAGS: EnvironmentFlags = EnvironmentFlags::empty();

/// The flags that let a commit return before it is on disk.
const UNSYNCED: u32 = EnvironmentFlags::NO_SYNC.bits()
    | EnvironmentFlags::NO_META_SYNC.bits()
    | EnvironmentFlags::MAP_ASYNC.bits();

const _: () = assert!(
    ENV_FLAGS.bits() & UNSYNCED == 0,
    "NO_SYNC, NO_META_SYNC or MAP_ASYNC would skip a commit's sync"
);

/// The `lmdb` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct LmdbFactory;

/// How an LMDB commit is made durable (`lmdb` and `lmdb-inline`).
pub const DURABILITY: &str = "LMDB's default flags (no NO_SYNC, NO_META_SYNC or MAP_ASYNC; the flags are one constant, checked at compile time): a commit writes its data pages and fdatasyncs them, then writes the meta page through a synchronous (O_DSYNC) descriptor, before returning";

/// What the harness's installation step does for LMDB.
pub const INSTALL: &str =
    "none: a commit writes its copy-on-write B-tree pages into the data file itself";

/// Opens the environment in `dir`, with [`ENV_FLAGS`].
pub(crate) fn open_env(dir: &Path) -> Result<Environment, EngineError> {
    open_env_with(dir, 3)
}

/// [`open_env`] for an environment of up to `max_dbs` named databases
/// (OO7's engine has more than OO1's three).
pub(crate) fn open_env_with(dir: &Path, max_dbs: u32) -> Result<Environment, EngineError> {
    // LMDB's lock file (default flags: no NO_LOCK) coordinates readers and
    // the writer.
    Environment::new()
        .set_flags(ENV_FLAGS)
        .set_map_size(MAP_SIZE)
        .set_max_dbs(max_dbs)
        .open(dir)
        .ctx(&format!("opening the LMDB environment {}", dir.display()))
}

/// The named database `name`, which must exist: a missing one is
/// [`EngineError::corrupt`].
pub(crate) fn open_db(env: &Environment, name: &str) -> Result<Database, EngineError> {
    match env.open_db(Some(name)) {
        Err(lmdb_rkv::Error::NotFound) => Err(EngineError::corrupt(format!(
            "the LMDB environment lacks the {name} database"
        ))),
        opened => opened.ctx(&format!("opening the {name} database")),
    }
}

/// `txn.get`, with LMDB's `NotFound` as `None`.
pub(crate) fn get<'t>(
    txn: &'t impl Transaction,
    db: Database,
    key: &[u8],
) -> Result<Option<&'t [u8]>, lmdb_rkv::Error> {
    match txn.get(db, &key) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(lmdb_rkv::Error::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The duplicates under `key` in the `DUP_SORT` database of `cursor`.
///
/// lmdb-rkv's `iter_dup_of` does not stop at a missing key: LMDB leaves the
/// cursor on the next key, whose duplicates it then yields. So the first
/// entry's key is compared (`NEXT_DUP` never leaves a key).
fn duplicates<'t>(
    cursor: &mut RoCursor<'t>,
    key: [u8; 4],
) -> impl Iterator<Item = Result<&'t [u8], lmdb_rkv::Error>> {
    cursor.iter_dup_of(key).map_while(move |entry| match entry {
        Ok((k, v)) => (k == key).then_some(Ok(v)),
        Err(e) => Some(Err(e)),
    })
}

/// The key of part `id`: big-endian, so that keys sort as ids.
pub(crate) fn key(id: PartId) -> [u8; 4] {
    id.to_be_bytes()
}

struct Dbs {
    parts: Database,
    out: Database,
    inc: Database,
}

/// The connection databases' flags: sorted, fixed-size duplicates.
const DUPS: DatabaseFlags = DatabaseFlags::from_bits_truncate(
    DatabaseFlags::DUP_SORT.bits() | DatabaseFlags::DUP_FIXED.bits(),
);

fn create_dbs(env: &Environment) -> Result<Dbs, EngineError> {
    let create = |name, flags| {
        env.create_db(Some(name), flags)
            .ctx("creating the databases")
    };
    Ok(Dbs {
        parts: create("parts", DatabaseFlags::empty())?,
        out: create("out", DUPS)?,
        inc: create("in", DUPS)?,
    })
}

fn open_dbs(env: &Environment) -> Result<Dbs, EngineError> {
    let dbs = Dbs {
        parts: open_db(env, "parts")?,
        out: open_db(env, "out")?,
        inc: open_db(env, "in")?,
    };
    // LMDB opens an existing database with the flags it was created with:
    // connection databases without sorted duplicates are another layout.
    let txn = env.begin_ro_txn().ctx("beginning a read transaction")?;
    for (name, db) in [("out", dbs.out), ("in", dbs.inc)] {
        let flags = txn.db_flags(db).ctx("reading a database's flags")?;
        if !flags.contains(DUPS) {
            return Err(EngineError::corrupt(format!(
                "the LMDB {name} database has flags {:#x}, not DUP_SORT | DUP_FIXED",
                flags.bits()
            )));
        }
    }
    Ok(dbs)
}

/// Writes parts and both connection indexes in `wtxn`.
fn put_parts<'a>(
    dbs: &Dbs,
    wtxn: &mut RwTransaction<'_>,
    parts: impl Iterator<Item = &'a NewPart> + Clone,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    for np in parts.clone() {
        let p = &np.part;
        // NO_OVERWRITE: inserting an id that exists is an error, not an update.
        wtxn.put(
            dbs.parts,
            &key(p.id),
            &encode_part(p),
            WriteFlags::NO_OVERWRITE,
        )
        .ctx(&format!("inserting part {}", p.id))?;
        tally.visit(p.id, p.x, p.y, &p.kind);
        tally.changed();
    }
    for np in parts {
        for (slot, c) in np.connections.iter().enumerate() {
            wtxn.put(
                dbs.out,
                &key(c.from),
                &encode_out(slot as u8, c),
                WriteFlags::empty(),
            )
            .ctx("writing an outgoing connection")?;
            wtxn.put(
                dbs.inc,
                &key(c.to),
                &encode_in(c.from, slot as u8),
                WriteFlags::empty(),
            )
            .ctx("writing an incoming connection")?;
        }
    }
    Ok(())
}

impl EngineFactory for LmdbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "lmdb",
            summary: "LMDB via lmdb-rkv: parts, out and in databases keyed by big-endian id, fixed-size records read in place (zero-copy), connections as sorted fixed-size duplicates; durable commits",
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
        let mut wtxn = env.begin_rw_txn().ctx("beginning the load")?;
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
    env: Environment,
    dbs: Dbs,
}

fn visit(
    dbs: &Dbs,
    txn: &RoTransaction<'_>,
    id: PartId,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let bytes = get(txn, dbs.parts, &key(id))
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })?;
    let p = PartRef::new(id, bytes)?;
    tally.visit(id, p.x(), p.y(), p.kind());
    Ok(())
}

/// Visits `id` and, below depth 7, walks along `out` (or `in` when `reverse`).
fn walk(
    dbs: &Dbs,
    txn: &RoTransaction<'_>,
    id: PartId,
    depth: u32,
    reverse: bool,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    visit(dbs, txn, id, tally)?;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let index = if reverse { dbs.inc } else { dbs.out };
    let mut cursor = txn.open_ro_cursor(index).ctx("reading connections")?;
    for entry in duplicates(&mut cursor, key(id)) {
        let bytes = entry.ctx("reading a connection")?;
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
    wtxn: &mut RwTransaction<'_>,
    id: PartId,
    depth: u32,
    plan: &UpdatePlan,
    visit: &mut usize,
    tally: &mut Tally,
) -> Result<(), EngineError> {
    let bytes = get(wtxn, dbs.parts, &key(id))
        .ctx("reading a part")?
        .ok_or_else(|| EngineError::MissingPart { id })?;
    let p = PartRef::new(id, bytes)?;
    tally.visit(id, p.x(), p.y(), p.kind());
    if plan.increment_at(*visit) {
        let record = p.incremented();
        wtxn.put(dbs.parts, &key(id), &record, WriteFlags::empty())
            .ctx("writing a part")?;
        tally.changed();
    }
    *visit += 1;
    if depth == TRAVERSAL_DEPTH {
        return Ok(());
    }
    let mut next = [0 as PartId; 3];
    let mut n = 0;
    let mut cursor = wtxn.open_ro_cursor(dbs.out).ctx("reading connections")?;
    for entry in duplicates(&mut cursor, key(id)) {
        let bytes = entry.ctx("reading a connection")?;
        let slot = next.get_mut(n).ok_or_else(|| {
            EngineError::corrupt(format!("part {id} has more than 3 outgoing connections"))
        })?;
        *slot = out_target(id, bytes)?;
        n += 1;
    }
    drop(cursor);
    for &to in &next[..n] {
        walk_update(dbs, wtxn, to, depth + 1, plan, visit, tally)?;
    }
    Ok(())
}

impl Engine for Lmdb {
    fn lookup(&mut self, ids: &[PartId]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Lookup);
        let rtxn = self
            .env
            .begin_ro_txn()
            .ctx("beginning a read transaction")?;
        for &id in ids {
            visit(&self.dbs, &rtxn, id, &mut tally)?;
        }
        Ok(tally.finish())
    }

    fn traverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let rtxn = self
            .env
            .begin_ro_txn()
            .ctx("beginning a read transaction")?;
        walk(&self.dbs, &rtxn, root, 0, false, &mut tally)?;
        Ok(tally.finish())
    }

    fn reverse(&mut self, root: PartId) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Reverse);
        let rtxn = self
            .env
            .begin_ro_txn()
            .ctx("beginning a read transaction")?;
        walk(&self.dbs, &rtxn, root, 0, true, &mut tally)?;
        Ok(tally.finish())
    }

    fn insert(&mut self, parts: &[NewPart]) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Insert);
        let mut wtxn = self.env.begin_rw_txn().ctx("beginning the insert")?;
        put_parts(&self.dbs, &mut wtxn, parts.iter(), &mut tally)?;
        wtxn.commit().ctx("committing the insert")?;
        Ok(tally.finish())
    }

    fn update(&mut self, root: PartId, plan: &UpdatePlan) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Update);
        let mut wtxn = self.env.begin_rw_txn().ctx("beginning the update")?;
        let mut visit = 0;
        walk_update(&self.dbs, &mut wtxn, root, 0, plan, &mut visit, &mut tally)?;
        wtxn.commit().ctx("committing the update")?;
        Ok(tally.finish())
    }

    fn close(self: Box<Self>) -> Result<(), EngineError> {
        // Dropping the environment closes it (`mdb_env_close`).
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_all(env: &Environment, db: Database, entries: &[(PartId, &[u8])]) {
        let mut wtxn = env.begin_rw_txn().expect("write transaction");
        for &(id, value) in entries {
            wtxn.put(db, &key(id), &value, WriteFlags::empty())
                .expect("put");
        }
        wtxn.commit().expect("commit");
    }

    /// A key without duplicates yields none, not those of the next key.
    #[test]
    fn duplicates_stop_at_the_key() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let env = open_env(dir.path()).expect("open");
        let db = env.create_db(Some("out"), DUPS).expect("create");
        put_all(&env, db, &[(1, b"aa"), (1, b"bb"), (3, b"cc")]);
        let txn = env.begin_ro_txn().expect("read transaction");
        let mut cursor = txn.open_ro_cursor(db).expect("cursor");
        let mut dups = |id| -> Vec<&[u8]> {
            duplicates(&mut cursor, key(id))
                .collect::<Result<_, _>>()
                .expect("duplicates")
        };
        assert_eq!(dups(0), Vec::<&[u8]>::new());
        assert_eq!(dups(1), vec![b"aa", b"bb"]);
        assert_eq!(dups(2), Vec::<&[u8]>::new());
        assert_eq!(dups(3), vec![b"cc"]);
        assert_eq!(dups(4), Vec::<&[u8]>::new());
    }

    /// An `out` database made without sorted duplicates is another layout:
    /// opening it is refused, naming the database.
    #[test]
    fn connection_databases_must_hold_sorted_duplicates() {
        let dir = tempfile::tempdir().expect("temporary directory");
        {
            let env = open_env(dir.path()).expect("open");
            for (name, flags) in [
                ("parts", DatabaseFlags::empty()),
                ("out", DatabaseFlags::empty()),
                ("in", DUPS),
            ] {
                env.create_db(Some(name), flags).expect("create");
            }
        }
        let env = open_env(dir.path()).expect("reopen");
        let err = match open_dbs(&env) {
            Ok(_) => panic!("opened an out database without duplicates"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("LMDB out database"), "{err}");
    }
}
