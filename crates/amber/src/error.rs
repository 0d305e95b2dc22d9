//! Errors. Every error names what is wrong and where (file, page, LSN), so that
//! a user reading one line knows whether the disk, the file or the program is at
//! fault. Decoding of on-disk bytes never panics: it returns [`Error::Corrupt`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Which of a database's files an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// The page file (superblocks and pages).
    PageFile,
    /// The write-ahead log (`<path>-wal`).
    Log,
    /// The reader table (`<path>-readers`).
    ReaderTable,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileKind::PageFile => f.write_str("page file"),
            FileKind::Log => f.write_str("log"),
            FileKind::ReaderTable => f.write_str("reader table"),
        }
    }
}

/// Where in a file a problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A superblock copy (0 or 1).
    Superblock(u8),
    /// A log header copy (0 or 1).
    LogHeader(u8),
    /// A page (for a multi-page block, its first page).
    Page(u64),
    /// A log record, by its log sequence number.
    Lsn(u64),
    /// A metadata blob (free-space map, root directory, schema catalog).
    Meta(&'static str),
    /// The file as a whole.
    File,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Superblock(i) => write!(f, "superblock copy {i}"),
            Location::LogHeader(i) => write!(f, "log header copy {i}"),
            Location::Page(p) => write!(f, "page {p}"),
            Location::Lsn(l) => write!(f, "log record at LSN {l}"),
            Location::Meta(m) => write!(f, "{m}"),
            Location::File => f.write_str("file"),
        }
    }
}

/// An error from any Amber operation.
///
/// `Debug` prints the same one line as `Display`, so that `fn main() ->
/// amber::Result<()>` (which prints an error returned from `main` with
/// `Debug`) says what is wrong in words; match on the variants for
/// structure.
#[non_exhaustive]
pub enum Error {
    /// An I/O call failed.
    Io {
        /// What Amber was doing.
        op: &'static str,
        /// The file it was doing it on.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Bytes on disk are not what Amber wrote: a checksum mismatch, an
    /// impossible value, a truncated structure.
    Corrupt {
        /// Which file.
        file: FileKind,
        /// The file's path.
        path: PathBuf,
        /// Where in it.
        at: Location,
        /// What is wrong.
        what: String,
    },
    /// The file is not an Amber database (or log) at all, or of a format
    /// version this build does not read.
    NotADatabase {
        /// The file's path.
        path: PathBuf,
        /// Why it was rejected.
        what: String,
    },
    /// The database is open elsewhere (another process or handle holds its lock).
    Locked {
        /// The file's path.
        path: PathBuf,
    },
    /// An earlier write or sync failed, so what is on disk is unknown; the
    /// store refuses further changes. Reopen the database to recover.
    Poisoned {
        /// The failure that poisoned the store.
        cause: String,
    },
    /// Misuse: the caller asked for something that is not valid in the
    /// current state (a bad argument, a name too long, a pointer from
    /// another open database, a finished transaction).
    Invalid(String),
    /// A pointer that no longer leads to a live object: the object was
    /// freed, was allocated by a transaction that aborted (or failed to
    /// commit), or the pointer comes from a closed session of a database.
    /// Nothing on disk is damaged; the program followed a stale pointer.
    Dangling {
        /// What the pointer is and why it dangles.
        what: String,
    },
    /// The operating system refused a virtual-memory operation Amber needs
    /// (reserving address space, `mprotect`, userfaultfd), or a limit of
    /// the machine was reached (`vm.max_map_count`, the reservation's
    /// size). The message says which, and the remedy where there is one.
    Vm {
        /// What failed, and what to do about it.
        what: String,
        /// The operating system's error, when there is one.
        source: Option<io::Error>,
    },
    /// A broken internal invariant: a bug in Amber, not the program's or
    /// the disk's fault. The operation failed without changing committed
    /// data; please report it.
    Internal(String),
    /// The program's persistent types do not match the database's stored
    /// schema.
    SchemaMismatch {
        /// The type.
        type_name: String,
        /// What differs (naming the field).
        what: String,
    },
    /// The transaction read a page that another client's transaction
    /// changed and committed meanwhile (a server's database: optimistic
    /// concurrency control). Nothing of it was committed, and memory is at
    /// the latest committed state: run it again ([`Db::transact`] does).
    ///
    /// [`Db::transact`]: crate::Db::transact
    Conflict {
        /// Which page, and which commit changed it.
        what: String,
    },
    /// A storage server refused the connection or a request (a wrong token,
    /// another wire version, no such database, a request it would not
    /// serve), or answered with something that is not the protocol. A
    /// broken connection is [`Error::Io`].
    Remote {
        /// The database's URL (`amber://host:port/name`).
        url: String,
        /// What the server said, or what was wrong with its answer.
        what: String,
    },
}

/// The error for damage found in `file` at `path`, at `at`: what is wrong.
pub(crate) fn corrupt(path: &Path, file: FileKind, at: Location, what: impl Into<String>) -> Error {
    Error::Corrupt {
        file,
        path: path.to_path_buf(),
        at,
        what: what.into(),
    }
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Error::Invalid(what.into())
    }

    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Error::Internal(what.into())
    }

    pub(crate) fn dangling(what: impl Into<String>) -> Self {
        Error::Dangling { what: what.into() }
    }

    /// True when this error reports a stale pointer (see [`Error::Dangling`]).
    pub fn is_dangling(&self) -> bool {
        matches!(self, Error::Dangling { .. })
    }

    /// True when a transaction lost to a concurrent one and can be run
    /// again (see [`Error::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }

    /// True when this error reports damaged bytes on disk.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "{}: {op} failed: {source}", path.display())
            }
            Error::Corrupt {
                file,
                path,
                at,
                what,
            } => write!(f, "{} ({file}): {at}: {what}", path.display()),
            Error::NotADatabase { path, what } => {
                write!(f, "{}: not an Amber database: {what}", path.display())
            }
            Error::Locked { path } => write!(
                f,
                "{}: database is in use (another process or handle holds its lock)",
                path.display()
            ),
            Error::Poisoned { cause } => write!(
                f,
                "store refuses changes after an earlier I/O failure ({cause}); reopen to recover"
            ),
            Error::Invalid(what) => f.write_str(what),
            Error::Dangling { what } => write!(f, "dangling pointer: {what}"),
            Error::Vm {
                what,
                source: Some(e),
            } => write!(f, "virtual memory: {what}: {e}"),
            Error::Vm { what, source: None } => write!(f, "virtual memory: {what}"),
            Error::Internal(what) => write!(
                f,
                "internal error (a bug in Amber; committed data is unchanged): {what}"
            ),
            Error::SchemaMismatch { type_name, what } => {
                write!(f, "schema mismatch for type `{type_name}`: {what}")
            }
            Error::Remote { url, what } => write!(f, "{url}: {what}"),
            Error::Conflict { what } => write!(f, "conflict: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Vm {
                source: Some(source),
                ..
            } => Some(source),
            _ => None,
        }
    }
}

/// Result with Amber's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error a program can meet prints as one line that says what is
    /// wrong and where, with no debug formatting.
    #[test]
    fn every_error_displays_one_line() {
        let p = PathBuf::from("/data/db.amber");
        let all = [
            Error::io(
                "open database",
                &p,
                io::Error::from(io::ErrorKind::NotFound),
            ),
            Error::Corrupt {
                file: FileKind::PageFile,
                path: p.clone(),
                at: Location::Page(7),
                what: "checksum mismatch".into(),
            },
            Error::NotADatabase {
                path: p.clone(),
                what: "bad magic".into(),
            },
            Error::Locked { path: p.clone() },
            Error::Poisoned {
                cause: "sync log failed".into(),
            },
            Error::invalid("root names are 1 to 255 bytes"),
            Error::SchemaMismatch {
                type_name: "Node".into(),
                what: "field 1 is `b` in the program, `c` in the database".into(),
            },
            Error::dangling("pointer 0x10 leads to an object that was freed"),
            Error::Vm {
                what: "mprotect of frame 3 failed with ENOMEM: raise vm.max_map_count".into(),
                source: None,
            },
            Error::internal("a broken invariant"),
            Error::Conflict {
                what: "page 17, which this transaction may have read, was changed by the commit \
                       at log position 4096, after its snapshot: nothing of it was committed; \
                       retry it"
                    .into(),
            },
            Error::Remote {
                url: "amber://127.0.0.1:7878/parts".into(),
                what: "the server refused the token".into(),
            },
        ];
        for e in all {
            let s = e.to_string();
            assert!(!s.is_empty() && !s.contains('\n'), "{e:?}: {s:?}");
            assert!(!s.contains("{ "), "debug formatting in {s:?}");
        }
    }
}
