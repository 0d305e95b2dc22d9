//! `create`, `verify`, `checkpoint`, `recover` (with `--salvage` and `--new-log`), `gc`
//! and `migrate`.

use crate::error::CliError;
use amber::Error;
use amber::inspect::{self, Installed, RecoveryReport, tail_line};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::ExitCode;

/// Checks, before opening, that `path` is a database with its log, so that
/// a missing file, a directory, a foreign file or a missing `-wal` each get
/// a plain message.
pub fn precheck(path: &Path) -> Result<(), CliError> {
    let shown = path.display();
    let meta = fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CliError::msg(format!("{shown}: no such file")),
        _ => CliError::msg(format!("{shown}: {e}")),
    })?;
    if meta.is_dir() {
        return Err(CliError::msg(format!(
            "{shown}: is a directory, not a database"
        )));
    }
    let sbs = inspect::read_superblocks(path)?;
    if !sbs.has_magic() {
        return Err(CliError::msg(format!(
            "{shown}: not an Amber database (no superblock magic in either copy)"
        )));
    }
    let wal = inspect::wal_path(path);
    match fs::metadata(&wal) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(CliError::msg(format!(
            "{}: the database's log is not a regular file",
            wal.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CliError::msg(format!(
            "{}: the database's log file is missing (a database is PATH and PATH-wal)",
            wal.display()
        ))),
        Err(e) => Err(CliError::msg(format!("{}: {e}", wal.display()))),
    }
}

/// `amber inspect PATH [--page N | --object PAGE:OFFSET]`: the report
/// `amber::inspect::report` makes (a server makes the same of a database
/// it serves).
pub fn inspect(path: &Path, show: &inspect::Show, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    inspect::report(path, show, out)?;
    Ok(ExitCode::SUCCESS)
}

/// `amber create PATH [--page-size N]`.
pub fn create(path: &Path, page_size: usize, out: &mut String) -> Result<ExitCode, CliError> {
    let st = inspect::create(path, page_size)?;
    let _ = writeln!(
        out,
        "created {} (page size {}, {} pages) and its log {}",
        path.display(),
        st.page_size,
        st.page_count,
        inspect::wal_path(path).display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `amber verify [--deep] PATH`: exit status 1 when anything is damaged.
pub fn verify(path: &Path, deep: bool, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let rep = inspect::verify(path)?;
    // A file that is not a database at all is an error, not damage.
    if let [e @ Error::NotADatabase { .. }] = rep.problems.as_slice() {
        return Err(CliError::msg(e.to_string()));
    }
    let name = path.display().to_string();
    let problems: Vec<String> = rep.problems.iter().map(ToString::to_string).collect();
    verify_lines(&name, &problems, &rep.notes, rep.blocks, rep.records, out);
    let deep_damage = deep
        && match inspect::verify_deep(path) {
            Ok(r) => deep_lines(&name, &DeepSummary::of(&r), out),
            // The first half reported why the store cannot be opened.
            Err(e) if e.is_corruption() => deep_not_run(&name, &e.to_string(), out),
            Err(e) => return Err(e.into()),
        };
    Ok(verify_status(rep.is_ok() && !deep_damage))
}

/// `verify`'s exit status.
pub fn verify_status(sound: bool) -> ExitCode {
    if sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The lines of `verify` (of a local file or through a server).
pub fn verify_lines(
    name: &str,
    problems: &[String],
    notes: &[String],
    blocks: u64,
    records: u64,
    out: &mut String,
) {
    for p in problems {
        let _ = writeln!(out, "problem: {p}");
    }
    for n in notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(
        out,
        "{name}: checked {blocks} blocks and {records} log records: {}",
        if problems.is_empty() {
            "no damage found".to_string()
        } else {
            format!("{} problem(s)", problems.len())
        }
    );
}

/// What `verify --deep` prints, from a local report or a server's.
#[derive(Debug, Default)]
pub struct DeepSummary {
    /// Class (`damage` or `dangling`) and text of each finding listed.
    pub findings: Vec<(String, String)>,
    /// Findings of class damage (all, listed or not).
    pub damage: u64,
    /// Dangling references (all, listed or not).
    pub dangling: u64,
    /// What was not checked, and why.
    pub notes: Vec<String>,
    /// Blocks read.
    pub blocks: u64,
    /// Objects found.
    pub objects: u64,
    /// Pointers checked.
    pub pointers: u64,
    /// Pointers not checked.
    pub unchecked: u64,
}

impl DeepSummary {
    fn of(rep: &inspect::DeepReport) -> DeepSummary {
        DeepSummary {
            findings: (rep.findings.iter())
                .map(|f| (f.class.name().to_string(), f.to_string()))
                .collect(),
            damage: rep.damage,
            dangling: rep.dangling,
            notes: rep.notes.clone(),
            blocks: rep.blocks,
            objects: rep.objects,
            pointers: rep.pointers,
            unchecked: rep.unchecked,
        }
    }
}

/// The line of a deep check that could not run (the store cannot be
/// opened); counts as damage.
pub fn deep_not_run(name: &str, why: &str, out: &mut String) -> bool {
    let _ = writeln!(
        out,
        "{name}: deep: not run (the database cannot be opened: {why})"
    );
    true
}

/// The `--deep` half of `verify`: every pointer of every object. Returns
/// whether it found damage (dangling references are not).
pub fn deep_lines(name: &str, rep: &DeepSummary, out: &mut String) -> bool {
    for (class, text) in &rep.findings {
        let _ = writeln!(out, "{class}: {text}");
    }
    let omitted = (rep.damage + rep.dangling).saturating_sub(rep.findings.len() as u64);
    if omitted > 0 {
        let _ = writeln!(out, "({omitted} more finding(s) not listed)");
    }
    for n in &rep.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let unchecked = if rep.unchecked > 0 {
        format!(
            " ({} not checked: their targets' blocks or types cannot be read)",
            rep.unchecked
        )
    } else {
        String::new()
    };
    let damage = if rep.damage > 0 {
        format!("{} problem(s)", rep.damage)
    } else {
        "no damage found".to_string()
    };
    let dangling = if rep.dangling > 0 {
        format!(
            "; {} dangling reference(s) to objects the program freed (not damage)",
            rep.dangling
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{name}: deep: checked {} pointer(s){unchecked} of {} object(s) in {} block(s): {damage}{dangling}",
        rep.pointers, rep.objects, rep.blocks
    );
    rep.damage > 0
}

fn installed(ck: &Installed) -> String {
    format!(
        "{} data block(s), {} bytes written to the page file (metadata included); \
         checkpoint LSN {}, superblock generation {}; log recycled",
        ck.blocks, ck.bytes, ck.lsn, ck.generation
    )
}

/// `amber checkpoint PATH`.
pub fn checkpoint(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let o = inspect::checkpoint(path)?;
    if let Some(ck) = &o.at_open {
        let rec = &o.recovery;
        let _ = writeln!(
            out,
            "open: recovery replayed {} record(s) of {} committed transaction(s) (LSN {} to {})",
            rec.redone, rec.committed, rec.from_lsn, rec.end_lsn
        );
        let _ = writeln!(out, "open: installed {}", installed(ck));
    }
    checkpoint_line(&o.checkpoint, out);
    Ok(ExitCode::SUCCESS)
}

/// The line of what a checkpoint installed (of a local file or through a
/// server).
pub fn checkpoint_line(ck: &Installed, out: &mut String) {
    if ck.is_nothing() {
        let _ = writeln!(
            out,
            "checkpoint: nothing (more) to install; checkpoint LSN {}, superblock generation {}",
            ck.lsn, ck.generation
        );
    } else {
        let _ = writeln!(out, "checkpoint: installed {}", installed(ck));
    }
}

/// `amber gc PATH`: collects the database and reports what it kept and
/// reclaimed, and the files' sizes before and after.
pub fn gc(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let s = amber::Db::collect_file(path)?;
    gc_lines(&s, out);
    Ok(ExitCode::SUCCESS)
}

/// `amber migrate PATH --schema FILE [--dry-run]`.
pub fn migrate(
    path: &Path,
    schema: &Path,
    dry_run: bool,
    out: &mut String,
) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let m = amber::Migration::load(schema)?;
    if dry_run {
        let changes = m.plan_file(path)?;
        if changes.is_empty() {
            let _ = writeln!(out, "migrate: nothing to change");
        }
        for c in changes {
            let _ = writeln!(out, "would change: {c}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let s = m.run_file(path)?;
    if !s.rewritten {
        let _ = writeln!(
            out,
            "migrate: every stored layout is already the schema's; nothing written"
        );
        return Ok(ExitCode::SUCCESS);
    }
    for c in &s.changes {
        let _ = writeln!(out, "changed: {c}");
    }
    gc_lines(&s.collect, out);
    Ok(ExitCode::SUCCESS)
}

/// What a collection did, in two lines.
fn gc_lines(s: &amber::CollectStats, out: &mut String) {
    let _ = writeln!(
        out,
        "gc: kept {} live object(s) ({} bytes){}; reclaimed {} object(s) ({} bytes)",
        s.objects_live,
        s.bytes_live,
        if s.tombstones > 0 {
            format!(
                " and {} freed object(s) still pointed at (dangling references)",
                s.tombstones
            )
        } else {
            String::new()
        },
        s.objects_reclaimed,
        s.bytes_reclaimed
    );
    let _ = writeln!(
        out,
        "gc: page file {} -> {} bytes ({} -> {} pages); log file {} -> {} bytes",
        s.file_bytes_before,
        s.file_bytes_after,
        s.pages_before,
        s.pages_after,
        s.log_bytes_before,
        s.log_bytes_after
    );
}

fn recovery_lines(out: &mut String, r: &RecoveryReport, closed: bool) {
    let _ = writeln!(
        out,
        "  log scanned:   LSN {} to {} ({} bytes), {} record(s)",
        r.from_lsn,
        r.end_lsn,
        r.end_lsn.saturating_sub(r.from_lsn),
        r.records
    );
    let _ = writeln!(
        out,
        "  transactions:  {} committed, {} without a commit record (ignored)",
        r.committed, r.uncommitted
    );
    let _ = writeln!(out, "  redone:        {} record(s)", r.redone);
    let repaired = if r.repaired.is_empty() {
        "none".to_string()
    } else {
        r.repaired
            .iter()
            .map(|p| format!("page {p}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "  repaired:      {repaired} (blocks torn by an interrupted checkpoint)"
    );
    let _ = writeln!(out, "  tail:          {}", tail_line(&r.tail, closed));
}

/// `amber recover PATH`.
pub fn recover(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let o = inspect::recover(path)?;
    let _ = writeln!(out, "recovery of {}", path.display());
    recovered(out, &o);
    Ok(ExitCode::SUCCESS)
}

/// What a recovery found and installed.
fn recovered(out: &mut String, o: &inspect::RecoveryOutcome) {
    recovery_lines(out, &o.recovery, o.closed_cleanly);
    match &o.installed {
        Some(ck) => {
            let _ = writeln!(out, "  installed:     {}", installed(ck));
        }
        None => {
            let _ = writeln!(
                out,
                "  installed:     nothing (no changes since checkpoint LSN {})",
                o.checkpoint_lsn
            );
        }
    }
}

/// `amber recover --salvage PATH`.
pub fn salvage(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let o = inspect::salvage(path)?;
    let _ = writeln!(out, "salvage of {}", path.display());
    match &o.cut {
        None => {
            let _ = writeln!(
                out,
                "  the log has no damaged record before a durable commit: nothing given up"
            );
        }
        Some(c) => {
            let _ = writeln!(
                out,
                "  damaged record at LSN {}: {}\n  the log now ends there: {} byte(s) cut, saved to {}",
                c.damaged_lsn,
                c.what,
                c.discarded_bytes,
                c.saved_to.display()
            );
            let _ = writeln!(
                out,
                "  transactions lost (their commit records were after the damage): {}",
                c.lost_commits.len()
            );
            for (lsn, txid) in &c.lost_commits {
                let _ = writeln!(out, "    transaction {txid}, committed at LSN {lsn}");
            }
        }
    }
    recovered(out, &o.recovery);
    Ok(ExitCode::SUCCESS)
}

/// `amber recover --new-log PATH`.
pub fn new_log(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    let o = inspect::new_log(path)?;
    let _ = writeln!(
        out,
        "new log for {} at {}, starting at the page file's checkpoint LSN {}\n  \
         every commit up to that LSN is in the page file; if the database was not closed \
         cleanly, commits after it were only in the missing log and are lost",
        path.display(),
        inspect::wal_path(path).display(),
        o.checkpoint_lsn
    );
    recovered(out, &o.recovery);
    Ok(ExitCode::SUCCESS)
}
