//! A commit's second half: a transaction whose records are in the log
//! (`StoreTx::append`), made durable and applied to the committed state.
//! Split from the first so that one thread can append several
//! transactions, sync the log once for them all and apply them in order
//! (`StoreTx::commit_all`).

use super::Store;
use super::early::Early;
use super::order::Turn;
use super::tx::{CommitInfo, Op};
use crate::error::{Error, Result};
use crate::format::PageNo;
use std::collections::HashSet;
use crate::wal::TxId;
use crate::wal::writer::{Appended, LogWriter};

/// A transaction appended to the log: [`sync`](Self::sync) makes it
/// durable (with everything appended before it), [`apply`](Self::apply)
/// makes it part of the committed state. Dropped unapplied, its commit is
/// in the log but not in memory: the store refuses further changes until
/// it is reopened, whose recovery replays it.
pub(crate) struct Logged<'s> {
    store: &'s Store,
    /// `None` for a transaction that changed nothing.
    inner: Option<LoggedTx<'s>>,
}

/// What applying a logged transaction needs.
pub(crate) struct LoggedTx<'s> {
    pub(crate) turn: Turn<'s>,
    pub(crate) log: &'s LogWriter,
    pub(crate) txid: TxId,
    pub(crate) ops: Vec<Op>,
    /// Each op's LSN.
    pub(crate) lsns: Vec<u64>,
    /// The range records logged early, applied before `ops[early_at]`.
    pub(crate) early: Early,
    pub(crate) early_at: usize,
    pub(crate) appended: Appended,
    pub(crate) log_bytes: u64,
    /// Page images laid over the committed state in place of the range
    /// records wholly on them (`StoreTx::cache_page`).
    pub(crate) cached: Vec<(PageNo, Vec<u8>)>,
}

impl<'s> Logged<'s> {
    pub(crate) fn new(store: &'s Store, inner: LoggedTx<'s>) -> Self {
        Logged {
            store,
            inner: Some(inner),
        }
    }

    pub(crate) fn nothing(store: &'s Store) -> Self {
        Logged { store, inner: None }
    }

    /// Whether it put records in the log (a transaction that changed
    /// nothing did not).
    pub(crate) fn has_records(&self) -> bool {
        self.inner.is_some()
    }

    /// Returns once the log is durable up to this commit, sharing the sync
    /// with concurrent committers (at no cost when it already is). On a
    /// failure whether the commit reached the disk is unknown: the store
    /// refuses further changes until reopened.
    pub(crate) fn sync(&self) -> Result<()> {
        let Some(t) = &self.inner else {
            return Ok(());
        };
        t.log.sync_to(t.appended.end).inspect_err(|e| {
            let mut st = self.store.lock();
            st.poisoned.get_or_insert_with(|| e.to_string());
            st.early.remove(&t.txid);
        })
    }

    /// Syncs, then applies the commit to the committed state in its turn
    /// (after every commit appended before it). Returns what it committed
    /// and whether a checkpoint is due, which the caller requests once it
    /// has let go of the gate.
    pub(crate) fn apply(mut self) -> Result<(CommitInfo, bool)> {
        self.sync()?;
        let Some(mut t) = self.inner.take() else {
            return Ok((CommitInfo::default(), false));
        };
        let store = self.store;
        store.publish_end(t.log.durable_lsn());
        t.turn.wait();
        let mut st = store.lock();
        st.early.remove(&t.txid);
        let commit_lsn = t.appended.commit_lsn;
        let shift = st.shift();
        let cached: HashSet<PageNo> = t.cached.iter().map(|(p, _)| *p).collect();
        // A range wholly on cached pages is not redone: the image is laid.
        // (Every op is redone in a commit that cached no page: a local
        // commit, or REDO and WPL through a server.)
        let redo = |op: &Op| match op {
            _ if cached.is_empty() => true,
            Op::Range { addr, after, .. } if !after.is_empty() => {
                let last = (addr + after.len() as u64 - 1) >> shift;
                !((addr >> shift)..=last).all(|p| cached.contains(&p))
            }
            _ => true,
        };
        for (i, op) in t.ops.iter().map(Some).chain([None]).enumerate() {
            let mut result = Ok(());
            if i == t.early_at.min(t.ops.len()) {
                result = t.early.apply(&mut st, t.txid, commit_lsn);
            }
            if let (Ok(()), Some(op)) = (&result, op)
                && redo(op)
            {
                result = st.apply(&op.record(t.txid), t.lsns[i], commit_lsn, false);
            }
            if let (Ok(()), None) = (&result, op) {
                result = (t.cached.iter()).try_for_each(|(p, img)| st.lay_cached(*p, img, commit_lsn));
            }
            if let Err(what) = result {
                // The log holds the commit; the in-memory state could not
                // follow. Reopening rebuilds it from the log.
                st.poisoned = Some(format!("applying a committed change failed: {what}"));
                return Err(Error::Poisoned {
                    cause: what.to_string(),
                });
            }
        }
        let due = store.checkpoint_due(&st, t.appended.end);
        drop(st);
        let info = CommitInfo {
            commit_lsn: t.appended.commit_lsn,
            log_bytes: t.log_bytes,
            ..CommitInfo::default()
        };
        Ok((info, due))
    }
}

impl Drop for Logged<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.inner.take() {
            let mut st = self.store.lock();
            st.poisoned
                .get_or_insert_with(|| "a commit appended to the log was not applied".into());
            st.early.remove(&t.txid);
        }
    }
}
