//! Operations a client asks the server to run on a served database: an
//! online backup (`BackupBegin`, `BackupRead`, `BackupEnd`), `Verify` and
//! `Checkpoint` (docs/design.md §10.10, §10.11). They need the same
//! authentication as any request: they come after the `Hello`.
//!
//! A backup pins its own read-only store (`store::backup::Pinned`), apart
//! from the connection's, so that the connection's snapshot and shipped
//! set are untouched. The pin is the connection's until `BackupEnd`, a new
//! `BackupBegin`, or the connection's end, whichever comes first: a client
//! killed mid-copy releases it with its connection. Each read is bounded
//! by the connection's answer limit, as a fetch cluster is.
//!
//! `Verify` runs the same checks as `amber verify` on a read-only store of
//! the latest commit (beside the writer, as any reader), and `Inspect` makes
//! `amber inspect`'s report there (`amber::inspect::report`); `Checkpoint` runs
//! on the writer store (a database served read-only has its writer
//! elsewhere, and is refused). Their reports are JSON documents, which the
//! command prints as it prints a local file's.

use crate::serve_read::{Served, error, refuse};
use amber::Error;
use amber::inspect;
use amber::internals::store::backup::{Part, Pinned};
use amber::internals::wire::{BACKUP_DATA, BACKUP_LOG, ErrorCode, Response};
use serde_json::{Value, json};

impl Served {
    /// `BackupBegin`: pins the latest committed state (letting go of one
    /// pinned before).
    pub(crate) fn backup_begin(&mut self) -> Response {
        self.backup = None;
        match Pinned::open(self.vfs.clone(), self.store.path()) {
            Ok(p) => {
                let info = p.info();
                self.backup = Some(p);
                Response::BackupPinned {
                    snapshot_lsn: info.snapshot_lsn,
                    page_size: info.page_size as u32,
                    data_len: info.data_len,
                    log_len: info.log_len,
                    max_read: u32::try_from(self.answer_limit()).unwrap_or(u32::MAX),
                }
            }
            Err(e) => error(&e),
        }
    }

    /// `BackupRead`: bytes of the pinned state's files.
    pub(crate) fn backup_read(&mut self, file: u8, offset: u64, len: u32) -> Response {
        let Some(p) = &self.backup else {
            return refuse(
                ErrorCode::Invalid,
                "BackupRead with nothing pinned: send BackupBegin first",
            );
        };
        let part = match file {
            BACKUP_DATA => Part::Data,
            BACKUP_LOG => Part::Log,
            f => {
                return refuse(
                    ErrorCode::Invalid,
                    format!("BackupRead of file {f} (0 or 1)"),
                );
            }
        };
        if len as usize > self.answer_limit() {
            return refuse(
                ErrorCode::TooLarge,
                format!(
                    "a backup read of {len} bytes is more than the {} one answer may carry",
                    self.answer_limit()
                ),
            );
        }
        let mut buf = vec![0; len as usize];
        match p.read(part, offset, &mut buf) {
            Ok(()) => Response::BackupBytes(buf),
            Err(e) => error(&e),
        }
    }

    /// `BackupEnd`: whether the bytes read are of the pinned state; the
    /// pin let go either way.
    pub(crate) fn backup_end(&mut self) -> Response {
        match self.backup.take() {
            None => refuse(ErrorCode::Invalid, "BackupEnd with nothing pinned"),
            Some(p) => match p.finish() {
                Ok(()) => Response::BackupDone,
                Err(e) => error(&e),
            },
        }
    }

    /// `Verify`: `amber verify [--deep]` of the latest commit.
    pub(crate) fn verify(&mut self, deep: bool) -> Response {
        let path = self.store.path();
        let rep = match inspect::verify(path) {
            Ok(r) => r,
            Err(e) => return error(&e),
        };
        let deep = if deep {
            match inspect::verify_deep(path) {
                Ok(d) => json!({
                    "findings": (d.findings.iter()).map(|f| json!({
                        "class": f.class.name(),
                        "text": f.to_string(),
                    })).collect::<Vec<_>>(),
                    "damage": d.damage,
                    "dangling": d.dangling,
                    "notes": d.notes,
                    "blocks": d.blocks,
                    "objects": d.objects,
                    "pointers": d.pointers,
                    "unchecked": d.unchecked,
                }),
                // The first half reports why the store cannot be opened.
                Err(e) if e.is_corruption() => json!({ "not_run": e.to_string() }),
                Err(e) => return error(&e),
            }
        } else {
            Value::Null
        };
        let doc = json!({
            "problems": rep.problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "not_a_database": matches!(rep.problems.as_slice(), [Error::NotADatabase { .. }]),
            "notes": rep.notes,
            "blocks": rep.blocks,
            "records": rep.records,
            "deep": deep,
        });
        Response::Report(doc.to_string())
    }

    /// `Checkpoint`: the writer store's checkpoint.
    pub(crate) fn checkpoint(&mut self) -> Response {
        let Some(writer) = &self.writer else {
            return refuse(
                ErrorCode::Invalid,
                "this server serves the database read-only (--read-only): its writer, \
                 elsewhere, checkpoints it",
            );
        };
        // Deferred while a connection's snapshot (this one's too: the
        // client refreshes first) is older than the log's end.
        match writer.store.checkpoint() {
            Ok(ck) => Response::Report(
                json!({
                    "blocks": ck.blocks,
                    "bytes": ck.bytes,
                    "lsn": ck.lsn,
                    "generation": writer.store.superblock().generation,
                })
                .to_string(),
            ),
            Err(e) => error(&e),
        }
    }

    /// `Inspect`: `amber inspect`'s report of the database, as text, and
    /// what stopped it if the store could not be opened (it then shows
    /// what its files allow, as the command does).
    pub(crate) fn inspect(&mut self, show: &inspect::Show) -> Response {
        let mut text = String::new();
        let stopped = inspect::report(self.store.path(), show, &mut text).err();
        Response::Report(
            json!({
                "text": text,
                "error": stopped.map(|e| e.to_string()),
            })
            .to_string(),
        )
    }
}
