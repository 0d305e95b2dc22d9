//! `amber serve`: the storage server (`amber-server`) on a tokio runtime,
//! until SIGINT or SIGTERM. Logs go to stderr through `env_logger`
//! (`RUST_LOG` picks the level; info by default).

use crate::error::CliError;
use amber_server::{ServeOptions, parse_database, read_token_file};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What `amber serve` was given.
#[derive(Debug)]
pub struct Args {
    pub databases: Vec<String>,
    pub listen: SocketAddr,
    pub token_file: Option<PathBuf>,
    pub insecure_no_auth: bool,
    pub max_frame: u32,
    pub max_buffered: usize,
    pub max_connections: usize,
    pub idle_timeout: f64,
    pub hello_timeout: f64,
    pub read_only: bool,
    pub memory_mib: Option<usize>,
}

fn seconds(v: f64, flag: &str) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| CliError::msg(format!("{flag} {v}: give a number of seconds above 0")))
}

/// Runs the server; returns once it has shut down.
pub fn serve(a: Args) -> Result<ExitCode, CliError> {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .try_init();
    let opts = ServeOptions {
        listen: a.listen,
        databases: (a.databases.iter().map(|d| parse_database(d)))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::msg(e.to_string()))?,
        token: a
            .token_file
            .as_deref()
            .map(read_token_file)
            .transpose()
            .map_err(|e| CliError::msg(e.to_string()))?,
        insecure_no_auth: a.insecure_no_auth,
        max_frame: a.max_frame,
        max_buffered: a.max_buffered,
        max_connections: a.max_connections,
        idle_timeout: seconds(a.idle_timeout, "--idle-timeout")?,
        hello_timeout: seconds(a.hello_timeout, "--hello-timeout")?,
        read_only: a.read_only,
        memory_budget: a.memory_mib.map(|m| m.saturating_mul(1 << 20)),
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
    .map_err(|e| CliError::msg(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}
