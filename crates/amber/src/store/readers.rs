//! The reader table (`PATH-readers`): read-only handles beside the one
//! writer, in any process.
//!
//! A reader sees one committed state, its *snapshot*: the page file as of
//! the last checkpoint with the log laid over it up to an LSN, the end of
//! a commit. The page file changes only at a checkpoint, and a checkpoint
//! overwrites blocks in place, so the writer must never install what a
//! reader's snapshot does not contain while that reader still reads the
//! page file under it — as SQLite's WAL readers hold back checkpoints with
//! their read marks. The table says, for each live reader, the LSN of its
//! snapshot; a checkpoint runs only if every live reader's snapshot reaches
//! the end of the log the checkpoint installs (it is deferred otherwise,
//! and the log keeps growing until the readers refresh). Then the blocks it
//! writes hold states no newer than any reader's snapshot, and a reader's
//! changes since its own checkpoint, laid over any of those states, give
//! exactly its snapshot.
//!
//! The table's file is shared, not durable (never synced: after a crash no
//! process that wrote it lives), and is read and written with plain
//! `pread`/`pwrite`. A lock on the whole file (`flock`) is held by a
//! checkpoint from its check of the snapshots until it has recycled the
//! log, by a reader while it loads a checkpoint (opening, or refreshing
//! after one), and by anyone claiming or releasing a slot; nothing holds it
//! across anything slower than a checkpoint. A process that dies loses its
//! locks; its slot is told from a live one by the process id *and* start
//! time it holds (`/proc/PID/stat`), so a reused process id does not keep a
//! dead reader alive, as LMDB clears the slots of readers that died.
//!
//! Layout (little-endian):
//!
//! ```text
//! header, 64 bytes:
//!   0  8  magic "AMBERRDR"
//!   8  4  version 1
//!  12  4  slots
//!  16  8  writer process id (0: no writer)
//!  24  8  writer start time (clock ticks since boot)
//!  32  8  published end: the LSN up to which the log is durable
//!  40  8  published end XOR CHECK (a torn read is told from a value)
//!  48  8  published generation: the page file's superblock generation
//!         the writer's state is at (its open, then each checkpoint)
//!  56  8  published generation XOR CHECK (zero, never a valid pair,
//!         when a writer of an earlier build left it unwritten)
//! slot i at 64 + 32·i:
//!   0  8  process id (0: free)
//!   8  8  start time
//!  16  8  snapshot LSN
//!  24  8  snapshot LSN XOR CHECK
//! ```

use crate::error::{Error, FileKind, Location, Result};
use crate::io::{IoFile, OpenMode, Vfs};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"AMBERRDR";
const VERSION: u32 = 1;
const HEADER: u64 = 64;
const SLOT: u64 = 32;
/// Readers at once (LMDB's default is 126 too).
pub const SLOTS: u32 = 126;
/// XORed into a pair's second word: zeros read as a pair are not a value.
const CHECK: u64 = 0x5a17_c0de_a3be_7e11;
/// How long taking the table's lock may wait: longer than any checkpoint
/// should take, and then an error rather than a hang.
const PATIENCE: Duration = Duration::from_secs(120);

/// The reader table of the database at `path`.
pub fn readers_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-readers");
    PathBuf::from(s)
}

/// An open reader table.
#[derive(Debug)]
pub(crate) struct Table {
    file: Box<dyn IoFile>,
    path: PathBuf,
    /// The end the writer published last (published ends only go up, and
    /// commits of several threads finish in any order).
    published: Mutex<u64>,
}

/// The table's lock, held: let go when dropped.
pub(crate) struct Locked<'a>(&'a Table);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.file.unlock() {
            log::warn!("{}: unlocking: {e}", self.0.path.display());
        }
    }
}

/// A process: its id and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Process {
    pid: u64,
    start: u64,
}

impl Process {
    /// This process.
    pub(crate) fn me() -> Process {
        let pid = u64::from(std::process::id());
        Process {
            pid,
            start: start_time(pid).unwrap_or(0),
        }
    }

    /// Whether the process still runs (the same one: same start time).
    /// Without `/proc` nothing can be told, and it counts as alive.
    fn alive(self) -> bool {
        if self.pid == 0 {
            return false;
        }
        if self.pid == u64::from(std::process::id()) {
            return true;
        }
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(s) => parse_start(&s) == Some(self.start),
            Err(e) if e.kind() == io::ErrorKind::NotFound => !Path::new("/proc/self").exists(),
            Err(_) => true,
        }
    }
}

fn start_time(pid: u64) -> Option<u64> {
    parse_start(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Field 22 of `/proc/PID/stat`, the start time; the command name (field
/// 2, in parentheses) may hold spaces and parentheses, so fields are
/// counted after its last `)`.
fn parse_start(stat: &str) -> Option<u64> {
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// A value and its check word, as the table stores them.
pub(crate) fn pair(v: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.to_le_bytes());
    b[8..].copy_from_slice(&(v ^ CHECK).to_le_bytes());
    b
}

fn unpair(b: &[u8]) -> Option<u64> {
    let v = u64::from_le_bytes(b[..8].try_into().ok()?);
    let c = u64::from_le_bytes(b[8..16].try_into().ok()?);
    (v ^ CHECK == c).then_some(v)
}

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

impl Table {
    /// Opens (creating if needed) the reader table of the database at
    /// `db`; `None` when it can be neither opened for writing nor created
    /// (a database in a place this process may not write: then a reader
    /// falls back to locking the page file, and no writer can run beside
    /// it).
    pub(crate) fn open(vfs: &dyn Vfs, db: &Path) -> Result<Option<Table>> {
        let path = readers_path(db);
        let file = match vfs.open(&path, OpenMode::ReadWrite) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match vfs.open(&path, OpenMode::CreateNew) {
                    Ok(f) => f,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => vfs
                        .open(&path, OpenMode::ReadWrite)
                        .map_err(|e| Error::io("open reader table", &path, e))?,
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
                    Err(e) => return Err(Error::io("create reader table", &path, e)),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
            Err(e) => return Err(Error::io("open reader table", &path, e)),
        };
        let t = Table {
            file,
            path,
            published: Mutex::new(0),
        };
        let g = t.lock()?;
        t.format_if_new(&g)?;
        drop(g);
        Ok(Some(t))
    }

    fn io(&self, op: &'static str, e: io::Error) -> Error {
        Error::io(op, &self.path, e)
    }

    /// Takes the table's lock, waiting for whoever holds it.
    pub(crate) fn lock(&self) -> Result<Locked<'_>> {
        let start = Instant::now();
        let mut pause = Duration::from_micros(50);
        while !self
            .file
            .try_lock_exclusive()
            .map_err(|e| self.io("lock reader table", e))?
        {
            if start.elapsed() >= PATIENCE {
                return Err(Error::Locked {
                    path: self.path.clone(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        Ok(Locked(self))
    }

    /// The table's lock: `held` if the caller has it already, else taken.
    pub(crate) fn lock_unless<'a>(&'a self, held: Option<Locked<'a>>) -> Result<Locked<'a>> {
        held.map_or_else(|| self.lock(), Ok)
    }

    /// Takes the table's lock if nobody holds it.
    pub(crate) fn try_lock(&self) -> Result<Option<Locked<'_>>> {
        let got = self
            .file
            .try_lock_exclusive()
            .map_err(|e| self.io("lock reader table", e))?;
        Ok(got.then_some(Locked(self)))
    }

    /// Writes a fresh header (no writer, no readers) unless the file holds
    /// a valid one.
    fn format_if_new(&self, _g: &Locked<'_>) -> Result<()> {
        let size = self
            .file
            .size()
            .map_err(|e| self.io("read reader table", e))?;
        if size >= HEADER + SLOT * u64::from(SLOTS) {
            let h = self.header()?;
            if &h[..8] == MAGIC && u32::from_le_bytes([h[8], h[9], h[10], h[11]]) == VERSION {
                return Ok(());
            }
        }
        let mut img = vec![0u8; (HEADER + SLOT * u64::from(SLOTS)) as usize];
        img[..8].copy_from_slice(MAGIC);
        img[8..12].copy_from_slice(&VERSION.to_le_bytes());
        img[12..16].copy_from_slice(&SLOTS.to_le_bytes());
        self.file
            .write_all_at(&img, 0)
            .map_err(|e| self.io("write reader table", e))
    }

    fn header(&self) -> Result<[u8; HEADER as usize]> {
        let mut h = [0u8; HEADER as usize];
        self.file
            .read_exact_at(&mut h, 0)
            .map_err(|e| self.io("read reader table", e))?;
        Ok(h)
    }

    /// Registers this process as the writer, with the log durable to `end`
    /// and its state at superblock generation `generation` (the table's
    /// lock `_g` held).
    pub(crate) fn register_writer(&self, _g: &Locked<'_>, end: u64, generation: u64) -> Result<()> {
        let me = Process::me();
        let mut b = [0u8; 48];
        b[..8].copy_from_slice(&me.pid.to_le_bytes());
        b[8..16].copy_from_slice(&me.start.to_le_bytes());
        b[16..32].copy_from_slice(&pair(end));
        b[32..].copy_from_slice(&pair(generation));
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = end;
        self.file
            .write_all_at(&b, 16)
            .map_err(|e| self.io("write reader table", e))
    }

    /// The writer is gone (closed).
    pub(crate) fn unregister_writer(&self) -> Result<()> {
        let _g = self.lock()?;
        self.file
            .write_all_at(&[0u8; 16], 16)
            .map_err(|e| self.io("write reader table", e))
    }

    /// The writer: the log is durable up to `end` (never lowered).
    pub(crate) fn publish(&self, end: u64) -> Result<()> {
        let mut p = self.published.lock().unwrap_or_else(|e| e.into_inner());
        if end <= *p {
            return Ok(());
        }
        self.file
            .write_all_at(&pair(end), 32)
            .map_err(|e| self.io("write reader table", e))?;
        *p = end;
        Ok(())
    }

    /// The writer: a checkpoint switched the page file to superblock
    /// generation `generation`. Said while the checkpoint still holds the
    /// commit gate, so that no end a later commit publishes is read
    /// before it (`refresh.rs`).
    pub(crate) fn publish_generation(&self, generation: u64) -> Result<()> {
        self.file
            .write_all_at(&pair(generation), 48)
            .map_err(|e| self.io("write reader table", e))
    }

    /// The end a live writer published; `None` when no writer is alive
    /// (the log then ends where its valid records do).
    pub(crate) fn published_end(&self) -> Result<Option<u64>> {
        Ok(self.published()?.map(|(end, _)| end))
    }

    /// The end a live writer published and the superblock generation it
    /// published, if any (a writer of an earlier build publishes none);
    /// `None` when no writer is alive.
    pub(crate) fn published(&self) -> Result<Option<(u64, Option<u64>)>> {
        for _ in 0..100 {
            let h = self.header()?;
            let w = Process {
                pid: word(&h, 16),
                start: word(&h, 24),
            };
            if !w.alive() {
                return Ok(None);
            }
            if let Some(end) = unpair(&h[32..48]) {
                return Ok(Some((end, unpair(&h[48..64]))));
            }
            // Read while the writer wrote it: read again.
            std::thread::yield_now();
        }
        // A live writer rewrites the pair in one short store: a hundred
        // torn reads in a row are damage, not a race.
        Err(Error::Corrupt {
            file: FileKind::ReaderTable,
            path: self.path.clone(),
            at: Location::Meta("the writer's published end"),
            what: "its value and check word never agree while the writer is alive".into(),
        })
    }

    /// Claims a slot for a reader whose snapshot is at `lsn` (the table's
    /// lock held, so that nobody checks the snapshots meanwhile).
    pub(crate) fn claim(&self, _g: &Locked<'_>, lsn: u64) -> Result<u32> {
        let slots = self.slots()?;
        let i = slots
            .iter()
            .position(|s| !s.0.alive())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{}: {SLOTS} readers are open already, the most the reader table holds",
                    self.path.display()
                ))
            })? as u32;
        let me = Process::me();
        let mut b = [0u8; SLOT as usize];
        b[..8].copy_from_slice(&me.pid.to_le_bytes());
        b[8..16].copy_from_slice(&me.start.to_le_bytes());
        b[16..].copy_from_slice(&pair(lsn));
        self.file
            .write_all_at(&b, HEADER + SLOT * u64::from(i))
            .map_err(|e| self.io("write reader table", e))?;
        Ok(i)
    }

    /// Moves reader `slot`'s snapshot to `lsn`.
    pub(crate) fn set_snapshot(&self, slot: u32, lsn: u64) -> Result<()> {
        self.file
            .write_all_at(&pair(lsn), HEADER + SLOT * u64::from(slot) + 16)
            .map_err(|e| self.io("write reader table", e))
    }

    /// Frees reader `slot`.
    pub(crate) fn release(&self, slot: u32) -> Result<()> {
        let _g = self.lock()?;
        self.file
            .write_all_at(&[0u8; SLOT as usize], HEADER + SLOT * u64::from(slot))
            .map_err(|e| self.io("write reader table", e))
    }

    /// Every slot: its process and snapshot (`None`: torn, being written).
    fn slots(&self) -> Result<Vec<(Process, Option<u64>)>> {
        let mut b = vec![0u8; (SLOT * u64::from(SLOTS)) as usize];
        self.file
            .read_exact_at(&mut b, HEADER)
            .map_err(|e| self.io("read reader table", e))?;
        Ok(b.chunks(SLOT as usize)
            .map(|s| {
                (
                    Process {
                        pid: word(s, 0),
                        start: word(s, 8),
                    },
                    unpair(&s[16..32]),
                )
            })
            .collect())
    }

    /// The live readers whose snapshot does not reach `lsn` (a snapshot
    /// being rewritten counts as not reaching it): what defers a checkpoint
    /// that would install the log up to `lsn`. The lock must be held.
    pub(crate) fn readers_behind(&self, _g: &Locked<'_>, lsn: u64) -> Result<usize> {
        Ok(self
            .slots()?
            .into_iter()
            .filter(|(p, snap)| p.alive() && snap.is_none_or(|s| s < lsn))
            .count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_field_22_after_the_name() {
        let stat = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 19 20";
        assert_eq!(parse_start(stat), Some(424242));
        let me = Process::me();
        assert!(me.start > 0 && me.alive());
        assert!(!Process { pid: me.pid + 1_000_000_000, start: 1 }.alive() || !Path::new("/proc/self").exists());
    }

    #[test]
    fn a_torn_pair_is_not_a_value() {
        let mut b = pair(77);
        assert_eq!(unpair(&b), Some(77));
        b[3] ^= 1;
        assert_eq!(unpair(&b), None);
        assert_eq!(unpair(&[0u8; 16]), None);
    }
}
