//! The reader table target: the file `store/readers.rs` shares between
//! the writer and the read-only handles. No checksum covers it and any
//! process that may write beside the database may write it, so whatever it
//! holds, using it must give an error or a correct answer: the table's own
//! operations stay inside its slots and agree with each other, and a
//! database opened beside it (read-only, then writable, then collected)
//! reads back only committed values.
//!
//! Input: a flags byte (bit 0: make every value's check word match it, as
//! a writer writes them, so that mutations of the values are read as
//! values; bits 1–7 pick the seed database, `seeds::databases` order),
//! then the table's bytes. The table names processes by id and start time,
//! and only a live one counts; the fuzzer cannot know which ids are alive
//! where it runs, so a process-id word of 1 (the writer's, or a slot's)
//! stands for this process, which is alive whatever its start time says.

use super::{Content, files::Bundle, seeds};
use crate::io::crash::CrashVfs;
use crate::io::{OpenMode, Vfs};
use crate::store::readers::{Locked, SLOTS, Table, pair, readers_path};
use std::sync::Arc;

/// The table's header, and each slot's, in bytes (`store/readers.rs`).
const HEADER: usize = 64;
const SLOT: usize = 32;

/// The offsets of the table's process-id words: the writer's, each slot's.
fn pid_words(len: usize) -> impl Iterator<Item = usize> {
    std::iter::once(16)
        .chain((0..SLOTS as usize).map(|i| HEADER + SLOT * i))
        .filter(move |&o| o + 8 <= len)
}

/// Makes the check word of every value (the published end, each slot's
/// snapshot) match the value.
fn reseal_pairs(table: &mut [u8]) {
    let len = table.len();
    let pairs = std::iter::once(32).chain((0..SLOTS as usize).map(|i| HEADER + SLOT * i + 16));
    for o in pairs.filter(|&o| o + 16 <= len) {
        let v = crate::format::bytes::get_u64(table, o).unwrap_or(0);
        table[o..o + 16].copy_from_slice(&pair(v));
    }
}

/// `table` with each process id of 1 made this process's (see the module's
/// comment), or with this process's made 1 (`to_marker`, for the seeds).
fn mark_live(table: &mut [u8], to_marker: bool) {
    let me = u64::from(std::process::id());
    let (from, to) = if to_marker { (me, 1) } else { (1, me) };
    for o in pid_words(table.len()) {
        if table[o..o + 8] == from.to_le_bytes() {
            table[o..o + 8].copy_from_slice(&to.to_le_bytes());
        }
    }
}

fn write(vfs: &CrashVfs, path: &std::path::Path, bytes: &[u8]) {
    let written = vfs
        .open(path, OpenMode::CreateNew)
        .and_then(|f| f.write_all_at(bytes, 0));
    if let Err(e) = written {
        panic!("the in-memory file system refused a write: {e}");
    }
}

/// The reader table target (see the module's comment).
pub fn reader_table<C: Content>(data: &[u8]) {
    let dbs = seeds::cached::<C>();
    let flags = data.first().copied().unwrap_or(0);
    let seed = &dbs[usize::from(flags >> 1) % dbs.len()];
    let mut table = data.get(1..).unwrap_or(&[]).to_vec();
    mark_live(&mut table, false);
    if flags & 1 == 1 {
        reseal_pairs(&mut table);
    }
    table_alone(&table);
    beside_a_database::<C>(seed, &table);
}

/// The table's operations on the table alone: opening formats what is not
/// a table; the readers a checkpoint waits for are among the slots; a slot
/// claimed is one of them, counts as behind until its snapshot moves, and
/// is free once released.
fn table_alone(table: &[u8]) {
    let vfs = CrashVfs::new();
    write(&vfs, &readers_path(seeds::db_path()), table);
    let t = match Table::open(&vfs, seeds::db_path()) {
        Ok(Some(t)) => t,
        Ok(None) => panic!("the in-memory file system refused the reader table"),
        Err(e) => panic!("a reader table that is not one is not formatted afresh: {e}"),
    };
    // An end, or (a live writer's end that never reads whole) damage.
    if let Err(e) = t.published_end() {
        assert!(e.is_corruption(), "a damaged published end is damage: {e}");
    }
    let behind = |t: &Table, lsn| {
        let g = lock(t);
        match t.readers_behind(&g, lsn) {
            Ok(n) => {
                assert!(n <= SLOTS as usize, "{n} readers behind, in {SLOTS} slots");
                n
            }
            Err(e) => panic!("the readers of an open table cannot be counted: {e}"),
        }
    };
    let lsn = 1 << 40;
    let (before, before_all) = (behind(&t, lsn + 1), behind(&t, u64::MAX));
    let claimed = t.claim(&lock(&t), lsn);
    let Ok(slot) = claimed else {
        // Refused only when every slot holds a live reader.
        assert_eq!(before_all, SLOTS as usize, "{claimed:?}");
        return;
    };
    assert!(slot < SLOTS, "slot {slot} claimed, of {SLOTS}");
    assert_eq!(
        behind(&t, lsn + 1),
        before + 1,
        "a claimed slot is not behind"
    );
    if let Err(e) = t.set_snapshot(slot, lsn + 1) {
        panic!("a claimed slot's snapshot cannot move: {e}");
    }
    assert_eq!(
        behind(&t, lsn + 1),
        before,
        "a moved snapshot is still behind"
    );
    if let Err(e) = t.release(slot) {
        panic!("a claimed slot cannot be released: {e}");
    }
    assert_eq!(
        behind(&t, u64::MAX),
        before_all,
        "a released slot is still live"
    );
}

fn lock(t: &Table) -> Locked<'_> {
    match t.lock() {
        Ok(g) => g,
        Err(e) => panic!("the reader table's lock, free, cannot be taken: {e}"),
    }
}

/// A seed database beside the table: opened read-only (and refreshed),
/// then for writing, then collected; every value read back must be one
/// that was committed (the database's files are the seed's, unmutated).
fn beside_a_database<C: Content>(seed: &Bundle, table: &[u8]) {
    let vfs = seed.materialize();
    write(&vfs, &readers_path(seeds::db_path()), table);
    let v: Arc<dyn Vfs> = Arc::new(vfs);
    let ps = seed.page_size();
    let mut ro = seeds::options(ps);
    ro.store.read_only = true;
    if let Ok(mut db) = seeds::open(v.clone(), ro) {
        C::read(&db, true);
        if db.refresh().is_ok() {
            C::read(&db, true);
        }
    }
    let Ok(db) = seeds::open(v, seeds::options(ps)) else {
        return;
    };
    let whole = C::read(&db, true);
    assert!(whole > 0, "a seed opened for writing reads nothing back");
    if let Ok((db, _)) = db.collect() {
        assert_eq!(C::read(&db, true), whole, "a collection lost objects");
    }
}

/// Seeds: the tables of the seed databases (by their index in `dbs`) as a
/// writer and a reader beside it leave them, and as a reader alone leaves
/// one, this process's id made the marker 1.
pub(super) fn table_seeds(dbs: &[Bundle]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, b) in dbs.iter().enumerate() {
        let vfs = b.materialize();
        let v: Arc<dyn Vfs> = Arc::new(vfs.clone());
        let opts = seeds::options(b.page_size());
        let mut ro = opts.clone();
        ro.store.read_only = true;
        let writer = if i % 2 == 0 {
            seeds::open(v.clone(), opts).ok()
        } else {
            None
        };
        let reader = seeds::open(v, ro).ok();
        let Some(table) = read_all(&vfs, &readers_path(seeds::db_path())) else {
            continue;
        };
        drop((reader, writer));
        let mut seed = vec![(i as u8) << 1];
        seed.extend_from_slice(&table);
        mark_live(&mut seed[1..], true);
        out.push(seed);
    }
    out
}

fn read_all(vfs: &CrashVfs, path: &std::path::Path) -> Option<Vec<u8>> {
    let f = vfs.open(path, OpenMode::ReadOnly).ok()?;
    let mut b = vec![0u8; f.size().ok()? as usize];
    f.read_exact_at(&mut b, 0).ok()?;
    Some(b)
}
