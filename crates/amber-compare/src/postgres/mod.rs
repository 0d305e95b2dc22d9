//! PostgreSQL as the peer a team would pick: a server started and stopped
//! by the harness ([`server`]), the pure-Rust synchronous `postgres` client
//! (no libpq), and the OO1 engine ([`oo1`]; OO7's is
//! [`crate::oo7::postgres`], which [`clients`] serves to the clients of
//! `amber bench oo7 --server`).
//!
//! An engine's database directory holds a cluster (`DIR/pgdata`) and the
//! server's log (`DIR/postgres.log`): `build` creates the cluster, loads it
//! into its `postgres` database, checkpoints and stops the server; `open`
//! starts a server of its own on the (copied) directory, so that every
//! measured process begins with a fresh server (its buffer pool empty, the
//! files in the OS page cache as the other engines find theirs), and
//! `close` stops it. [`Session`] is one connection with its transactions.

pub mod clients;
pub mod oo1;
pub mod server;

use std::path::Path;

use amber_bench::oo1::{EngineError, EngineOptions, ResultExt};
use amber_bench::procfs::ProcessTree;
use postgres::Client;

use server::{Install, Server, check_durability, simple_value};

/// The data directory inside an engine's directory.
const DATA: &str = "pgdata";
/// The server's log inside an engine's directory.
const LOG: &str = "postgres.log";
/// The database the engines use: the one `initdb` creates.
pub const DATABASE: &str = "postgres";

/// Whether PostgreSQL can run here ([`Install::find`]'s error otherwise).
pub fn available() -> Result<(), String> {
    Install::find().map(drop)
}

fn install() -> Result<Install, EngineError> {
    Install::find().map_err(EngineError::bad_input)
}

/// What the engines say about durability (the settings are set at start
/// and read back on every connection: [`server::DURABILITY`]).
pub const DURABILITY: &str = "a PostgreSQL server of the harness's own, fsync = on, synchronous_commit = on, full_page_writes = on, wal_sync_method = fdatasync (set at start, read back on every connection): each COMMIT returns after the WAL is fdatasynced; the checkpointer writes the data files now and then (checkpoint_timeout 5 min, max_wal_size 1 GB, the defaults) and fsyncs them";

/// What `install` forces.
pub const INSTALL: &str = "CHECKPOINT: every dirty shared buffer written to the data files, which are fsynced, and a checkpoint record logged";

/// Creates the cluster in `dir`, starts a server on it, `load`s the
/// database through one connection, then `VACUUM ANALYZE` (visibility map,
/// hint bits and statistics, as after any bulk load), `CHECKPOINT`, and a
/// fast shutdown.
pub fn build(
    dir: &Path,
    options: &EngineOptions,
    load: impl FnOnce(&mut Client) -> Result<(), EngineError>,
) -> Result<(), EngineError> {
    let install = install()?;
    let data = dir.join(DATA);
    install.init(&data)?;
    let server = Server::start(&install, &data, &dir.join(LOG), options.cache_mib)?;
    let mut client = server.connect(DATABASE)?;
    check_durability(&mut client)?;
    load(&mut client)?;
    client
        .batch_execute("VACUUM ANALYZE")
        .ctx("VACUUM ANALYZE after the load")?;
    client.batch_execute("CHECKPOINT").ctx("CHECKPOINT")?;
    client.close().ctx("closing the connection")?;
    server.stop()
}

/// One connection to an engine's database, and the server it started, if
/// any.
pub struct Session {
    /// Dropped before the server.
    client: Client,
    server: Option<Server>,
    /// WAL bytes of the last committing transaction.
    wal_bytes: Option<u64>,
}

impl Session {
    /// Starts a server on the cluster `build` made in `dir` (or a copy) and
    /// connects to it.
    pub fn open(dir: &Path, options: &EngineOptions) -> Result<Session, EngineError> {
        let install = install()?;
        let data = dir.join(DATA);
        if !data.join("PG_VERSION").is_file() {
            return Err(EngineError::bad_input(format!(
                "{} holds no PostgreSQL cluster (no PG_VERSION)",
                data.display()
            )));
        }
        let server = Server::start(&install, &data, &dir.join(LOG), options.cache_mib)?;
        let client = server.connect(DATABASE)?;
        Session::with(client, Some(server))
    }

    /// A session on a connection to a server someone else runs (a test's
    /// shared server, one of several clients).
    pub fn on(client: Client) -> Result<Session, EngineError> {
        Session::with(client, None)
    }

    fn with(mut client: Client, server: Option<Server>) -> Result<Session, EngineError> {
        check_durability(&mut client)?;
        Ok(Session {
            client,
            server,
            wal_bytes: None,
        })
    }

    /// Runs `f` in a transaction that changes nothing: `BEGIN`, `f`,
    /// `COMMIT` (`ROLLBACK` when `f` fails).
    pub fn read<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        self.client
            .batch_execute("BEGIN")
            .ctx("beginning a transaction")?;
        match f(&mut self.client) {
            Ok(v) => {
                self.client.batch_execute("COMMIT").ctx("committing")?;
                Ok(v)
            }
            Err(e) => Err(self.abort(e)),
        }
    }

    /// Runs `f` in a transaction committed durably, and records the WAL it
    /// wrote: the WAL insert position is read in the same round trips as
    /// `BEGIN` and `COMMIT` (two statements in one simple query), so the
    /// count costs no round trip.
    pub fn write<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        const LSN: &str = "SELECT pg_current_wal_insert_lsn() - '0/0'";
        let before = lsn(&simple_value(&mut self.client, &format!("BEGIN; {LSN}"))?)?;
        match f(&mut self.client) {
            Ok(v) => {
                let after = lsn(&simple_value(&mut self.client, &format!("COMMIT; {LSN}"))?)?;
                self.wal_bytes = Some(after.saturating_sub(before));
                Ok(v)
            }
            Err(e) => Err(self.abort(e)),
        }
    }

    /// Rolls back after `e`, and returns it.
    fn abort(&mut self, e: EngineError) -> EngineError {
        // The connection may be gone: the error that matters is `e`.
        let _ = self.client.batch_execute("ROLLBACK");
        e
    }

    /// The connection, outside any transaction of the session's.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// `CHECKPOINT` (the engines' `install`).
    pub fn checkpoint(&mut self) -> Result<(), EngineError> {
        self.client.batch_execute("CHECKPOINT").ctx("CHECKPOINT")
    }

    /// WAL bytes of the last committing transaction, from before its
    /// `BEGIN` to after its `COMMIT` (WAL that background processes wrote
    /// in between, rarely any, included).
    pub fn wal_bytes(&self) -> Option<u64> {
        self.wal_bytes
    }

    /// The server's processes, when the session started the server.
    pub fn server(&self) -> Option<ProcessTree> {
        self.server.as_ref().map(Server::processes)
    }

    /// Closes the connection, and stops the server if the session started
    /// it.
    pub fn close(self) -> Result<(), EngineError> {
        let Session { client, server, .. } = self;
        let closed = client.close().ctx("closing the connection");
        let stopped = server.map_or(Ok(()), Server::stop);
        closed.and(stopped)
    }
}

/// An id or count as PostgreSQL's `integer` (the schemas' ids are 32-bit
/// signed; the generators' ids are far below 2^31).
pub fn int(v: u32) -> Result<i32, EngineError> {
    i32::try_from(v)
        .map_err(|_| EngineError::bad_input(format!("{v} exceeds PostgreSQL's integer")))
}

/// A WAL position difference (`pg_lsn - pg_lsn`, a numeric) as bytes.
fn lsn(text: &str) -> Result<u64, EngineError> {
    text.parse()
        .map_err(|_| EngineError::corrupt(format!("a WAL position difference {text:?}")))
}
