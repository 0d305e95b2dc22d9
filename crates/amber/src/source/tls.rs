//! TLS to a server (`amber serve --tls-cert`; docs/design.md §10.14):
//! rustls with the `ring` provider, TLS 1.3 only, blocking
//! (`rustls::StreamOwned` over the `TcpStream`, whose read and write
//! timeouts bound every step of the handshake too).
//!
//! The server is checked against the CA the program trusts, under the
//! URL's host (an IP address is checked against the certificate's IP
//! addresses); the program proves itself with a client certificate when the
//! server asks for one (mutual TLS). In TLS 1.3 the server checks that
//! certificate after the client has finished its side of the handshake: a
//! refusal arrives as an alert on the first read, the answer to `Hello`.
//! Every TLS failure, then or later, is told in words naming what failed
//! and which file ([`explain`]), not as rustls' enum.

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, CertificateError, ClientConfig, ClientConnection, StreamOwned};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a program connects to a server over TLS
/// ([`RemoteOptions::tls`](crate::RemoteOptions)): the CA it trusts for the
/// server's certificate, and its own certificate and key for a server that
/// requires one (`amber serve --tls-client-ca`).
#[derive(Clone)]
pub struct TlsOptions {
    config: Arc<ClientConfig>,
    /// The files, as errors name them.
    ca: PathBuf,
    cert: Option<PathBuf>,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl TlsOptions {
    /// Trusts the CA certificates of PEM file `ca` for the server, and
    /// presents the certificate chain of PEM file `cert` with the private
    /// key of PEM file `key` (`amber serve --gen-certs` writes `ca.pem`,
    /// `client.pem` and `client.key`).
    pub fn from_files(
        ca: impl AsRef<Path>,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsOptions> {
        let (ca, cert, key) = (ca.as_ref(), cert.as_ref(), key.as_ref());
        let chain = read_certs(cert)?;
        let key_der = read_key(key)?;
        let config = builder(ca)?
            .with_client_auth_cert(chain, key_der)
            .map_err(|e| {
                Error::invalid(format!(
                    "the client certificate {} and key {} do not go together: {e}",
                    cert.display(),
                    key.display()
                ))
            })?;
        Ok(TlsOptions {
            config: Arc::new(config),
            ca: ca.to_path_buf(),
            cert: Some(cert.to_path_buf()),
        })
    }

    /// Trusts the CA certificates of PEM file `ca` for the server, and
    /// presents no certificate: for a server that authenticates its
    /// clients by token alone.
    pub fn without_client_cert(ca: impl AsRef<Path>) -> Result<TlsOptions> {
        let ca = ca.as_ref();
        Ok(TlsOptions {
            config: Arc::new(builder(ca)?.with_no_client_auth()),
            ca: ca.to_path_buf(),
            cert: None,
        })
    }
}

/// Makes the TLS handshake of `opts` on `tcp` with the server at `host`
/// (`host:port`, as in the URL `url`). `amber bench server` measures its
/// round trips over such a stream.
pub fn connect(opts: &TlsOptions, tcp: TcpStream, host: &str, url: &str) -> Result<TlsStream> {
    let name = host
        .rsplit_once(':')
        .map_or(host, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let remote = |what: String| Error::Remote {
        url: url.to_string(),
        what,
    };
    let name = ServerName::try_from(name.to_string())
        .map_err(|e| remote(format!("{name:?} is not a name TLS can check: {e}")))?;
    let conn = ClientConnection::new(opts.config.clone(), name)
        .map_err(|e| remote(format!("starting TLS: {e}")))?;
    let mut stream = TlsStream {
        inner: StreamOwned::new(conn, tcp),
        opts: opts.clone(),
    };
    while stream.inner.conn.is_handshaking() {
        let TlsStream { inner, .. } = &mut stream;
        if let Err(e) = inner.conn.complete_io(&mut inner.sock) {
            let e = stream.explained(e);
            return Err(match e.get_ref().and_then(|i| i.downcast_ref::<TlsFailure>()) {
                Some(f) => remote(f.0.clone()),
                None => Error::io("make the TLS handshake with the server", url, e),
            });
        }
    }
    Ok(stream)
}

fn builder(ca: &Path) -> Result<rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>> {
    Ok(ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Error::Internal(format!("TLS 1.3 with ring: {e}")))?
        .with_root_certificates(root_store(ca)?))
}

/// The TLS provider of the server and its clients: `ring` (used with TLS
/// 1.3 only).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The CA certificates of PEM file `path`, as trust anchors.
pub fn root_store(path: &Path) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|e| {
            Error::invalid(format!("the CA certificate in {}: {e}", path.display()))
        })?;
    }
    Ok(roots)
}

/// The private key of PEM file `path` (PKCS#8, PKCS#1 or SEC1).
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| Error::invalid(format!("reading a private key from {}: {e}", path.display())))
}

/// The certificates of PEM file `path` (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |e: String| Error::invalid(format!("reading certificates from {}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no CERTIFICATE in it".into()));
    }
    Ok(certs)
}

/// A TLS connection to a server: its reads and writes fail with
/// [`TlsFailure`] inside the `io::Error` when TLS is what failed.
#[derive(Debug)]
pub struct TlsStream {
    inner: StreamOwned<ClientConnection, TcpStream>,
    opts: TlsOptions,
}

impl TlsStream {
    fn explained(&self, e: io::Error) -> io::Error {
        match explain(&e, &self.opts) {
            Some(why) => io::Error::new(e.kind(), TlsFailure(why)),
            None => e,
        }
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| self.explained(e))
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.explained(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().map_err(|e| self.explained(e))
    }
}

/// A TLS failure, in words: what the remote source reports as
/// [`Error::Remote`].
#[derive(Debug)]
pub(crate) struct TlsFailure(pub(crate) String);

impl fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFailure {}

/// What a rustls error inside `e` means for the program: which side
/// refused what, and the file concerned. `None` if `e` is not a TLS error
/// (a timeout, a reset).
fn explain(e: &io::Error, opts: &TlsOptions) -> Option<String> {
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    let ca = opts.ca.display();
    Some(match tls {
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => {
            format!("the server's certificate is not signed by the CA in {ca}")
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!("the server's certificate is not valid for the host in the URL: {tls}"),
        rustls::Error::InvalidCertificate(c) => {
            format!("the server's certificate is refused ({ca} is the CA trusted): {c:?}")
        }
        rustls::Error::AlertReceived(alert) => match (&opts.cert, alert) {
            (_, AlertDescription::ProtocolVersion) => {
                "the server refused the TLS version: this program speaks TLS 1.3 only".into()
            }
            (None, _) => format!(
                "the server requires a client certificate, and none was given (it refused \
                 the handshake with the alert {alert:?})"
            ),
            (Some(cert), _) => format!(
                "the server refused our client certificate {} (alert {alert:?}): is it \
                 signed by the CA the server trusts (--tls-client-ca)?",
                cert.display()
            ),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "the server's answer is not TLS ({tls}): is it served without --tls-cert?"
        ),
        other => format!("TLS: {other}"),
    })
}
