//! `amber serve --gen-certs DIR`: the certificates of a quick start with
//! mutual TLS — a self-signed CA, a server certificate it signs for
//! `localhost`, `127.0.0.1`, `::1` and the names given, and a client
//! certificate it signs. Keys are ECDSA P-256, written with mode 0600; no
//! file is overwritten. The server's tests and `amber bench server` make
//! theirs with the same code.
//!
//! The certificates are valid from 1975 to 4096 (rcgen's default): a quick
//! start has no renewal, and whoever holds `ca.key` can sign clients, so
//! that file is what to guard (or delete once the certificates are made).

use crate::ServeError;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The files `--gen-certs` writes in its directory.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The CA's certificate: what the server trusts for clients
    /// (`--tls-client-ca`) and clients trust for the server.
    pub ca: PathBuf,
    /// The CA's private key.
    pub ca_key: PathBuf,
    /// The server's certificate (`--tls-cert`).
    pub server_cert: PathBuf,
    /// The server's private key (`--tls-key`).
    pub server_key: PathBuf,
    /// The client's certificate.
    pub client_cert: PathBuf,
    /// The client's private key.
    pub client_key: PathBuf,
}

impl CertFiles {
    /// The file names in `dir`.
    pub fn in_dir(dir: &Path) -> CertFiles {
        CertFiles {
            ca: dir.join("ca.pem"),
            ca_key: dir.join("ca.key"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
        }
    }

    fn all(&self) -> [&Path; 6] {
        [
            &self.ca,
            &self.ca_key,
            &self.server_cert,
            &self.server_key,
            &self.client_cert,
            &self.client_key,
        ]
    }
}

/// Generates a CA, a server certificate for `localhost`, `127.0.0.1`,
/// `::1` and `hosts` (DNS names or IP addresses), and a client
/// certificate, into `dir` (created if missing). Refuses, writing
/// nothing, if any of the six files exists.
pub fn generate(dir: &Path, hosts: &[String]) -> Result<CertFiles, ServeError> {
    let files = CertFiles::in_dir(dir);
    if let Some(there) = files.all().into_iter().find(|p| p.exists()) {
        return Err(ServeError::Config(format!(
            "{} exists: --gen-certs does not overwrite certificates or keys (remove them, or \
             give another directory)",
            there.display()
        )));
    }
    let made =
        make(hosts).map_err(|e| ServeError::Config(format!("generating certificates: {e}")))?;
    std::fs::create_dir_all(dir).map_err(|source| ServeError::Io {
        what: format!("creating {}", dir.display()),
        source,
    })?;
    let writes = [
        (&files.ca, made.ca.pem(), 0o644),
        (&files.ca_key, made.ca_key.serialize_pem(), 0o600),
        (&files.server_cert, made.server.pem(), 0o644),
        (&files.server_key, made.server_key.serialize_pem(), 0o600),
        (&files.client_cert, made.client.pem(), 0o644),
        (&files.client_key, made.client_key.serialize_pem(), 0o600),
    ];
    for (path, pem, mode) in writes {
        write_new(path, pem.as_bytes(), mode)?;
    }
    Ok(files)
}

/// What [`generate`] writes.
struct Made {
    ca: Certificate,
    ca_key: KeyPair,
    server: Certificate,
    server_key: KeyPair,
    client: Certificate,
    client_key: KeyPair,
}

fn make(hosts: &[String]) -> Result<Made, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    // Named after its key: two quick starts' CAs never share a name (a
    // certificate of one would be checked against the other's key, and
    // refused as a bad signature rather than as an unknown issuer).
    let id: String = (ca_key.public_key_raw().iter().skip(1).take(6))
        .map(|b| format!("{b:02x}"))
        .collect();
    ca.distinguished_name
        .push(DnType::CommonName, format!("Amber quick-start CA {id}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca.self_signed(&ca_key)?;

    let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
    names.extend(
        hosts
            .iter()
            .filter(|h| !names.contains(h))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(names)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "Amber server");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server = server.signed_by(&server_key, &ca, &ca_key)?;

    let client_key = KeyPair::generate()?;
    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client
        .distinguished_name
        .push(DnType::CommonName, "Amber client");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client = client.signed_by(&client_key, &ca, &ca_key)?;
    Ok(Made {
        ca,
        ca_key,
        server,
        server_key,
        client,
        client_key,
    })
}

/// Writes a new file with `mode` (a key is never readable by others, not
/// even between its creation and a chmod).
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), ServeError> {
    let io = |source| ServeError::Io {
        what: format!("writing {}", path.display()),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(io)
}
