//! Killed clients and a killed server: every commit a client was told of
//! (an acknowledgement printed after `commit` returned) is in the database
//! afterwards, and nothing else is — no transaction half there, no lost
//! update.
//!
//! The processes are this test binary run again (`ROLE` in the
//! environment): a server child (`amber_server` on a runtime of its own,
//! stopped by SIGTERM or killed by SIGKILL) and client children, each
//! running transactions through `Db::connect` and `Db::transact` until it
//! is killed. Every transaction adds one to its client's counter and one to
//! a shared total, so that the total is the sum of the counters exactly
//! when no committed update was lost, and every transaction conflicts with
//! every concurrent one (the total's page), which `transact` retries.
//!
//! The clients run under QuickStore's recovery schemes (docs/design.md
//! §11.7), all six at once: client `i` starts under scheme `i` of
//! `Scheme::ALL` and takes the next one each time it is started again, so
//! that ESM's cached pages, REDO's records and WPL's page records are all
//! in the log that each server kill makes recovery replay.
//!
//! `AMBER_SERVER_CLIENT_KILLS` (default 40) client kills and
//! `AMBER_SERVER_KILLS` (default 10) server kills per run; CI runs more.

use amber::{Db, Error, Options, PRef, Persistent, RemoteOptions, Scheme};
use amber_server::ServeOptions;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const TOKEN: &[u8] = b"kill-test-token";
const CLIENTS: u64 = 4;

#[derive(Persistent)]
#[repr(C)]
struct Ledger {
    total: u64,
    counters: [Option<PRef<Counter>>; CLIENTS as usize],
}

#[derive(Persistent)]
#[repr(C)]
struct Counter {
    client: u64,
    value: u64,
    /// Spreads the counters over pages of their own.
    pad: [u64; 500],
}

fn env_n(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A cheap random number (the test needs no quality, only variety).
fn rand(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn create(path: &Path) {
    let mut db = Db::create(path, Options::default()).expect("create");
    let mut tx = db.begin().expect("begin");
    let mut counters = [None; CLIENTS as usize];
    for (i, c) in counters.iter_mut().enumerate() {
        *c = Some(
            tx.alloc(Counter {
                client: i as u64,
                value: 0,
                pad: [0; 500],
            })
            .expect("alloc"),
        );
    }
    let ledger = tx.alloc(Ledger { total: 0, counters }).expect("alloc");
    tx.set_root("ledger", ledger).expect("root");
    tx.commit().expect("commit");
    db.close().expect("close");
}

/// Ends a child whose test is gone (it panicked, or was killed itself):
/// nothing else would stop a client that reconnects forever.
fn orphaned() {
    if std::os::unix::process::parent_id() == 1 {
        std::process::exit(0);
    }
}

/// The server child: serves `PATH` on `PORT` until SIGTERM (or death).
fn server_role(path: &Path, port: u16) {
    std::thread::spawn(|| {
        loop {
            orphaned();
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let opts = ServeOptions {
            listen: format!("127.0.0.1:{port}").parse().unwrap(),
            databases: vec![("ledger".into(), path.to_path_buf())],
            token: Some(TOKEN.to_vec()),
            ..ServeOptions::default()
        };
        let server = amber_server::bind(opts).await.expect("bind");
        println!("listening {}", server.local_addr());
        std::io::stdout().flush().unwrap();
        server
            .run(amber_server::shutdown_signal().expect("signals"))
            .await;
    });
}

fn client_opts(scheme: Scheme) -> Options {
    Options {
        remote: RemoteOptions {
            token: Some(TOKEN.to_vec()),
            timeout: Duration::from_secs(5),
            scheme: Some(scheme),
            ..RemoteOptions::default()
        },
        ..Options::default()
    }
}

/// A client child: transactions on its counter and the total, each
/// acknowledged on stdout once `commit` returned, until killed; a lost
/// connection is reopened (the server may be restarting).
fn client_role(url: &str, me: u64, scheme: Scheme) {
    let stdout = std::io::stdout();
    loop {
        orphaned();
        let mut db = match Db::connect(url, client_opts(scheme)) {
            Ok(db) => db,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let ledger: PRef<Ledger> = db.root("ledger").expect("root").expect("ledger");
        loop {
            orphaned();
            let done = db.transact(|tx| {
                // The pages are faulted in through `try_get`, which returns
                // a lost server as an error (a plain load would abort the
                // process, as it does on a damaged page).
                let counter = tx.try_get(ledger)?.counters[me as usize].expect("counter");
                tx.try_get(counter)?;
                tx.get_mut(ledger).total += 1;
                let c = tx.get_mut(counter);
                c.value += 1;
                Ok(c.value)
            });
            match done {
                Ok(v) => {
                    let mut out = stdout.lock();
                    writeln!(out, "ack {me} {v}").unwrap();
                    out.flush().unwrap();
                }
                // Lost to the others more often than `transact` retries:
                // the next round tries again.
                Err(Error::Conflict { .. }) => {}
                // The server went away (killed, restarting): start again
                // on a new connection.
                Err(Error::Io { .. } | Error::Remote { .. }) => break,
                Err(e) => panic!("client {me}: {e}"),
            }
        }
    }
}

fn main_role() -> Option<()> {
    let role = std::env::var("ROLE").ok()?;
    let path = PathBuf::from(std::env::var("DB").expect("DB"));
    match role.as_str() {
        "server" => server_role(&path, std::env::var("PORT").unwrap().parse().unwrap()),
        "client" => client_role(
            &std::env::var("URL").unwrap(),
            std::env::var("ME").unwrap().parse().unwrap(),
            std::env::var("SCHEME").unwrap().parse().unwrap(),
        ),
        other => panic!("unknown role {other}"),
    }
    Some(())
}

fn spawn(role: &str, vars: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("ROLE", role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in vars {
        c.env(k, v);
    }
    c.spawn().expect("spawn")
}

/// Not a test of its own: the entry of the children.
#[test]
fn child_entry() {
    main_role();
}

/// Starts a server child on `port` (0: any) and waits for its address.
fn start_server(db: &Path, port: u16) -> (Child, u16) {
    let mut child = spawn(
        "server",
        &[("DB", db.display().to_string()), ("PORT", port.to_string())],
    );
    // The test harness prints lines of its own first, and more after
    // (read to the end, so that the child never writes into a closed pipe).
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    let line = lines
        .find_map(|l| l.split_once("listening ").map(|(_, a)| a.to_string()))
        .expect("the server's address");
    std::thread::spawn(move || lines.for_each(drop));
    let port = line
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the server said {line:?}"));
    (child, port)
}

/// A client child whose acknowledgements go to `acks`, started for the
/// `start`-th time: under that scheme of `Scheme::ALL` past its own.
fn start_client(
    db: &Path,
    url: &str,
    me: u64,
    start: u64,
    acks: &mpsc::Sender<(u64, u64)>,
) -> Child {
    let scheme = Scheme::ALL[((me + start) % Scheme::ALL.len() as u64) as usize];
    let mut child = spawn(
        "client",
        &[
            ("DB", db.display().to_string()),
            ("URL", url.to_string()),
            ("ME", me.to_string()),
            ("SCHEME", scheme.to_string()),
        ],
    );
    let out = child.stdout.take().unwrap();
    let acks = acks.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // The harness's own words may precede the first one on its line.
            let Some((_, ack)) = line.split_once("ack ") else {
                continue;
            };
            let mut w = ack.split_whitespace().map(|n| n.parse::<u64>());
            if let (Some(Ok(c)), Some(Ok(v))) = (w.next(), w.next()) {
                let _ = acks.send((c, v));
            }
        }
    });
    child
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn killed_clients_and_a_killed_server_lose_no_acknowledged_commit() {
    let client_kills = env_n("AMBER_SERVER_CLIENT_KILLS", 40);
    let server_kills = env_n("AMBER_SERVER_KILLS", 10);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.amber");
    create(&path);
    let (mut server, port) = start_server(&path, 0);
    let url = format!("amber://127.0.0.1:{port}/ledger");
    let (ack_tx, ack_rx) = mpsc::channel();
    let mut clients: Vec<Child> = (0..CLIENTS)
        .map(|me| start_client(&path, &url, me, 0, &ack_tx))
        .collect();
    let mut starts = [0u64; CLIENTS as usize];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut killed_clients, mut killed_servers) = (0, 0);
    // About 60 ms per kill here; a generous bound that grows with them.
    let deadline = Instant::now()
        + Duration::from_secs(60)
        + Duration::from_millis(300 * (client_kills + server_kills));
    while (killed_clients < client_kills || killed_servers < server_kills)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20 + rand(&mut seed) % 80));
        let pick = rand(&mut seed) % (client_kills + server_kills);
        if pick < server_kills && killed_servers < server_kills {
            kill(&mut server);
            killed_servers += 1;
            server = start_server(&path, port).0;
        } else if killed_clients < client_kills {
            let me = rand(&mut seed) % CLIENTS;
            if let Ok(Some(status)) = clients[me as usize].try_wait() {
                panic!("client {me} exited by itself: {status}");
            }
            kill(&mut clients[me as usize]);
            killed_clients += 1;
            starts[me as usize] += 1;
            clients[me as usize] = start_client(&path, &url, me, starts[me as usize], &ack_tx);
        }
    }
    for (me, c) in clients.iter_mut().enumerate() {
        // A client ends only when killed: one that exited failed.
        if let Ok(Some(status)) = c.try_wait() {
            panic!("client {me} exited by itself: {status}");
        }
        kill(c);
    }
    // The server stops cleanly (SIGTERM), then the database is opened
    // locally: recovery runs if the last server was killed mid-commit.
    let _ = Command::new("kill").arg(server.id().to_string()).status();
    let _ = server.wait();
    drop(ack_tx);
    let mut acked: HashMap<u64, u64> = HashMap::new();
    for (c, v) in ack_rx.iter() {
        let e = acked.entry(c).or_default();
        *e = (*e).max(v);
    }
    let db = Db::open(&path, Options::default()).expect("the database opens");
    let ledger: PRef<Ledger> = db.root("ledger").unwrap().unwrap();
    let l = db.get(ledger);
    let mut sum = 0;
    for me in 0..CLIENTS {
        let value = db.get(l.counters[me as usize].unwrap()).value;
        let told = acked.get(&me).copied().unwrap_or(0);
        // Every acknowledged commit is there; at most one more (committed,
        // its acknowledgement lost with its client).
        assert!(
            value >= told && value <= told + 1,
            "client {me}: counter {value}, acknowledged {told}"
        );
        sum += value;
    }
    assert_eq!(l.total, sum, "no update of the total was lost or doubled");
    assert!(
        acked.values().sum::<u64>() > 0,
        "no transaction committed at all"
    );
    println!(
        "{killed_clients} client kills, {killed_servers} server kills, {} commits acknowledged, total {}",
        acked.values().sum::<u64>(),
        l.total
    );
    assert!(
        killed_clients >= client_kills && killed_servers >= server_kills,
        "ran out of time"
    );
}
