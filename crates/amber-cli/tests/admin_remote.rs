//! Operations on a served database, as programs: `amber status`, `amber
//! verify` / `checkpoint` of `amber://host:port/name`, and `amber backup`
//! (of a file and through the server) taken while a client commits in a
//! loop — each backup verifies and holds one committed state of the model
//! (a counter and a log updated together by every commit). A backup killed
//! mid-copy leaves the server serving, its pin released, and no database
//! at DEST. Each test starts `amber serve` as a child process.

use amber::{Db, Options, PRef, PVec, Persistent, RemoteOptions};
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{amber, assert_error, s, serial};

const TOKEN: &str = "secret";

#[derive(Persistent)]
#[repr(C)]
struct Counter {
    n: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Log {
    entries: PVec<u64>,
}

/// A directory holding the model database `m.amber`, served.
fn model_server(extra: &[&str]) -> (tempfile::TempDir, PathBuf, Server) {
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("m.amber");
    create_model(&db);
    let server = Server::start(dir.path(), &db, extra);
    (dir, db, server)
}

/// `amber serve` of `db` as `m`, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    token: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path, db: &Path, extra: &[&str]) -> Server {
        let token = dir.join("token");
        std::fs::write(&token, format!("{TOKEN}\n")).expect("token written");
        let db_arg = format!("m={}", s(db));
        let mut args = vec![db_arg.as_str(), "--token-file", s(&token)];
        args.extend(extra);
        let (child, addr, _, log) = common::serve(&args);
        // Keep draining the log so that the server never blocks on it.
        std::thread::spawn(move || for _ in log.lines().map_while(Result::ok) {});
        Server { child, addr, token }
    }

    fn url(&self) -> String {
        format!("amber://{}/m", self.addr)
    }

    fn connect(&self) -> Db {
        let opts = Options {
            remote: RemoteOptions {
                token: Some(TOKEN.as_bytes().to_vec()),
                ..RemoteOptions::default()
            },
            ..Options::default()
        };
        Db::connect(&self.url(), opts).expect("connected")
    }

    /// `amber ARGS... URL --token-file T`.
    fn run(&self, args: &[&str]) -> common::Run {
        let url = self.url();
        let mut a = args.to_vec();
        a.extend([url.as_str(), "--token-file", s(&self.token)]);
        amber(&a)
    }

    fn status(&self) -> serde_json::Value {
        let r = self.run(&["status", "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(&r.stdout).expect("JSON")
    }
}

/// A new database holding the model at 0: counter 0, empty log.
fn create_model(path: &Path) {
    let mut db = Db::create(path, Options::default()).expect("created");
    let mut tx = db.begin().expect("begun");
    let c = tx.alloc(Counter { n: 0 }).expect("allocated");
    let l = tx
        .alloc(Log {
            entries: PVec::new(),
        })
        .expect("allocated");
    tx.set_root("counter", c).expect("root");
    tx.set_root("log", l).expect("root");
    tx.commit().expect("committed");
    db.close().expect("closed");
}

/// One commit of the model: the counter goes up by one and the log gets
/// its new value, together.
fn step(db: &mut Db) -> amber::Result<()> {
    let c: PRef<Counter> = db.root("counter")?.expect("counter");
    let l: PRef<Log> = db.root("log")?.expect("log");
    db.transact(|tx| {
        let n = tx.get(c).n + 1;
        tx.get_mut(c).n = n;
        tx.push(l, |l| &mut l.entries, n)?;
        Ok(())
    })
}

/// Commits steps in a loop on its own thread until told to stop; the
/// number of steps made.
struct Committer {
    stop: Arc<AtomicBool>,
    steps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    fn start(mut db: Db) -> Committer {
        let stop = Arc::new(AtomicBool::new(false));
        let steps = Arc::new(AtomicU64::new(0));
        let (st, n) = (stop.clone(), steps.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                step(&mut db).expect("a step committed");
                n.fetch_add(1, Ordering::Relaxed);
            }
            db.close().expect("closed");
        });
        Committer {
            stop,
            steps,
            thread: Some(thread),
        }
    }

    fn wait_for(&self, steps: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.steps.load(Ordering::Relaxed) < steps {
            assert!(Instant::now() < deadline, "the committer is stuck");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("the committer");
        self.steps.load(Ordering::Relaxed)
    }
}

/// The backup at `path` verifies (deep too) and holds one committed state
/// of the model: counter `n` and the log `1..=n`. Returns `n`.
fn check_backup(path: &Path) -> u64 {
    let v = amber(&["verify", "--deep", s(path)]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
    let db = Db::open(path, Options::default()).expect("the backup opens");
    let c: PRef<Counter> = db.root("counter").unwrap().expect("counter");
    let l: PRef<Log> = db.root("log").unwrap().expect("log");
    let n = db.get(c).n;
    let log = db.slice(&db.get(l).entries).to_vec();
    assert_eq!(log, (1..=n).collect::<Vec<_>>(), "counter {n}, log {log:?}");
    db.close().expect("closed");
    n
}

/// Takes three backups with `backup` while `committer` commits, and checks
/// each; they hold states the committer passed through.
fn backups_while_committing(
    dir: &Path,
    committer: Committer,
    backup: impl Fn(&Path) -> common::Run,
) {
    let mut seen = Vec::new();
    for i in 0..3 {
        committer.wait_for(5 * (i + 1));
        let dest = dir.join(format!("backup{i}.amber"));
        let r = backup(&dest);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("backed up"), "{}", r.stdout);
        assert!(
            !dir.join(format!("backup{i}.amber.amber-backup-partial"))
                .exists()
        );
        seen.push(check_backup(&dest));
    }
    let total = committer.stop();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(
        seen[0] >= 5 && *seen.last().unwrap() <= total,
        "{seen:?} of {total}"
    );
    // The destination is never overwritten.
    let r = backup(&dir.join("backup0.amber"));
    assert_error(&r, "exists");
}

#[test]
fn a_local_backup_while_a_writer_commits_is_one_committed_state() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("m.amber");
    create_model(&db);
    let committer = Committer::start(Db::open(&db, Options::default()).expect("opened"));
    backups_while_committing(dir.path(), committer, |dest| {
        amber(&["backup", s(&db), s(dest)])
    });
}

#[test]
fn a_backup_through_the_server_while_a_client_commits_is_one_committed_state() {
    let _serial = serial();
    let (dir, _db, server) = model_server(&[]);
    let committer = Committer::start(server.connect());
    backups_while_committing(dir.path(), committer, |dest| {
        amber(&[
            "backup",
            &server.url(),
            s(dest),
            "--token-file",
            s(&server.token),
        ])
    });
    // Without the token, nothing.
    let r = amber(&["backup", &server.url(), s(&dir.path().join("x.amber"))]);
    assert_error(&r, "authentication failed");
}

#[test]
fn a_backup_killed_midway_leaves_the_server_fine_and_no_database() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("m.amber");
    create_model(&db);
    {
        // About 8 MB, copied in reads of 8 KiB (the server's answer limit
        // is half of --max-buffered): a thousand round trips, and the kill
        // comes as soon as the copy has begun.
        let mut d = Db::open(&db, Options::default()).expect("opened");
        let mut tx = d.begin().expect("begun");
        for _ in 0..2000 {
            tx.new_string(&"x".repeat(4000)).expect("a string");
        }
        tx.commit().expect("committed");
        d.close().expect("closed");
    }
    let server = Server::start(dir.path(), &db, &["--max-buffered", "16384"]);
    let dest = dir.path().join("b.amber");
    let mut child = Command::new(env!("CARGO_BIN_EXE_amber"))
        .args([
            "backup",
            &server.url(),
            s(&dest),
            "--token-file",
            s(&server.token),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("amber backup started");
    let partial = dir.path().join("b.amber.amber-backup-partial");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !partial.exists() {
        assert!(Instant::now() < deadline, "the backup never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("killed");
    child.wait().expect("reaped");
    assert!(
        !dest.exists(),
        "killed after it finished: make the database larger"
    );
    // What is left is not a database.
    let r = amber(&["verify", s(&partial)]);
    assert_error(&r, "not an Amber database");
    // The server let the pin go with the connection, and serves on.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = server.status();
        let conns = st["connections"].as_array().expect("connections");
        if conns.iter().all(|c| c["backup_pinned"] == false) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pin outlived its connection: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A new backup to the same place replaces the leftovers.
    let r = amber(&[
        "backup",
        &server.url(),
        s(&dest),
        "--token-file",
        s(&server.token),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!partial.exists());
    assert_eq!(check_backup(&dest), 0);
}

#[test]
fn status_lists_databases_connections_and_resources() {
    let _serial = serial();
    let (_dir, _db, server) = model_server(&[]);
    let mut a = server.connect();
    for _ in 0..3 {
        step(&mut a).expect("a step");
    }
    let mut b = server.connect();
    let tx = b.begin().expect("begun");
    let st = server.status();
    let d = &st["databases"][0];
    assert_eq!(d["name"], "m");
    assert_eq!(d["mode"], "read-write");
    assert_eq!(d["commits"], 3);
    assert_eq!(d["conflicts"], 0);
    assert!(d["pages_served"].as_u64().unwrap() > 0, "{st}");
    // The clusters the clients fetched were read into the server's
    // buffer pool.
    let pool = &d["image_cache"];
    assert!(pool["misses"].as_u64().unwrap() > 0, "{st}");
    assert!(pool["entries"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(
        pool["capacity_bytes"].as_u64(),
        Some(amber_server::config::DEFAULT_IMAGE_CACHE as u64)
    );
    let w = &d["writer"];
    assert!(w["end_lsn"].as_u64().unwrap() > w["checkpoint_lsn"].as_u64().unwrap());
    let conns = st["connections"].as_array().unwrap();
    // a, b and the status connection itself.
    assert_eq!(conns.len(), 3, "{st}");
    assert_eq!(
        conns.iter().filter(|c| c["in_transaction"] == true).count(),
        1
    );
    assert!(
        conns
            .iter()
            .any(|c| c["shipped_pages"].as_u64().unwrap() > 0)
    );
    assert!(
        conns
            .iter()
            .all(|c| c["peer"].as_str().unwrap().starts_with("127.0.0.1:"))
    );
    let srv = &st["server"];
    assert!(srv["cpu_s"].as_f64().is_some() && srv["peak_rss_kib"].as_u64().unwrap() > 0);
    assert!(srv["cpu_us_per_commit"].as_f64().is_some());
    assert!(srv["locks"].as_str().unwrap().starts_with("none"));

    let text = server.run(&["status"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    for want in [
        "locks: none",
        "3 commit(s)",
        "in a transaction",
        "writer store: log end LSN",
        "buffer pool: ",
    ] {
        assert!(
            text.stdout.contains(want),
            "{want:?} not in {}",
            text.stdout
        );
    }
    drop(tx);
    let r = amber(&["status", &server.url()]);
    assert_error(&r, "authentication failed");
    let r = amber(&["status", &format!("amber://{}", server.addr)]);
    assert_error(&r, "must name a database");
    drop((a, b));
}

#[test]
fn checkpoint_and_verify_run_on_the_server() {
    let _serial = serial();
    let (_dir, db, server) = model_server(&[]);
    let mut a = server.connect();
    for _ in 0..5 {
        step(&mut a).expect("a step");
    }
    drop(a);
    let v = server.run(&["verify", "--deep"]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
    assert!(v.stdout.contains("no damage found"), "{}", v.stdout);
    assert!(v.stdout.contains("deep: checked"), "{}", v.stdout);

    let ck = server.run(&["checkpoint"]);
    assert_eq!(ck.code, 0, "{}", ck.stderr);
    assert!(ck.stdout.contains("checkpoint: installed"), "{}", ck.stdout);
    let w = &server.status()["databases"][0]["writer"];
    assert_eq!(w["checkpoint_lsn"], w["end_lsn"]);
    let again = server.run(&["checkpoint"]);
    assert!(
        again.stdout.contains("nothing (more) to install"),
        "{}",
        again.stdout
    );
    let r = amber(&["checkpoint", s(&db), "--token-file", s(&server.token)]);
    assert_error(&r, "are for a served database");
}

/// `amber inspect amber://…` prints the report the command prints of the
/// file (made by the server, beside its writer), after a line naming the
/// server; `--page` too.
#[test]
fn inspect_through_the_server_shows_what_inspect_of_the_file_shows() {
    let _serial = serial();
    let (_dir, db, mut server) = model_server(&[]);
    let mut a = server.connect();
    for _ in 0..5 {
        step(&mut a).expect("a step");
    }
    drop(a);
    let summary = server.run(&["inspect"]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    let url = server.url();
    let first = summary
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(first, format!("served at {url}"));
    assert!(summary.stdout.contains("roots"), "{}", summary.stdout);
    let page = server.run(&["inspect", "--page", "3"]);
    let r = amber(&["inspect", s(&db), "--token-file", s(&server.token)]);
    assert_error(&r, "are for a served database");
    // The server stopped, nothing committed since: the file's own report.
    let _ = server.child.kill();
    let _ = server.child.wait();
    let local = amber(&["inspect", s(&db)]);
    assert_eq!(local.code, 0, "{}", local.stderr);
    assert_eq!(summary.stdout, format!("{first}\n{}", local.stdout));
    let local_page = amber(&["inspect", s(&db), "--page", "3"]);
    assert_eq!(page.code, local_page.code, "{}", page.stderr);
    assert_eq!(page.stdout, format!("{first}\n{}", local_page.stdout));
}

#[test]
fn verify_through_the_server_finds_a_damaged_page() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("m.amber");
    create_model(&db);
    // A data block installed in the page file (the close checkpointed).
    let (page, ps) = {
        let ins = amber::inspect::Inspector::open(&db).expect("opened");
        let ps = ins.page_size() as u64;
        let c = ins
            .roots()
            .into_iter()
            .find(|r| r.name == "counter")
            .expect("the counter");
        (c.addr / ps, ps)
    };
    let server = Server::start(dir.path(), &db, &["--read-only"]);
    let before = server.run(&["verify"]);
    assert_eq!(before.code, 0, "{}{}", before.stdout, before.stderr);
    // Damage it under the server, which no client has read it through.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&db)
            .expect("opened");
        f.write_all_at(&[0xA5; 64], page * ps + 200)
            .expect("written");
        f.sync_all().expect("synced");
    }
    let after = server.run(&["verify"]);
    assert_eq!(after.code, 1, "{}{}", after.stdout, after.stderr);
    assert!(after.stdout.contains("problem:"), "{}", after.stdout);
    assert!(
        after.stdout.contains(&format!("page {page}")),
        "{}",
        after.stdout
    );
    // Checkpoint is the writer's, which runs elsewhere.
    let ck = server.run(&["checkpoint"]);
    assert_error(&ck, "read-only");
}

#[test]
fn a_memory_budget_admits_the_connections_whose_buffers_fit() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("m.amber");
    create_model(&db);
    let small = ["--max-buffered", "1048576", "--max-frame", "1048576"];
    // 1 MiB of buffers and a commit frame of 1 MiB held twice: 3 MiB a
    // connection; half of 8 MiB holds one.
    let server = Server::start(
        dir.path(),
        &db,
        &[&small[..], &["--memory-mib", "8"]].concat(),
    );
    let st0 = server.status();
    assert_eq!(st0["server"]["max_connections"], 1, "{st0}");
    assert_eq!(st0["server"]["memory_budget_bytes"], 8 << 20, "{st0}");
    let mut a = server.connect();
    step(&mut a).expect("a step");
    let r = server.run(&["status"]);
    assert_error(&r, "server busy");
    // The writer's share is 2 MiB of log: 3.6 MB of commits pass it, and
    // the session checkpoints after its commit (its own snapshot would
    // defer the store's checkpointer).
    for _ in 0..6 {
        let mut tx = a.begin().expect("begun");
        tx.new_string(&"y".repeat(600_000)).expect("a string");
        tx.commit().expect("committed");
    }
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    let st = loop {
        let r = server.run(&["status", "--json"]);
        if r.code == 0 {
            break serde_json::from_str::<serde_json::Value>(&r.stdout).expect("JSON");
        }
        assert!(Instant::now() < deadline, "the place was not given back");
        std::thread::sleep(Duration::from_millis(20));
    };
    let w = &st["databases"][0]["writer"];
    let before = st0["databases"][0]["writer"]["generation"]
        .as_u64()
        .unwrap();
    assert!(
        w["generation"].as_u64().unwrap() > before,
        "no checkpoint: {w}"
    );
    assert!(
        w["log_bytes_since_checkpoint"].as_u64().unwrap() <= 2 << 20,
        "{w}"
    );
    // A budget with room for no connection is refused at start.
    let r = amber(&[
        "serve",
        s(&db),
        "--insecure-no-auth",
        "--listen",
        "127.0.0.1:0",
        "--memory-mib",
        "4",
    ]);
    assert_error(&r, "lower --max-buffered");
}

/// The commands that reach a server take its TLS as a program does: a
/// server with mutual TLS answers `amber status` given the CA and a client
/// certificate, and refuses it, saying TLS is required, without them.
#[test]
fn the_commands_speak_mutual_tls() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("a directory");
    let db = dir.path().join("m.amber");
    create_model(&db);
    let certs = dir.path().join("certs");
    let made = amber(&["serve", "--gen-certs", s(&certs)]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let file = |n: &str| certs.join(n);
    let server = Server::start(
        dir.path(),
        &db,
        &[
            "--tls-cert",
            s(&file("server.pem")),
            "--tls-key",
            s(&file("server.key")),
            "--tls-client-ca",
            s(&file("ca.pem")),
        ],
    );
    let refused = server.run(&["status"]);
    assert_error(&refused, "requires TLS");
    let (ca, cert, key) = (file("ca.pem"), file("client.pem"), file("client.key"));
    let tls = [
        "--tls-ca",
        s(&ca),
        "--tls-cert",
        s(&cert),
        "--tls-key",
        s(&key),
    ];
    let mut args = vec!["status", "--json"];
    args.extend(tls);
    let st = server.run(&args);
    assert_eq!(st.code, 0, "{}", st.stderr);
    let doc: serde_json::Value = serde_json::from_str(&st.stdout).expect("JSON");
    assert_eq!(doc["databases"][0]["name"], "m", "{doc}");
    let mut args = vec!["verify"];
    args.extend(tls);
    let v = server.run(&args);
    assert_eq!(v.code, 0, "{}", v.stderr);
}
