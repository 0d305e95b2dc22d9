//! The real file system: `pread`, `pwrite`, `fdatasync`, `flock`.

use super::{IoFile, OpenMode, Vfs};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealVfs;

impl Vfs for RealVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn IoFile>> {
        let mut o = OpenOptions::new();
        match mode {
            OpenMode::CreateNew => o.read(true).write(true).create_new(true),
            OpenMode::ReadWrite => o.read(true).write(true),
            OpenMode::ReadOnly => o.read(true),
        };
        let file = o.open(path)?;
        if mode == OpenMode::CreateNew {
            // A new file's directory entry is durable only once the directory
            // itself is synced.
            File::open(parent_dir(path))?.sync_all()?;
        }
        Ok(Box::new(RealFile { file }))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)?;
        // The new directory entry is durable only once the directory is.
        File::open(parent_dir(to))?.sync_all()
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[derive(Debug)]
struct RealFile {
    file: File,
}

impl IoFile for RealFile {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, off)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.file.write_all_at(buf, off)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        match self.file.try_lock() {
            Ok(()) => Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => Ok(false),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn unlock(&self) -> io::Result<()> {
        self.file.unlock()
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.file))
    }
}
