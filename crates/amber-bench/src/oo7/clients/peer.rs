//! The peer a team would deploy beside Amber in the client-server
//! experiment (PostgreSQL, issue 19): one server of its own that every
//! client process connects to, one connection per client. The engine
//! lives in `amber-compare`, which depends on this crate, so the CLI hands
//! it in as a [`Peer`].

use std::path::Path;

use super::super::engine::{EngineError, Oo7Engine};
use super::super::generate::Oo7Db;
use crate::procfs::ProcessTree;

/// A peer engine the clients can share through a server of its own.
pub trait Peer: Send + Sync {
    /// The names of its forms in `--schemes` and in the rows (`postgres`,
    /// `postgres-recursive`), the plain one first.
    fn names(&self) -> &'static [&'static str];
    /// Why it cannot run here (not installed), if so.
    fn available(&self) -> Result<(), String>;
    /// Builds the database `db` in `dir` (the server stopped afterwards).
    fn build(&self, dir: &Path, db: &Oo7Db) -> Result<(), EngineError>;
    /// Starts a server on what [`build`](Peer::build) made in `dir`.
    fn serve(&self, dir: &Path) -> Result<Box<dyn PeerServer>, EngineError>;
    /// In a client process: a connection to the server at `url`
    /// ([`PeerServer::url`]) as the engine form `name`.
    fn connect(&self, url: &str, name: &str) -> Result<Box<dyn Oo7Engine>, EngineError>;
}

/// A running peer server; stopped by [`PeerServer::stop`].
pub trait PeerServer {
    /// Where the clients connect (given to [`Peer::connect`]).
    fn url(&self) -> String;
    /// The end of its log (PostgreSQL's WAL insert position), bytes.
    fn log_end(&mut self) -> Result<u64, EngineError>;
    /// Its processes, whose CPU time is the server's.
    fn processes(&self) -> ProcessTree;
    /// Stops it cleanly.
    fn stop(self: Box<Self>) -> Result<(), EngineError>;
}

/// The peer that provides the form `name`, if any.
pub fn find<'a>(peers: &'a [Box<dyn Peer>], name: &str) -> Option<&'a dyn Peer> {
    peers
        .iter()
        .find(|p| p.names().contains(&name))
        .map(|p| &**p)
}
