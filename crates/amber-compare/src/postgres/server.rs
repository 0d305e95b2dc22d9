//! A PostgreSQL server that the benchmarks start and stop themselves, from
//! the binaries of the Debian package (`apt-get install postgresql`).
//!
//! - **Finding it**: [`Install::find`] takes the highest version under
//!   `/usr/lib/postgresql/VERSION/bin` that has `initdb` and `postgres`
//!   (Debian keeps them off `PATH`), else a directory of `PATH` that has
//!   both; none is [`Install::find`]'s error, which names the package.
//! - **Who runs it**: PostgreSQL refuses to run as root. When this process
//!   is root, `initdb` and `postgres` run as the `postgres` system user the
//!   package creates (`setpriv --reuid --regid --init-groups`), the data
//!   directory is owned by it (mode 0700, [`prepare_data_dir`] chowns a
//!   copied one), and every directory above it must let that user search
//!   it: one that does not is an error naming it (the benchmarks' default
//!   directory, under the system's temporary directory, does; the
//!   harness changes no permission above the data directory). Otherwise
//!   both run as this process's user.
//! - **Where it listens**: only on a Unix socket in the data directory
//!   (`listen_addresses = ''`), which is mode 0700: the `trust`
//!   authentication `initdb` is given lets in no one but the directory's
//!   owner and root. A client connects with [`Server::connect`], as many
//!   times as it likes (one connection per client).
//! - **Durability**: started with `fsync = on`, `synchronous_commit = on`,
//!   `full_page_writes = on`, `wal_sync_method = fdatasync` (PostgreSQL's
//!   defaults on Linux, set explicitly) and checked on every connection the
//!   engines make ([`check_durability`]).
//! - **Never left running**: the server is started under a tether, a shell
//!   that holds the read end of a pipe whose write end only this process
//!   has; when this process stops the server, drops it, or dies in any way
//!   (SIGKILL included), the pipe reaches end of file and the shell asks
//!   the postmaster for a fast shutdown (SIGINT) and waits for it. Starting
//!   and stopping wait a bounded time ([`START_TIMEOUT`],
//!   [`STOP_TIMEOUT`]); a server that does not stop in time gets an
//!   immediate shutdown (SIGQUIT), then SIGKILL.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use amber_bench::oo1::{EngineError, ResultExt};
use amber_bench::procfs::ProcessTree;
use postgres::{Client, Config, NoTls, SimpleQueryMessage};

/// How long the server may take to accept connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fast shutdown may take (it ends with a checkpoint) before the
/// server is shut down immediately.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// The superuser `initdb` creates; the engines connect as it.
pub const USER: &str = "amber";
/// The port, which only names the socket file (`.s.PGSQL.5432`): the
/// server listens on no TCP port.
const PORT: u16 = 5432;
/// The longest socket path a Unix socket allows, as PostgreSQL checks it.
const MAX_SOCKET_PATH: usize = 107;

/// The settings every server is started with and every connection checks:
/// `(name, value)`.
pub const DURABILITY: [(&str, &str); 4] = [
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("full_page_writes", "on"),
    ("wal_sync_method", "fdatasync"),
];

/// The shell that starts the server and shuts it down when its standard
/// input (a pipe from this process) reaches end of file, then removes the
/// directory `AMBER_PG_SCRATCH` names, if any: `$@` is the server's
/// command. The watcher gets the pipe as fd 3 (an asynchronous
/// command's standard input is /dev/null); the server gets neither.
const TETHER: &str = r#"exec 3<&0 0</dev/null
"$@" 3<&- &
server=$!
{ read -r _ <&3; kill -INT "$server" 2>/dev/null; } &
watcher=$!
exec 3<&-
wait "$server"
status=$?
kill "$watcher" 2>/dev/null
if [ -n "${AMBER_PG_SCRATCH-}" ]; then rm -rf -- "$AMBER_PG_SCRATCH"; fi
exit "$status""#;

/// The PostgreSQL binaries.
#[derive(Clone, Debug)]
pub struct Install {
    bin: PathBuf,
    /// Who runs them.
    user: RunAs,
}

/// Who runs `initdb` and `postgres`.
#[derive(Clone, Debug)]
enum RunAs {
    /// This process's user (not root).
    Me,
    /// This process is root: the `postgres` system user.
    System { uid: u32, gid: u32 },
}

/// The system user that runs PostgreSQL when this process is root.
const SYSTEM_USER: &str = "postgres";

impl Install {
    /// Finds PostgreSQL's binaries and the user to run them as; the error
    /// says what is missing and how to get it.
    pub fn find() -> Result<Install, String> {
        let bin = debian_bin()
            .or_else(path_bin)
            .ok_or_else(|| {
                "PostgreSQL is not installed: no initdb and postgres under /usr/lib/postgresql/*/bin or on PATH (Debian: apt-get install postgresql)".to_string()
            })?;
        let user = if rustix::process::geteuid().is_root() {
            let id = |flag: &str| -> Option<u32> {
                let out = Command::new("id").args([flag, SYSTEM_USER]).output().ok()?;
                String::from_utf8_lossy(&out.stdout).trim().parse().ok()
            };
            match (id("-u"), id("-g")) {
                (Some(uid), Some(gid)) if uid != 0 => RunAs::System { uid, gid },
                _ => {
                    return Err(format!(
                        "PostgreSQL refuses to run as root and there is no unprivileged `{SYSTEM_USER}` user to run it as (the Debian package postgresql creates it)"
                    ));
                }
            }
        } else {
            RunAs::Me
        };
        Ok(Install { bin, user })
    }

    /// A command running PostgreSQL's `program` as the right user, from
    /// `/` (which that user can search; every path given to it is
    /// absolute).
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        let mut c = match self.user {
            RunAs::Me => Command::new(exe),
            RunAs::System { uid, gid } => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--init-groups")
                    .arg("--")
                    .arg(exe);
                c
            }
        };
        c.current_dir("/");
        c
    }

    /// Creates a cluster in `data` (which must not exist) with `initdb`:
    /// superuser [`USER`], `trust` authentication (see the module
    /// documentation), UTF-8 with the C locale. Nothing is synced: the
    /// harness syncs a built database's files.
    pub fn init(&self, data: &Path) -> Result<(), EngineError> {
        // Absolute: `initdb` runs as another user, maybe from a directory
        // it cannot search.
        let data = &fs::create_dir(data)
            .and_then(|()| fs::canonicalize(data))
            .map_err(|e| EngineError::io(format!("creating {}", data.display()), e))?;
        prepare_data_dir(self, data)?;
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(data)
            .args([
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| EngineError::io(format!("running {}/initdb", self.bin.display()), e))?;
        if !out.status.success() {
            return Err(EngineError::io(
                format!("initdb -D {}", data.display()),
                io::Error::other(format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            ));
        }
        Ok(())
    }
}

/// The highest version under Debian's `/usr/lib/postgresql` with both
/// binaries.
fn debian_bin() -> Option<PathBuf> {
    let mut found: Vec<(Vec<u32>, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e
                .file_name()
                .to_str()?
                .split('.')
                .map(|n| n.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            let bin = e.path().join("bin");
            has_binaries(&bin).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// A directory of `PATH` with both binaries.
fn path_bin() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has_binaries(d))
}

fn has_binaries(dir: &Path) -> bool {
    ["initdb", "postgres"].iter().all(|b| dir.join(b).is_file())
}

/// Makes `data` a data directory the server's user may use: mode 0700,
/// owned by that user (the whole tree, when it was copied by root). Every
/// directory above it must let that user search it; the first that does
/// not is an error naming it and the remedy — changing the permissions of
/// a user's directories is not the benchmark's business.
pub fn prepare_data_dir(install: &Install, data: &Path) -> Result<(), EngineError> {
    let fail =
        |what: &str, path: &Path, e| EngineError::io(format!("{what} {}", path.display()), e);
    fs::set_permissions(data, fs::Permissions::from_mode(0o700))
        .map_err(|e| fail("setting mode 0700 on", data, e))?;
    let RunAs::System { uid, gid } = install.user else {
        return Ok(());
    };
    chown_tree(data, uid, gid).map_err(|e| fail("handing to the postgres user", data, e))?;
    let mut dir = data.parent();
    while let Some(d) = dir {
        let meta = fs::metadata(d).map_err(|e| fail("inspecting", d, e))?;
        if !searchable(meta.mode(), (meta.uid(), meta.gid()), (uid, gid)) {
            return Err(EngineError::bad_input(format!(
                "PostgreSQL runs as the `{SYSTEM_USER}` user, which may not search {} (mode {:o}), above its data directory {}: give the benchmark a --dir it can reach (the default, under {}, is one), or let it through (chmod o+x)",
                d.display(),
                meta.mode() & 0o7777,
                data.display(),
                std::env::temp_dir().display()
            )));
        }
        dir = d.parent();
    }
    Ok(())
}

/// Whether a directory of `mode`, owned by `(uid, gid)`, may be searched by
/// the user `(user, group)` (its primary group only: the system user has
/// no other).
fn searchable(mode: u32, (uid, gid): (u32, u32), (user, group): (u32, u32)) -> bool {
    let bit = if uid == user {
        0o100
    } else if gid == group {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    if fs::symlink_metadata(path)?.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// A running server on one data directory.
pub struct Server {
    data: PathBuf,
    log: PathBuf,
    /// The tether shell (see the module documentation).
    tether: Child,
    /// The write end of the tether's pipe: dropping it stops the server.
    pipe: Option<ChildStdin>,
    /// The postmaster's process id.
    pid: u32,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("data", &self.data)
            .field("pid", &self.pid)
            .finish()
    }
}

impl Server {
    /// Starts a server on the cluster in `data`, its output appended to
    /// `log`, with the [`DURABILITY`] settings and `shared_buffers` =
    /// `shared_buffers_mib` MiB when given (else PostgreSQL's default);
    /// returns once it accepts connections.
    pub fn start(
        install: &Install,
        data: &Path,
        log: &Path,
        shared_buffers_mib: Option<u64>,
    ) -> Result<Server, EngineError> {
        Self::spawn(install, data, log, shared_buffers_mib, None)
    }

    /// A server on a new cluster in a temporary directory of its own, which
    /// goes when the server does, however this process ends (the tether
    /// removes it): for tests, and for several clients sharing a server.
    pub fn scratch(install: &Install) -> Result<Server, EngineError> {
        // Mode 0711 (its own directory): the server's user passes through.
        let dir = tempfile::Builder::new()
            .prefix("amber-pg-")
            .tempdir()
            .and_then(|t| {
                fs::set_permissions(t.path(), fs::Permissions::from_mode(0o711))?;
                Ok(t)
            })
            .map_err(|e| EngineError::io("creating a temporary directory", e))?
            .keep();
        let data = dir.join("pgdata");
        let started = install.init(&data).and_then(|()| {
            Self::spawn(install, &data, &dir.join("postgres.log"), None, Some(&dir))
        });
        if started.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        started
    }

    fn spawn(
        install: &Install,
        data: &Path,
        log: &Path,
        shared_buffers_mib: Option<u64>,
        scratch: Option<&Path>,
    ) -> Result<Server, EngineError> {
        let data = fs::canonicalize(data)
            .map_err(|e| EngineError::io(format!("finding {}", data.display()), e))?;
        let socket = data.join(format!(".s.PGSQL.{PORT}"));
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(EngineError::bad_input(format!(
                "the server's socket {} would be longer than the {MAX_SOCKET_PATH} bytes a Unix socket allows: use a shorter directory (--dir)",
                socket.display()
            )));
        }
        prepare_data_dir(install, &data)?;
        let pid_file = data.join("postmaster.pid");
        if pid_file.exists() {
            return Err(EngineError::bad_input(format!(
                "{} exists: a server is running on {}, or one was killed (remove the file if none runs)",
                pid_file.display(),
                data.display()
            )));
        }
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| EngineError::io(format!("opening {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| EngineError::io(format!("opening {}", log.display()), e))?;
        let server = install.command("postgres");
        let mut tether = Command::new("sh");
        tether
            .current_dir("/")
            .args(["-c", TETHER, "tether"])
            .arg(server.get_program())
            .args(server.get_args())
            .arg("-D")
            .arg(&data)
            .args(settings(&data, shared_buffers_mib))
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        match scratch {
            Some(dir) => tether.env("AMBER_PG_SCRATCH", dir),
            None => tether.env_remove("AMBER_PG_SCRATCH"),
        };
        let mut tether = tether
            .spawn()
            .map_err(|e| EngineError::io("starting the PostgreSQL server (sh)", e))?;
        let pipe = tether.stdin.take();
        let mut server = Server {
            data,
            log: log.to_path_buf(),
            tether,
            pipe,
            pid: 0,
        };
        server.pid = server.wait_ready()?;
        Ok(server)
    }

    /// Waits until `postmaster.pid` says `ready`; the postmaster's pid.
    fn wait_ready(&mut self) -> Result<u32, EngineError> {
        let pid_file = self.data.join("postmaster.pid");
        let start = Instant::now();
        loop {
            // Line 1 is the pid, line 8 the status (`ready` when it accepts
            // connections), as pg_ctl reads them.
            if let Ok(text) = fs::read_to_string(&pid_file) {
                let lines: Vec<&str> = text.lines().collect();
                let ready = lines.get(7).is_some_and(|s| s.trim() == "ready");
                if let Some(pid) = lines.first().and_then(|p| p.trim().parse().ok())
                    && ready
                {
                    return Ok(pid);
                }
            }
            if let Ok(Some(status)) = self.tether.try_wait() {
                return Err(self.failed(format!("the server exited ({status}) while starting")));
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(self.failed(format!(
                    "the server did not accept connections within {} s",
                    START_TIMEOUT.as_secs()
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// An error about the server, with the end of its log.
    fn failed(&self, what: String) -> EngineError {
        EngineError::io(
            format!("PostgreSQL on {}", self.data.display()),
            io::Error::other(format!("{what}; its log ends:\n{}", log_tail(&self.log))),
        )
    }

    /// A new connection to database `dbname` as [`USER`].
    pub fn connect(&self, dbname: &str) -> Result<Client, EngineError> {
        connect(&self.data, dbname)
    }

    /// The postmaster and the processes it forks.
    pub fn processes(&self) -> ProcessTree {
        ProcessTree::new(self.pid)
    }

    /// The data directory.
    pub fn data(&self) -> &Path {
        &self.data
    }

    /// Fast shutdown (the server ends its sessions, writes a shutdown
    /// checkpoint and exits), waiting at most [`STOP_TIMEOUT`].
    pub fn stop(mut self) -> Result<(), EngineError> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), EngineError> {
        let Some(pipe) = self.pipe.take() else {
            return Ok(());
        };
        drop(pipe);
        if let Some(status) = self.wait_exit(STOP_TIMEOUT) {
            return if status.success() {
                Ok(())
            } else {
                Err(self.failed(format!("the server's fast shutdown ended with {status}")))
            };
        }
        // Immediate shutdown, then the last resort; a server that never
        // said it was ready has its pid in `postmaster.pid` all the same.
        let pid = match self.pid {
            0 => fs::read_to_string(self.data.join("postmaster.pid"))
                .ok()
                .and_then(|t| t.lines().next()?.trim().parse().ok())
                .unwrap_or(0),
            pid => pid,
        };
        let _ = signal(pid, rustix::process::Signal::QUIT);
        if self.wait_exit(Duration::from_secs(10)).is_none() {
            let _ = signal(pid, rustix::process::Signal::KILL);
            let _ = self.tether.kill();
            let _ = self.tether.wait();
        }
        Err(self.failed(format!(
            "the server did not shut down within {} s and was killed",
            STOP_TIMEOUT.as_secs()
        )))
    }

    /// The tether's exit status, if it exits within `limit`.
    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            match self.tether.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(_) => return None,
            }
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            eprintln!("{e}");
        }
    }
}

/// A new connection to database `dbname` as [`USER`] of the server
/// running on `data` (another process's: its socket is in `data`).
pub fn connect(data: &Path, dbname: &str) -> Result<Client, EngineError> {
    Config::new()
        .host_path(data)
        .port(PORT)
        .user(USER)
        .dbname(dbname)
        .application_name("amber-bench")
        .connect(NoTls)
        .ctx(&format!("connecting to PostgreSQL on {}", data.display()))
}

fn signal(pid: u32, sig: rustix::process::Signal) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::other("bad pid"))?;
    rustix::process::kill_process(pid, sig).map_err(io::Error::from)
}

/// The `-c` settings of a server on `data`.
fn settings(data: &Path, shared_buffers_mib: Option<u64>) -> Vec<String> {
    let mut set = vec![
        "listen_addresses=".to_string(),
        format!("unix_socket_directories={}", data.display()),
        format!("port={PORT}"),
    ];
    set.extend(DURABILITY.iter().map(|(k, v)| format!("{k}={v}")));
    if let Some(mib) = shared_buffers_mib {
        set.push(format!("shared_buffers={mib}MB"));
    }
    set.into_iter()
        .flat_map(|s| ["-c".to_string(), s])
        .collect()
}

/// The last few KiB of the server's log.
fn log_tail(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(log) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
        let _ = f.read_to_string(&mut text);
    }
    text.trim_end().to_string()
}

/// Reads back the [`DURABILITY`] settings on `client`'s server; an error
/// names a setting that differs.
pub fn check_durability(client: &mut Client) -> Result<(), EngineError> {
    for (name, want) in DURABILITY {
        let got = simple_value(client, &format!("SHOW {name}"))?;
        if got != want {
            return Err(EngineError::corrupt(format!(
                "PostgreSQL runs with {name} = {got}, not {want}: commits would not be durable as the benchmark requires"
            )));
        }
    }
    Ok(())
}

/// The first column of the last row `sql` returns (simple query protocol:
/// `sql` may hold several statements).
pub fn simple_value(client: &mut Client, sql: &str) -> Result<String, EngineError> {
    client
        .simple_query(sql)
        .ctx(sql)?
        .iter()
        .rev()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .ok_or_else(|| EngineError::corrupt(format!("{sql}: no value")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_the_durable_ones() {
        let s = settings(Path::new("/d"), Some(8));
        let joined = s.join(" ");
        for (k, v) in DURABILITY {
            assert!(joined.contains(&format!("-c {k}={v}")), "{joined}");
        }
        assert!(joined.contains("-c listen_addresses= "), "{joined}");
        assert!(joined.contains("-c shared_buffers=8MB"), "{joined}");
    }

    #[test]
    fn search_permission_follows_owner_group_and_others() {
        let (pg, root) = ((105, 110), (0, 0));
        assert!(searchable(0o755, root, pg), "others may search");
        assert!(!searchable(0o700, root, pg), "root's private directory");
        assert!(!searchable(0o750, root, pg), "another group's");
        assert!(searchable(0o750, (0, 110), pg), "the user's group");
        assert!(searchable(0o700, pg, pg), "the user's own");
        assert!(
            !searchable(0o077, pg, pg),
            "the owner's bit, not the others'"
        );
    }
}
