//! `amber backup SRC DEST`: one committed state of a database, copied
//! while other programs keep committing, into the new database DEST
//! (`amber::internals::store::backup`; docs/design.md §10.11). SRC is a
//! database file, or `amber://host:port/name` of a served one, whose pinned
//! state the server streams in chunks (`BackupBegin`, `BackupRead`,
//! `BackupEnd`).

use crate::error::CliError;
use crate::remote_admin::{Auth, connect};
use amber::Error;
use amber::internals::io::real::RealVfs;
use amber::internals::source::remote::Remote;
use amber::internals::store::backup::{self, BackupSource, LocalSource, Part, PinInfo};
use amber::internals::wire::{BACKUP_DATA, BACKUP_LOG, Request, Response};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Bytes asked for in one read: well under any frame limit, and large
/// enough that a round trip per chunk costs little.
const CHUNK: usize = 1 << 20;

/// A served database as a backup's source.
struct ServedSource {
    remote: Remote,
}

impl ServedSource {
    fn unexpected(&self, asked: &str, got: &Response) -> Error {
        self.remote.unexpected(asked, got)
    }
}

impl BackupSource for ServedSource {
    fn pin(&mut self) -> amber::Result<PinInfo> {
        match self.remote.request(&Request::BackupBegin)? {
            Response::BackupPinned {
                snapshot_lsn,
                page_size,
                data_len,
                log_len,
                max_read,
            } => Ok(PinInfo {
                snapshot_lsn,
                page_size: page_size as usize,
                data_len,
                log_len,
                max_read: max_read as usize,
            }),
            other => Err(self.unexpected("BackupBegin", &other)),
        }
    }

    fn read(&mut self, part: Part, offset: u64, len: usize) -> amber::Result<Vec<u8>> {
        let file = match part {
            Part::Data => BACKUP_DATA,
            Part::Log => BACKUP_LOG,
        };
        let req = Request::BackupRead {
            file,
            offset,
            len: len as u32,
        };
        match self.remote.request(&req)? {
            Response::BackupBytes(b) => Ok(b),
            other => Err(self.unexpected("BackupRead", &other)),
        }
    }

    fn finish(&mut self) -> amber::Result<()> {
        match self.remote.request(&Request::BackupEnd)? {
            Response::BackupDone => Ok(()),
            other => Err(self.unexpected("BackupEnd", &other)),
        }
    }
}

/// `amber backup SRC DEST [--token-file FILE] [--tls-ca …]`.
pub fn backup(src: &str, dest: &Path, auth: &Auth, out: &mut String) -> Result<ExitCode, CliError> {
    let vfs = Arc::new(RealVfs);
    let mut source: Box<dyn BackupSource> = if src.starts_with("amber://") {
        let remote = connect(src, auth)?;
        Box::new(ServedSource { remote })
    } else {
        auth.local_only()?;
        crate::admin::precheck(Path::new(src))?;
        Box::new(LocalSource::new(vfs.clone(), Path::new(src)))
    };
    let rep = backup::backup(&mut *source, vfs, dest, CHUNK)?;
    let _ = writeln!(
        out,
        "backed up {src} at LSN {} into {} ({} bytes copied{}): {} pages, {} blocks, checkpoint LSN {}",
        rep.snapshot_lsn,
        dest.display(),
        rep.bytes,
        match rep.retries {
            0 => String::new(),
            n => format!(", {n} copy(ies) retaken after a checkpoint"),
        },
        rep.stats.page_count,
        rep.stats.blocks,
        rep.stats.checkpoint_lsn,
    );
    Ok(ExitCode::SUCCESS)
}
