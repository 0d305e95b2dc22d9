//! What a server is told: where to listen, which databases under which
//! names, how clients authenticate, and the bounds that keep one client
//! from taking the server's memory, connections or time. [`ServeOptions::check`]
//! refuses a combination that would serve without authentication, or a
//! non-loopback address without mutual TLS, unless that was asked for by
//! a flag whose name says it is insecure.

use crate::ServeError;
use crate::tls::TlsFiles;
use amber::Scheme;
use amber::internals::io::Vfs;
use amber::internals::io::real::RealVfs;
use amber::internals::wire::{DEFAULT_MAX_FRAME, MAX_TOKEN};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The address `amber serve` listens on unless told otherwise: loopback.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 7878);

/// The bytes of the server's buffer pool unless told otherwise
/// ([`ServeOptions::image_cache`]): 128 MiB.
pub const DEFAULT_IMAGE_CACHE: usize = 128 << 20;

/// A server's configuration.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to listen on (port 0: any free port; see
    /// [`Server::local_addr`](crate::Server::local_addr)).
    pub listen: SocketAddr,
    /// The databases served: name (what a client's `Hello` asks for) and
    /// path.
    pub databases: Vec<(String, PathBuf)>,
    /// The shared token every client must present; `None` serves without
    /// authentication, which [`check`](Self::check) allows only with
    /// `insecure_no_auth`.
    pub token: Option<Vec<u8>>,
    /// Serve without authentication (no token, no client certificates).
    /// Required to run without either, on loopback too: authentication
    /// comes before anything else unless refused by name.
    pub insecure_no_auth: bool,
    /// TLS: the server's certificate and key, and the CA of the client
    /// certificates it requires (mutual TLS); `None`: plaintext.
    pub tls: Option<TlsFiles>,
    /// Serve a non-loopback address with the token as the only
    /// authentication. Without it, a non-loopback address needs mutual
    /// TLS: the token is for loopback development.
    pub insecure_token_only: bool,
    /// The largest frame body the server sends; a client's frames are
    /// bounded by the largest request instead (a `Hello` with the longest
    /// names and token), or this if smaller.
    pub max_frame: u32,
    /// The most bytes one connection may have the server hold for it at
    /// once: the images a request reads and the frame that carries them.
    /// A request whose answer would be larger is refused with `TooLarge`
    /// (the connection stays open); the client asks for less.
    pub max_buffered: usize,
    /// The most connections served at once; one more is answered `Busy`
    /// and closed. Each connection is a reader of its database, and a
    /// database's reader table holds 126 readers (of every process): a
    /// connection beyond that is answered `Busy` too.
    pub max_connections: usize,
    /// A connection that sends nothing for this long, or whose frame or
    /// answer takes longer to cross, is told `Timeout` and closed.
    pub idle_timeout: Duration,
    /// The time a new connection has to send its `Hello`.
    pub hello_timeout: Duration,
    /// How a request's store calls (which block: `pread`, log reads) are
    /// kept off the runtime's async workers.
    pub blocking: Blocking,
    /// Serve without opening the databases for writing: clients only
    /// read, and a program beside the server may hold a database open for
    /// writing (the server would otherwise take its exclusive lock).
    pub read_only: bool,
    /// A bound on the server's memory, in bytes, shared out between the
    /// writers' pending changes and the connections' buffers
    /// (`budget.rs`); `None`: no bound beyond the per-connection ones.
    pub memory_budget: Option<usize>,
    /// The bytes of the server's buffer pool of framed fetch clusters
    /// (`image_cache.rs`), shared evenly between the databases; with a
    /// memory budget, no more than an eighth of it. 0: none, every
    /// fetch reads the file.
    pub image_cache: usize,
    /// The recovery scheme of every database served (`amber serve
    /// --scheme`), told to each client in its `Welcome`; a client's own
    /// `RemoteOptions::scheme` wins. `None`: each client's own strategy,
    /// its records redone here (docs/design.md §11.7).
    pub scheme: Option<Scheme>,
    /// The file system the databases are on: the real one, or in tests the
    /// crash model (`amber::internals::io::crash`) or the fault model
    /// (`countdown`), so that every file the server reads and writes while
    /// serving can be made to fail. (`Verify` and `Inspect` read the files
    /// as `amber verify` and `amber inspect` do, from the real one.)
    pub vfs: Arc<dyn Vfs>,
}

/// How a session runs a request's blocking store calls. `amber bench
/// serve` measures both per `ReadCluster` on loopback (docs/design.md
/// §10.8): in place is as cheap or cheaper at every cluster size, and
/// much cheaper on a loaded machine, where the pool's hand-off waits for
/// a second thread to be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocking {
    /// On the session's own worker (`block_in_place`), which tokio first
    /// hands the worker's other tasks away from. The default. On a
    /// current-thread runtime, where it is not possible, sessions use
    /// the pool.
    InPlace,
    /// On tokio's blocking pool (`spawn_blocking`): the session hands the
    /// request to a pool thread and waits for it. (A `Commit` goes to its
    /// database's committer thread in either mode, unless made in place.)
    Pool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: DEFAULT_LISTEN,
            databases: Vec::new(),
            token: None,
            insecure_no_auth: false,
            tls: None,
            insecure_token_only: false,
            max_frame: DEFAULT_MAX_FRAME,
            max_buffered: 2 * DEFAULT_MAX_FRAME as usize,
            max_connections: 100,
            idle_timeout: Duration::from_secs(300),
            hello_timeout: Duration::from_secs(10),
            blocking: Blocking::InPlace,
            read_only: false,
            memory_budget: None,
            image_cache: DEFAULT_IMAGE_CACHE,
            scheme: None,
            vfs: Arc::new(RealVfs),
        }
    }
}

impl ServeOptions {
    /// Refuses a configuration that cannot or must not be served: no
    /// database, two of one name, a zero bound, no authentication (neither
    /// a token nor mutual TLS) without `insecure_no_auth`, and a
    /// non-loopback address without mutual TLS unless `insecure_no_auth`
    /// or `insecure_token_only` says so. Returns the warnings to log (what
    /// those two flags let through).
    pub fn check(&self) -> Result<Vec<String>, ServeError> {
        let bad = |m: String| Err(ServeError::Config(m));
        if self.databases.is_empty() {
            return bad("no database to serve".into());
        }
        for (i, (name, _)) in self.databases.iter().enumerate() {
            check_name(name)?;
            if self.databases[..i].iter().any(|(n, _)| n == name) {
                return bad(format!(
                    "two databases are named {name:?}: name one with NAME=PATH"
                ));
            }
        }
        if self.max_frame == 0 || self.max_buffered == 0 || self.max_connections == 0 {
            return bad("--max-frame, --max-buffered and --max-connections must be above 0".into());
        }
        if self.idle_timeout.is_zero() || self.hello_timeout.is_zero() {
            return bad("timeouts must be above 0".into());
        }
        crate::budget::check(self)?;
        let mut warnings = Vec::new();
        match &self.token {
            Some(t) if t.is_empty() => return bad("the token is empty".into()),
            Some(t) if t.len() > MAX_TOKEN => {
                return bad(format!(
                    "the token is {} bytes, more than the {MAX_TOKEN} a client may send",
                    t.len()
                ));
            }
            _ => {}
        }
        let mutual_tls = self.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        let token = self.token.is_some();
        let listen = self.listen;
        let loopback = listen.ip().is_loopback();
        if self.insecure_no_auth && (token || mutual_tls) {
            return bad(
                "--insecure-no-auth contradicts --token-file and --tls-client-ca: it serves \
                 without authentication"
                    .into(),
            );
        }
        if self.insecure_token_only && !token {
            return bad("--insecure-token-only needs --token-file".into());
        }
        if self.insecure_no_auth {
            warnings.push(format!(
                "serving {listen} without authentication (--insecure-no-auth): anyone who \
                 reaches it reads the databases"
            ));
        } else if !token && !mutual_tls {
            return bad(if loopback {
                format!(
                    "no authentication: give --tls-cert, --tls-key and --tls-client-ca \
                     (mutual TLS), or --token-file FILE, or serve {listen} without \
                     authentication with --insecure-no-auth"
                )
            } else {
                format!(
                    "refusing to serve {listen}, which is not loopback, without \
                     authentication: give --tls-cert, --tls-key and --tls-client-ca (mutual \
                     TLS), or --insecure-no-auth to allow anyone who reaches it"
                )
            });
        } else if !loopback && !mutual_tls {
            // The token is for loopback development: off loopback, a
            // client proves itself with a certificate.
            if !self.insecure_token_only {
                return bad(format!(
                    "refusing to serve {listen}, which is not loopback, with a token as the \
                     only authentication: give --tls-cert, --tls-key and --tls-client-ca \
                     (mutual TLS), or --insecure-token-only to accept the token alone"
                ));
            }
            warnings.push(if self.tls.is_some() {
                format!(
                    "serving {listen} with a token as the only authentication \
                     (--insecure-token-only): whoever learns it reads and writes the databases"
                )
            } else {
                format!(
                    "serving {listen} with a token as the only authentication, without TLS \
                     (--insecure-token-only): the token and every page cross the network in \
                     clear"
                )
            });
        }
        Ok(warnings)
    }
}

/// A database name must fit a `Hello` and be printable on one line.
fn check_name(name: &str) -> Result<(), ServeError> {
    if name.is_empty() || name.len() > 255 || name.chars().any(char::is_control) {
        return Err(ServeError::Config(format!(
            "database name {name:?} must be 1 to 255 bytes without control characters"
        )));
    }
    Ok(())
}

/// A database argument: `NAME=PATH`, or `PATH`, served under its file
/// stem (`a.amber` as `a`).
pub fn parse_database(arg: &str) -> Result<(String, PathBuf), ServeError> {
    let (name, path) = match arg.split_once('=') {
        Some((n, p)) if !n.is_empty() && !n.contains('/') => (n.to_owned(), PathBuf::from(p)),
        _ => {
            let path = PathBuf::from(arg);
            let stem = path.file_stem().and_then(|s| s.to_str()).ok_or_else(|| {
                ServeError::Config(format!(
                    "{arg}: no file name to serve it under; use NAME=PATH"
                ))
            })?;
            (stem.to_owned(), path)
        }
    };
    check_name(&name)?;
    Ok((name, path))
}

/// The token in file `path`: its bytes, one trailing newline (`\n` or
/// `\r\n`) trimmed. An empty token is refused.
pub fn read_token_file(path: &Path) -> Result<Vec<u8>, ServeError> {
    let mut t = std::fs::read(path).map_err(|e| {
        ServeError::Config(format!("reading the token file {}: {e}", path.display()))
    })?;
    if t.last() == Some(&b'\n') {
        t.pop();
        if t.last() == Some(&b'\r') {
            t.pop();
        }
    }
    if t.is_empty() {
        return Err(ServeError::Config(format!(
            "the token file {} is empty",
            path.display()
        )));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(listen: &str, token: Option<&[u8]>, insecure: bool) -> ServeOptions {
        ServeOptions {
            listen: listen.parse().unwrap(),
            databases: vec![("a".into(), "a.amber".into())],
            token: token.map(<[u8]>::to_vec),
            insecure_no_auth: insecure,
            ..ServeOptions::default()
        }
    }

    #[test]
    fn authentication_is_required_unless_refused_by_name() {
        let err = |o: ServeOptions| o.check().unwrap_err().to_string();
        assert!(err(opts("127.0.0.1:1", None, false)).contains("--insecure-no-auth"));
        assert!(err(opts("0.0.0.0:1", None, false)).contains("not loopback"));
        assert!(err(opts("127.0.0.1:1", Some(b""), false)).contains("empty"));
        assert!(err(opts("127.0.0.1:1", Some(b"t"), true)).contains("contradict"));
        assert_eq!(
            opts("127.0.0.1:1", Some(b"t"), false).check().unwrap(),
            Vec::<String>::new()
        );
        // Off loopback, the token alone is refused unless asked by name.
        let e = err(opts("0.0.0.0:1", Some(b"t"), false));
        assert!(
            e.contains("not loopback") && e.contains("--insecure-token-only"),
            "{e}"
        );
        let mut o = opts("0.0.0.0:1", Some(b"t"), false);
        o.insecure_token_only = true;
        let w = o.check().unwrap();
        assert!(w[0].contains("in clear"), "{w:?}");
        o.tls = Some(tls(None));
        let w = o.check().unwrap();
        assert!(
            w[0].contains("only authentication") && !w[0].contains("clear"),
            "{w:?}"
        );
        let mut o = opts("127.0.0.1:1", None, false);
        o.insecure_token_only = true;
        assert!(err(o).contains("needs --token-file"));
        let w = opts("[::]:1", None, true).check().unwrap();
        assert!(w[0].contains("without authentication"), "{w:?}");
    }

    fn tls(client_ca: Option<&str>) -> TlsFiles {
        TlsFiles {
            cert: "s.pem".into(),
            key: "s.key".into(),
            client_ca: client_ca.map(Into::into),
        }
    }

    #[test]
    fn a_non_loopback_address_needs_mutual_tls() {
        let err = |o: ServeOptions| o.check().unwrap_err().to_string();
        // TLS without client certificates authenticates nobody.
        let mut o = opts("0.0.0.0:1", None, false);
        o.tls = Some(tls(None));
        assert!(err(o.clone()).contains("without authentication"));
        // A token over TLS is still a token alone.
        o.token = Some(b"t".to_vec());
        assert!(err(o.clone()).contains("--insecure-token-only"));
        // Mutual TLS, with or without a token, serves anywhere.
        o.tls = Some(tls(Some("ca.pem")));
        assert_eq!(o.check().unwrap(), Vec::<String>::new());
        o.token = None;
        assert_eq!(o.check().unwrap(), Vec::<String>::new());
        o.insecure_no_auth = true;
        assert!(err(o).contains("contradicts"));
        let mut o = opts("127.0.0.1:1", None, false);
        o.tls = Some(tls(Some("ca.pem")));
        assert_eq!(o.check().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn databases_are_named_by_stem_or_explicitly() {
        assert_eq!(
            parse_database("dir/a.amber").unwrap(),
            ("a".into(), "dir/a.amber".into())
        );
        assert_eq!(
            parse_database("main=dir/a.amber").unwrap(),
            ("main".into(), "dir/a.amber".into())
        );
        // An `=` in a directory name is a path, not a name.
        assert_eq!(
            parse_database("x=y/b.amber").unwrap(),
            ("x".into(), "y/b.amber".into())
        );
        assert_eq!(
            parse_database("d/x=y/b.amber").unwrap(),
            ("b".into(), "d/x=y/b.amber".into())
        );
        let mut o = opts("127.0.0.1:1", Some(b"t"), false);
        o.databases.push(("a".into(), "b/a.amber".into()));
        assert!(o.check().unwrap_err().to_string().contains("two databases"));
    }

    #[test]
    fn token_files_lose_one_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, b"secret\r\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), b"secret");
        std::fs::write(&p, b"secret\n\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), b"secret\n");
        std::fs::write(&p, b"\n").unwrap();
        assert!(
            read_token_file(&p)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(read_token_file(&dir.path().join("none")).is_err());
    }
}
