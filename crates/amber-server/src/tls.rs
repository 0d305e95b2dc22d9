//! TLS for the server (docs/design.md §10.14): rustls with the `ring`
//! provider, TLS 1.3 only, and — given a client CA — mutual TLS: a client
//! must present a certificate that CA signed, or the handshake fails
//! before a byte of the wire protocol is read.
//!
//! A connection to a TLS server is looked at before the handshake: a
//! client that does not start with a TLS record (a client without TLS
//! options) is told so in a plaintext `Error` frame, which it reads as
//! any refusal, instead of a TLS alert it cannot read. A plaintext server
//! looks the same way at its first bytes, so that a TLS client is named as
//! such in its log.

use crate::ServeError;
use amber::internals::source::tls::{provider, read_certs, read_key, root_store};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// The PEM files of a TLS server (`amber serve --tls-cert --tls-key
/// --tls-client-ca`).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server's certificate chain, its own certificate first.
    pub cert: PathBuf,
    /// The server's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA whose certificates clients must present (mutual TLS);
    /// `None`: clients are not asked for one (a token authenticates them,
    /// or nothing does).
    pub client_ca: Option<PathBuf>,
}

/// Reads the files and builds the configuration every connection's TLS
/// handshake is made with.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, ServeError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| ServeError::Config(format!("setting up TLS with TLS 1.3: {e}")))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let roots = Arc::new(root_store(ca).map_err(config)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(|e| ServeError::Config(format!("the client CA {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let server = builder
        .with_single_cert(
            read_certs(&files.cert).map_err(config)?,
            read_key(&files.key).map_err(config)?,
        )
        .map_err(|e| {
            ServeError::Config(format!(
                "the certificate {} and key {} do not go together: {e}",
                files.cert.display(),
                files.key.display()
            ))
        })?;
    Ok(Arc::new(server))
}

/// A certificate or key file that does not read, as the server's error.
fn config(e: amber::Error) -> ServeError {
    ServeError::Config(e.to_string())
}

/// Whether the connection's first bytes are a TLS handshake record
/// (`0x16`, then version `0x03 0x0?`), waiting up to `wait` for them;
/// `None` if the peer sent nothing (or closed) in that time. A frame of the
/// wire protocol starts with its length, little-endian: only a `Hello` of
/// 66 326 (`0x01_0316`) bytes or so would look the same, and a plaintext
/// client sending one is answered by TLS instead of a plaintext refusal.
pub async fn starts_with_tls(stream: &TcpStream, wait: Duration) -> Option<bool> {
    let look = async {
        let mut first = [0u8; 3];
        loop {
            let n = stream.peek(&mut first).await.ok()?;
            match (n, first) {
                (0, _) => return None,
                (_, [b, ..]) if b != 0x16 => return Some(false),
                (1, _) => {}
                (2, [_, v, _]) if v != 0x03 => return Some(false),
                (2, _) => {}
                (_, [_, v, minor]) => return Some(v == 0x03 && minor <= 0x04),
            }
            // Only part of the record header has arrived: wait for more.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(wait, look).await.ok().flatten()
}
