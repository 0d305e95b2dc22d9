//! All file I/O of the store goes through these two traits, so that tests can
//! put a crash model ([`crash::CrashVfs`]) or an error countdown
//! ([`countdown::CountdownVfs`]) between the store and the disk.
//!
//! The contract is the one a POSIX file gives, reduced to what the store uses:
//! positioned reads and writes, `fdatasync`, length, truncation, an exclusive
//! lock. What the store assumes of the disk is written down in `docs/design.md`:
//! data written before a successful `sync_data` is durable after it, and
//! nothing else.

#[cfg(any(test, feature = "internals"))]
pub mod countdown;
#[cfg(any(test, feature = "internals"))]
pub mod crash;
pub mod real;

use std::fmt::Debug;
use std::io;
use std::path::Path;

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create a new file; fail if it exists.
    CreateNew,
    /// Open an existing file for reading and writing.
    ReadWrite,
    /// Open an existing file for reading only.
    ReadOnly,
}

/// A file system: opens files by path.
pub trait Vfs: Send + Sync + Debug {
    /// Opens `path`. A newly created file is durable in its directory when
    /// this returns (the real implementation syncs the directory).
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn IoFile>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Removes `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Atomically replaces `to` by `from` (POSIX `rename`), durable in the
    /// directory when this returns: the collector's switch from the old page
    /// file to the compacted one. Handles open on the file that was at `to`
    /// keep reaching that file, no longer the path. File systems that cannot
    /// (test wrappers that have no use for it) refuse.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system does not replace files",
        ))
    }
}

/// An open file.
pub trait IoFile: Send + Sync + Debug {
    /// Fills `buf` from offset `off`. Reading past the end of the file is an
    /// error of kind `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    /// Writes all of `buf` at offset `off`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    /// Makes everything written so far durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Takes an exclusive advisory lock without waiting; `Ok(false)` when
    /// another holder has it.
    fn try_lock_exclusive(&self) -> io::Result<bool>;
    /// Lets go of the lock taken by [`try_lock_exclusive`](Self::try_lock_exclusive)
    /// (closing the file lets go of it too).
    fn unlock(&self) -> io::Result<()>;
    /// The operating system's descriptor of the file, for mapping it (the
    /// mapped fault backend, `vm/mapped.rs`); `None` for a file that is a
    /// model (crash models, fault injection), which the backend then does
    /// not serve.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// Reads up to `buf.len()` bytes at `off`, zero-filling what lies past the end
/// of the file. Returns how many bytes came from the file.
pub fn read_at_most(file: &dyn IoFile, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let len = file.size()?;
    let avail = len.saturating_sub(off).min(buf.len() as u64) as usize;
    let (head, tail) = buf.split_at_mut(avail);
    if avail > 0 {
        file.read_exact_at(head, off)?;
    }
    tail.fill(0);
    Ok(avail)
}

/// A read-only view of the first `len` bytes of a file (all of it when
/// `len` is `None`): what a reader scans of a log whose writer is appending
/// past the end it published.
#[derive(Debug)]
pub struct Prefix<'a> {
    inner: &'a dyn IoFile,
    len: Option<u64>,
}

impl<'a> Prefix<'a> {
    /// The first `len` bytes of `inner`.
    pub fn new(inner: &'a dyn IoFile, len: Option<u64>) -> Self {
        Prefix { inner, len }
    }

    fn refuse() -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, "a prefix view is read-only")
    }
}

impl IoFile for Prefix<'_> {
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        match self.len {
            Some(len) if off.saturating_add(buf.len() as u64) > len => {
                Err(io::ErrorKind::UnexpectedEof.into())
            }
            _ => self.inner.read_exact_at(buf, off),
        }
    }

    fn write_all_at(&self, _buf: &[u8], _off: u64) -> io::Result<()> {
        Err(Self::refuse())
    }

    fn sync_data(&self) -> io::Result<()> {
        Err(Self::refuse())
    }

    fn size(&self) -> io::Result<u64> {
        let size = self.inner.size()?;
        Ok(self.len.map_or(size, |len| len.min(size)))
    }

    fn set_len(&self, _len: u64) -> io::Result<()> {
        Err(Self::refuse())
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        Err(Self::refuse())
    }

    fn unlock(&self) -> io::Result<()> {
        Err(Self::refuse())
    }
}
