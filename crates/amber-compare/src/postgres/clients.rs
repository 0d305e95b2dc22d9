//! PostgreSQL as the peer of `amber bench oo7 --server` (issue 19): one
//! server on the cluster the OO7 `postgres` engine builds, every client
//! process a connection to it running that engine
//! ([`crate::oo7::postgres`]: prepared statements, one object per
//! statement, or with `postgres-recursive` T1 as recursive queries), and
//! the WAL's insert position as the log's end.

use std::path::{Path, PathBuf};

use amber_bench::oo7::clients::{PEERS, Peer, PeerServer};
use amber_bench::oo7::engine::{EngineError, EngineOptions};
use amber_bench::oo7::{Oo7Db, Oo7Engine};
use amber_bench::procfs::ProcessTree;
use postgres::Client;

use super::server::{Install, Server, connect, simple_value};
use super::{DATA, DATABASE, LOG, Session, available, build, lsn};
use crate::oo7::postgres::PostgresOo7;
use crate::oo7::postgres_schema::load;

/// The PostgreSQL peer.
pub struct PostgresPeer;

impl Peer for PostgresPeer {
    fn names(&self) -> &'static [&'static str] {
        &PEERS
    }

    fn available(&self) -> Result<(), String> {
        available()
    }

    fn build(&self, dir: &Path, db: &Oo7Db) -> Result<(), EngineError> {
        build(dir, &EngineOptions::default(), |client| load(client, db))
    }

    fn serve(&self, dir: &Path) -> Result<Box<dyn PeerServer>, EngineError> {
        let install = Install::find().map_err(EngineError::bad_input)?;
        let server = Server::start(&install, &dir.join(DATA), &dir.join(LOG), None)?;
        let own = server.connect(DATABASE)?;
        Ok(Box::new(Served {
            data: server.data().to_path_buf(),
            own: Some(own),
            server,
        }))
    }

    fn connect(&self, url: &str, name: &str) -> Result<Box<dyn Oo7Engine>, EngineError> {
        let session = Session::on(connect(Path::new(url), DATABASE)?)?;
        let engine = PostgresOo7::new(session, name == "postgres-recursive")?;
        Ok(Box::new(engine))
    }
}

/// The running server, and the harness's own connection to it (which
/// reads the WAL's position).
struct Served {
    data: PathBuf,
    /// Closed before the server stops.
    own: Option<Client>,
    server: Server,
}

impl PeerServer for Served {
    fn url(&self) -> String {
        self.data.display().to_string()
    }

    fn log_end(&mut self) -> Result<u64, EngineError> {
        let client = (self.own.as_mut())
            .ok_or_else(|| EngineError::bad_input("the server's connection is closed"))?;
        lsn(&simple_value(
            client,
            "SELECT pg_current_wal_insert_lsn() - '0/0'",
        )?)
    }

    fn processes(&self) -> ProcessTree {
        self.server.processes()
    }

    fn stop(mut self: Box<Self>) -> Result<(), EngineError> {
        if let Some(c) = self.own.take() {
            use amber_bench::oo7::engine::ResultExt;
            c.close().ctx("closing the connection")?;
        }
        let Served { server, .. } = *self;
        server.stop()
    }
}
