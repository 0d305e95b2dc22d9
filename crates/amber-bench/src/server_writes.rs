//! The write figures of `amber bench server`: a commit through the server
//! against the same commit on a local copy of the database, and the
//! commits per second of 16 client processes against one.
//!
//! Every transaction adds one to the `x` of one part and commits (an OO1
//! part: 0.3 KiB in a page of a dozen): a change of four bytes, one block,
//! one synced commit.
//!
//! - **One client**: `rounds` transactions on the local copy (opened for
//!   writing in this process) and through the server (`Db::connect`),
//!   alternating, each over the parts of a range of its own. Timed: the
//!   `commit` call alone, and the whole transaction (`begin`, the change,
//!   `commit`). `commit_vs_local_plus_rtt` = median remote commit / (median
//!   local commit + median round trip).
//! - **Group commit**: client processes (the `amber` binary itself, with a
//!   hidden argument) connect, wait for a common start, and run `transact`
//!   on parts of their own range for `seconds`; the figure is the commits
//!   per second of all of them together, 16 clients against 1
//!   (`group_commit_16_vs_1`), with the server's log syncs per commit (the
//!   fsyncs the group shares) and its CPU time per commit.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use amber::{Db, Options};
use serde::Serialize;

use crate::oo1::amber_engine::AmberOo1;
use crate::oo1::database::PartId;
use crate::storage::{BenchError, Summary, summarize};

/// The hidden argument that makes `amber bench server` a client process.
pub const CLIENT_ARG: &str = "__server-client";

/// Parts each client works on at most (its own range, so that clients do
/// not conflict but by sharing a page at a range's edge): fewer when 16
/// ranges of it do not fit in the database.
const PARTS_PER_CLIENT: u32 = 200;

/// The parts of each client's range in a database of `parts` parts.
pub(crate) fn per_client(parts: u32) -> u32 {
    (parts / 16).clamp(1, PARTS_PER_CLIENT)
}

/// What the write figures measured.
#[derive(Debug, Clone, Serialize)]
pub struct WriteReport {
    /// Local `commit` calls, ms.
    pub local_commit_ms: Summary,
    /// Remote `commit` calls, ms.
    pub remote_commit_ms: Summary,
    /// Local transactions, `begin` to the end of `commit`, ms.
    pub local_tx_ms: Summary,
    /// Remote transactions, ms.
    pub remote_tx_ms: Summary,
    /// Median remote commit / (median local commit + median round trip).
    pub commit_vs_local_plus_rtt: f64,
    /// Commits per second, one client process.
    pub one_client_tx_per_s: f64,
    /// Commits per second, 16 client processes together.
    pub sixteen_clients_tx_per_s: f64,
    /// `sixteen_clients_tx_per_s / one_client_tx_per_s`.
    pub group_commit_16_vs_1: f64,
    /// Commits that lost to a concurrent one and ran again, 16 clients.
    pub sixteen_clients_retries: u64,
    /// The server's CPU time per commit, 1 and 16 clients, µs.
    pub server_cpu_us_per_commit: [f64; 2],
    /// CPU time of the server and the clients together over the wall time
    /// of the run and the machine's cores, 1 and 16 clients: near 1, the
    /// CPUs are what saturates; well below, the log's syncs are.
    pub cpu_busy: [f64; 2],
    /// Which resource saturates with 16 clients, by `cpu_busy`.
    pub saturates: &'static str,
}

/// How every client of the benchmark connects: mutual TLS with the
/// certificates `amber_server::certs` generated in `certs`, and the token.
pub(crate) fn remote_options(token: &str, certs: &Path) -> Result<Options, BenchError> {
    let f = amber_server::certs::CertFiles::in_dir(certs);
    let tls = amber::TlsOptions::from_files(&f.ca, &f.client_cert, &f.client_key)?;
    Ok(Options {
        remote: amber::RemoteOptions {
            token: Some(token.as_bytes().to_vec()),
            tls: Some(tls),
            ..amber::RemoteOptions::default()
        },
        ..Options::default()
    })
}

/// One transaction: `x += 1` on `part`; (commit ms, whole ms).
fn bump(
    db: &mut Db,
    part: amber::PRef<crate::oo1::amber_engine::schema::Part>,
) -> amber::Result<(f64, f64)> {
    let t = Instant::now();
    let mut tx = db.begin()?;
    tx.try_get(part)?;
    let p = tx.get_mut(part);
    p.x = p.x.wrapping_add(1);
    let c = Instant::now();
    tx.commit()?;
    let end = Instant::now();
    Ok(((end - c).as_secs_f64() * 1e3, (end - t).as_secs_f64() * 1e3))
}

/// The parts `[first, first + n)`, as pointers of `e`.
fn parts(
    e: &AmberOo1,
    first: PartId,
    n: u32,
) -> Result<Vec<amber::PRef<crate::oo1::amber_engine::schema::Part>>, BenchError> {
    (first..first + n)
        .map(|id| e.part(id).map_err(|err| BenchError::new(err.to_string())))
        .collect()
}

/// The one-client commit figures.
pub(crate) fn one_client(
    local_path: &Path,
    url: &str,
    opts: &Options,
    rounds: usize,
    rtt_us: f64,
    per: u32,
) -> Result<(Summary, Summary, Summary, Summary, f64), BenchError> {
    let mut local = AmberOo1::over(Db::open(local_path, Options::default())?)
        .map_err(|e| BenchError::new(e.to_string()))?;
    let mut remote = AmberOo1::over(Db::connect(url, opts.clone())?)
        .map_err(|e| BenchError::new(e.to_string()))?;
    let lp = parts(&local, 1, per)?;
    let rp = parts(&remote, 1, per)?;
    let (mut lc, mut lt, mut rc, mut rt) = (vec![], vec![], vec![], vec![]);
    for i in 0..rounds {
        let k = i % lp.len();
        let (c, t) = bump(local.db_mut(), lp[k])?;
        lc.push(c);
        lt.push(t);
        let (c, t) = bump(remote.db_mut(), rp[k])?;
        rc.push(c);
        rt.push(t);
    }
    let (lc, rc) = (summarize(&lc), summarize(&rc));
    let ratio = rc.median / (lc.median + rtt_us / 1e3);
    Ok((lc, rc, summarize(&lt), summarize(&rt), ratio))
}

/// What the client processes of one group commit run did.
pub(crate) struct Group {
    pub(crate) tx_per_s: f64,
    pub(crate) commits: u64,
    pub(crate) retries: u64,
    /// The clients' CPU time, s.
    pub(crate) cpu_s: f64,
    /// The longest client's run, s.
    pub(crate) wall_s: f64,
}

/// Runs `clients` client processes for `seconds`.
pub(crate) fn group(
    cmd: &[String],
    url: &str,
    (token, certs): (&str, &Path),
    (clients, per): (u32, u32),
    seconds: f64,
) -> Result<Group, BenchError> {
    let fail =
        |e: &dyn std::fmt::Display| BenchError::new(format!("bench server: client processes: {e}"));
    let (exe, args) = cmd
        .split_first()
        .ok_or_else(|| fail(&"no command starts a client"))?;
    let start_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| fail(&e))?
        .as_millis() as u64
        + 1500
        + 30 * u64::from(clients);
    let mut children = Vec::new();
    for me in 0..clients {
        let child = Command::new(exe)
            .args(args)
            .args([
                CLIENT_ARG,
                url,
                token,
                &certs.display().to_string(),
                &me.to_string(),
                &per.to_string(),
                &start_ms.to_string(),
                &seconds.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| fail(&e))?;
        children.push(child);
    }
    let (mut commits, mut retries, mut longest, mut cpu) = (0u64, 0u64, 0f64, 0f64);
    for mut c in children {
        let out = c.stdout.take().ok_or_else(|| fail(&"no stdout"))?;
        let line = BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.starts_with("commits "))
            .ok_or_else(|| fail(&"a client reported nothing"))?;
        let status = c.wait().map_err(|e| fail(&e))?;
        if !status.success() {
            return Err(fail(&format!("a client failed: {status}")));
        }
        let f: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let [n, r, s, c] = f[..] else {
            return Err(fail(&format!("a client said {line:?}")));
        };
        commits += n as u64;
        retries += r as u64;
        longest = longest.max(s);
        cpu += c;
    }
    Ok(Group {
        tx_per_s: commits as f64 / longest.max(1e-9),
        commits,
        retries,
        cpu_s: cpu,
        wall_s: longest,
    })
}

/// A client process: connects (mutual TLS with the certificates in
/// `certs`, and `token`), waits for the common start, runs transactions on
/// its own parts for `seconds`, prints `commits N RETRIES SECONDS
/// CPU_SECONDS`.
pub fn run_client(
    url: &str,
    (token, certs): (&str, &Path),
    (me, per): (u32, u32),
    start_ms: u64,
    seconds: f64,
) -> Result<String, BenchError> {
    let opts = remote_options(token, certs)?;
    let mut e =
        AmberOo1::over(Db::connect(url, opts)?).map_err(|err| BenchError::new(err.to_string()))?;
    let mine = parts(&e, 1 + me * per, per)?;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|err| BenchError::new(err.to_string()))?
        .as_millis() as u64;
    std::thread::sleep(Duration::from_millis(start_ms.saturating_sub(now_ms)));
    let t = Instant::now();
    let cpu0 = crate::procfs::cpu_time_s().unwrap_or(0.0);
    let (mut n, mut runs) = (0u64, 0u64);
    while t.elapsed().as_secs_f64() < seconds {
        let part = mine[n as usize % mine.len()];
        e.db_mut().transact(|tx| {
            runs += 1;
            tx.try_get(part)?;
            let p = tx.get_mut(part);
            p.x = p.x.wrapping_add(1);
            Ok(())
        })?;
        n += 1;
    }
    let cpu = crate::procfs::cpu_time_s().unwrap_or(0.0) - cpu0;
    Ok(format!(
        "commits {n} {} {} {cpu}",
        runs - n,
        t.elapsed().as_secs_f64()
    ))
}
