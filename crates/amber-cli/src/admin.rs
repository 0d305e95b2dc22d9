//! `create`, `verify`, `checkpoint` and `recover`.

use crate::error::CliError;
use amber::Error;
use amber::internals::format::superblock::{MAGIC, SLOT_OFFSETS};
use amber::internals::io::real::RealVfs;
use amber::internals::store::checkpoint::CheckpointReport;
use amber::internals::store::{RecoveryReport, Store, StoreOptions, verify, wal_path};
use amber::internals::wal::header::{self as log_header, LogHeader};
use amber::internals::wal::scan::Tail;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

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
    let f = fs::File::open(path).map_err(|e| CliError::msg(format!("{shown}: {e}")))?;
    let has_magic = SLOT_OFFSETS.iter().any(|&off| {
        let mut m = [0u8; 8];
        f.read_exact_at(&mut m, off).is_ok() && &m == MAGIC
    });
    if !has_magic {
        return Err(CliError::msg(format!(
            "{shown}: not an Amber database (no superblock magic in either copy)"
        )));
    }
    let wal = wal_path(path);
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

/// `amber create PATH [--page-size N]`.
pub fn create(path: &Path, page_size: usize, out: &mut String) -> Result<ExitCode, CliError> {
    let opts = StoreOptions {
        page_size,
        ..StoreOptions::default()
    };
    let s = Store::create(Arc::new(RealVfs), path, opts)?;
    let st = s.stats();
    let _ = writeln!(
        out,
        "created {} (page size {}, {} pages) and its log {}",
        path.display(),
        st.page_size,
        st.page_count,
        s.wal_path().display()
    );
    s.close()?;
    Ok(ExitCode::SUCCESS)
}

/// `amber verify PATH`: exit status 1 when anything is damaged.
pub fn verify(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    precheck(path)?;
    let rep = verify::verify(Arc::new(RealVfs), path)?;
    // A file that is not a database at all is an error, not damage.
    if let [e @ Error::NotADatabase { .. }] = rep.problems.as_slice() {
        return Err(CliError::msg(e.to_string()));
    }
    for p in &rep.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    for n in &rep.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(
        out,
        "{}: checked {} blocks and {} log records: {}",
        path.display(),
        rep.blocks,
        rep.records,
        if rep.is_ok() {
            "no damage found".to_string()
        } else {
            format!("{} problem(s)", rep.problems.len())
        }
    );
    Ok(if rep.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn open_writable(path: &Path) -> Result<Store, CliError> {
    precheck(path)?;
    Ok(Store::open(
        Arc::new(RealVfs),
        path,
        StoreOptions::default(),
    )?)
}

fn installed(ck: &CheckpointReport, generation: u64) -> String {
    format!(
        "{} data block(s), {} bytes written to the page file (metadata included); \
         checkpoint LSN {}, superblock generation {generation}; log recycled",
        ck.blocks, ck.bytes, ck.lsn
    )
}

/// `amber checkpoint PATH`.
pub fn checkpoint(path: &Path, out: &mut String) -> Result<ExitCode, CliError> {
    let s = open_writable(path)?;
    let rec = s.recovery_report();
    if let Some(ck) = s.open_checkpoint() {
        let _ = writeln!(
            out,
            "open: recovery replayed {} record(s) of {} committed transaction(s) (LSN {} to {})",
            rec.redone, rec.committed, rec.from_lsn, rec.end_lsn
        );
        let _ = writeln!(
            out,
            "open: installed {}",
            installed(&ck, s.superblock().generation)
        );
    }
    let ck = s.checkpoint()?;
    let sb = s.superblock();
    if ck.blocks == 0 && ck.bytes == 0 {
        let _ = writeln!(
            out,
            "checkpoint: nothing (more) to install; checkpoint LSN {}, superblock generation {}",
            sb.checkpoint_lsn, sb.generation
        );
    } else {
        let _ = writeln!(
            out,
            "checkpoint: installed {}",
            installed(&ck, sb.generation)
        );
    }
    s.close()?;
    Ok(ExitCode::SUCCESS)
}

/// Whether the log's newest header was written by a clean close: then the
/// bytes after its (empty) epoch are older records, not a torn batch.
pub fn closed_cleanly(wal: &[u8]) -> bool {
    log_header::SLOT_OFFSETS
        .iter()
        .filter_map(|&off| {
            let b = wal.get(off as usize..)?;
            LogHeader::decode(&b[..b.len().min(log_header::SLOT_SIZE)]).ok()
        })
        .max_by_key(|h| h.generation)
        .is_some_and(|h| h.closed)
}

/// One line describing how the log ended; `closed` is what
/// [`closed_cleanly`] says.
pub fn tail_line(t: &Tail, closed: bool) -> String {
    match (t, closed) {
        (Tail::Clean, _) => "clean".to_string(),
        (Tail::Torn { at, bytes, .. }, true) => format!(
            "clean, ends at LSN {at} (closed cleanly); the {bytes} byte(s) after it are older records left in place \
             when a checkpoint recycled the log (not damage; recovery ignores them)"
        ),
        (Tail::Torn { at, what, bytes }, false) => format!(
            "torn at LSN {at} ({what}; {bytes} byte(s) after the last valid record: a batch cut short by a crash, \
             or older records left when the log was recycled; recovery discards them)"
        ),
        (Tail::Corrupt { at, what, evidence }, _) => format!(
            "CORRUPT at LSN {at} ({what}; the commit record at LSN {evidence} shows the log was durable past it)"
        ),
    }
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
    // Read before the open, which may start a new log epoch: only to tell
    // a clean close from a torn tail.
    let closed = closed_cleanly(&fs::read(wal_path(path)).unwrap_or_default());
    let s = open_writable(path)?;
    let rep = s.recovery_report();
    let _ = writeln!(out, "recovery of {}", path.display());
    recovery_lines(out, rep, closed);
    match s.open_checkpoint() {
        Some(ck) => {
            let _ = writeln!(
                out,
                "  installed:     {}",
                installed(&ck, s.superblock().generation)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  installed:     nothing (no changes since checkpoint LSN {})",
                s.superblock().checkpoint_lsn
            );
        }
    }
    s.close()?;
    Ok(ExitCode::SUCCESS)
}
