//! The accept loop: a session task per connection up to the limit, `Busy`
//! beyond it, and shutdown — stop accepting, tell every session (each
//! finishes the request it is answering, sends `ShuttingDown` and
//! closes), wait for them all, then close the databases' writers (each
//! checkpointed).

use crate::image_cache::ImageCache;
use crate::serve_read::read_only;
use crate::serve_write::Writer;
use crate::status::Registry;
use crate::{ServeError, ServeOptions, budget, session, tls};
use amber::internals::store::Store;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// What every session of a server reads.
#[derive(Debug)]
pub struct Shared {
    /// The configuration.
    pub opts: ServeOptions,
    /// The databases by name.
    pub databases: HashMap<String, Database>,
    /// Their writers, by name (none when served `read_only`).
    pub writers: HashMap<String, Arc<Writer>>,
    /// The connections and counters `Status` reports.
    pub status: Registry,
    /// The TLS configuration, when served over TLS.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// A database served.
#[derive(Debug)]
pub struct Database {
    /// Its path.
    pub path: PathBuf,
    /// Its buffer pool, shared by its connections.
    pub cache: Arc<ImageCache>,
}

/// A server bound to its address, not yet accepting.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Checks `opts` (logging its warnings), reads the TLS certificates and
/// keys, opens each database for writing
/// (its exclusive lock, held until shutdown) or, served `read_only`,
/// read-only once to check that it is an Amber database this build reads,
/// and binds the listening socket.
pub async fn bind(opts: ServeOptions) -> Result<Server, ServeError> {
    for w in opts.check()? {
        log::warn!("{w}");
    }
    let tls = opts.tls.as_ref().map(tls::server_config).transpose()?;
    let mut databases = HashMap::new();
    let mut writers = HashMap::new();
    for (name, path) in &opts.databases {
        let (n, p) = (name.clone(), path.clone());
        let served_read_only = opts.read_only;
        let writer_opts = budget::writer_options(&opts);
        let vfs = opts.vfs.clone();
        let writer = tokio::task::spawn_blocking(move || {
            let opened = if served_read_only {
                Store::open(vfs, &p, read_only())
                    .and_then(Store::close)
                    .map(|()| None)
            } else {
                Store::open(vfs, &p, writer_opts).map(Some)
            };
            opened.map_err(|source| ServeError::Database {
                name: n,
                path: p,
                source: Box::new(source),
            })
        })
        .await
        .map_err(|e| ServeError::Config(format!("opening {}: {e}", path.display())))??;
        if let Some(store) = writer {
            let writer = Writer::new(store, opts.scheme).map_err(|source| ServeError::Io {
                what: format!("starting the committer thread of {name}"),
                source,
            })?;
            writers.insert(name.clone(), Arc::new(writer));
        }
        let cache = Arc::new(ImageCache::new(budget::image_cache_share(&opts)));
        let path = path.clone();
        databases.insert(name.clone(), Database { path, cache });
    }
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|source| ServeError::Io {
            what: format!("listening on {}", opts.listen),
            source,
        })?;
    let listening = listener.local_addr().unwrap_or(opts.listen);
    Ok(Server {
        listener,
        shared: Arc::new(Shared {
            status: Registry::new(databases.keys(), listening),
            opts,
            databases,
            writers,
            tls,
        }),
    })
}

impl Server {
    /// The address it listens on (the port chosen, if it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or(self.shared.opts.listen)
    }

    /// The writer of database `name`, unless it is served read-only (for
    /// numbers such as its log syncs). A handle kept past shutdown keeps
    /// the writer from being closed (it is then dropped unclosed: the next
    /// open recovers from the log).
    pub fn writer(&self, name: &str) -> Option<Arc<Writer>> {
        self.shared.writers.get(name).cloned()
    }

    /// Accepts and serves connections until `shutdown` completes, then
    /// stops accepting and returns once every session has closed.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let addr = self.local_addr();
        let Server { listener, shared } = self;
        let opts = &shared.opts;
        log::info!(
            "serving {}{} on {}",
            (opts.databases.iter())
                .map(|(n, p)| format!("{n} ({})", p.display()))
                .collect::<Vec<_>>()
                .join(", "),
            match &opts.tls {
                Some(t) if t.client_ca.is_some() => " over TLS, client certificates required,",
                Some(_) => " over TLS",
                None => "",
            },
            addr
        );
        let (stop, stopped) = watch::channel(false);
        let limit = budget::connection_limit(opts);
        let permits = Arc::new(Semaphore::new(limit));
        let mut sessions = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        match permits.clone().try_acquire_owned() {
                            Ok(permit) => sessions.spawn(session::serve(
                                stream,
                                peer,
                                shared.clone(),
                                stopped.clone(),
                                permit,
                            )),
                            Err(_) => sessions.spawn(session::refuse_busy(
                                stream,
                                peer,
                                limit,
                                opts.hello_timeout,
                                shared.tls.clone(),
                            )),
                        };
                    }
                    // Out of file descriptors, a connection reset before
                    // it was accepted, ...: the listener itself is fine.
                    Err(e) => {
                        log::warn!("accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(done) = sessions.join_next(), if !sessions.is_empty() => reap(done),
            }
        }
        drop(listener);
        log::info!("shutting down: {} connections to close", sessions.len());
        let _ = stop.send(true);
        while let Some(done) = sessions.join_next().await {
            reap(done);
        }
        close_writers(shared).await;
        log::info!("stopped");
    }
}

/// Closes each writer once every session has ended (their commits with
/// them): a checkpoint, so that the next open reads no log.
async fn close_writers(shared: Arc<Shared>) {
    let writers = match Arc::try_unwrap(shared) {
        Ok(s) => s.writers,
        Err(_) => {
            log::error!("a session outlived shutdown (a bug in amber-server): writers left open");
            return;
        }
    };
    for (name, writer) in writers {
        let Ok(writer) = Arc::try_unwrap(writer) else {
            log::error!("{name}: the writer is still in use at shutdown (a bug in amber-server)");
            continue;
        };
        match tokio::task::spawn_blocking(move || writer.store.close()).await {
            Ok(Ok(())) => log::info!("{name}: closed"),
            Ok(Err(e)) => log::error!("{name}: closing: {e}"),
            Err(e) => log::error!("{name}: closing: {e}"),
        }
    }
}

/// A session that panicked is a bug; it took only its own connection.
fn reap(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        log::error!("a session ended abnormally (a bug in amber-server): {e}");
    }
}

/// Completes on the first SIGINT or SIGTERM.
pub fn shutdown_signal() -> Result<impl Future<Output = ()>, ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let io = |source| ServeError::Io {
        what: "installing the SIGINT/SIGTERM handlers".into(),
        source,
    };
    let mut int = signal(SignalKind::interrupt()).map_err(io)?;
    let mut term = signal(SignalKind::terminate()).map_err(io)?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => log::info!("SIGINT"),
            _ = term.recv() => log::info!("SIGTERM"),
        }
    })
}
