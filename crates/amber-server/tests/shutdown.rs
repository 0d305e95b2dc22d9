//! Shutdown with clients connected: the server stops accepting, tells each
//! connected client `ShuttingDown` (one waiting for its next request, one
//! that has not said `Hello` yet), closes, and returns.

mod common;

use amber::internals::wire::{ErrorCode, Request, Response};
use common::{Client, error_of, fixture, options, start};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn shutdown_tells_connected_clients_and_returns() {
    let (_dir, path) = fixture(100);
    let server = start(options(&[("items", &path)]));
    let addr = server.addr;
    let (mut reading, _) = Client::welcomed(addr, "items");
    assert!(matches!(
        reading.ask(&Request::Stats),
        Response::Stats { .. }
    ));
    let mut silent = Client::connect(addr);
    // The silent client's connection is accepted before the shutdown.
    std::thread::sleep(Duration::from_millis(100));

    let took = server.shutdown();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");

    for c in [&mut reading, &mut silent] {
        let (code, m) = error_of(c.recv());
        assert_eq!(code, ErrorCode::ShuttingDown, "{m}");
        c.expect_closed();
    }
    // Nothing listens any more.
    assert!(TcpStream::connect(addr).is_err());
}

/// A client that asks and never reads its answers: the server blocks
/// writing to it, and shutdown gives that write 5 s, not the idle
/// timeout, before it drops the connection.
#[test]
fn a_client_that_does_not_read_does_not_hold_up_shutdown() {
    let (_dir, path) = fixture(3000);
    let mut opts = options(&[("items", &path)]);
    opts.idle_timeout = Duration::from_secs(120);
    let server = start(opts);
    let (mut c, _) = Client::welcomed(server.addr, "items");
    // Pipelined clusters of the whole file, far more than the sockets'
    // buffers hold.
    let ask = Request::ReadCluster {
        from: 0,
        pages: 1 << 20,
    }
    .encode();
    for _ in 0..200 {
        c.send_raw(&ask);
    }
    std::thread::sleep(Duration::from_millis(300));
    let took = server.shutdown();
    assert!(took < Duration::from_secs(15), "shutdown took {took:?}");
}
