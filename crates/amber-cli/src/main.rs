//! The `amber` command: create, inspect, verify, checkpoint, recover and
//! collect a database, serve databases to client programs, and run the
//! benchmarks.
//!
//! Exit status: 0 success; 1 `verify` found damage (`verify --deep`: or a
//! damaged pointer; a dangling reference alone is reported with status 0);
//! 2 any error (bad arguments, missing or foreign files, a locked database,
//! an I/O failure), reported as one line on stderr, `amber: <message>`.
#![deny(clippy::unwrap_used)]

mod admin;
mod backup;
mod bench;
mod error;
mod remote_admin;
mod serve;

use amber::inspect::Show;
use clap::{CommandFactory, Parser, Subcommand};
use error::CliError;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "amber",
    version,
    about = "Amber, a persistent object store: database administration and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a new, empty database: PATH and its log PATH-wal.
    Create {
        /// The database file to create.
        path: PathBuf,
        /// Page size in bytes: a power of two from 4096 to 32768.
        #[arg(long, value_name = "N", default_value_t = amber::Options::default().page_size)]
        page_size: usize,
    },
    /// Describe a database without changing it: superblocks, free space,
    /// blocks, the log since the last checkpoint, the schema catalog, roots;
    /// or one page or one object, field by field. Of
    /// `amber://host:port/name`, the server makes the report.
    Inspect {
        /// The database file, or `amber://host:port/name`.
        path: PathBuf,
        #[command(flatten)]
        auth: remote_admin::Auth,
        /// Dump the block holding page N: its header, then each object with
        /// its type, size, flags and fields.
        #[arg(long, value_name = "N", conflicts_with = "object")]
        page: Option<u64>,
        /// Dump the object at persistent address PAGE:OFFSET (as inspect
        /// prints addresses).
        #[arg(long, value_name = "PAGE:OFFSET")]
        object: Option<String>,
    },
    /// Check every superblock copy, log header copy, log record and block;
    /// exit status 1 if anything is damaged. Of `amber://host:port/name`,
    /// the server checks the latest commit of the database it serves.
    Verify {
        /// The database file, or `amber://host:port/name`.
        path: PathBuf,
        #[command(flatten)]
        auth: remote_admin::Auth,
        /// Also check every pointer of every object: that it is null only
        /// where its type allows, and otherwise the start of a live object
        /// of the field's type; that every vector's buffer holds its
        /// capacity; that every index is whole. A pointer to an object the
        /// program freed is reported as dangling, not as damage.
        #[arg(long)]
        deep: bool,
    },
    /// Install every committed change into the page file and recycle the
    /// log. Of `amber://host:port/name`, the server's writer does it
    /// (deferred while a client's snapshot is older than the log's end).
    Checkpoint {
        /// The database file, or `amber://host:port/name`.
        path: PathBuf,
        #[command(flatten)]
        auth: remote_admin::Auth,
    },
    /// Copy one committed state of a database into a new database DEST
    /// (DEST and DEST-wal), while other programs keep committing: the
    /// backup holds exactly the commits up to the moment it was taken,
    /// opens on its own and verifies. SRC is a database file (a writer may
    /// have it open) or `amber://host:port/name` (the server streams it).
    /// Refuses to overwrite; a backup cut short leaves only
    /// DEST.amber-backup-partial files, which are not a database.
    Backup {
        /// The database file, or `amber://host:port/name`.
        src: String,
        /// The new database file.
        dest: PathBuf,
        #[command(flatten)]
        auth: remote_admin::Auth,
    },
    /// Report on a running server (`amber serve`): per database its mode,
    /// commits, conflicts, aborts, pages served and the writer store's log
    /// and checkpoint state; per connection its peer, snapshot, open
    /// transaction, pages shipped, requests and bytes; the server's CPU
    /// time and memory. Locks: none (the server validates at commit).
    Status {
        /// `amber://host:port/name`: the server, and a database it serves
        /// (the report covers all of them).
        url: String,
        #[command(flatten)]
        auth: remote_admin::Auth,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run recovery, install what it rebuilt, and report what it found.
    Recover {
        /// The database file.
        path: PathBuf,
        /// When recovery refuses a log with a damaged record followed by
        /// durable commits: cut the log at the damaged record (saving what
        /// is cut beside the log) and recover to the last commit before it,
        /// listing the transactions lost.
        #[arg(long, conflicts_with = "new_log")]
        salvage: bool,
        /// When the log file is missing: make a new, empty one starting at
        /// the page file's last checkpoint. Loses nothing after a clean
        /// close; after a crash, commits only in the missing log are lost.
        #[arg(long)]
        new_log: bool,
    },
    /// Collect the database: keep what its roots reach, reclaim every
    /// other object (freed or unreachable), compact what is kept into as
    /// few pages as it fits in, and shrink the file. The database must not
    /// be open elsewhere. Crash-safe: a crash leaves the database as it
    /// was or collected. A database deep verification finds damaged is
    /// refused and left as it is.
    Gc {
        /// The database file.
        path: PathBuf,
    },
    /// Migrate the database to a program's layouts: convert every object
    /// whose stored layout differs from the schema file's (fields added
    /// with their defaults, renamed, reordered or dropped), retire the old
    /// layouts, and collect as `gc` does. The schema file is written by
    /// the program (`Migration::save`); a migration with conversion
    /// functions runs from the program instead. The database must not be
    /// open elsewhere. Crash-safe: a crash leaves the database as it was
    /// or migrated. Nothing is written if any field cannot be converted.
    Migrate {
        /// The database file.
        path: PathBuf,
        /// The schema file the program wrote.
        #[arg(long)]
        schema: PathBuf,
        /// Say what would change, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    Serve(serve::Args),
    /// Run a benchmark: `amber bench <NAME> [ARGS]...`; `amber bench list`
    /// lists them, `amber bench <NAME> --help` gives a benchmark's options.
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark: commit, recovery, oo1, oo7, hot, faults, update, checkpoint, churn (or `list`).
        #[arg(allow_hyphen_values = true)]
        name: Option<String>,
        /// Its options.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn run(cmd: Command, out: &mut String) -> Result<ExitCode, CliError> {
    match cmd {
        Command::Create { path, page_size } => admin::create(&path, page_size, out),
        Command::Inspect {
            path,
            auth,
            page,
            object,
        } => {
            let show = match (page, object) {
                (Some(p), _) => Show::Page(p),
                (None, Some(o)) => Show::Object(o),
                (None, None) => Show::Summary,
            };
            match remote_admin::is_url(&path) {
                true => remote_admin::inspect(&path.to_string_lossy(), &auth, show, out),
                false => auth
                    .local_only()
                    .and_then(|()| admin::inspect(&path, &show, out)),
            }
        }
        Command::Verify { path, deep, auth } => match remote_admin::is_url(&path) {
            true => remote_admin::verify(&path.to_string_lossy(), &auth, deep, out),
            false => auth
                .local_only()
                .and_then(|()| admin::verify(&path, deep, out)),
        },
        Command::Checkpoint { path, auth } => match remote_admin::is_url(&path) {
            true => remote_admin::checkpoint(&path.to_string_lossy(), &auth, out),
            false => auth
                .local_only()
                .and_then(|()| admin::checkpoint(&path, out)),
        },
        Command::Backup { src, dest, auth } => backup::backup(&src, &dest, &auth, out),
        Command::Status { url, auth, json } => remote_admin::status(&url, &auth, json, out),
        Command::Recover {
            path,
            salvage,
            new_log,
        } => match (salvage, new_log) {
            (true, _) => admin::salvage(&path, out),
            (_, true) => admin::new_log(&path, out),
            _ => admin::recover(&path, out),
        },
        Command::Gc { path } => admin::gc(&path, out),
        Command::Migrate {
            path,
            schema,
            dry_run,
        } => admin::migrate(&path, &schema, dry_run, out),
        Command::Serve(args) => serve::serve(args, out),
        Command::Bench { name, args } => bench::run(name.as_deref(), &args, out),
    }
}

/// Writes to stdout; a closed pipe (`amber inspect db | head`) is not an
/// error worth reporting.
fn emit(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|()| o.flush());
}

/// A panic is a bug in Amber; it is still reported on one line.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "amber: internal error (a bug in amber, please report it): {}{at}",
            error::one_line(&msg)
        );
    }));
}

fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let names: Vec<String> = Cli::command()
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            return error::report(CliError::msg(format!(
                "a subcommand is required: {} (see 'amber --help')",
                names.join(", ")
            )));
        }
        Err(e) => return error::report(CliError::from_clap(&e, "amber")),
    };
    let mut out = String::new();
    let result = run(cli.cmd, &mut out);
    emit(&out);
    match result {
        Ok(code) => code,
        Err(e) => error::report(e),
    }
}
