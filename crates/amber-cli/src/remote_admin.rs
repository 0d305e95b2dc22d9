//! `amber status`, and `amber verify` / `checkpoint` / `inspect` of a
//! database given as `amber://host:port/name`: the operation runs on the
//! server (the wire's `Status`, `Verify`, `Checkpoint`, `Inspect` requests,
//! docs/design.md §10.10), and
//! its report is printed as for a local file.

use crate::admin::{
    DeepSummary, checkpoint_line, deep_lines, deep_not_run, verify_lines, verify_status,
};
use crate::error::CliError;
use amber::inspect::{Installed, Show};
use amber::internals::source::remote::Remote;
use amber::internals::wire::{Request, Response};
use amber::{RemoteOptions, TlsOptions};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Whether a database argument names a served database.
pub fn is_url(arg: &Path) -> bool {
    arg.to_str().is_some_and(|s| s.starts_with("amber://"))
}

/// How a command authenticates to a server, for a database given as
/// `amber://host:port/name`: a token, TLS, or both, as the server asks.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Auth {
    /// For a served database: the file holding the server's token.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// For a server with TLS: the CA certificate (PEM) its certificate is
    /// signed by (`ca.pem` of `amber serve --gen-certs`).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// For a server that asks for client certificates: this program's
    /// certificate (PEM), with --tls-key and --tls-ca.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl Auth {
    /// Refuses these options for a local database, where they mean
    /// nothing.
    pub fn local_only(&self) -> Result<(), CliError> {
        match (&self.token_file, &self.tls_ca) {
            (None, None) => Ok(()),
            _ => Err(CliError::msg(
                "--token-file and --tls-* are for a served database (amber://host:port/name)",
            )),
        }
    }
}

/// A connection to the served database `url`, authenticated as `auth`
/// says; an answer may take an hour.
pub fn connect(url: &str, auth: &Auth) -> Result<Remote, CliError> {
    let mut opts = RemoteOptions {
        keepalive: None,
        // A deep verification or a checkpoint of a large database runs
        // on the server before its one answer comes.
        timeout: Duration::from_secs(3600),
        ..RemoteOptions::default()
    };
    if let Some(f) = &auth.token_file {
        opts = opts.with_token_file(f)?;
    }
    opts.tls = match (&auth.tls_ca, &auth.tls_cert, &auth.tls_key) {
        (Some(ca), Some(cert), Some(key)) => Some(TlsOptions::from_files(ca, cert, key)?),
        (Some(ca), _, _) => Some(TlsOptions::without_client_cert(ca)?),
        _ => None,
    };
    Ok(Remote::connect(url, &opts)?)
}

/// A request whose answer is a JSON report.
fn report(remote: &Remote, req: &Request) -> Result<Value, CliError> {
    match remote.request(req)? {
        Response::Report(doc) => serde_json::from_str(&doc)
            .map_err(|e| CliError::msg(format!("the server's report is not JSON: {e}"))),
        other => Err(CliError::msg(format!(
            "the server answered a report request with {other:?}"
        ))),
    }
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn strings(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// `amber status amber://host:port/name [--json]`.
pub fn status(url: &str, auth: &Auth, json: bool, out: &mut String) -> Result<ExitCode, CliError> {
    let remote = connect(url, auth)?;
    let doc = report(&remote, &Request::Status)?;
    drop(remote);
    if json {
        let _ = writeln!(out, "{doc:#}");
    } else {
        status_lines(&doc, out);
    }
    Ok(ExitCode::SUCCESS)
}

/// The human-readable status report.
fn status_lines(doc: &Value, out: &mut String) {
    let s = &doc["server"];
    let micros = |k: &str| s[k].as_f64().map_or("-".into(), |v| format!("{v:.1} µs"));
    let _ = writeln!(
        out,
        "server {} (pid {}, wire protocol {}): up {:.1} s, {} connection(s) of at most {}",
        s["listen"].as_str().unwrap_or("?"),
        u(s, "pid"),
        u(s, "protocol_version"),
        s["uptime_s"].as_f64().unwrap_or(0.0),
        u(s, "connections"),
        u(s, "max_connections"),
    );
    let _ = writeln!(
        out,
        "  CPU {} s ({} per page served, {} per commit, all work included); \
         memory: resident {} KiB, peak {} KiB",
        s["cpu_s"]
            .as_f64()
            .map_or("-".into(), |v| format!("{v:.2}")),
        micros("cpu_us_per_page_served"),
        micros("cpu_us_per_commit"),
        u(s, "rss_kib"),
        u(s, "peak_rss_kib"),
    );
    let _ = writeln!(out, "  locks: {}", s["locks"].as_str().unwrap_or("?"));
    for d in doc["databases"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "database {} ({}), {}: {} connection(s) ({} since start); {} commit(s), \
             {} conflict(s), {} abort(s); {} page(s) served",
            d["name"].as_str().unwrap_or("?"),
            d["path"].as_str().unwrap_or("?"),
            d["mode"].as_str().unwrap_or("?"),
            u(d, "connections"),
            u(d, "connections_since_start"),
            u(d, "commits"),
            u(d, "conflicts"),
            u(d, "aborts"),
            u(d, "pages_served"),
        );
        let p = &d["image_cache"];
        let _ = writeln!(
            out,
            "  buffer pool: {} of {} bytes in {} fetch cluster(s); {} answered from it, {} read",
            u(p, "bytes"),
            u(p, "capacity_bytes"),
            u(p, "entries"),
            u(p, "hits"),
            u(p, "misses"),
        );
        let w = &d["writer"];
        if w.is_object() {
            let _ = writeln!(
                out,
                "  writer store: log end LSN {}, checkpoint LSN {} ({} log bytes since); \
                 {} block(s) with changes not installed, {} page(s) logged whole; \
                 {} log sync(s); superblock generation {}",
                u(w, "end_lsn"),
                u(w, "checkpoint_lsn"),
                u(w, "log_bytes_since_checkpoint"),
                u(w, "pending_blocks"),
                u(w, "logged_pages"),
                u(w, "log_syncs"),
                u(w, "generation"),
            );
            let _ = writeln!(
                out,
                "  {} page(s) of {} bytes ({} free), {} block(s); {} recent commit(s) kept for validation",
                u(w, "page_count"),
                u(w, "page_size"),
                u(w, "free_pages"),
                u(w, "blocks"),
                u(w, "validator_entries"),
            );
        } else {
            let _ = writeln!(
                out,
                "  served read-only: its writer, if any, runs beside the server"
            );
        }
    }
    for c in doc["connections"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "connection {} from {} to {}, for {:.1} s: snapshot LSN {}, {}, {} page(s) shipped; \
             {} request(s), {} bytes received, {} bytes sent{}",
            u(c, "id"),
            c["peer"].as_str().unwrap_or("?"),
            c["database"].as_str().unwrap_or("?"),
            c["connected_s"].as_f64().unwrap_or(0.0),
            u(c, "snapshot_lsn"),
            if c["in_transaction"].as_bool() == Some(true) {
                "in a transaction"
            } else {
                "no transaction"
            },
            u(c, "shipped_pages"),
            u(c, "requests"),
            u(c, "bytes_received"),
            u(c, "bytes_sent"),
            if c["backup_pinned"].as_bool() == Some(true) {
                ", copying a backup"
            } else {
                ""
            },
        );
    }
}

/// `amber verify [--deep] amber://host:port/name`.
pub fn verify(url: &str, auth: &Auth, deep: bool, out: &mut String) -> Result<ExitCode, CliError> {
    let remote = connect(url, auth)?;
    let doc = report(&remote, &Request::Verify { deep })?;
    let problems = strings(&doc["problems"]);
    if doc["not_a_database"].as_bool() == Some(true) {
        return Err(CliError::msg(problems.join("; ")));
    }
    verify_lines(
        url,
        &problems,
        &strings(&doc["notes"]),
        u(&doc, "blocks"),
        u(&doc, "records"),
        out,
    );
    let d = &doc["deep"];
    let deep_damage = if let Some(why) = d["not_run"].as_str() {
        deep_not_run(url, why, out)
    } else if d.is_object() {
        let summary = DeepSummary {
            findings: (d["findings"].as_array().into_iter().flatten())
                .map(|f| {
                    let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
                    (s("class"), s("text"))
                })
                .collect(),
            damage: u(d, "damage"),
            dangling: u(d, "dangling"),
            notes: strings(&d["notes"]),
            blocks: u(d, "blocks"),
            objects: u(d, "objects"),
            pointers: u(d, "pointers"),
            unchecked: u(d, "unchecked"),
        };
        deep_lines(url, &summary, out)
    } else {
        false
    };
    Ok(verify_status(problems.is_empty() && !deep_damage))
}

/// `amber checkpoint amber://host:port/name`: the server's writer store
/// checkpoints. The connection moves to the latest commit first: its
/// snapshot would defer the checkpoint.
pub fn checkpoint(url: &str, auth: &Auth, out: &mut String) -> Result<ExitCode, CliError> {
    let remote = connect(url, auth)?;
    match remote.request(&Request::Refresh)? {
        Response::Refreshed { .. } => {}
        other => {
            return Err(CliError::msg(format!(
                "the server answered Refresh with {other:?}"
            )));
        }
    }
    let doc = report(&remote, &Request::Checkpoint)?;
    let ck = Installed {
        blocks: u(&doc, "blocks"),
        bytes: u(&doc, "bytes"),
        lsn: u(&doc, "lsn"),
        generation: u(&doc, "generation"),
    };
    checkpoint_line(&ck, out);
    Ok(ExitCode::SUCCESS)
}

/// `amber inspect amber://…`: the server's report of the database it
/// serves, printed as the command prints a file's.
pub fn inspect(url: &str, auth: &Auth, show: Show, out: &mut String) -> Result<ExitCode, CliError> {
    let remote = connect(url, auth)?;
    let doc = report(&remote, &Request::Inspect(show))?;
    let _ = writeln!(out, "served at {url}");
    out.push_str(doc["text"].as_str().unwrap_or_default());
    match doc["error"].as_str() {
        Some(why) => Err(CliError::msg(why)),
        None => Ok(ExitCode::SUCCESS),
    }
}
