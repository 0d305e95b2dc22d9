//! `amber serve` as a program: refusals at start (exit 2, one line), and a
//! SIGTERM with a client connected — the client is told the server is
//! shutting down, and the server exits 0.

use amber::internals::wire::{self, DEFAULT_MAX_FRAME, ErrorCode, Request, Response, VERSION};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
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
    assert_error(&r, "no token: give --token-file FILE");
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
        "TLS",
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args([
            "serve",
            &format!("main={}", s(&db)),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--token-file", s(&token)])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("amber serve started");
    // The address it listens on is in its first log line.
    let mut log = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    log.read_line(&mut line).expect("a log line");
    let addr: std::net::SocketAddr = line
        .split_whitespace()
        .last()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
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
