//! `amber serve` as a program: refusals at start (exit 2, one line), a
//! SIGTERM with a client connected — the client is told the server is
//! shutting down, and the server exits 0 — and `--gen-certs`: the six
//! files, the keys readable by their owner only, certificates a mutual TLS
//! server and client accept, and no file overwritten.

use amber::internals::wire::{self, DEFAULT_MAX_FRAME, ErrorCode, Request, Response, VERSION};
use std::io::{BufRead, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{amber, assert_error, s, serial};

fn ask(c: &mut TcpStream, r: &Request) -> Response {
    c.write_all(&r.encode()).expect("sent");
    let body = wire::read_frame(c, DEFAULT_MAX_FRAME).expect("a frame");
    Response::decode(&body).expect("a response")
}

#[test]
fn serve_refuses_what_it_cannot_serve() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("a.amber");
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    let token = dir.path().join("token");
    std::fs::write(&token, "secret\n").expect("token written");
    let not_db = dir.path().join("b.amber");
    std::fs::write(&not_db, vec![7u8; 8192]).expect("written");

    let r = amber(&["serve", s(&db)]);
    assert_error(&r, "no authentication: give --tls-cert");
    let r = amber(&["serve", s(&db), "--listen", "0.0.0.0:0"]);
    assert_error(&r, "without authentication");
    let r = amber(&[
        "serve",
        s(&db),
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        s(&not_db),
    ]);
    // (the file's 8 KiB are more than a token may be)
    assert_error(&r, "more than the 4096");
    let r = amber(&[
        "serve",
        s(&not_db),
        "--token-file",
        s(&token),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_error(&r, "cannot serve");
    let r = amber(&["serve", s(&db), s(&db), "--token-file", s(&token)]);
    assert_error(&r, "two databases are named \"a\"");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").expect("written");
    let r = amber(&["serve", s(&db), "--token-file", s(&empty)]);
    assert_error(&r, "is empty");
    let help = amber(&["serve", "--help"]);
    assert_eq!(help.code, 0);
    for opt in [
        "--listen",
        "--token-file",
        "--insecure-no-auth",
        "--max-frame",
        "--max-buffered",
        "--max-connections",
        "--idle-timeout",
        "--hello-timeout",
        "--tls-cert",
        "--tls-key",
        "--tls-client-ca",
        "--insecure-token-only",
        "--gen-certs",
        "--cert-host",
    ] {
        assert!(help.stdout.contains(opt), "--help lacks {opt}");
    }
}

#[test]
fn sigterm_with_a_client_connected_exits_cleanly() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("a.amber");
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    let token = dir.path().join("token");
    std::fs::write(&token, "secret\n").expect("token written");
    let db_arg = format!("main={}", s(&db));
    let (mut child, addr, line, log) = common::serve(&[&db_arg, "--token-file", s(&token)]);
    // The address it listens on is in its first log line.
    assert!(line.contains("serving main ("), "{line}");

    let mut c = TcpStream::connect(addr).expect("connected");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let hello = Request::Hello {
        version: VERSION,
        database: "main".into(),
        token: b"secret".to_vec(),
    };
    assert!(matches!(ask(&mut c, &hello), Response::Welcome { .. }));
    assert!(matches!(
        ask(&mut c, &Request::Stats),
        Response::Stats { .. }
    ));

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill ran");
    assert!(kill.success());
    let body = wire::read_frame(&mut c, DEFAULT_MAX_FRAME).expect("a last frame");
    match Response::decode(&body).expect("a response") {
        Response::Error { code, .. } => assert_eq!(code, ErrorCode::ShuttingDown),
        other => panic!("{other:?}"),
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().expect("waited") {
            break st;
        }
        assert!(Instant::now() < deadline, "amber serve did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    let rest: Vec<String> = log.lines().map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("SIGTERM")), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
}

#[test]
fn gen_certs_writes_a_ca_and_certificates_and_overwrites_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let certs = dir.path().join("certs");
    let r = amber(&[
        "serve",
        "--gen-certs",
        s(&certs),
        "--cert-host",
        "db.example",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for (file, mode) in [
        ("ca.pem", 0o644),
        ("ca.key", 0o600),
        ("server.pem", 0o644),
        ("server.key", 0o600),
        ("client.pem", 0o644),
        ("client.key", 0o600),
    ] {
        let meta = std::fs::metadata(certs.join(file)).expect(file);
        // The umask may take from a certificate's mode, never add to a key's.
        let got = meta.permissions().mode() & 0o777;
        assert_eq!(got & !mode, 0, "{file}: mode {got:o}");
        if mode == 0o600 {
            assert_eq!(got, 0o600, "{file}");
        }
        let text = std::fs::read_to_string(certs.join(file)).expect(file);
        assert!(text.starts_with("-----BEGIN "), "{file}: {text}");
    }
    // It says how to use them.
    assert!(r.stdout.contains("--tls-client-ca"), "{}", r.stdout);
    assert!(r.stdout.contains("TlsOptions::from_files"), "{}", r.stdout);
    // A second run overwrites nothing, even with one file missing.
    let key = std::fs::read(certs.join("client.key")).expect("the key");
    std::fs::remove_file(certs.join("ca.key")).expect("removed");
    let r = amber(&["serve", "--gen-certs", s(&certs)]);
    assert_error(&r, "does not overwrite");
    assert!(!certs.join("ca.key").exists(), "nothing written");
    assert_eq!(
        std::fs::read(certs.join("client.key")).expect("the key"),
        key
    );

    // The certificates serve: a mutual TLS server starts with them, and a
    // client with the client's certificate reads the database.
    let db = dir.path().join("a.amber");
    assert_eq!(amber(&["create", s(&db)]).code, 0);
    let (server, key, ca) = (
        certs.join("server.pem"),
        certs.join("server.key"),
        certs.join("ca.pem"),
    );
    let (mut child, addr, line, _log) = common::serve(&[
        s(&db),
        "--tls-cert",
        s(&server),
        "--tls-key",
        s(&key),
        "--tls-client-ca",
        s(&ca),
    ]);
    assert!(
        line.contains("over TLS, client certificates required"),
        "{line}"
    );
    let tls = amber::TlsOptions::from_files(
        certs.join("ca.pem"),
        certs.join("client.pem"),
        certs.join("client.key"),
    )
    .expect("client TLS options");
    let opts = amber::Options {
        remote: amber::RemoteOptions {
            tls: Some(tls),
            ..amber::RemoteOptions::default()
        },
        ..amber::Options::default()
    };
    let got = amber::Db::connect(&format!("amber://{addr}/a"), opts)
        .map(|db| amber::View::roots(&db).len());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("the server exits");
    assert_eq!(got.expect("connected over mutual TLS"), 0);
    assert!(status.success(), "{status}");
}
