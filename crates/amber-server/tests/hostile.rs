//! Clients that are wrong or hostile: each is refused with an `Error` frame
//! of the right code and a message saying why, then closed — and nothing
//! else changes: another client reading meanwhile reads on, correctly.

mod common;

use amber::internals::wire::{ErrorCode, MAGIC, Request, Response, VERSION};
use common::{Client, TOKEN, error_of, fixture, options, start};
use std::time::{Duration, Instant};

/// Says `Hello` with `token`, expects `code` and a message containing
/// `says`, then the close.
fn refused_hello(addr: std::net::SocketAddr, db: &str, token: &[u8], code: ErrorCode, says: &str) {
    let (mut c, r) = Client::hello(addr, db, token);
    let (got, m) = error_of(r);
    assert_eq!(got, code, "{m}");
    assert!(m.contains(says), "{m:?} does not say {says:?}");
    c.expect_closed();
}

#[test]
fn authentication_comes_first() {
    let (_dir, path) = fixture(10);
    let server = start(options(&[("items", &path)]));
    let a = server.addr;
    refused_hello(a, "items", b"", ErrorCode::Auth, "no token given");
    refused_hello(a, "items", b"wrong", ErrorCode::Auth, "wrong token");
    refused_hello(a, "items", &TOKEN[1..], ErrorCode::Auth, "wrong token");
    // The token is checked before the name: an unauthenticated client
    // learns nothing of what is served.
    refused_hello(a, "nothing", b"wrong", ErrorCode::Auth, "wrong token");
    refused_hello(
        a,
        "nothing",
        TOKEN,
        ErrorCode::NoSuchDatabase,
        "\"nothing\"",
    );

    // A request before Hello is refused, whatever it is.
    let mut c = Client::connect(a);
    let (code, m) = error_of(c.ask(&Request::ReadBlock { head: 3 }));
    assert_eq!(code, ErrorCode::Malformed);
    assert!(
        m.contains("the first message must be Hello, not ReadBlock"),
        "{m}"
    );
    c.expect_closed();
}

#[test]
fn other_versions_and_other_protocols_are_told_so() {
    let (_dir, path) = fixture(10);
    let server = start(options(&[("items", &path)]));
    // A client of the next version, whose Hello goes on in a layout this
    // version does not know.
    let mut c = Client::connect(server.addr);
    let mut body = vec![0x01];
    body.extend_from_slice(&MAGIC);
    body.extend_from_slice(&(VERSION + 1).to_le_bytes());
    body.extend_from_slice(b"anything at all");
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    c.send_raw(&frame);
    let (code, m) = error_of(c.recv());
    assert_eq!(code, ErrorCode::Version);
    assert_eq!(
        m,
        format!(
            "the client speaks wire protocol version {}, this server {VERSION}",
            VERSION + 1
        )
    );
    c.expect_closed();

    // Not an Amber client: the magic is wrong.
    let mut c = Client::connect(server.addr);
    let mut frame = Request::Hello {
        version: VERSION,
        database: "items".into(),
        token: TOKEN.to_vec(),
    }
    .encode();
    frame[5..9].copy_from_slice(b"HTTP");
    c.send_raw(&frame);
    let (code, m) = error_of(c.recv());
    assert_eq!(code, ErrorCode::Malformed);
    assert!(m.contains("not an Amber client"), "{m}");
    c.expect_closed();

    // An HTTP request: its first four bytes read as a length far over
    // the limit.
    let mut c = Client::connect(server.addr);
    c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let (code, m) = error_of(c.recv());
    assert_eq!(code, ErrorCode::TooLarge);
    assert!(m.contains("exceeds the limit"), "{m}");
    c.expect_closed();
}

#[test]
fn bad_frames_close_only_their_connection() {
    let (_dir, path) = fixture(1000);
    let server = start(options(&[("items", &path)]));
    let (mut good, _) = Client::welcomed(server.addr, "items");
    let Response::Blocks(blocks) = good.ask(&Request::Blocks {
        from: 0,
        pages: u64::MAX,
    }) else {
        panic!("no blocks");
    };
    let expected: Vec<Response> = blocks
        .iter()
        .map(|&(head, _)| good.ask(&Request::ReadBlock { head }))
        .collect();
    // Between every hostile connection, the good one reads every block
    // again and gets the same bytes.
    let read_all = |good: &mut Client| {
        for (&(head, _), want) in blocks.iter().zip(&expected) {
            assert_eq!(&good.ask(&Request::ReadBlock { head }), want);
        }
    };
    let hostile: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        (
            "garbage kind",
            frame(&[0x42, 1, 2, 3]),
            ErrorCode::Malformed,
        ),
        (
            "a response as a request",
            frame(&[0x81; 31]),
            ErrorCode::Malformed,
        ),
        (
            "truncated ReadBlock",
            frame(&[0x03, 1, 2, 3]),
            ErrorCode::Malformed,
        ),
        (
            "trailing bytes",
            frame(&[0x03, 1, 0, 0, 0, 0, 0, 0, 0, 9]),
            ErrorCode::Malformed,
        ),
        ("empty frame", vec![0, 0, 0, 0], ErrorCode::Malformed),
        (
            "oversized",
            u32::MAX.to_le_bytes().to_vec(),
            ErrorCode::TooLarge,
        ),
        (
            "just over the request limit",
            70_000u32.to_le_bytes().to_vec(),
            ErrorCode::TooLarge,
        ),
        ("a second Hello", hello(), ErrorCode::Malformed),
    ];
    for (what, bytes, code) in hostile {
        let (mut bad, _) = Client::welcomed(server.addr, "items");
        bad.send_raw(&bytes);
        let (got, m) = error_of(bad.recv());
        assert_eq!(got, code, "{what}: {m}");
        bad.expect_closed();
        read_all(&mut good);
    }
    // A frame cut short by the client closing: nothing to answer, the
    // server drops the connection.
    let (mut bad, _) = Client::welcomed(server.addr, "items");
    bad.send_raw(&Request::ReadBlock { head: 3 }.encode()[..7]);
    drop(bad);
    read_all(&mut good);
}

#[test]
fn the_connection_limit_answers_busy() {
    let (_dir, path) = fixture(10);
    let mut opts = options(&[("items", &path)]);
    opts.max_connections = 2;
    let server = start(opts);
    let (mut a, _) = Client::welcomed(server.addr, "items");
    let (_b, _) = Client::welcomed(server.addr, "items");
    let mut c = Client::connect(server.addr);
    let (code, m) = error_of(c.recv());
    assert_eq!(code, ErrorCode::Busy);
    assert!(m.contains("limit of 2 connections"), "{m}");
    c.expect_closed();
    // A place freed is taken again.
    a.send_raw(&Request::Bye.encode());
    a.expect_closed();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Client::hello(server.addr, "items", TOKEN) {
            (_, Response::Welcome { .. }) => break,
            (_, r) => {
                assert_eq!(error_of(r).0, ErrorCode::Busy);
                assert!(Instant::now() < deadline, "the place was never given back");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[test]
fn idle_and_silent_connections_time_out() {
    let (_dir, path) = fixture(10);
    let mut opts = options(&[("items", &path)]);
    opts.idle_timeout = Duration::from_millis(300);
    opts.hello_timeout = Duration::from_millis(300);
    let server = start(opts);

    // Welcomed, then silent.
    let (mut c, _) = Client::welcomed(server.addr, "items");
    let t = Instant::now();
    let (code, m) = error_of(c.recv());
    assert_eq!(code, ErrorCode::Timeout, "{m}");
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    c.expect_closed();

    // Connected, never says Hello.
    let mut c = Client::connect(server.addr);
    let (code, m) = error_of(c.recv());
    assert_eq!(code, ErrorCode::Timeout);
    assert!(m.contains("Hello"), "{m}");
    c.expect_closed();

    // Starts a frame and never finishes it.
    let (mut c, _) = Client::welcomed(server.addr, "items");
    c.send_raw(&Request::ReadBlock { head: 3 }.encode()[..6]);
    assert_eq!(error_of(c.recv()).0, ErrorCode::Timeout);
    c.expect_closed();
}

/// A frame of `body`.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn hello() -> Vec<u8> {
    Request::Hello {
        version: VERSION,
        database: "items".into(),
        token: TOKEN.to_vec(),
    }
    .encode()
}

/// Each connection is a reader of its database, and the reader table
/// holds 126: the next connection is answered `Busy`, saying why.
#[test]
fn a_full_reader_table_answers_busy() {
    let (_dir, path) = fixture(10);
    let mut opts = options(&[("items", &path)]);
    opts.max_connections = 200;
    let server = start(opts);
    let held: Vec<Client> = (0..126)
        .map(|_| Client::welcomed(server.addr, "items").0)
        .collect();
    let (mut c, r) = Client::hello(server.addr, "items", TOKEN);
    let (code, m) = error_of(r);
    assert_eq!(code, ErrorCode::Busy, "{m}");
    assert!(m.contains("126 readers are open already"), "{m}");
    c.expect_closed();
    drop(held);
}
