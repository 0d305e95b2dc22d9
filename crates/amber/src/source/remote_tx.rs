//! A transaction on a server's database: its changes are kept here and
//! shipped whole at commit, where the server validates and logs them
//! (docs/design.md §11: optimistic concurrency control, backward
//! validation at page granularity).
//!
//! What the log generator produces (`db/strategy/loggen/`) is what travels:
//! ranges of changed bytes (or whole pages under whole-page logging) in
//! persistent form, so the server appends them to its log as they are, the
//! redo-at-server scheme of QuickStore's client-server recovery
//! (`papers/002_*` §3.1). Blocks are allocated by the server when the
//! transaction asks (their addresses go into other objects before the
//! commit), types defined by it at once; frees and roots travel with the
//! commit.
//!
//! Records spilled by a transaction larger than the cache budget stay in
//! this buffer (`log_early` keeps them): nothing reaches the server before
//! the commit, so an aborted transaction leaves nothing there to undo.

use super::{Source, SourceTx};
use super::remote::Remote;
use crate::error::{Error, Result};
use crate::format::meta::RootEntry;
use crate::format::page::BlockKind;
use crate::format::{PAddr, PageNo};
use crate::store::CommitInfo;
use crate::wal::TxId;
use crate::wire::{ROOT_PAGE, Request, Response, WireRecord};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes a record takes on the wire beside its data (kind, address,
/// length): the commit's `log_bytes` counts them, as the local store counts
/// its record headers.
const RECORD_OVERHEAD: u64 = 13;

/// A transaction of a [`Remote`] database.
#[derive(Debug)]
pub(crate) struct RemoteTx<'r> {
    remote: &'r Remote,
    txid: TxId,
    records: Vec<WireRecord>,
    /// Bytes the server will log: the records with their headers.
    bytes: u64,
    /// Whether the commit ships its dirty pages (an ESM scheme).
    ships: bool,
    /// Whole pages shipped: dirty pages, page records.
    data_pages: u64,
    /// Bytes of range records shipped.
    range_bytes: u64,
    frees: Vec<PageNo>,
    /// Roots this transaction named or removed (address 0).
    roots: BTreeMap<String, RootEntry>,
    /// The pages it read (the object layer's record, `set_reads`).
    reads: Vec<PageNo>,
    /// Whether it read the committed roots.
    read_roots: AtomicBool,
    /// Whether the server still has this transaction open.
    open: bool,
}

impl<'r> RemoteTx<'r> {
    pub(crate) fn new(remote: &'r Remote, txid: TxId) -> Self {
        RemoteTx {
            remote,
            txid,
            records: Vec::new(),
            bytes: 0,
            ships: remote.scheme().is_some_and(|s| s.ships_pages()),
            data_pages: 0,
            range_bytes: 0,
            frees: Vec::new(),
            roots: BTreeMap::new(),
            reads: Vec::new(),
            read_roots: AtomicBool::new(false),
            open: true,
        }
    }

    fn push(&mut self, rec: WireRecord, len: usize) {
        self.bytes += RECORD_OVERHEAD + len as u64;
        self.records.push(rec);
    }
}

impl SourceTx for RemoteTx<'_> {
    fn id(&self) -> TxId {
        self.txid
    }

    fn write(&mut self, addr: PAddr, data: &[u8]) -> Result<()> {
        self.range_bytes += RECORD_OVERHEAD + data.len() as u64;
        self.push(
            WireRecord::Range {
                addr,
                data: data.to_vec(),
            },
            data.len(),
        );
        Ok(())
    }

    fn write_with_before(&mut self, addr: PAddr, _before: &[u8], after: &[u8]) -> Result<()> {
        // Nothing is logged before the commit, so nothing needs undoing.
        self.write(addr, after)
    }

    fn write_page(&mut self, page: PageNo, image: &[u8]) -> Result<()> {
        self.data_pages += 1;
        self.push(
            WireRecord::Page {
                page,
                image: image.to_vec(),
            },
            image.len(),
        );
        Ok(())
    }

    fn ships_pages(&self) -> bool {
        self.ships
    }

    fn ship_page(&mut self, page: PageNo, image: &[u8]) -> Result<()> {
        // Cached by the server, not logged: not in `bytes`.
        self.data_pages += 1;
        self.records.push(WireRecord::Cached {
            page,
            image: image.to_vec(),
        });
        Ok(())
    }

    fn alloc(&mut self, pages: u32, kind: BlockKind) -> Result<PageNo> {
        match self.remote.request(&Request::Alloc {
            pages,
            kind: kind as u8,
        })? {
            Response::Allocated { head } => Ok(head),
            other => Err(self.remote.unexpected("Alloc", &other)),
        }
    }

    fn free(&mut self, page: PageNo) -> Result<()> {
        self.frees.push(page);
        Ok(())
    }

    fn set_root(&mut self, name: &str, addr: PAddr, type_id: u32) -> Result<()> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::invalid("root names are 1 to 255 bytes"));
        }
        self.roots.insert(
            name.to_string(),
            RootEntry {
                name: name.to_string(),
                addr,
                type_id,
            },
        );
        Ok(())
    }

    fn roots(&self) -> Vec<RootEntry> {
        self.read_roots.store(true, Ordering::Relaxed);
        let mut all: BTreeMap<String, RootEntry> = self
            .remote
            .committed_roots()
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        for (name, r) in &self.roots {
            match r.addr {
                0 => all.remove(name),
                _ => all.insert(name.clone(), r.clone()),
            };
        }
        all.into_values().collect()
    }

    fn root(&self, name: &str) -> Option<RootEntry> {
        match self.roots.get(name) {
            Some(r) if r.addr == 0 => None,
            Some(r) => Some(r.clone()),
            None => {
                self.read_roots.store(true, Ordering::Relaxed);
                self.remote.committed_root(name)
            }
        }
    }

    fn define_type(&mut self, desc: &[u8]) -> Result<u32> {
        match self.remote.request(&Request::DefineType {
            desc: desc.to_vec(),
        })? {
            Response::TypeDefined { id } => Ok(id),
            other => Err(self.remote.unexpected("DefineType", &other)),
        }
    }

    fn log_early(&mut self) -> Result<()> {
        Ok(())
    }

    fn wants_reads(&self) -> bool {
        true
    }

    fn set_reads(&mut self, pages: Vec<PageNo>) {
        self.reads = pages;
    }

    fn commit(mut self: Box<Self>) -> Result<CommitInfo> {
        self.open = false;
        let roots = std::mem::take(&mut self.roots)
            .into_values()
            .map(|r| (r.name, r.addr, r.type_id))
            .collect();
        let mut reads = std::mem::take(&mut self.reads);
        if self.read_roots.load(Ordering::Relaxed) {
            reads.push(ROOT_PAGE);
        }
        let req = Request::Commit {
            records: std::mem::take(&mut self.records),
            frees: std::mem::take(&mut self.frees),
            roots,
            reads,
        };
        match self.remote.request(&req)? {
            Response::Committed {
                lsn,
                page_count,
                change,
            } => {
                // Before the move, which drops what others changed.
                if let Request::Commit { records, frees, .. } = &req {
                    self.remote.clean.committed(records, frees);
                }
                self.remote.moved(page_count, change)?;
                Ok(CommitInfo {
                    commit_lsn: lsn,
                    log_bytes: self.bytes,
                    data_pages_shipped: self.data_pages,
                    log_pages_shipped: self.range_bytes.div_ceil(self.remote.page_size() as u64),
                })
            }
            Response::Conflict {
                page_count,
                change,
                message,
            } => {
                self.remote.moved(page_count, change)?;
                Err(Error::Conflict { what: message })
            }
            other => Err(self.remote.unexpected("Commit", &other)),
        }
    }

    fn abandon(mut self: Box<Self>) {
        self.open = false;
        // Best effort: the server aborts an open transaction at the next
        // Begin and when the connection ends.
        let _ = self.remote.request(&Request::Abort);
    }
}

impl Drop for RemoteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.remote.request(&Request::Abort);
        }
    }
}
