//! The object server's log of committed modifications not yet installed,
//! kept in non-volatile memory: entries grouped by the page they belong to,
//! the pages waiting for an installation read in a [`Pool`] by cylinder
//! (what SPTF chooses from) and in arrival order (what FIFO and the age
//! weight need).

use std::collections::{BTreeSet, HashMap};

use super::pool::{Layout, Pool};

/// A committed modification waiting to be installed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    /// The commit's number.
    pub commit: u64,
    /// The page version the commit made.
    pub version: u32,
    /// When it entered the log, ms.
    pub logged: f64,
}

/// The pending modifications of one page.
#[derive(Clone, Debug)]
pub struct Pending {
    /// Arrival order of the first entry.
    pub seq: u64,
    /// Arrival time of the first entry, ms.
    pub since: f64,
    /// The entries, in commit order.
    pub entries: Vec<Entry>,
    /// Whether a read of the page is under way (it is then not a candidate).
    pub reading: bool,
}

/// The object log.
#[derive(Clone, Debug)]
pub struct ObjectLog {
    capacity: usize,
    pages: HashMap<u32, Pending>,
    len: usize,
    pool: Pool,
    order: BTreeSet<(u64, u32)>,
    next_seq: u64,
}

impl ObjectLog {
    /// An empty log holding up to `capacity` entries.
    pub fn new(layout: &Layout, capacity: usize) -> Self {
        Self {
            capacity,
            pages: HashMap::new(),
            len: 0,
            pool: Pool::new(layout),
            order: BTreeSet::new(),
            next_seq: 0,
        }
    }

    /// Entries in the log.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the log holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every entry slot is taken.
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Pages waiting for an installation read (no read under way).
    pub fn candidates(&self) -> &Pool {
        &self.pool
    }

    /// Pending modifications of `page`.
    pub fn pending(&self, page: u32) -> Option<&Pending> {
        self.pages.get(&page)
    }

    /// Arrival time of `page`'s first pending entry, ms.
    pub fn since(&self, page: u32) -> f64 {
        self.pages.get(&page).map_or(0.0, |p| p.since)
    }

    /// The candidate page whose first entry is oldest, and its arrival time.
    pub fn oldest(&self) -> Option<(u32, f64)> {
        let &(_, page) = self.order.first()?;
        Some((page, self.since(page)))
    }

    /// Appends `entry` for `page` at time `now`; `reading` says a read of
    /// the page is under way (its entries are installed when it completes).
    pub fn append(&mut self, layout: &Layout, page: u32, entry: Entry, now: f64, reading: bool) {
        self.len += 1;
        if let Some(p) = self.pages.get_mut(&page) {
            p.entries.push(entry);
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pages.insert(
            page,
            Pending {
                seq,
                since: now,
                entries: vec![entry],
                reading,
            },
        );
        if !reading {
            self.pool.insert(layout, page);
            self.order.insert((seq, page));
        }
    }

    /// A read of `page` starts: it stops being a candidate.
    pub fn start_read(&mut self, layout: &Layout, page: u32) {
        if let Some(p) = self.pages.get_mut(&page)
            && !p.reading
        {
            p.reading = true;
            self.pool.remove(layout, page);
            self.order.remove(&(p.seq, page));
        }
    }

    /// Removes and returns `page`'s entries: they are being installed.
    pub fn take(&mut self, layout: &Layout, page: u32) -> Vec<Entry> {
        let Some(p) = self.pages.remove(&page) else {
            return Vec::new();
        };
        if !p.reading {
            self.pool.remove(layout, page);
            self.order.remove(&(p.seq, page));
        }
        self.len -= p.entries.len();
        p.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_a_page_are_installed_together() {
        let l = Layout {
            pages: 100,
            sectors_per_page: 8,
            first_lbn: 0,
            sectors_per_bucket: 1368,
        };
        let mut log = ObjectLog::new(&l, 3);
        let e = |c| Entry {
            commit: c,
            version: c as u32,
            logged: 0.0,
        };
        log.append(&l, 9, e(1), 1.0, false);
        log.append(&l, 4, e(2), 2.0, false);
        log.append(&l, 9, e(3), 3.0, false);
        assert!(log.is_full());
        assert_eq!(log.candidates().len(), 2);
        assert_eq!(log.oldest(), Some((9, 1.0)));
        log.start_read(&l, 9);
        assert_eq!(log.oldest(), Some((4, 2.0)));
        assert_eq!(log.take(&l, 9), vec![e(1), e(3)]);
        assert_eq!(log.len(), 1);
        assert!(!log.is_full());
        assert_eq!(log.take(&l, 9), vec![]);
    }
}
