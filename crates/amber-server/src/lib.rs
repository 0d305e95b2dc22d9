//! Amber's storage server: many client programs read one or more databases
//! through one process (`amber serve`), over the wire protocol of
//! `amber::internals::wire` (docs/design.md §10 gives its layout and this
//! server's behaviour).
//!
//! Each connection gets its own read-only store on the database's path,
//! whose snapshot is the connection's, faults pages in over the wire
//! (`ReadCluster`, `ReadBlock`), and moves its snapshot only when it asks
//! (`Refresh`, `Begin`, `Commit`). The server opens each database for
//! writing too, once: clients' transactions are validated optimistically
//! against each other and committed through that writer (docs/design.md
//! §11). Served `read_only`, it does not, and a writer beside the server
//! (a program with the database open for writing) keeps committing; its
//! checkpoints wait for the connections' snapshots through the reader
//! table, as they wait for any reader's.
//!
//! - [`config`]: what a server is told, and the refusal to serve without
//!   authentication (or off loopback without mutual TLS) unless asked by
//!   name.
//! - [`tls`]: TLS 1.3 with rustls, client certificates (mutual TLS).
//! - [`certs`]: the self-signed CA and certificates of `--gen-certs`.
//! - [`listener`]: the accept loop, the connection limit, shutdown.
//! - [`session`]: one connection — the TLS handshake and `Hello` first,
//!   within a deadline, the token compared in constant time, then requests until `Bye`, an idle
//!   timeout, a bad frame or shutdown.
//! - [`serve_read`]: the answers, from the connection's store.
//! - [`image_cache`]: the server's buffer pool — fetch clusters already
//!   read, verified and framed, with the snapshots they are right at.
//! - [`serve_write`]: transactions — reservations, types, commits through
//!   the writer store.
//! - [`validator`]: backward validation at page granularity.
//! - [`status`]: what `amber status` reports (the `Status` request).
//! - [`procfs`]: a process's CPU time and memory, from `/proc`.
//! - [`budget`]: the memory budget, shared out between the writers and
//!   the connections.
//! - [`admin`]: operations run on the server for a client: an online
//!   backup's pinned state, `verify`, `checkpoint`.
//!
//! Every bound is in [`ServeOptions`]; a malformed or hostile frame closes
//! that connection with a logged reason and an `Error` frame, never more.
#![deny(unsafe_code)]

pub mod admin;
pub mod budget;
pub mod certs;
mod committer;
pub mod config;
pub mod image_cache;
pub mod listener;
pub mod procfs;
pub mod serve_read;
pub mod serve_write;
pub mod session;
pub mod status;
pub mod tls;
pub mod validator;

pub use config::{Blocking, DEFAULT_LISTEN, ServeOptions, parse_database, read_token_file};
pub use listener::{Server, bind, shutdown_signal};
pub use tls::TlsFiles;

use std::fmt;
use std::path::PathBuf;

/// Why a server could not start or stopped.
#[derive(Debug)]
pub enum ServeError {
    /// The configuration is refused: what is wrong with it.
    Config(String),
    /// A database to serve could not be opened (for writing, or read-only
    /// when served `read_only`).
    Database {
        /// Its name.
        name: String,
        /// Its path.
        path: PathBuf,
        /// Why.
        source: Box<amber::Error>,
    },
    /// Binding the listening socket, or accepting on it, failed.
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Config(m) => f.write_str(m),
            ServeError::Database { name, path, source } => {
                write!(f, "cannot serve {} as {name:?}: {source}", path.display())
            }
            ServeError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for ServeError {}
