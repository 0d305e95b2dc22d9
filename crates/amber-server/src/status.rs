//! What `amber status` reports (the `Status` request): the server's
//! databases, its connections and the resources it uses, as a JSON
//! document (docs/design.md §10.10 lists its keys).
//!
//! Every session registers its connection here once its `Hello` is
//! accepted and updates its entry after each request — counters and the
//! few facts a report shows (snapshot, open transaction, shipped set) —
//! so that a report reads only atomics and one short lock, and never
//! waits for a session's request to finish. Per database, the counts of
//! commits, conflicts, aborts and pages served are taken from the answers
//! the sessions send; the writer store's own numbers (`StoreStats`) are
//! read when the report is made.
//!
//! No locks are listed: the protocol holds none. A transaction reads its
//! snapshot and the server validates it at commit (docs/design.md §11).

use crate::image_cache::Framed;
use crate::listener::Shared;
use crate::procfs;
use crate::serve_read::Served;
use amber::internals::wire::{Response, VERSION};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The words a report says about locks.
pub const LOCKS: &str = "none — the protocol is optimistic: a transaction reads its snapshot \
                         and the server validates it at commit (docs/design.md §11)";

/// The live connections and the counters of each database.
#[derive(Debug)]
pub struct Registry {
    started: Instant,
    /// The address the server listens on (the port chosen, if it was 0).
    listen: SocketAddr,
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
    dbs: HashMap<String, Counters>,
}

/// One database's counters, over every connection since the start.
#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    conflicts: AtomicU64,
    aborts: AtomicU64,
    pages_served: AtomicU64,
    connections: AtomicU64,
}

/// One connection, as a report shows it.
#[derive(Debug)]
pub struct Conn {
    id: u64,
    peer: SocketAddr,
    database: String,
    since: SystemTime,
    requests: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    snapshot_lsn: AtomicU64,
    in_transaction: AtomicBool,
    shipped: AtomicU64,
    backup: AtomicBool,
}

/// A connection's entry, removed when this is dropped (the session's end).
#[derive(Debug)]
pub struct Registered<'a> {
    registry: &'a Registry,
    conn: Arc<Conn>,
    /// Its database's counters.
    db: Option<&'a Counters>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        (self
            .registry
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner()))
        .remove(&self.conn.id);
    }
}

impl Registry {
    /// A registry for the databases named, of a server listening on
    /// `listen`.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a String>, listen: SocketAddr) -> Registry {
        Registry {
            started: Instant::now(),
            listen,
            conns: Mutex::new(BTreeMap::new()),
            dbs: names
                .into_iter()
                .map(|n| (n.clone(), Counters::default()))
                .collect(),
        }
    }

    /// Registers `served`, a connection from `peer` to `database`.
    pub fn register(&self, peer: SocketAddr, database: &str, served: &Served) -> Registered<'_> {
        let conn = Arc::new(Conn {
            id: served.conn,
            peer,
            database: database.to_string(),
            since: SystemTime::now(),
            requests: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            snapshot_lsn: AtomicU64::new(served.store.snapshot_lsn()),
            in_transaction: AtomicBool::new(false),
            shipped: AtomicU64::new(0),
            backup: AtomicBool::new(false),
        });
        let db = self.dbs.get(database);
        if let Some(c) = db {
            c.connections.fetch_add(1, Relaxed);
        }
        (self.conns.lock().unwrap_or_else(|e| e.into_inner())).insert(conn.id, conn.clone());
        Registered {
            registry: self,
            conn,
            db,
        }
    }
}

impl Registered<'_> {
    /// A request of `bytes` (its frame) arrived.
    pub fn received(&self, bytes: usize) {
        self.conn.requests.fetch_add(1, Relaxed);
        self.conn.bytes_in.fetch_add(bytes as u64, Relaxed);
    }

    /// An answer of `bytes` (its frame) was sent.
    pub fn sent(&self, bytes: usize) {
        self.conn.bytes_out.fetch_add(bytes as u64, Relaxed);
    }

    /// A request was answered `resp`: the counters it moves, and the
    /// connection's state after it.
    pub fn answered(&self, resp: &Response, served: &Served) {
        if let Some(db) = self.db {
            let ps = served.store.page_size() as u64;
            match resp {
                Response::Committed { .. } => db.commits.fetch_add(1, Relaxed),
                Response::Conflict { .. } => db.conflicts.fetch_add(1, Relaxed),
                Response::Aborted => db.aborts.fetch_add(1, Relaxed),
                Response::Block(image) => {
                    db.pages_served.fetch_add(image.len() as u64 / ps, Relaxed)
                }
                Response::Cluster { blocks, .. } => db.pages_served.fetch_add(
                    (blocks.iter())
                        .filter(|b| b.error.is_none())
                        .map(|b| u64::from(b.pages))
                        .sum(),
                    Relaxed,
                ),
                _ => 0,
            };
        }
        self.seen(served);
    }

    /// A `ReadCluster` was answered from the buffer pool with `framed`.
    pub fn answered_cached(&self, framed: &Framed, served: &Served) {
        if let Some(db) = self.db {
            let pages = framed.blocks.iter().map(|b| u64::from(b.1)).sum();
            db.pages_served.fetch_add(pages, Relaxed);
        }
        self.seen(served);
    }

    /// The connection's state after an answer.
    fn seen(&self, served: &Served) {
        let c = &self.conn;
        c.snapshot_lsn.store(served.store.snapshot_lsn(), Relaxed);
        c.in_transaction.store(served.tx.is_some(), Relaxed);
        c.shipped.store(served.shipped.len() as u64, Relaxed);
        c.backup.store(served.backup.is_some(), Relaxed);
    }
}

/// The report: a JSON document.
pub fn report(shared: &Shared) -> Response {
    let reg = &shared.status;
    let conns: Vec<Arc<Conn>> = (reg.conns.lock().unwrap_or_else(|e| e.into_inner()))
        .values()
        .cloned()
        .collect();
    let now = SystemTime::now();
    let connections: Vec<Value> = conns
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "peer": c.peer.to_string(),
                "database": c.database,
                "since_unix_s": c.since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
                "connected_s": now.duration_since(c.since).map_or(0.0, |d| d.as_secs_f64()),
                "snapshot_lsn": c.snapshot_lsn.load(Relaxed),
                "in_transaction": c.in_transaction.load(Relaxed),
                "shipped_pages": c.shipped.load(Relaxed),
                "requests": c.requests.load(Relaxed),
                "bytes_received": c.bytes_in.load(Relaxed),
                "bytes_sent": c.bytes_out.load(Relaxed),
                "backup_pinned": c.backup.load(Relaxed),
            })
        })
        .collect();
    let mut total_pages = 0;
    let mut total_commits = 0;
    let databases: Vec<Value> = (shared.opts.databases.iter())
        .map(|(name, path)| {
            let c = reg.dbs.get(name);
            let n = |f: fn(&Counters) -> &AtomicU64| c.map_or(0, |c| f(c).load(Relaxed));
            total_pages += n(|c| &c.pages_served);
            total_commits += n(|c| &c.commits);
            let writer = shared.writers.get(name).map(|w| {
                let s = w.store.stats();
                json!({
                    "page_size": s.page_size,
                    "page_count": s.page_count,
                    "free_pages": s.free_pages,
                    "blocks": s.blocks,
                    "pending_blocks": s.pending_blocks,
                    "logged_pages": s.logged_pages,
                    "wpl_installed_pages": s.wpl_installed_pages,
                    "checkpoint_lsn": s.checkpoint_lsn,
                    "end_lsn": s.end_lsn,
                    "log_bytes_since_checkpoint": s.end_lsn.saturating_sub(s.checkpoint_lsn),
                    "log_syncs": s.log_syncs,
                    "generation": s.generation,
                    "validator_entries": w.validator.len(),
                })
            });
            json!({
                "name": name,
                "path": path.display().to_string(),
                "mode": if writer.is_some() { "read-write" } else { "read-only" },
                "connections": conns.iter().filter(|c| &c.database == name).count(),
                "connections_since_start": n(|c| &c.connections),
                "commits": n(|c| &c.commits),
                "conflicts": n(|c| &c.conflicts),
                "aborts": n(|c| &c.aborts),
                "pages_served": n(|c| &c.pages_served),
                "image_cache": shared.databases.get(name).map(|d| {
                    let (c, s) = (&d.cache, d.cache.stats());
                    json!({
                        "capacity_bytes": c.capacity(),
                        "bytes": s.bytes,
                        "entries": s.entries,
                        "hits": s.hits,
                        "misses": s.misses,
                    })
                }),
                "writer": writer,
            })
        })
        .collect();
    let cpu = procfs::cpu_time_s("self");
    let per = |count: u64| match (cpu, count) {
        (Some(s), n) if n > 0 => Value::from(s * 1e6 / n as f64),
        _ => Value::Null,
    };
    let doc = json!({
        "server": {
            "protocol_version": VERSION,
            "pid": std::process::id(),
            "listen": reg.listen.to_string(),
            "uptime_s": reg.started.elapsed().as_secs_f64(),
            "connections": conns.len(),
            "max_connections": crate::budget::connection_limit(&shared.opts),
            "memory_budget_bytes": shared.opts.memory_budget,
            "cpu_s": cpu,
            "cpu_us_per_page_served": per(total_pages),
            "cpu_us_per_commit": per(total_commits),
            "rss_kib": procfs::status_kib("self", "VmRSS:"),
            "peak_rss_kib": procfs::status_kib("self", "VmHWM:"),
            "locks": LOCKS,
        },
        "databases": databases,
        "connections": connections,
    });
    Response::Report(doc.to_string())
}
