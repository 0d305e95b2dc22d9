//! TLS and mutual TLS: a client with the generated certificates reads and
//! commits through the server; every way of failing authentication — no
//! client certificate, a client certificate of another CA, a server
//! certificate the client does not trust, a wrong token over TLS, a
//! plaintext client to a TLS server and a TLS client to a plaintext
//! server, a client that never finishes its handshake — is refused with an
//! error that says what failed, on the client's side and in the server's
//! log, within the timeouts; a client over the connection limit is told,
//! inside TLS, that the server is busy. Certificates are made at test time
//! by the code of `amber serve --gen-certs` (no key is committed).
//!
//! The server runs in this test process on a runtime of its own (this
//! binary is the process of its tests alone); its log is captured.

mod common;

use amber::{Db, Error, Options, PRef, RemoteOptions, TlsOptions};
use amber_server::certs::{CertFiles, generate};
use amber_server::{ServeOptions, TlsFiles};
use common::{Client, Item, TOKEN, append, error_of, fixture, start, writing};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The server's log lines, from every test of this binary.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            LOG.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn capture_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).expect("the only logger");
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// Waits (5 s at most) for a server log line containing every one of
/// `words`, and returns it.
fn logged(words: &[&str]) -> String {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(l) = (LOG.lock().unwrap_or_else(|e| e.into_inner()).iter())
            .find(|l| words.iter().all(|w| l.contains(w)))
        {
            return l.clone();
        }
        assert!(
            Instant::now() < end,
            "no server log line with {words:?} in {:#?}",
            LOG.lock().unwrap_or_else(|e| e.into_inner())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Generated certificates in a directory of their own.
fn certs() -> (tempfile::TempDir, CertFiles) {
    let dir = tempfile::tempdir().expect("a directory");
    let files = generate(&dir.path().join("certs"), &[]).expect("certificates");
    (dir, files)
}

/// Serving `path` for writing over mutual TLS with `c`'s certificates,
/// and with `token` if given.
fn tls_options(path: &Path, c: &CertFiles, token: Option<&[u8]>) -> ServeOptions {
    let mut o = writing(&[("items", path)]);
    o.token = token.map(<[u8]>::to_vec);
    o.tls = Some(TlsFiles {
        cert: c.server_cert.clone(),
        key: c.server_key.clone(),
        client_ca: Some(c.ca.clone()),
    });
    o
}

fn connect(addr: SocketAddr, tls: Option<TlsOptions>, token: Option<&[u8]>) -> amber::Result<Db> {
    let remote = RemoteOptions {
        tls,
        token: token.map(<[u8]>::to_vec),
        timeout: Duration::from_secs(10),
        ..RemoteOptions::default()
    };
    Db::connect(
        &format!("amber://{addr}/items"),
        Options {
            remote,
            ..Options::default()
        },
    )
}

/// The client's error, which must be `Error::Remote`, as text; and it
/// came within the client's timeout, not after it.
fn refused(t: Instant, got: amber::Result<Db>) -> String {
    let e = got.expect_err("refused");
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "took {:?}: {e}",
        t.elapsed()
    );
    assert!(matches!(e, Error::Remote { .. }), "{e:?}");
    e.to_string()
}

fn client_tls(c: &CertFiles) -> TlsOptions {
    TlsOptions::from_files(&c.ca, &c.client_cert, &c.client_key).expect("client TLS options")
}

#[test]
fn reads_and_commits_over_mutual_tls() {
    capture_log();
    let (_d, path) = fixture(50);
    let (_c, c) = certs();
    let server = start(tls_options(&path, &c, None));
    let mut db = connect(server.addr, Some(client_tls(&c)), None).expect("connected over TLS");
    let head: PRef<Item> = db.root("items").expect("roots").expect("the list");
    assert_eq!(db.get(head).id, 49);
    let mut n = 0;
    let mut at = Some(head);
    while let Some(i) = at {
        n += 1;
        at = db.get(i).next;
    }
    assert_eq!(n, 50);
    append(&mut db, 50..60);
    let head: PRef<Item> = db.root("items").expect("roots").expect("the list");
    assert_eq!(db.get(head).id, 59);
    // Another client, over another TLS connection, sees the commit.
    let other = connect(server.addr, Some(client_tls(&c)), None).expect("connected");
    let head: PRef<Item> = other.root("items").expect("roots").expect("the list");
    assert_eq!(other.get(head).id, 59);
    drop((db, other));
    let addr = server.addr.to_string();
    server.shutdown();
    logged(&[&format!(
        "over TLS, client certificates required, on {addr}"
    )]);
}

#[test]
fn a_client_without_a_certificate_is_refused_on_both_sides() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let server = start(tls_options(&path, &c, None));
    let no_cert = TlsOptions::without_client_cert(&c.ca).expect("TLS options");
    let t = Instant::now();
    let e = refused(t, connect(server.addr, Some(no_cert), None));
    assert!(
        e.contains("the server requires a client certificate, and none was given"),
        "{e}"
    );
    logged(&["refused: the TLS handshake failed", "no certificates"]);
}

#[test]
fn a_client_certificate_of_another_ca_is_refused_on_both_sides() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let (_o, other) = certs();
    let server = start(tls_options(&path, &c, None));
    // The client trusts the server, but its certificate is another CA's.
    let tls = TlsOptions::from_files(&c.ca, &other.client_cert, &other.client_key).expect("TLS");
    let t = Instant::now();
    let e = refused(t, connect(server.addr, Some(tls), None));
    assert!(
        e.contains("the server refused our client certificate"),
        "{e}"
    );
    assert!(e.contains(&other.client_cert.display().to_string()), "{e}");
    logged(&["refused: the TLS handshake failed", "UnknownIssuer"]);
}

#[test]
fn a_server_certificate_the_client_does_not_trust_is_refused() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let (_o, other) = certs();
    let server = start(tls_options(&path, &c, None));
    // The client's certificate is good; the CA it trusts is another.
    let tls =
        TlsOptions::from_files(&other.ca, &c.client_cert, &c.client_key).expect("TLS options");
    let t = Instant::now();
    let e = refused(t, connect(server.addr, Some(tls), None));
    let want = format!(
        "the server's certificate is not signed by the CA in {}",
        other.ca.display()
    );
    assert!(e.contains(&want), "{e}");
    // The client's alert ends the server's handshake.
    logged(&["refused: the TLS handshake failed", "UnknownCA"]);
}

#[test]
fn a_wrong_token_over_tls_is_refused_on_both_sides() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let server = start(tls_options(&path, &c, Some(TOKEN)));
    let t = Instant::now();
    let e = refused(
        t,
        connect(server.addr, Some(client_tls(&c)), Some(b"not the token")),
    );
    assert!(e.contains("authentication failed: wrong token"), "{e}");
    logged(&["closing: authentication failed: wrong token"]);
    // Both checks pass: welcome.
    connect(server.addr, Some(client_tls(&c)), Some(TOKEN)).expect("certificate and token");
}

#[test]
fn a_plaintext_client_of_a_tls_server_is_told_to_use_tls() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let server = start(tls_options(&path, &c, Some(TOKEN)));
    let t = Instant::now();
    let e = refused(t, connect(server.addr, None, Some(TOKEN)));
    assert!(e.contains("this server requires TLS"), "{e}");
    logged(&["closing: authentication failed: this server requires TLS"]);
    // The raw protocol: an `Error` frame, then the close.
    let (mut raw, answer) = Client::hello(server.addr, "items", TOKEN);
    let (code, _) = error_of(answer);
    assert_eq!(code, amber::internals::wire::ErrorCode::Auth);
    raw.expect_closed();
}

#[test]
fn a_tls_client_of_a_plaintext_server_is_told_the_server_is_not_tls() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let server = start(writing(&[("items", &path)]));
    let t = Instant::now();
    let e = refused(t, connect(server.addr, Some(client_tls(&c)), Some(TOKEN)));
    assert!(
        e.contains("the server's answer is not TLS") && e.contains("--tls-cert"),
        "{e}"
    );
    logged(&["the client began a TLS handshake, but this server is not serving TLS"]);
}

#[test]
fn a_tls_client_over_the_limit_is_told_the_server_is_busy() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let mut opts = tls_options(&path, &c, None);
    opts.max_connections = 1;
    let server = start(opts);
    let first = connect(server.addr, Some(client_tls(&c)), None).expect("the first client");
    let t = Instant::now();
    let e = refused(t, connect(server.addr, Some(client_tls(&c)), None));
    assert!(
        e.contains("busy") && e.contains("limit of 1 connections"),
        "{e}"
    );
    drop(first);
}

#[test]
fn the_hello_timeout_bounds_the_tls_handshake() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let mut opts = tls_options(&path, &c, None);
    opts.hello_timeout = Duration::from_millis(500);
    let server = start(opts);
    // Silent: the server closes at the hello timeout.
    let mut s = std::net::TcpStream::connect(server.addr).expect("connected");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let n = s.read(&mut [0u8; 64]).unwrap_or(0);
    assert_eq!(n, 0, "the server closes, sending nothing");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // The start of a TLS record, then nothing: the same.
    let mut s = std::net::TcpStream::connect(server.addr).expect("connected");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[0x16, 0x03, 0x01, 0x01, 0x00, 0x01]).unwrap();
    let t = Instant::now();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    logged(&["no TLS handshake within the hello timeout of 0.5 s"]);
}

#[test]
fn shutdown_does_not_wait_for_a_tls_handshake() {
    capture_log();
    let (_d, path) = fixture(5);
    let (_c, c) = certs();
    let server = start(tls_options(&path, &c, None));
    // One client silent, one inside its handshake (half a record sent).
    let _silent = std::net::TcpStream::connect(server.addr).expect("connected");
    let mut half = std::net::TcpStream::connect(server.addr).expect("connected");
    half.write_all(&[0x16, 0x03, 0x01, 0x01, 0x00, 0x01])
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let took = server.shutdown();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
}

#[test]
fn off_loopback_the_server_requires_mutual_tls() {
    let (_d, path) = fixture(1);
    let (_c, c) = certs();
    let mut opts = writing(&[("items", &path)]);
    opts.listen = "0.0.0.0:0".parse().unwrap();
    // A token alone, even over TLS, is refused off loopback.
    let e = opts.check().unwrap_err().to_string();
    assert!(
        e.contains("not loopback") && e.contains("--tls-client-ca"),
        "{e}"
    );
    opts.tls = Some(TlsFiles {
        cert: c.server_cert.clone(),
        key: c.server_key.clone(),
        client_ca: None,
    });
    let e = opts.check().unwrap_err().to_string();
    assert!(e.contains("--insecure-token-only"), "{e}");
    opts.tls = tls_options(&path, &c, None).tls;
    assert_eq!(
        opts.check().expect("mutual TLS serves anywhere"),
        Vec::<String>::new()
    );
}

#[test]
fn unreadable_certificates_are_refused_at_start_naming_the_file() {
    let (_d, path) = fixture(1);
    let (_c, c) = certs();
    let mut opts = tls_options(&path, &c, None);
    let missing = c.ca.with_file_name("none.pem");
    opts.tls.as_mut().unwrap().client_ca = Some(missing.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt
        .block_on(amber_server::bind(opts.clone()))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&missing.display().to_string()), "{e}");
    // A key that is not the certificate's.
    let mut opts = tls_options(&path, &c, None);
    opts.tls.as_mut().unwrap().key = c.client_key.clone();
    let e = rt
        .block_on(amber_server::bind(opts))
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not go together"), "{e}");
}
