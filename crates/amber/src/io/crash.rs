//! The crash model: an in-memory file system that keeps, for every file, a
//! durable image and a live image, as SQLite's crash-test layer does.
//!
//! Writes go to the live image and are remembered as pending until the file is
//! synced. At a chosen crash point (the N-th mutating call from now) the
//! "process dies": that call and every later one fail. [`CrashVfs::crash`]
//! then decides, independently and at random for each write made since the
//! file's last sync, whether it reached the disk whole, not at all, or torn
//! (each 512-byte sector of it kept or lost on its own), and the result becomes
//! the new durable and live image. Handles opened before the crash are dead.
//!
//! Images are sparse (4 KiB chunks), so a test can place pages at offsets far
//! beyond any real disk.
//!
//! A rename replaces the target path's file at once and durably (the real
//! file system syncs the directory before returning), and counts as a
//! mutating call, so a crash point falls before or after it. As on POSIX, a
//! handle keeps reaching the file it was opened on, wherever a rename put
//! it; a handle on the file a rename replaced fails ("stale handle") rather
//! than reach its successor.

use super::{IoFile, OpenMode, Vfs};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The unit of tearing: a write reaches the disk sector by sector.
pub const SECTOR: u64 = 512;
const CHUNK: u64 = 4096;

/// A small deterministic generator (SplitMix64), so crash outcomes replay from
/// a seed.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[derive(Debug, Clone, Default)]
struct Sparse {
    len: u64,
    chunks: BTreeMap<u64, Box<[u8]>>,
}

impl Sparse {
    fn read(&self, buf: &mut [u8], off: u64) {
        let mut done = 0usize;
        while done < buf.len() {
            let pos = off + done as u64;
            let ci = pos / CHUNK;
            let co = (pos % CHUNK) as usize;
            let n = (CHUNK as usize - co).min(buf.len() - done);
            match self.chunks.get(&ci) {
                Some(c) => buf[done..done + n].copy_from_slice(&c[co..co + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    fn write(&mut self, buf: &[u8], off: u64) {
        let mut done = 0usize;
        while done < buf.len() {
            let pos = off + done as u64;
            let ci = pos / CHUNK;
            let co = (pos % CHUNK) as usize;
            let n = (CHUNK as usize - co).min(buf.len() - done);
            let c = self
                .chunks
                .entry(ci)
                .or_insert_with(|| vec![0u8; CHUNK as usize].into_boxed_slice());
            c[co..co + n].copy_from_slice(&buf[done..done + n]);
            done += n;
        }
        self.len = self.len.max(off + buf.len() as u64);
    }

    fn set_len(&mut self, len: u64) {
        if len < self.len {
            let first_dead = len.div_ceil(CHUNK);
            self.chunks.retain(|&ci, _| ci < first_dead);
            if !len.is_multiple_of(CHUNK)
                && let Some(c) = self.chunks.get_mut(&(len / CHUNK))
            {
                c[(len % CHUNK) as usize..].fill(0);
            }
        }
        self.len = len;
    }
}

#[derive(Debug, Clone)]
enum Pending {
    Write { off: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct FileImage {
    /// Which file this is, whatever path it is at now.
    inode: u64,
    durable: Sparse,
    live: Sparse,
    pending: Vec<Pending>,
    locked: bool,
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, FileImage>,
    /// Mutating calls (write, sync, set_len) made so far.
    mutations: u64,
    /// The mutation count at which the simulated process dies.
    crash_at: Option<u64>,
    dead: bool,
    /// The file of the call at which the simulated process died.
    died_on: Option<PathBuf>,
    /// Bumped by every crash; handles from an older epoch are dead.
    epoch: u64,
    /// Files created so far (the next inode number).
    inodes: u64,
}

/// An in-memory file system with a crash model. Cloning shares the files.
#[derive(Debug, Clone, Default)]
pub struct CrashVfs {
    state: Arc<Mutex<State>>,
}

/// What a crash did to the pending writes, for test diagnostics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CrashOutcome {
    /// Writes that reached the disk whole.
    pub kept: u64,
    /// Writes that were lost.
    pub dropped: u64,
    /// Writes of which only some sectors reached the disk.
    pub torn: u64,
}

fn dead_error() -> io::Error {
    io::Error::other("simulated crash: the process is dead")
}

impl CrashVfs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the images half-updated
        // in a way that matters to a test, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Mutating calls (writes, syncs, truncations) made so far: a workload's
    /// length in crash points.
    pub fn mutations(&self) -> u64 {
        self.lock().mutations
    }

    /// Kills the simulated process at the `n`-th mutating call from now
    /// (`n >= 1`): that call fails, as does every call after it.
    pub fn crash_after(&self, n: u64) {
        let mut s = self.lock();
        s.crash_at = Some(s.mutations + n.max(1));
    }

    /// The file of the call at which the simulated process died, if it
    /// died (since the last crash).
    pub fn died_on(&self) -> Option<PathBuf> {
        self.lock().died_on.clone()
    }

    /// Whether the simulated process has died.
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// Simulates power loss now: every write since each file's last sync is
    /// kept, dropped, or torn at sector granularity, at random from `seed`.
    /// Afterwards the files hold only what survived, open handles are dead,
    /// and new opens work again.
    pub fn crash(&self, seed: u64) -> CrashOutcome {
        let mut rng = SplitMix::new(seed);
        let mut s = self.lock();
        let mut out = CrashOutcome::default();
        let mut paths: Vec<PathBuf> = s.files.keys().cloned().collect();
        paths.sort();
        for p in paths {
            let Some(f) = s.files.get_mut(&p) else {
                continue;
            };
            let mut img = f.durable.clone();
            for op in std::mem::take(&mut f.pending) {
                match op {
                    Pending::SetLen(len) => {
                        if rng.below(2) == 0 {
                            img.set_len(len);
                            out.kept += 1;
                        } else {
                            out.dropped += 1;
                        }
                    }
                    Pending::Write { off, data } => match rng.below(3) {
                        0 => {
                            img.write(&data, off);
                            out.kept += 1;
                        }
                        1 => out.dropped += 1,
                        _ => {
                            out.torn += 1;
                            let end = off + data.len() as u64;
                            let mut pos = off;
                            while pos < end {
                                let next = ((pos / SECTOR) + 1) * SECTOR;
                                let stop = next.min(end);
                                if rng.below(2) == 0 {
                                    let a = (pos - off) as usize;
                                    let b = (stop - off) as usize;
                                    img.write(&data[a..b], pos);
                                }
                                pos = stop;
                            }
                        }
                    },
                }
            }
            f.durable = img.clone();
            f.live = img;
            f.locked = false;
        }
        s.crash_at = None;
        s.dead = false;
        s.died_on = None;
        s.epoch += 1;
        out
    }

    /// A file system of its own holding this one's durable images (what a
    /// crash dropping every unsynced write would leave), unlocked: for
    /// running one workload from the same start at every crash point.
    pub fn durable_copy(&self) -> CrashVfs {
        let s = self.lock();
        let files = s
            .files
            .iter()
            .map(|(p, f)| {
                let img = FileImage {
                    inode: f.inode,
                    durable: f.durable.clone(),
                    live: f.durable.clone(),
                    pending: Vec::new(),
                    locked: false,
                };
                (p.clone(), img)
            })
            .collect();
        CrashVfs {
            state: Arc::new(Mutex::new(State {
                files,
                inodes: s.inodes,
                ..State::default()
            })),
        }
    }

    /// The durable bytes of a file (what a crash with every pending write
    /// dropped would leave), for inspection by tests.
    pub fn durable_image(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.lock();
        let f = s.files.get(path)?;
        let mut v = vec![0u8; f.durable.len as usize];
        f.durable.read(&mut v, 0);
        Some(v)
    }

    /// Overwrites bytes of a file's durable and live images directly, as media
    /// corruption would: for corruption tests.
    pub fn corrupt(&self, path: &Path, off: u64, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.lock();
        let f = s
            .files
            .get_mut(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        f.durable.write(bytes, off);
        f.live.write(bytes, off);
        Ok(())
    }

    /// A file's length in its live image.
    pub fn file_len(&self, path: &Path) -> Option<u64> {
        self.lock().files.get(path).map(|f| f.live.len)
    }
}

impl Vfs for CrashVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn IoFile>> {
        let mut s = self.lock();
        if s.dead {
            return Err(dead_error());
        }
        let exists = s.files.contains_key(path);
        match mode {
            OpenMode::CreateNew if exists => return Err(io::ErrorKind::AlreadyExists.into()),
            OpenMode::CreateNew => {
                s.inodes += 1;
                let inode = s.inodes;
                s.files.insert(
                    path.to_path_buf(),
                    FileImage {
                        inode,
                        ..FileImage::default()
                    },
                );
            }
            _ if !exists => return Err(io::ErrorKind::NotFound.into()),
            _ => {}
        }
        let inode = s.files.get(path).map_or(0, |f| f.inode);
        Ok(Box::new(CrashFile {
            vfs: self.clone(),
            inode,
            epoch: s.epoch,
            read_only: mode == OpenMode::ReadOnly,
            holds_lock: Mutex::new(false),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().files.contains_key(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if s.dead {
            return Err(dead_error());
        }
        s.files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if s.dead {
            return Err(dead_error());
        }
        s.mutations += 1;
        if s.crash_at.is_some_and(|c| s.mutations >= c) {
            s.dead = true;
            s.died_on = Some(to.to_path_buf());
            return Err(dead_error());
        }
        let f = s
            .files
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.files.insert(to.to_path_buf(), f);
        Ok(())
    }
}

#[derive(Debug)]
struct CrashFile {
    vfs: CrashVfs,
    /// The file it was opened on, wherever a rename put it.
    inode: u64,
    epoch: u64,
    read_only: bool,
    holds_lock: Mutex<bool>,
}

impl CrashFile {
    /// Runs `f` on this file's image, counting a mutating call against the
    /// crash point when `mutating`.
    fn with<R>(&self, mutating: bool, f: impl FnOnce(&mut FileImage) -> R) -> io::Result<R> {
        let mut s = self.vfs.lock();
        if s.dead || s.epoch != self.epoch {
            return Err(dead_error());
        }
        if mutating {
            if self.read_only {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "file opened read-only",
                ));
            }
            s.mutations += 1;
            if s.crash_at.is_some_and(|c| s.mutations >= c) {
                s.dead = true;
                let inode = self.inode;
                s.died_on = s
                    .files
                    .iter()
                    .find(|(_, img)| img.inode == inode)
                    .map(|(p, _)| p.clone());
                return Err(dead_error());
            }
        }
        let img = s
            .files
            .values_mut()
            .find(|img| img.inode == self.inode)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "stale handle: the file was renamed or replaced",
                )
            })?;
        Ok(f(img))
    }
}

/// The largest file the model holds, as a real file system has one (ext4's
/// is 16 TiB; the model's is larger, so that tests may place pages at the
/// far addresses a format allows): an offset or length beyond it is
/// refused with `EFBIG`, as `pwrite` and `ftruncate` refuse one past a real
/// file system's limit, rather than overflowing the model's arithmetic. A
/// crafted page or log can lead Amber to such an offset.
const MAX_FILE: u64 = 1 << 62;

/// `off + len`, or `EFBIG` past [`MAX_FILE`].
fn end_within_limit(off: u64, len: usize) -> io::Result<u64> {
    off.checked_add(len as u64)
        .filter(|&end| end <= MAX_FILE)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EFBIG))
}

impl IoFile for CrashFile {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let end = end_within_limit(off, buf.len())?;
        self.with(false, |f| {
            if end > f.live.len {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            f.live.read(buf, off);
            Ok(())
        })?
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        end_within_limit(off, buf.len())?;
        self.with(true, |f| {
            f.live.write(buf, off);
            f.pending.push(Pending::Write {
                off,
                data: buf.to_vec(),
            });
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.with(true, |f| {
            f.durable = f.live.clone();
            f.pending.clear();
        })
    }

    fn size(&self) -> io::Result<u64> {
        self.with(false, |f| f.live.len)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        end_within_limit(len, 0)?;
        self.with(true, |f| {
            f.live.set_len(len);
            f.pending.push(Pending::SetLen(len));
        })
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        let got = self.with(false, |f| {
            if f.locked {
                false
            } else {
                f.locked = true;
                true
            }
        })?;
        if got {
            *self.holds_lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        }
        Ok(got)
    }

    fn unlock(&self) -> io::Result<()> {
        let mut held = self.holds_lock.lock().unwrap_or_else(|e| e.into_inner());
        if *held {
            self.with(false, |f| f.locked = false)?;
            *held = false;
        }
        Ok(())
    }
}

impl Drop for CrashFile {
    fn drop(&mut self) {
        if *self.holds_lock.lock().unwrap_or_else(|e| e.into_inner()) {
            let mut s = self.vfs.lock();
            if s.epoch == self.epoch
                && let Some(f) = s.files.values_mut().find(|f| f.inode == self.inode)
            {
                f.locked = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_writes_can_be_lost_and_synced_ones_cannot() {
        let p = Path::new("/f");
        let mut seen = std::collections::HashSet::new();
        for seed in 0..64 {
            let vfs = CrashVfs::new();
            let f = vfs.open(p, OpenMode::CreateNew).expect("create");
            f.write_all_at(&[1u8; 1024], 0).expect("write");
            f.sync_data().expect("sync");
            f.write_all_at(&[2u8; 4096], 0).expect("write");
            vfs.crash(seed);
            let img = vfs.durable_image(p).expect("image");
            assert!(img.len() >= 1024 && img.len().is_multiple_of(512));
            // The synced prefix is never lost: each sector is old or new.
            for (i, s) in img.chunks(512).enumerate() {
                assert!(s.iter().all(|&b| b == s[0]));
                assert!(s[0] == 2 || (i < 2 && s[0] == 1) || (i >= 2 && s[0] == 0));
                seen.insert(s[0]);
            }
        }
        assert!(seen.contains(&1) && seen.contains(&2));
    }

    #[test]
    fn crash_point_kills_the_process() {
        let vfs = CrashVfs::new();
        let f = vfs
            .open(Path::new("/g"), OpenMode::CreateNew)
            .expect("create");
        vfs.crash_after(2);
        f.write_all_at(b"a", 0).expect("first write survives");
        assert!(f.write_all_at(b"b", 1).is_err());
        assert!(f.sync_data().is_err());
        assert!(vfs.is_dead());
        vfs.crash(7);
        assert!(f.size().is_err(), "old handles are dead after a crash");
        let g = vfs
            .open(Path::new("/g"), OpenMode::ReadWrite)
            .expect("reopen");
        assert!(g.size().expect("len") <= 1);
    }

    #[test]
    fn rename_replaces_and_old_handles_go_stale() {
        let vfs = CrashVfs::new();
        let (a, b) = (Path::new("/a"), Path::new("/b"));
        let fa = vfs.open(a, OpenMode::CreateNew).expect("create a");
        fa.write_all_at(b"old", 0).expect("write");
        fa.sync_data().expect("sync");
        let fb = vfs.open(b, OpenMode::CreateNew).expect("create b");
        fb.write_all_at(b"new", 0).expect("write");
        fb.sync_data().expect("sync");
        assert!(fb.try_lock_exclusive().expect("lock"));
        vfs.rename(b, a).expect("rename");
        assert!(!vfs.exists(b));
        assert!(fa.size().is_err(), "a handle on the replaced file is stale");
        drop(fa);
        let g = vfs.open(a, OpenMode::ReadWrite).expect("open a");
        assert!(!g.try_lock_exclusive().expect("lock"), "the lock moved along");
        drop(g);
        fb.write_all_at(b"N", 0).expect("a handle follows its file");
        drop(fb);
        let g = vfs.open(a, OpenMode::ReadWrite).expect("open a");
        assert!(g.try_lock_exclusive().expect("lock"), "unlocked where it went");
        g.sync_data().expect("sync");
        vfs.crash(1);
        let mut buf = [0u8; 3];
        let h = vfs.open(a, OpenMode::ReadOnly).expect("open");
        h.read_exact_at(&mut buf, 0).expect("read");
        assert_eq!(&buf, b"New", "a rename is durable when it returns");
        // A crash point at the rename: it does not happen.
        let c = vfs.open(b, OpenMode::CreateNew).expect("create b");
        c.sync_data().expect("sync");
        vfs.crash_after(1);
        assert!(vfs.rename(b, a).is_err());
        vfs.crash(2);
        assert!(vfs.exists(b));
    }

    #[test]
    fn sparse_images_reach_far_offsets() {
        let vfs = CrashVfs::new();
        let f = vfs
            .open(Path::new("/h"), OpenMode::CreateNew)
            .expect("create");
        let off = (1u64 << 33) * 4096;
        f.write_all_at(b"far", off).expect("write");
        let mut b = [0u8; 3];
        f.read_exact_at(&mut b, off).expect("read");
        assert_eq!(&b, b"far");
        assert_eq!(f.size().expect("len"), off + 3);
    }
}
