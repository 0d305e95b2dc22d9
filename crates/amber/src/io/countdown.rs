//! The error countdown: the N-th I/O call fails, as redb's fuzzer injects
//! errors. Wrapped around another file system (usually the crash model, so a
//! test can then crash and recover).

use super::{IoFile, OpenMode, Vfs};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};

/// A file system whose N-th call fails.
#[derive(Debug, Clone)]
pub struct CountdownVfs {
    inner: Arc<dyn Vfs>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Calls made so far.
    calls: AtomicU64,
    /// The call number (1-based) that fails; 0 = none.
    fail_at: AtomicU64,
    /// Whether every call after the failing one fails too.
    sticky: bool,
    /// The file of the first call made to fail since the countdown was set.
    failed: Mutex<Option<PathBuf>>,
}

impl Shared {
    fn tick(&self, what: &str, path: &Path) -> io::Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let at = self.fail_at.load(Ordering::SeqCst);
        if at != 0 && (n == at || (self.sticky && n > at)) {
            self.failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(|| path.to_path_buf());
            return Err(io::Error::other(format!(
                "injected I/O error (call {n}: {what} {})",
                path.display()
            )));
        }
        Ok(())
    }
}

impl CountdownVfs {
    /// Wraps `inner`; call number `fail_at` (1-based) fails, and with `sticky`
    /// every later call fails as well. `fail_at == 0` never fails.
    pub fn new(inner: Arc<dyn Vfs>, fail_at: u64, sticky: bool) -> Self {
        CountdownVfs {
            inner,
            shared: Arc::new(Shared {
                calls: AtomicU64::new(0),
                fail_at: AtomicU64::new(fail_at),
                sticky,
                failed: Mutex::new(None),
            }),
        }
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.shared.calls.load(Ordering::SeqCst)
    }

    /// The file of the first call made to fail since the countdown was
    /// set, if any.
    pub fn failed_file(&self) -> Option<PathBuf> {
        self.shared
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes the `n`-th call from now fail (1: the next one), replacing
    /// the countdown set at creation; 0 disarms it. For failing one step of
    /// a workload after an unfailing setup.
    pub fn arm(&self, n: u64) {
        let at = if n == 0 { 0 } else { self.calls() + n };
        *self.shared.failed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.shared.fail_at.store(at, Ordering::SeqCst);
    }
}

impl Vfs for CountdownVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn IoFile>> {
        self.shared.tick("open", path)?;
        let inner = self.inner.open(path, mode)?;
        Ok(Box::new(CountdownFile {
            inner,
            path: path.to_path_buf(),
            shared: self.shared.clone(),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.shared.tick("remove", path)?;
        self.inner.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.tick("rename", to)?;
        self.inner.rename(from, to)
    }
}

#[derive(Debug)]
struct CountdownFile {
    inner: Box<dyn IoFile>,
    path: PathBuf,
    shared: Arc<Shared>,
}

impl IoFile for CountdownFile {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.shared.tick("read", &self.path)?;
        self.inner.read_exact_at(buf, off)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.shared.tick("write", &self.path)?;
        self.inner.write_all_at(buf, off)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.shared.tick("sync", &self.path)?;
        self.inner.sync_data()
    }

    fn size(&self) -> io::Result<u64> {
        self.shared.tick("len", &self.path)?;
        self.inner.size()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.shared.tick("set_len", &self.path)?;
        self.inner.set_len(len)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        self.shared.tick("lock", &self.path)?;
        self.inner.try_lock_exclusive()
    }

    fn unlock(&self) -> io::Result<()> {
        self.inner.unlock()
    }
}
