//! Storage-level transactions: the write batch the object runtime fills.
//!
//! A transaction buffers its changes as log records. Commit appends them with
//! a commit record, waits until the log is durable (sharing the sync with
//! concurrent committers), then applies them to the committed state, in the
//! order of the commit records (`order.rs`). Abort
//! forgets them; allocations made by the transaction are returned. A
//! transaction can also push its records to the log before committing
//! ([`StoreTx::log_early`]): recovery ignores them unless the commit record
//! follows, so nothing needs undoing on disk.
//!
//! Reads through the store see committed state only; the runtime keeps its
//! own view of uncommitted changes.

use super::batch::Batch;
use super::early::Early;
use super::logged::{Logged, LoggedTx};
use super::{Core, Store};
use crate::error::{Error, Result};
use crate::format::page::{BlockKind, HEADER_SIZE, USED_OFFSET};
use crate::format::{PAddr, PageNo};
use crate::wal::ranges::max_range;
use crate::wal::record::COMMIT_SIZE;
use crate::wal::{Record, TxId};
use crate::format::meta::RootEntry;
use std::collections::BTreeMap;

/// A change buffered by a transaction.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Range {
        addr: PAddr,
        after: Vec<u8>,
        before: Option<Vec<u8>>,
    },
    Page {
        page: PageNo,
        image: Vec<u8>,
    },
    Alloc {
        page: PageNo,
        count: u32,
        kind: BlockKind,
    },
    Free {
        page: PageNo,
        count: u32,
    },
    Root {
        name: String,
        addr: PAddr,
        type_id: u32,
    },
    Type {
        type_id: u32,
        desc: Vec<u8>,
    },
}

impl Op {
    pub(crate) fn record(&self, txid: TxId) -> Record<'_> {
        match self {
            Op::Range {
                addr,
                after,
                before,
            } => Record::Range {
                txid,
                addr: *addr,
                after,
                before: before.as_deref(),
            },
            Op::Page { page, image } => Record::Page {
                txid,
                page: *page,
                image,
            },
            Op::Alloc { page, count, kind } => Record::Alloc {
                txid,
                page: *page,
                count: *count,
                kind: *kind as u8,
            },
            Op::Free { page, count } => Record::Free {
                txid,
                page: *page,
                count: *count,
            },
            Op::Root {
                name,
                addr,
                type_id,
            } => Record::Root {
                txid,
                name: name.as_bytes(),
                addr: *addr,
                type_id: *type_id,
            },
            Op::Type { type_id, desc } => Record::Type {
                txid,
                type_id: *type_id,
                desc,
            },
        }
    }
}

/// What a commit did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitInfo {
    /// LSN of the commit record (0 when nothing was written).
    pub commit_lsn: u64,
    /// Log bytes this transaction wrote, commit record included.
    pub log_bytes: u64,
    /// Through a server: the whole pages the commit shipped (the dirty
    /// pages of an ESM scheme, the page records of whole-page logging);
    /// 0 for a local store.
    pub data_pages_shipped: u64,
    /// Through a server: the bytes of range records the commit shipped,
    /// in pages (rounded up); 0 for a local store.
    pub log_pages_shipped: u64,
}

/// A storage-level transaction.
#[derive(Debug)]
pub struct StoreTx<'s> {
    store: &'s Store,
    txid: TxId,
    ops: Vec<Op>,
    /// Ops already in the log (logged early), range records excepted.
    logged: usize,
    /// The LSN of each op logged early (a page record's is its place in
    /// the WPL table).
    early_lsns: Vec<u64>,
    /// The range records logged early, as the bytes they leave.
    early: Early,
    /// Where among `ops` the overlay applies: once a whole-page record
    /// was logged early, at the number of ops kept before it.
    early_at: Option<usize>,
    log_bytes: u64,
    /// Page images laid over the committed state in place of redoing the
    /// records on them (`cache_page`): not logged.
    cached: Vec<(PageNo, Vec<u8>)>,
    done: bool,
}

impl<'s> StoreTx<'s> {
    pub(crate) fn new(store: &'s Store, txid: TxId) -> Self {
        StoreTx {
            store,
            txid,
            ops: Vec::new(),
            logged: 0,
            early_lsns: Vec::new(),
            early: Early::default(),
            early_at: None,
            log_bytes: 0,
            cached: Vec::new(),
            done: false,
        }
    }

    /// The store this transaction writes to.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// The transaction id.
    pub fn id(&self) -> TxId {
        self.txid
    }

    /// Whether the transaction has changed anything yet.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.early.is_empty()
    }

    /// Checks that `[addr, addr + len)` lies inside one allocated block and
    /// avoids the header fields the store owns.
    fn check_range(&self, addr: PAddr, len: usize) -> Result<()> {
        let st = self.store.lock();
        let (_, pages, off) = st.locate(addr).ok_or_else(|| {
            Error::invalid(format!("write at address {addr}: no allocated block there"))
        })?;
        let off = off as usize;
        let end = off + len;
        if end > pages as usize * st.page_size {
            return Err(Error::invalid(format!(
                "write of {len} bytes at address {addr} runs past its block"
            )));
        }
        if off < HEADER_SIZE && !(off >= USED_OFFSET && end <= USED_OFFSET + 4) {
            return Err(Error::invalid(format!(
                "write at address {addr} touches the page header (only the `used` field is writable)"
            )));
        }
        Ok(())
    }

    /// Records new bytes at `addr` (after-image only). Bytes past what one
    /// log record holds become several ranges.
    pub fn write(&mut self, addr: PAddr, data: &[u8]) -> Result<()> {
        self.check_range(addr, data.len())?;
        let most = max_range(1);
        for (i, chunk) in data.chunks(most).enumerate() {
            self.ops.push(Op::Range {
                addr: addr + (i * most) as u64,
                after: chunk.to_vec(),
                before: None,
            });
        }
        Ok(())
    }

    /// Records new bytes at `addr` together with the old ones (for records
    /// pushed to the log before commit, as QuickStore's recovery buffer does).
    pub fn write_with_before(&mut self, addr: PAddr, before: &[u8], after: &[u8]) -> Result<()> {
        if before.len() != after.len() {
            return Err(Error::invalid("before- and after-images differ in length"));
        }
        self.check_range(addr, after.len())?;
        let most = max_range(2);
        for (i, (a, b)) in after.chunks(most).zip(before.chunks(most)).enumerate() {
            self.ops.push(Op::Range {
                addr: addr + (i * most) as u64,
                after: a.to_vec(),
                before: Some(b.to_vec()),
            });
        }
        Ok(())
    }

    /// Records a whole page image (whole-page logging). For the first page of
    /// a block the store keeps its own header fields except `used`.
    pub fn write_page(&mut self, page: PageNo, image: &[u8]) -> Result<()> {
        let ps = self.store.page_size();
        if image.len() != ps {
            return Err(Error::invalid(format!(
                "page image of {} bytes; pages are {ps}",
                image.len()
            )));
        }
        {
            let st = self.store.lock();
            if st.fsm.block_of(page).is_none_or(|(h, _)| st.is_meta(h)) {
                return Err(Error::invalid(format!("page {page} is not allocated")));
            }
        }
        self.ops.push(Op::Page {
            page,
            image: image.to_vec(),
        });
        Ok(())
    }

    /// Caches `image` as page `page`'s committed image, without logging it
    /// (QuickStore's ESM schemes at the server, docs/design.md §11.7): at
    /// the commit, the range records wholly on cached pages are logged but
    /// not applied, and the images are laid over the committed state
    /// instead, as an in-memory page record is (the store keeps its own
    /// header fields but `used`). The caller vouches that each image is
    /// what the records on its page make of it, which recovery, replaying
    /// the records, rebuilds; a page of a block the transaction frees must
    /// not be cached.
    pub fn cache_page(&mut self, page: PageNo, image: &[u8]) -> Result<()> {
        let ps = self.store.page_size();
        if image.len() != ps {
            return Err(Error::invalid(format!(
                "cached image of {} bytes; pages are {ps}",
                image.len()
            )));
        }
        self.cached.push((page, image.to_vec()));
        Ok(())
    }

    /// Allocates a block of `pages` contiguous pages, formatted empty.
    pub fn alloc(&mut self, pages: u32, kind: BlockKind) -> Result<PageNo> {
        let page = self
            .store
            .lock()
            .fsm
            .reserve(pages)
            .map_err(Error::Invalid)?;
        self.ops.push(Op::Alloc {
            page,
            count: pages,
            kind,
        });
        Ok(page)
    }

    /// Allocates the specific block `[page, page + pages)`, which must be free
    /// (or beyond the end of the file).
    pub fn alloc_at(&mut self, page: PageNo, pages: u32, kind: BlockKind) -> Result<()> {
        self.store
            .lock()
            .fsm
            .reserve_at(page, pages)
            .map_err(Error::Invalid)?;
        self.ops.push(Op::Alloc {
            page,
            count: pages,
            kind,
        });
        Ok(())
    }

    /// Allocates the block `[page, page + pages)` that
    /// [`Store::reserve`] reserved: the commit makes it real, an abort
    /// gives it back.
    pub fn alloc_reserved(&mut self, page: PageNo, pages: u32, kind: BlockKind) -> Result<()> {
        let st = self.store.lock();
        if !st.fsm.is_reserved(page) || st.fsm.block_of(page) != Some((page, pages)) {
            return Err(Error::invalid(format!(
                "page {page} does not start a reserved block of {pages} pages"
            )));
        }
        drop(st);
        self.ops.push(Op::Alloc {
            page,
            count: pages,
            kind,
        });
        Ok(())
    }

    /// Frees the block whose first page is `page`; its pages become free when
    /// the transaction commits.
    pub fn free(&mut self, page: PageNo) -> Result<()> {
        let (head, count) = self.store.lock().fsm.block_of(page).ok_or_else(|| {
            Error::invalid(format!("free of page {page}, which is not allocated"))
        })?;
        if head != page {
            return Err(Error::invalid(format!(
                "free of page {page}, which is inside the block at {head}"
            )));
        }
        if self
            .ops
            .iter()
            .any(|o| matches!(o, Op::Free { page: p, .. } if *p == page))
        {
            return Err(Error::invalid(format!("page {page} freed twice")));
        }
        self.ops.push(Op::Free { page, count });
        Ok(())
    }

    /// Names `addr` (of type `type_id`) as root `name`; address 0 removes it.
    pub fn set_root(&mut self, name: &str, addr: PAddr, type_id: u32) -> Result<()> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::invalid("root names are 1 to 255 bytes"));
        }
        self.ops.push(Op::Root {
            name: name.to_string(),
            addr,
            type_id,
        });
        Ok(())
    }

    /// The named roots as this transaction sees them: the committed ones
    /// with its own `set_root`s applied, by name.
    pub fn roots(&self) -> Vec<RootEntry> {
        let mut roots: BTreeMap<String, RootEntry> = self
            .store
            .roots()
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        for op in &self.ops {
            if let Op::Root {
                name,
                addr,
                type_id,
            } = op
            {
                if *addr == 0 {
                    roots.remove(name);
                } else {
                    let r = RootEntry {
                        name: name.clone(),
                        addr: *addr,
                        type_id: *type_id,
                    };
                    roots.insert(name.clone(), r);
                }
            }
        }
        roots.into_values().collect()
    }

    /// Root `name` as this transaction sees it.
    pub fn root(&self, name: &str) -> Option<RootEntry> {
        let own = self.ops.iter().rev().find_map(|op| match op {
            Op::Root {
                name: n,
                addr,
                type_id,
            } if n == name => Some((*addr, *type_id)),
            _ => None,
        });
        match own {
            None => self.store.root(name),
            Some((0, _)) => None,
            Some((addr, type_id)) => Some(RootEntry {
                name: name.to_string(),
                addr,
                type_id,
            }),
        }
    }

    /// Registers a type descriptor; returns its new type id.
    pub fn define_type(&mut self, desc: &[u8]) -> Result<u32> {
        if desc.len() > u16::MAX as usize {
            return Err(Error::invalid("type descriptor longer than 65535 bytes"));
        }
        let type_id = {
            let mut st = self.store.lock();
            let id = st.next_type_id;
            if id > crate::format::objects::MAX_TYPE_ID {
                return Err(Error::invalid("the schema catalog is full"));
            }
            st.next_type_id += 1;
            id
        };
        self.ops.push(Op::Type {
            type_id,
            desc: desc.to_vec(),
        });
        Ok(type_id)
    }

    /// Pushes the changes buffered so far to the log now, without waiting for
    /// them to be durable. Recovery ignores them unless the transaction
    /// commits.
    ///
    /// Holds the gate shared while it appends: a checkpoint (which holds it
    /// exclusively from its cut to the log's recycling) has either finished
    /// before these records are appended, or starts after `early` names this
    /// transaction, and then refuses — it could not otherwise make the
    /// checkpoint LSN follow every record of finished transactions only, and
    /// its recycling would drop these records from the log.
    pub fn log_early(&mut self) -> Result<()> {
        if self.logged == self.ops.len() {
            return Ok(());
        }
        let store = self.store;
        let log = store.log()?;
        let ops = &self.ops[self.logged..];
        let batch = Batch::new(ops)?;
        let _g = store.gate_shared();
        {
            let mut st = store.lock();
            Core::check_poisoned(&st)?;
            st.early.insert(self.txid);
        }
        let recs = batch.records(ops, self.txid);
        self.log_bytes += Batch::bytes(&recs);
        let first = log.append(&recs)?;
        let lsns = batch.op_lsns(first, &recs);
        drop(recs);
        // What the commit needs of them: ranges as the bytes they leave,
        // the rest as they are.
        let new: Vec<(Op, u64)> = self.ops.drain(self.logged..).zip(lsns).collect();
        let (kept, closed_at) = self.early.absorb(&store.lock(), new);
        if let Some(at) = closed_at {
            self.early_at = Some(self.logged + at);
        }
        for (op, lsn) in kept {
            self.ops.push(op);
            self.early_lsns.push(lsn);
        }
        self.logged = self.ops.len();
        log.write_out()
    }

    /// Commits: returns once the transaction is durable and applied to the
    /// committed state. A checkpoint it finds due is left to the
    /// checkpointer thread.
    pub fn commit(self) -> Result<CommitInfo> {
        Self::commit_all(vec![self])
            .pop()
            .unwrap_or_else(|| Err(Error::internal("a commit of one transaction answered none")))
    }

    /// Commits `txs` (of one store), in order, with one sync of the log for
    /// them all: each is appended to the log, then the log is synced past
    /// the last, then each is applied in its turn. What `amber-server`'s
    /// committer does with the commits its connections queued. Each gets
    /// its own outcome; a failed sync fails every one appended (whether
    /// they reached the disk is unknown, and the store refuses further
    /// changes until reopened).
    pub fn commit_all(txs: Vec<StoreTx<'s>>) -> Vec<Result<CommitInfo>> {
        let Some(store) = txs.first().map(|t| t.store) else {
            return Vec::new();
        };
        let (out, due) = {
            // Held once for the batch: no checkpoint cuts between a commit's
            // append and its apply. (Taking it again per transaction could
            // wait behind a checkpoint that waits for this batch.)
            let _g = store.gate_shared();
            let logged: Vec<Result<Logged<'s>>> = (txs.into_iter())
                .map(|t| match std::ptr::eq(t.store, store) {
                    true => t.append(),
                    false => Err(Error::invalid("commit_all: a transaction of another store")),
                })
                .collect();
            let mut appended = logged.iter().filter_map(|l| l.as_ref().ok());
            if let Some(last) = appended.rfind(|l| l.has_records()) {
                // A failure is each one's to report, from its own sync.
                let _ = last.sync();
            }
            let mut due = false;
            let out = (logged.into_iter())
                .map(|l| {
                    let (info, d) = l?.apply()?;
                    due |= d;
                    Ok(info)
                })
                .collect::<Vec<_>>();
            (out, due)
        };
        if due {
            store.requests.request();
        }
        out
    }

    /// A commit's first half, under the gate: the transaction's records and
    /// its commit record appended to the log. On an error nothing of it is
    /// in the log.
    fn append(mut self) -> Result<Logged<'s>> {
        self.done = true;
        let store = self.store;
        if self.is_empty() {
            return Ok(Logged::nothing(store));
        }
        let log = store.log()?;
        let sound = Core::check_poisoned(&store.lock());
        if let Err(e) = sound {
            self.release();
            return Err(e);
        }
        let ops = &self.ops[self.logged..];
        let batch = match Batch::new(ops) {
            Ok(b) => b,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        let recs = batch.records(ops, self.txid);
        let records_len = Batch::bytes(&recs);
        let bytes = records_len + COMMIT_SIZE as u64;
        let appended = log.append_commit(&recs, self.txid);
        // Each op's LSN: the records end where the commit record starts.
        let lsns: Vec<u64> = match &appended {
            Ok(a) => (self.early_lsns.iter().copied())
                .chain(batch.op_lsns(a.commit_lsn - records_len, &recs))
                .collect(),
            Err(_) => Vec::new(),
        };
        drop(recs);
        match appended {
            Ok(appended) => Ok(Logged::new(
                store,
                LoggedTx {
                    // From here the commit holds a turn in the apply order;
                    // every way out (dropping it) finishes the turn.
                    turn: store.order.turn(appended.seq),
                    log,
                    txid: self.txid,
                    ops: std::mem::take(&mut self.ops),
                    lsns,
                    early: std::mem::take(&mut self.early),
                    early_at: self.early_at.unwrap_or(self.logged),
                    appended,
                    log_bytes: self.log_bytes + bytes,
                    cached: std::mem::take(&mut self.cached),
                },
            )),
            Err(e) => {
                self.release();
                Err(e)
            }
        }
    }

    /// Abandons the transaction.
    pub fn abort(mut self) {
        self.done = true;
        self.release();
    }

    /// Abandons the transaction but keeps the blocks it allocated reserved
    /// for the rest of the session (a checkpoint writes reserved pages as
    /// free, so a later session reuses them): the object layer's dead space,
    /// which stale pointers of this session may still lead to.
    pub fn abandon(mut self) {
        self.done = true;
        self.store.forget_tx(self.txid);
        self.ops.clear();
        self.early = Early::default();
    }

    /// Returns reserved allocations and forgets early-logged state.
    fn release(&mut self) {
        let mut st = self.store.lock();
        for op in &self.ops {
            if let Op::Alloc { page, .. } = op {
                st.fsm.unreserve(*page);
            }
        }
        st.early.remove(&self.txid);
        self.ops.clear();
    }
}

impl Drop for StoreTx<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.release();
        }
    }
}
