//! `amber serve`: the storage server (`amber-server`) on a tokio runtime,
//! until SIGINT or SIGTERM. Logs go to stderr through `env_logger`
//! (`RUST_LOG` picks the level; info by default). `amber serve --gen-certs
//! DIR` writes the certificates of a quick start with mutual TLS instead.

use crate::error::CliError;
use amber_server::{ServeOptions, TlsFiles, parse_database, read_token_file};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Serve databases to client programs over the network: a client opens a
/// database by name, faults its pages in over the wire, reads a committed
/// snapshot that moves only when it refreshes or begins a transaction, and
/// commits transactions that the server validates against each other and
/// logs (the server holds each database open for writing; with
/// --read-only clients only read, and a writer may keep the database open
/// beside the server).
/// Runs until SIGINT or SIGTERM, then tells connected clients it is
/// shutting down, closes their connections and exits 0. Logs go to
/// stderr; RUST_LOG=debug (or trace) says more.
/// Authentication: mutual TLS (--tls-cert, --tls-key, --tls-client-ca:
/// clients present a certificate the CA signed), a shared token
/// (--token-file, for loopback development), or both. A non-loopback
/// address needs mutual TLS unless --insecure-token-only or
/// --insecure-no-auth says otherwise. `amber serve --gen-certs DIR` makes a
/// CA, a server and a client certificate for a quick start.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The databases: PATH, served under its file stem (`dir/a.amber` as
    /// `a`), or NAME=PATH. Each is checked at start to be an Amber
    /// database.
    #[arg(required_unless_present = "gen_certs", value_name = "[NAME=]PATH")]
    pub databases: Vec<String>,
    /// The address to listen on. Loopback by default; a non-loopback
    /// address needs mutual TLS (or --insecure-token-only, or
    /// --insecure-no-auth).
    #[arg(long, value_name = "ADDR", default_value_t = amber_server::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// A file holding the token every client must present: its bytes, one
    /// trailing newline trimmed, not empty, at most 4096 bytes. With
    /// mutual TLS, clients need both.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure_no_auth")]
    pub token_file: Option<PathBuf>,
    /// Serve TLS (1.3) with this certificate chain (PEM, the server's
    /// certificate first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: clients must present a certificate signed by this CA
    /// (PEM); the TLS handshake fails otherwise. Needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Serve without authentication: anyone who reaches the address reads
    /// and writes every database served. Required when neither
    /// --token-file nor --tls-client-ca is given, on loopback too.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Serve a non-loopback address with the token as the only
    /// authentication (no client certificates): whoever learns the token
    /// reads and writes the databases, and without --tls-cert the token
    /// and every page cross the network in clear.
    #[arg(long, requires = "token_file")]
    pub insecure_token_only: bool,
    /// The largest frame the server sends, in bytes; an answer that would
    /// be larger (a fetch cluster of many pages) is refused and the client
    /// asks for less. Requests are at most ~70 KB.
    #[arg(long, value_name = "BYTES", default_value_t = amber::internals::wire::DEFAULT_MAX_FRAME)]
    pub max_frame: u32,
    /// The most bytes one connection may have the server hold at once (an
    /// answer's images and its frame): a connection's answers carry at
    /// most half of this.
    #[arg(long, value_name = "BYTES", default_value_t = ServeOptions::default().max_buffered)]
    pub max_buffered: usize,
    /// The most connections served at once; one more is told the server
    /// is busy and closed.
    #[arg(long, value_name = "N", default_value_t = ServeOptions::default().max_connections)]
    pub max_connections: usize,
    /// A connection that sends no request for this long (or is this slow
    /// to send a frame or take an answer) is told so and closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    pub idle_timeout: f64,
    /// The time a new connection has to authenticate (its TLS handshake
    /// and its Hello).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub hello_timeout: f64,
    /// Serve without opening the databases for writing: clients only
    /// read, and another program may write a database beside the server.
    #[arg(long)]
    pub read_only: bool,
    /// Bound the server's memory to about N MiB: a quarter for the
    /// writers' pending changes (each checkpoints at its share), half
    /// for the connections' buffers (--max-buffered and a request
    /// frame each: a connection beyond what fits is told the server
    /// is busy), an eighth at most for the buffer pool (--image-cache-mib),
    /// the rest left for the runtime.
    #[arg(long, value_name = "N")]
    pub memory_mib: Option<usize>,
    /// The server's buffer pool of fetch clusters already read and
    /// verified, shared by every connection to a database and split evenly
    /// between the databases: N MiB (with --memory-mib, no more than an
    /// eighth of it). 0: every fetch reads the file.
    #[arg(long, value_name = "N", default_value_t = amber_server::config::DEFAULT_IMAGE_CACHE >> 20)]
    pub image_cache_mib: usize,
    /// The recovery scheme of the databases served, told to every client
    /// (a client's own scheme wins): pd-esm, sd-esm or sl-esm (records and
    /// dirty pages shipped, the pages cached here), pd-redo (records
    /// only, redone here), wpl (whole pages, logged here) or auto. Without
    /// it each client's own strategy ships records.
    #[arg(long, value_name = "NAME")]
    pub scheme: Option<amber::Scheme>,
    /// Instead of serving, write a self-signed CA (ca.pem, ca.key), a
    /// server certificate for localhost, 127.0.0.1, ::1 and each
    /// --cert-host (server.pem, server.key) and a client certificate
    /// (client.pem, client.key) into DIR, keys readable by their owner
    /// only; existing files are not overwritten. Prints the lines that use
    /// them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["databases", "tls_cert", "token_file", "insecure_no_auth"])]
    pub gen_certs: Option<PathBuf>,
    /// A further name (DNS name or IP address) the server certificate of
    /// --gen-certs is valid for; repeatable.
    #[arg(long, value_name = "NAME", requires = "gen_certs")]
    pub cert_host: Vec<String>,
}

fn seconds(v: f64, flag: &str) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| CliError::msg(format!("{flag} {v}: give a number of seconds above 0")))
}

/// Runs the server and returns once it has shut down; or, given
/// `--gen-certs`, writes the certificates and says how to use them.
pub fn serve(a: Args, out: &mut String) -> Result<ExitCode, CliError> {
    if let Some(dir) = &a.gen_certs {
        return gen_certs(dir, &a.cert_host, a.listen, out);
    }
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .try_init();
    let config = |e: amber_server::ServeError| CliError::msg(e.to_string());
    let opts = ServeOptions {
        listen: a.listen,
        databases: (a.databases.iter().map(|d| parse_database(d)))
            .collect::<Result<_, _>>()
            .map_err(config)?,
        token: (a.token_file.as_deref().map(read_token_file))
            .transpose()
            .map_err(config)?,
        insecure_no_auth: a.insecure_no_auth,
        tls: match (a.tls_cert, a.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert,
                key,
                client_ca: a.tls_client_ca,
            }),
            _ => None,
        },
        insecure_token_only: a.insecure_token_only,
        max_frame: a.max_frame,
        max_buffered: a.max_buffered,
        max_connections: a.max_connections,
        idle_timeout: seconds(a.idle_timeout, "--idle-timeout")?,
        hello_timeout: seconds(a.hello_timeout, "--hello-timeout")?,
        read_only: a.read_only,
        memory_budget: a.memory_mib.map(|m| m.saturating_mul(1 << 20)),
        image_cache: a.image_cache_mib.saturating_mul(1 << 20),
        scheme: a.scheme,
        ..ServeOptions::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::msg(format!("starting the server's runtime: {e}")))?;
    rt.block_on(async {
        // The handlers first: a signal from then on stops the server
        // cleanly, also while it opens its databases.
        let stop = amber_server::shutdown_signal()?;
        let server = amber_server::bind(opts).await?;
        server.run(stop).await;
        Ok::<_, amber_server::ServeError>(())
    })
    .map_err(config)?;
    Ok(ExitCode::SUCCESS)
}

/// `--gen-certs DIR`: the files, then the server's command line and the
/// client's options that use them.
fn gen_certs(
    dir: &Path,
    hosts: &[String],
    listen: SocketAddr,
    out: &mut String,
) -> Result<ExitCode, CliError> {
    let f = amber_server::certs::generate(dir, hosts).map_err(|e| CliError::msg(e.to_string()))?;
    let p = |p: &Path| p.display().to_string();
    let _ = writeln!(
        out,
        "wrote {}, {} (the CA: keep ca.key private, or delete it once you have made the \
         certificates you need),\n  {}, {} (the server's), {}, {} (the client's)",
        p(&f.ca),
        p(&f.ca_key),
        p(&f.server_cert),
        p(&f.server_key),
        p(&f.client_cert),
        p(&f.client_key)
    );
    let _ = writeln!(
        out,
        "serve with mutual TLS:\n  amber serve --listen {listen} --tls-cert {} --tls-key {} \
         --tls-client-ca {} [NAME=]PATH...",
        p(&f.server_cert),
        p(&f.server_key),
        p(&f.ca)
    );
    let _ = writeln!(
        out,
        "connect (Rust):\n  RemoteOptions {{ tls: Some(TlsOptions::from_files({:?}, {:?}, \
         {:?})?), ..RemoteOptions::default() }}\n  with Db::connect(\"amber://{listen}/NAME\", \
         Options {{ remote, ..Options::default() }})",
        p(&f.ca),
        p(&f.client_cert),
        p(&f.client_key)
    );
    Ok(ExitCode::SUCCESS)
}
