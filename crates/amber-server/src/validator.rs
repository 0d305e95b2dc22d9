//! Backward validation at page granularity: which recent commits a
//! committing transaction must not have read (docs/design.md §11).
//!
//! A database's validator keeps the commits validated lately, each with
//! the pages it writes and, once it is in the log, its commit record's
//! LSN. A transaction that began at snapshot `S` (the LSN its reads see up
//! to) conflicts with every entry that is not in `S` — not logged yet, or
//! logged at or past `S` — and writes a page it may have read. Validation
//! and the entry it pushes happen under one mutex, so the validation order
//! is a total order: the serial order of the committed transactions.
//!
//! Entries are dropped once every open transaction's snapshot holds them:
//! a transaction begun later starts past them (its snapshot is taken after
//! their commit is durable).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

pub use amber::internals::wire::ROOT_PAGE;

/// A set of pages.
pub type Pages = HashSet<u64>;

/// One database's recent commits.
#[derive(Debug, Default)]
pub struct Validator {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_seq: u64,
    entries: Vec<Entry>,
    /// The snapshot of each connection's open transaction.
    open: HashMap<u64, u64>,
}

#[derive(Debug)]
struct Entry {
    seq: u64,
    /// The commit record's LSN, once the commit is in the log.
    lsn: Option<u64>,
    written: Pages,
}

/// Why a transaction may not commit: the first page found that a commit
/// outside its snapshot wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict {
    /// The page ([`ROOT_PAGE`] for the root directory).
    pub page: u64,
    /// That commit's LSN, if it is logged yet.
    pub lsn: Option<u64>,
}

impl Validator {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connection `conn` opens a transaction at snapshot `snapshot`.
    pub fn begin(&self, conn: u64, snapshot: u64) {
        let mut v = self.lock();
        v.open.insert(conn, snapshot);
        v.prune();
    }

    /// How many transactions are open (a committing one included, until
    /// its answer is made).
    pub fn open_transactions(&self) -> usize {
        self.lock().open.len()
    }

    /// Connection `conn`'s transaction ended without a commit to record.
    pub fn end(&self, conn: u64) {
        let mut v = self.lock();
        v.open.remove(&conn);
        v.prune();
    }

    /// Validates a transaction that began at
    /// `snapshot`, may have read the pages in `read` and in `written`, and
    /// writes those of `written`: `Ok(seq)` and its entry is pushed
    /// (logged at [`logged`](Self::logged), or dropped by
    /// [`failed`](Self::failed)), or the conflict. The transaction stays
    /// open until [`end`](Self::end): its commit's answer needs the entries
    /// since its snapshot ([`written_since`](Self::written_since)).
    pub fn validate(&self, snapshot: u64, read: &Pages, written: Pages) -> Result<u64, Conflict> {
        let mut v = self.lock();
        let outside = |e: &&Entry| e.lsn.is_none_or(|l| l >= snapshot);
        for e in v.entries.iter().filter(outside) {
            let hit = [read, &written].into_iter().find_map(|set| {
                // The smaller set is walked.
                if e.written.len() <= set.len() {
                    e.written.iter().find(|p| set.contains(p))
                } else {
                    set.iter().find(|p| e.written.contains(p))
                }
            });
            if let Some(&page) = hit {
                let c = Conflict { page, lsn: e.lsn };
                v.prune();
                return Err(c);
            }
        }
        let seq = v.next_seq;
        v.next_seq += 1;
        if !written.is_empty() {
            v.entries.push(Entry {
                seq,
                lsn: None,
                written,
            });
        }
        Ok(seq)
    }

    /// Entry `seq`'s commit record is at `lsn` in the log, durable.
    /// The pages written by the commits other than `seq` that are not in
    /// snapshot `snapshot` (no LSN yet, or at or past it): what else may
    /// have changed since that snapshot.
    pub fn written_since(&self, seq: u64, snapshot: u64) -> Pages {
        let v = self.lock();
        (v.entries.iter())
            .filter(|e| e.seq != seq && e.lsn.is_none_or(|l| l >= snapshot))
            .flat_map(|e| e.written.iter().copied())
            .collect()
    }

    pub fn logged(&self, seq: u64, lsn: u64) {
        let mut v = self.lock();
        if let Some(e) = v.entries.iter_mut().find(|e| e.seq == seq) {
            e.lsn = Some(lsn);
        }
        v.prune();
    }

    /// Entry `seq`'s commit failed: nothing of it is committed.
    pub fn failed(&self, seq: u64) {
        let mut v = self.lock();
        v.entries.retain(|e| e.seq != seq);
    }

    /// How many entries are kept (tests).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Drops the logged entries every open transaction's snapshot holds.
    fn prune(&mut self) {
        let oldest = self.open.values().copied().min().unwrap_or(u64::MAX);
        self.entries.retain(|e| e.lsn.is_none_or(|l| l >= oldest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(p: &[u64]) -> Pages {
        p.iter().copied().collect()
    }

    #[test]
    fn a_commit_outside_the_snapshot_conflicts_with_its_readers_only() {
        let v = Validator::default();
        v.begin(1, 100);
        v.begin(2, 100);
        v.begin(3, 100);
        let s1 = v.validate(100, &pages(&[5, 6]), pages(&[5])).unwrap();
        // Not logged yet: outside every snapshot.
        let c = v.validate(100, &pages(&[5]), pages(&[5])).unwrap_err();
        assert_eq!(c, Conflict { page: 5, lsn: None });
        v.logged(s1, 150);
        // Logged past 3's snapshot: still a conflict; a disjoint one is not.
        assert!(v.validate(100, &pages(&[7]), pages(&[7])).is_ok());
        v.begin(2, 100);
        let c = v.validate(100, &pages(&[5]), pages(&[])).unwrap_err();
        assert_eq!(c.lsn, Some(150));
        // A snapshot past it holds it.
        v.begin(4, 200);
        assert!(v.validate(200, &pages(&[5]), pages(&[5])).is_ok());
    }

    #[test]
    fn entries_go_once_every_open_snapshot_holds_them() {
        let v = Validator::default();
        v.begin(1, 10);
        v.begin(2, 10);
        let s = v.validate(10, &pages(&[1]), pages(&[1])).unwrap();
        v.logged(s, 20);
        // 1 stays open until its answer is made.
        assert_eq!(
            v.written_since(s, 10),
            pages(&[]),
            "no other commit since 10"
        );
        v.end(1);
        assert_eq!(v.len(), 1, "2's snapshot is before it");
        v.end(2);
        assert!(v.is_empty());
        v.begin(3, 30);
        let s = v.validate(30, &pages(&[1]), pages(&[1])).unwrap();
        v.failed(s);
        assert!(v.is_empty());
    }
}
