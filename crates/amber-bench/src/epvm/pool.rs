//! ESM's client buffer pool, as the call-interface baselines use it: a
//! fixed number of page frames over the store's pages, a page table, pin
//! counts, clock replacement of unpinned frames, and updates made through
//! a call that changes the frame and generates a log record at once.
//!
//! - **Pin** (`pin`): finds the page in the page table or reads it from
//!   the store into a free or replaced frame (one `read_block`: the store
//!   checks the checksum and lays committed changes over the page-file
//!   image), checks its kind, and counts a pin. What the caller gets back
//!   is a [`Ud`], ESM's *user descriptor*: the frame and the record's
//!   offset, through which it reads the record's bytes directly, as often
//!   as it likes, until it unpins.
//! - **Update** (`update`): writes new bytes into the pinned record and
//!   appends a log record with the old and the new bytes to the store
//!   transaction at once (`StoreTx::write_with_before`); every
//!   [`LOG_EARLY_RECORDS`] records are pushed to the log without a sync
//!   (`StoreTx::log_early`), as ESM's client ships full log pages to its
//!   server while the transaction runs. The commit appends the rest and
//!   syncs.
//! - **Replacement**: the clock hand sweeps the frames, giving a second
//!   chance to those referenced since its last pass, and takes the first
//!   unpinned one. A dirty victim (changed by the open transaction) is kept
//!   beside the pool until the transaction ends, as ESM's client ships a
//!   dirty page to its server, so that reading it again sees the
//!   transaction's changes; such a read counts as `shipped`, not as a read
//!   of the store. Pages stay cached across transactions (ESM's
//!   inter-transaction caching).
//!
//! **(choice)** Clock rather than LRU: ESM's paper does not name its
//! policy; clock is what a buffer manager of the time would use, and costs
//! no list updates on a hit.

use amber::internals::fasthash::IntMap;
use amber::internals::store::{Store, StoreTx};

use super::rawdb::{self, PAGE, PageKind};
use crate::oo1::engine::{EngineError, ResultExt};

/// Log records buffered before they are pushed to the log (about two of
/// ESM's 8 KB log pages of 32-byte update records).
pub const LOG_EARLY_RECORDS: usize = 512;

/// A user descriptor: where a pinned record lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ud {
    pub frame: u32,
    pub offset: u16,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Pages read from the store (the paper's client I/Os).
    pub reads: u64,
    /// Dirty pages read back from beside the pool.
    pub shipped: u64,
    /// Pages replaced.
    pub evictions: u64,
    /// Log records generated.
    pub records: u64,
}

/// Why a pin could not be served.
#[derive(Debug)]
pub enum PinError {
    /// Every frame is pinned.
    Full,
    /// The store failed or the page is not what the OID says.
    Engine(EngineError),
}

impl From<EngineError> for PinError {
    fn from(e: EngineError) -> Self {
        PinError::Engine(e)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Frame {
    page: Option<u64>,
    pins: u32,
    dirty: bool,
    referenced: bool,
}

/// The buffer pool.
pub struct Pool {
    bytes: Vec<u8>,
    frames: Vec<Frame>,
    table: IntMap<u64, u32>,
    hand: usize,
    /// Dirty pages replaced during the open transaction.
    shipped: IntMap<u64, Vec<u8>>,
    /// Records generated since the last push to the log.
    unpushed: usize,
    pub stats: PoolStats,
}

impl Pool {
    /// A pool of `frames` page frames.
    pub fn new(frames: usize) -> Pool {
        Pool {
            bytes: vec![0; frames * PAGE],
            frames: vec![Frame::default(); frames],
            table: IntMap::default(),
            hand: 0,
            shipped: IntMap::default(),
            unpushed: 0,
            stats: PoolStats::default(),
        }
    }

    /// Frames in the pool.
    pub fn capacity(&self) -> usize {
        self.frames.len()
    }

    /// Pins the record `oid` of a page of `kind`.
    pub fn pin(&mut self, store: &Store, oid: u64, kind: PageKind) -> Result<Ud, PinError> {
        let (page, offset) = rawdb::split(oid, kind)?;
        let frame = match self.table.get(&page) {
            Some(&f) => f,
            None => self.fetch(store, page, kind)?,
        };
        let f = &mut self.frames[frame as usize];
        f.pins += 1;
        f.referenced = true;
        Ok(Ud {
            frame,
            offset: offset as u16,
        })
    }

    /// Releases one pin of `ud`'s page.
    pub fn unpin(&mut self, ud: Ud) {
        let f = &mut self.frames[ud.frame as usize];
        f.pins = f.pins.saturating_sub(1);
    }

    /// The record `ud` describes, `len` bytes.
    #[inline]
    pub fn record(&self, ud: Ud, len: usize) -> &[u8] {
        let at = ud.frame as usize * PAGE + usize::from(ud.offset);
        &self.bytes[at..at + len]
    }

    /// Writes `new` at `at` bytes into the record `ud` and logs the change
    /// (old and new bytes) in `tx` at once.
    pub fn update(
        &mut self,
        tx: &mut StoreTx<'_>,
        ud: Ud,
        at: usize,
        new: &[u8],
    ) -> Result<(), EngineError> {
        let frame = &mut self.frames[ud.frame as usize];
        let page = frame.page.ok_or_else(|| {
            EngineError::bad_input(format!("update through frame {} holding no page", ud.frame))
        })?;
        frame.dirty = true;
        let start = ud.frame as usize * PAGE + usize::from(ud.offset) + at;
        let old = self.bytes[start..start + new.len()].to_vec();
        self.bytes[start..start + new.len()].copy_from_slice(new);
        let addr = page * PAGE as u64 + u64::from(ud.offset) + at as u64;
        tx.write_with_before(addr, &old, new)
            .ctx("logging an update")?;
        self.stats.records += 1;
        self.unpushed += 1;
        if self.unpushed >= LOG_EARLY_RECORDS {
            tx.log_early().ctx("pushing log records")?;
            self.unpushed = 0;
        }
        Ok(())
    }

    /// The transaction ended (committed): its changes are the store's now,
    /// so no page is dirty and nothing is kept beside the pool.
    pub fn end_transaction(&mut self) {
        for f in &mut self.frames {
            f.dirty = false;
        }
        self.shipped.clear();
        self.unpushed = 0;
    }

    /// Brings `page` into a frame.
    fn fetch(&mut self, store: &Store, page: u64, kind: PageKind) -> Result<u32, PinError> {
        let frame = self.victim().ok_or(PinError::Full)?;
        // A page changed by the open transaction comes back from beside
        // the pool, still dirty: replaced again, it must be kept again.
        let (image, dirty) = match self.shipped.remove(&page) {
            Some(image) => {
                self.stats.shipped += 1;
                (image, true)
            }
            None => {
                self.stats.reads += 1;
                let image = store
                    .read_block(page)
                    .ctx(&format!("reading page {page}"))?;
                (image, false)
            }
        };
        rawdb::check_page(page, &image, kind)?;
        if image.len() != PAGE {
            return Err(EngineError::corrupt(format!(
                "page {page} is a block of {} bytes, not one page",
                image.len()
            ))
            .into());
        }
        let f = frame as usize;
        if let Some(old) = self.frames[f].page.take() {
            self.table.remove(&old);
            self.stats.evictions += 1;
            if self.frames[f].dirty {
                self.shipped
                    .insert(old, self.bytes[f * PAGE..(f + 1) * PAGE].to_vec());
            }
        }
        self.bytes[f * PAGE..(f + 1) * PAGE].copy_from_slice(&image);
        self.frames[f] = Frame {
            page: Some(page),
            pins: 0,
            dirty,
            referenced: true,
        };
        self.table.insert(page, frame);
        Ok(frame)
    }

    /// A frame to reuse: a free one, or the clock's choice among the
    /// unpinned; `None` when all are pinned.
    fn victim(&mut self) -> Option<u32> {
        let n = self.frames.len();
        // Two sweeps: the first clears reference bits, the second finds an
        // unpinned frame if there is one.
        for _ in 0..2 * n + 1 {
            let i = self.hand;
            self.hand = (self.hand + 1) % n.max(1);
            let f = self.frames.get_mut(i)?;
            if f.page.is_none() {
                return Some(i as u32);
            }
            if f.pins > 0 {
                continue;
            }
            if f.referenced {
                f.referenced = false;
                continue;
            }
            return Some(i as u32);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oo1::database::{GenParams, generate};
    use rawdb::{PART_SIZE, PARTS_PER_PAGE, RECORDS_AT, field};

    /// A database of 400 parts (11 part pages) and its store.
    fn store(dir: &std::path::Path) -> Store {
        let data = generate(GenParams {
            parts: 400,
            seed: 3,
        })
        .expect("parameters");
        rawdb::build(dir, &data).expect("build");
        rawdb::open(dir).expect("open")
    }

    fn oid_of(store: &Store, id: u32) -> u64 {
        let d = rawdb::Directory::read(store).expect("directory");
        let (page, at) = d.entry(id).expect("entry");
        rawdb::u64_at(&store.read_block(page).expect("index page"), at)
    }

    #[test]
    fn pins_hit_replace_and_refuse_when_full() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = store(dir.path());
        let mut pool = Pool::new(2);
        let first = pool
            .pin(&store, oid_of(&store, 1), PageKind::Parts)
            .expect("pin");
        assert_eq!(rawdb::u32_at(pool.record(first, PART_SIZE), field::ID), 1);
        // Part 2 is on the same page: a hit.
        let second = pool
            .pin(&store, oid_of(&store, 2), PageKind::Parts)
            .expect("pin");
        assert_eq!(second.frame, first.frame);
        assert_eq!(pool.stats.reads, 1);
        let far = 1 + PARTS_PER_PAGE as u32;
        let third = pool
            .pin(&store, oid_of(&store, far), PageKind::Parts)
            .expect("pin");
        assert_ne!(third.frame, first.frame);
        // Both frames pinned: a third page cannot come in.
        let farther = 1 + 2 * PARTS_PER_PAGE as u32;
        assert!(matches!(
            pool.pin(&store, oid_of(&store, farther), PageKind::Parts),
            Err(PinError::Full)
        ));
        // Unpinned, the first page is replaced (after its second chance).
        pool.unpin(first);
        pool.unpin(second);
        let fourth = pool
            .pin(&store, oid_of(&store, farther), PageKind::Parts)
            .expect("pin");
        assert_eq!(fourth.frame, first.frame);
        assert_eq!((pool.stats.reads, pool.stats.evictions), (3, 1));
        assert_eq!(
            rawdb::u32_at(pool.record(fourth, PART_SIZE), field::ID),
            farther
        );
    }

    #[test]
    fn an_oid_of_the_wrong_kind_is_an_error() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = store(dir.path());
        let mut pool = Pool::new(4);
        let d = rawdb::Directory::read(&store).expect("directory");
        let index_record = d.index_pages[0] * PAGE as u64 + RECORDS_AT as u64;
        match pool.pin(&store, index_record, PageKind::Parts) {
            Err(PinError::Engine(e)) => assert!(e.to_string().contains("not a Parts page"), "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn updates_are_logged_and_survive_replacement_and_commit() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = store(dir.path());
        let mut pool = Pool::new(1);
        let oid = oid_of(&store, 5);
        let far = oid_of(&store, 1 + PARTS_PER_PAGE as u32);
        let mut tx = store.begin().expect("begin");
        let ud = pool.pin(&store, oid, PageKind::Parts).expect("pin");
        let x = rawdb::i32_at(pool.record(ud, PART_SIZE), field::X);
        pool.update(&mut tx, ud, field::X, &(x + 1).to_le_bytes())
            .expect("update");
        pool.unpin(ud);
        // Replaced while dirty, then read again: the change is still there,
        // from beside the pool, not from the store.
        let other = pool.pin(&store, far, PageKind::Parts).expect("pin");
        pool.unpin(other);
        let ud = pool.pin(&store, oid, PageKind::Parts).expect("pin");
        assert_eq!(rawdb::i32_at(pool.record(ud, PART_SIZE), field::X), x + 1);
        assert_eq!(pool.stats.shipped, 1);
        pool.unpin(ud);
        // Replaced again without a new update: still kept beside the pool.
        let other = pool.pin(&store, far, PageKind::Parts).expect("pin");
        pool.unpin(other);
        let ud = pool.pin(&store, oid, PageKind::Parts).expect("pin");
        assert_eq!(rawdb::i32_at(pool.record(ud, PART_SIZE), field::X), x + 1);
        assert_eq!(pool.stats.shipped, 2);
        pool.unpin(ud);
        assert_eq!(pool.stats.records, 1);
        tx.commit().expect("commit");
        pool.end_transaction();
        // Committed: the store has it.
        let (page, at) = rawdb::split(oid, PageKind::Parts).expect("oid");
        let image = store.read_block(page).expect("read");
        assert_eq!(rawdb::i32_at(&image, at + field::X), x + 1);
    }
}
