//! Checkpoints: installing committed changes into the page file, then
//! recycling the log.
//!
//! Steps, and why a crash at any point is safe:
//!
//! 0. The cut, under the gate (exclusive: no record is appended until the
//!    checkpoint ends) and the state lock: the checkpoint LSN-to-be is the
//!    end of the log; the pending changes move, shared, to the changes being
//!    installed (`State::installing`), where reads still find them; the new
//!    metadata blobs (free-space map, roots, catalog) are built into freshly
//!    allocated blocks (shadow paging: the old blobs stay untouched).
//! 1. Installation reads, without the state lock: every block whose changes
//!    lie over its page-file image is read from the page file (checksum
//!    verified), its pages in the WPL table read from the log (checksum
//!    verified; the log is recycled only at step 6) and laid over it, and
//!    the changes laid over that; blocks whose whole image is in memory are
//!    copied.
//! 2. The images are sealed (LSN, checksum), still without the lock; then,
//!    under it for a moment, they replace the changes being installed, so
//!    that from here on no read of a block about to be written uses the
//!    page file. Nothing has been written yet.
//! 3. An intent record listing every block about to be written, with its new
//!    checksum, is appended and synced. From here a crash leaves the old
//!    superblock in charge and recovery replays the whole log since the old
//!    checkpoint, checking torn blocks against the intent (`recovery.rs`).
//! 4. The blocks are written and the page file synced.
//! 5. The superblock copy that is not the newest is overwritten with the new
//!    checkpoint LSN and blob locations, and synced: the atomic switch. A torn
//!    superblock write damages only that copy; the other still describes the
//!    previous, intact checkpoint. Then the other copy is written too, so that
//!    both describe the new checkpoint and a later flipped byte in either one
//!    leaves an identical twin.
//! 6. Under the lock for a moment, the in-memory state switches: the new
//!    superblock, the installed changes dropped (the page file holds them
//!    now; they are freed after the lock is let go), the old blobs' blocks
//!    freed (the new free-space map already shows them free). Then the log is recycled by writing a new log header (both
//!    copies, one after the other) whose base LSN is the new checkpoint LSN.
//!    If the header write is lost, recovery reads the old header and skips
//!    to the checkpoint LSN; no record is appended before both copies are
//!    written.
//!
//! A failure before step 4 undoes the cut (the new blobs' blocks are freed)
//! and leaves the store usable; any failure from step 4 on poisons it (the
//! page file, then the superblock, are in a state memory no longer
//! describes). What a concurrent read and a concurrent commit see at each
//! step is argued in docs/design.md §3.1.

use super::pending::{Base, Patch};
use super::state::{Changes, State};
use super::{Core, corrupt, wpl};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::PageNo;
use crate::format::meta::{self, MetaKind, RootEntry, blob_pages};
use crate::format::page::{self, BlockKind};
use crate::format::superblock::{SLOT_OFFSETS, Superblock};
use crate::io::IoFile;
use crate::store::alloc::FreeSpace;
use crate::wal::Record;
use crate::wal::record::MAX_INTENT;
use crate::wal::writer::LogWriter;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// What a checkpoint did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Data blocks installed.
    pub blocks: u64,
    /// Bytes written to the page file (metadata included).
    pub bytes: u64,
    /// The new checkpoint LSN.
    pub lsn: u64,
}

/// Blob heads (free-space map, roots, catalog) and sealed block images.
pub(crate) type MetaBlobs = ([PageNo; 3], Vec<(PageNo, Vec<u8>)>);

/// Builds the three metadata blobs (of `roots` and `catalog`) into newly
/// allocated blocks of `fsm` (committed allocations), describing `fsm` as it
/// will be once the blocks in `old` are freed. Returns the blob heads
/// (free-space map, roots, catalog) and the sealed block images.
pub(crate) fn build_meta_blobs(
    fsm: &mut FreeSpace,
    roots: &BTreeMap<String, RootEntry>,
    catalog: &BTreeMap<u32, Vec<u8>>,
    page_size: usize,
    old: &[(PageNo, u32)],
    lsn: u64,
) -> Result<MetaBlobs> {
    let roots: Vec<_> = roots.values().cloned().collect();
    let roots_payload = meta::encode_roots(&roots);
    let cat: Vec<_> = catalog.iter().map(|(k, v)| (*k, v.clone())).collect();
    let cat_payload = meta::encode_catalog(&cat);
    // Each allocation or free below changes the map by at most one extent
    // or run; leave room for all of them.
    let fsm_room = fsm.image().encode().len() + 16 * (3 + old.len()) + 12 * 3 + 64;
    let mut heads = [0; 3];
    let mut images = Vec::new();
    let sizes = [fsm_room, roots_payload.len(), cat_payload.len()];
    for (i, size) in sizes.iter().enumerate() {
        heads[i] = fsm
            .allocate(blob_pages(*size, page_size))
            .map_err(Error::Invalid)?;
    }
    let mut snapshot = fsm.clone();
    for &(h, l) in old {
        snapshot.free(h, l).map_err(Error::Invalid)?;
    }
    let fsm_payload = snapshot.image().encode();
    if fsm_payload.len() > fsm_room {
        return Err(Error::invalid("free-space map grew past its reserved room"));
    }
    let kinds = [MetaKind::FreeSpace, MetaKind::Roots, MetaKind::Catalog];
    let payloads = [&fsm_payload, &roots_payload, &cat_payload];
    for i in 0..3 {
        let (head, pages) = fsm
            .block_of(heads[i])
            .ok_or_else(|| Error::invalid("metadata block vanished"))?;
        let mut img = vec![0u8; pages as usize * page_size];
        page::format(&mut img, BlockKind::Meta, head, pages);
        meta::write_blob(&mut img, kinds[i], payloads[i]);
        page::seal(&mut img, lsn);
        images.push((head, img));
    }
    Ok((heads, images))
}

/// Writes block images to the page file.
pub(crate) fn write_blocks(
    file: &dyn IoFile,
    path: &Path,
    page_size: usize,
    blocks: &[(PageNo, Vec<u8>)],
) -> Result<u64> {
    let mut bytes = 0;
    for (head, img) in blocks {
        file.write_all_at(img, head * page_size as u64)
            .map_err(|e| Error::io("write page", path, e))?;
        bytes += img.len() as u64;
    }
    Ok(bytes)
}

/// Why a checkpoint runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// [`Core::checkpoint`].
    Asked,
    /// Even when nothing changed: recovery's installation after an open
    /// (which also repairs a damaged copy).
    Forced,
    /// A clean close: the log header is marked closed afterwards.
    Closing,
    /// The checkpointer thread, if one is still due.
    Due,
}

/// What a checkpoint decided at its cut (step 0).
struct Cut {
    /// The pending changes it installs (also in `State::installing`).
    changes: Arc<Changes>,
    /// The old metadata blobs' blocks, freed at step 6.
    old: Vec<(PageNo, u32)>,
    /// The new blobs' sealed images.
    meta_images: Vec<(PageNo, Vec<u8>)>,
    /// The new superblock, but for its checkpoint LSN (known after the
    /// intent record).
    sb: Superblock,
    /// The superblock copy written first (the one that is not current).
    first_slot: usize,
}

/// Why a checkpoint did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NotRun {
    /// A transaction in progress has records in the log.
    Refused,
    /// The background checkpoint found none due.
    NotDue,
    /// Readers (`readers.rs`) hold snapshots older than the log's end.
    Readers(usize),
}

impl NotRun {
    fn error(self) -> Error {
        match self {
            NotRun::Refused | NotRun::NotDue => Error::invalid(
                "checkpoint refused: a transaction in progress has records in the log",
            ),
            NotRun::Readers(n) => Error::invalid(format!(
                "checkpoint deferred: {n} reader(s) hold snapshots older than the end of the \
                 log; it can run once they refresh or close"
            )),
        }
    }
}

impl Core {
    /// Installs every committed change into the page file and recycles the
    /// log. Refused while a transaction has records in the log already, and
    /// deferred while a reader's snapshot is older than the log's end.
    /// Runs on the calling thread and returns its result, whether or not the
    /// checkpointer thread is running one (they take turns).
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        self.run_checkpoint(Trigger::Asked)?.map_err(NotRun::error)
    }

    /// The checkpointer thread's installation of what the open's recovery
    /// rebuilt, run even when nothing changed (it also rewrites a damaged
    /// superblock or log header copy: the copy that is not current is the
    /// one written), and kept as [`open_checkpoint`](Core::open_checkpoint)'s
    /// report. Not run while a transaction has records in the log or
    /// readers hold older snapshots: recovery's work then stays pending,
    /// as any commit's does, until a later checkpoint installs it.
    pub(crate) fn install_recovered(&self) -> Result<()> {
        if let Ok(r) = self.run_checkpoint(Trigger::Forced)? {
            let _ = self.open_checkpoint.set(r);
        }
        Ok(())
    }

    /// The checkpoint of a clean close: afterwards the log header says the
    /// epoch is empty, so the next open knows the bytes after it are old.
    /// Readers with older snapshots defer it: the close leaves the log to
    /// the next open's recovery.
    pub(crate) fn checkpoint_closing(&self) -> Result<()> {
        match self.run_checkpoint(Trigger::Closing)? {
            Ok(_) | Err(NotRun::Readers(_)) => Ok(()),
            Err(n) => Err(n.error()),
        }
    }

    /// The checkpoint that starts a collection: a clean close's, refused
    /// (not deferred) while readers are behind, since the collection needs
    /// the page file to hold every commit.
    pub(crate) fn checkpoint_for_collection(&self) -> Result<()> {
        self.run_checkpoint(Trigger::Closing)?
            .map(|_| ())
            .map_err(NotRun::error)
    }

    /// The checkpointer thread's checkpoint: runs only if one is still due
    /// and no transaction has records in the log (else a later commit asks
    /// again).
    pub(crate) fn checkpoint_background(&self) -> Result<()> {
        self.run_checkpoint(Trigger::Due).map(|_| ())
    }

    /// Whether the log (ending at `log_end`) or the pending changes have
    /// grown past the configured limits, with no transaction logging early
    /// and the store sound. The caller reads the log's end before taking the
    /// state lock: nothing holding the state lock waits for the log writer's
    /// lock, which a log header write holds across its syncs.
    pub(crate) fn checkpoint_due(&self, st: &State, log_end: u64) -> bool {
        self.log.is_some()
            && st.early.is_empty()
            && st.poisoned.is_none()
            && (log_end.saturating_sub(st.sb.checkpoint_lsn) > self.opts.checkpoint_log_bytes
                || st.pending_bytes > self.opts.checkpoint_pending_bytes)
    }

    /// Runs a checkpoint, or says why it did not run.
    fn run_checkpoint(&self, trigger: Trigger) -> Result<std::result::Result<CheckpointReport, NotRun>> {
        let log = self.log()?;
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        // Nothing is appended while the gate is held: this stays the end.
        let start = log.end_lsn();
        // Every live reader's snapshot must reach `start`; the table's lock
        // is then held until the log is recycled, so that no reader loads
        // a checkpoint halfway (`readers.rs`).
        // The background checkpoint does not wait for a reader loading a
        // checkpoint (commits wait for the gate meanwhile): it comes back.
        let _readers = match &self.readers {
            Some(t) => {
                let g = if trigger == Trigger::Due {
                    match t.try_lock()? {
                        Some(g) => g,
                        None => return Ok(Err(NotRun::Readers(1))),
                    }
                } else {
                    t.lock()?
                };
                match t.readers_behind(&g, start)? {
                    0 => Some(g),
                    n => return Ok(Err(NotRun::Readers(n))),
                }
            }
            None => None,
        };
        let cut = {
            let mut st = self.lock();
            Core::check_poisoned(&st)?;
            if !st.early.is_empty() {
                return Ok(Err(NotRun::Refused));
            }
            if trigger == Trigger::Due && !self.checkpoint_due(&st, start) {
                return Ok(Err(NotRun::NotDue));
            }
            if trigger != Trigger::Forced && start == st.sb.checkpoint_lsn && st.pending.is_empty()
            {
                drop(st);
                if trigger == Trigger::Closing {
                    log.recycle(true, self.opts.log_keep_bytes)?;
                }
                return Ok(Ok(CheckpointReport {
                    lsn: start,
                    ..CheckpointReport::default()
                }));
            }
            self.cut(&mut st, start)?
        };
        let report = self.install(log, cut, trigger == Trigger::Closing)?;
        self.publish_end(report.lsn);
        Ok(Ok(report))
    }

    /// Step 0, under the state lock: what to install, and the new metadata
    /// blobs, whose blocks are allocated in the free-space map at once so
    /// that no transaction's allocation takes them. `start` is the end of
    /// the log: everything before it is committed and applied, and nothing
    /// is appended after it until the checkpoint ends.
    fn cut(&self, st: &mut State, start: u64) -> Result<Cut> {
        let old: Vec<(PageNo, u32)> = [st.sb.fsm_page, st.sb.roots_page, st.sb.catalog_page]
            .iter()
            .filter_map(|&p| st.fsm.block_of(p))
            .collect();
        let generation = next_generation(&self.path, st)?;
        let mut fsm = st.fsm.clone();
        let (blobs, meta_images) = build_meta_blobs(
            &mut fsm,
            &st.roots,
            &st.catalog,
            self.page_size,
            &old,
            start,
        )?;
        st.fsm = fsm;
        let mut sb = st.sb;
        sb.generation = generation;
        sb.fsm_page = blobs[0];
        sb.roots_page = blobs[1];
        sb.catalog_page = blobs[2];
        sb.next_txid = st.next_txid;
        let changes = Arc::new(std::mem::take(&mut st.pending));
        st.pending_bytes = 0;
        st.installing = Some(changes.clone());
        st.new_meta = Some(blobs);
        Ok(Cut {
            changes,
            old,
            meta_images,
            sb,
            first_slot: 1 - st.sb_slot as usize,
        })
    }

    /// Steps 1 to 6, the state lock taken only for in-memory work (never
    /// across I/O), each time for a moment.
    fn install(&self, log: &LogWriter, cut: Cut, closing: bool) -> Result<CheckpointReport> {
        let mut heads: Vec<PageNo> = cut.changes.keys().copied().collect();
        heads.sort_unstable();
        let images = match self.installation_reads(&cut, &heads) {
            Ok(images) => images,
            Err(e) => {
                self.undo_cut(&cut);
                return Err(e);
            }
        };
        let data: Vec<(PageNo, &[u8])> = heads
            .iter()
            .filter_map(|h| match &images.get(h)?.base {
                Base::Image(img) => Some((*h, &img[..])),
                Base::File => None,
            })
            .collect();
        let ckpt_lsn = match append_intent(log, &data, &cut.meta_images) {
            Ok(lsn) => lsn,
            Err(e) => {
                self.undo_cut(&cut);
                if log.failure().is_some() {
                    // The log refuses everything from now on: so does the
                    // store, from `begin` on.
                    self.poison(format!("checkpoint failed: {e}"));
                }
                return Err(e);
            }
        };
        // 4–5. A failure from here on leaves the page file in a state the
        // memory does not describe: poison the store.
        let mut sb = cut.sb;
        sb.checkpoint_lsn = ckpt_lsn;
        let bytes = self
            .write_and_switch(&data, &cut.meta_images, &sb, cut.first_slot)
            .inspect_err(|e| self.poison(format!("checkpoint failed: {e}")))?;
        let blocks = data.len() as u64;
        drop(data);
        // 6. The in-memory switch (the installed changes are freed after
        // the lock is let go), then the log's recycling.
        let installed = self.lock().switch_to(sb, &cut.old);
        drop(images);
        drop(cut);
        installed.map_err(|what| {
            corrupt(
                &self.path,
                FileKind::PageFile,
                Location::Meta("free-space map"),
                what,
            )
        })?;
        log.recycle(closing, self.opts.log_keep_bytes)
            .inspect_err(|e| self.poison(format!("checkpoint failed: {e}")))?;
        // Still under the commit gate: readers learn of the new generation
        // before any end a later commit publishes.
        self.publish_generation(sb.generation);
        Ok(CheckpointReport {
            blocks,
            bytes,
            lsn: ckpt_lsn,
        })
    }

    /// Steps 1 and 2, without the lock: the whole image of every block to
    /// install (`heads`, ascending) — its page-file image, verified, with its
    /// changes laid over, or the whole image it has in memory — sealed;
    /// then, under the lock for a moment, these whole images published in
    /// place of the changes being installed, so that from then on no read of
    /// these blocks uses the page file. The old changes are freed once no
    /// read holds them.
    fn installation_reads(&self, cut: &Cut, heads: &[PageNo]) -> Result<Arc<Changes>> {
        let ps = self.page_size;
        let mut images = Changes::default();
        let (mut logged_pages, mut logged_bytes) = (0, 0);
        for &head in heads {
            let Some(p) = cut.changes.get(&head) else {
                continue;
            };
            let mut img = match &p.base {
                Base::File => {
                    let mut img = vec![0u8; p.run_len as usize * ps].into_boxed_slice();
                    self.read_file_block(head, p.run_len, &mut img)?;
                    let recs = self.read_logged(head, &p.logged)?;
                    wpl::lay_records(&mut img, &p.logged, &recs, ps);
                    logged_pages += recs.len() as u64;
                    logged_bytes += recs.iter().map(|r| r.len() as u64).sum::<u64>();
                    img
                }
                Base::Image(img) => img.clone(),
            };
            p.apply(&mut img);
            page::seal(&mut img, p.lsn);
            images.insert(head, Patch::image(p.run_len, img, p.lsn));
        }
        let images = Arc::new(images);
        let replaced = {
            let mut st = self.lock();
            // A read that went to the page file before this point reads
            // again (the blocks are about to be written); later ones find
            // the whole images.
            st.installs += 1;
            st.wpl_installed.0 += logged_pages;
            st.wpl_installed.1 += logged_bytes;
            st.installing.replace(images.clone())
        };
        drop(replaced);
        Ok(images)
    }

    /// Undoes the cut of a checkpoint that failed before writing anything:
    /// the changes it was installing are pending again (as the whole images
    /// it built, if it got that far), and the new blobs' blocks go back to
    /// the free space.
    fn undo_cut(&self, cut: &Cut) {
        let mut st = self.lock();
        if let Some(changes) = st.installing.take() {
            let changes = Arc::unwrap_or_clone(changes);
            st.pending_bytes += changes.values().map(Patch::bytes).sum::<usize>();
            st.pending.extend(changes);
        }
        st.installs += 1;
        st.new_meta = None;
        for &h in &[cut.sb.fsm_page, cut.sb.roots_page, cut.sb.catalog_page] {
            let freed = match st.fsm.block_of(h) {
                Some((head, len)) if head == h => st.fsm.free(head, len),
                _ => Err(format!("block {h} is not allocated")),
            };
            if let Err(what) = freed {
                st.poisoned.get_or_insert_with(|| {
                    format!("undoing a failed checkpoint's metadata blob: {what}")
                });
            }
        }
    }

    /// Steps 4 and 5: the blocks, the page file's sync, and the superblock
    /// switch (both copies, each synced). Returns the bytes written.
    fn write_and_switch(
        &self,
        data: &[(PageNo, &[u8])],
        meta_images: &[(PageNo, Vec<u8>)],
        sb: &Superblock,
        first_slot: usize,
    ) -> Result<u64> {
        let ps = self.page_size;
        let mut bytes = 0;
        for (head, img) in data.iter().copied().chain(
            meta_images
                .iter()
                .map(|(head, img)| (*head, img.as_slice())),
        ) {
            self.file
                .write_all_at(img, head * ps as u64)
                .map_err(|e| Error::io("write page", &self.path, e))?;
            bytes += img.len() as u64;
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io("sync database", &self.path, e))?;
        // The copy that is not current first, then the other: a torn write
        // damages one copy while the other describes a complete checkpoint,
        // and afterwards both are the same.
        for i in [first_slot, 1 - first_slot] {
            self.file
                .write_all_at(&sb.encode(), SLOT_OFFSETS[i])
                .and_then(|()| self.file.sync_data())
                .map_err(|e| Error::io("write superblock", &self.path, e))?;
        }
        Ok(bytes)
    }
}

impl State {
    /// Step 6 in memory, once the superblock `sb` is on disk: it becomes the
    /// current one, the pending changes are dropped (the page file holds
    /// them) and the old metadata blobs' blocks `old` are freed. An error (an
    /// old blob no longer where the cut found it: a bug) poisons the store,
    /// since the page file already holds the new checkpoint.
    fn switch_to(&mut self, sb: Superblock, old: &[(PageNo, u32)]) -> Result<(), String> {
        self.sb = sb;
        self.sb_slot = 0;
        // The installed changes go (their last holders free them, not under
        // the lock); a read that took them before this and read the page
        // file while the blocks were written reads again.
        self.installing = None;
        self.new_meta = None;
        self.installs += 1;
        for &(h, l) in old {
            if let Err(what) = self.fsm.free(h, l) {
                let what =
                    format!("freeing the old metadata blob at page {h} after a checkpoint: {what}");
                self.poisoned.get_or_insert_with(|| what.clone());
                return Err(what);
            }
        }
        Ok(())
    }
}

/// The generation of the superblock the next checkpoint of `st` writes;
/// refused as damage (naming the current copy) when the current one leaves
/// no room for it.
pub(super) fn next_generation(path: &Path, st: &State) -> Result<u64> {
    crate::format::slot::next_generation(st.sb.generation)
        .map_err(|what| corrupt(path, FileKind::PageFile, Location::Superblock(st.sb_slot), what))
}

/// Step 3: the intent record (every block about to be written, with its new
/// checksum), appended and synced. Returns the checkpoint LSN: the end of
/// the log after it.
fn append_intent(
    log: &LogWriter,
    data: &[(PageNo, &[u8])],
    meta_images: &[(PageNo, Vec<u8>)],
) -> Result<u64> {
    let mut entries = Vec::with_capacity((data.len() + meta_images.len()) * 12);
    let meta = meta_images.iter().map(|(h, img)| (*h, img.as_slice()));
    for (h, img) in data.iter().copied().chain(meta) {
        entries.extend_from_slice(&h.to_le_bytes());
        entries.extend_from_slice(&img[0..4]);
    }
    let recs: Vec<Record<'_>> = entries
        .chunks(MAX_INTENT * 12)
        .map(|c| Record::Intent { entries: c })
        .collect();
    log.append(&recs)?;
    let ckpt_lsn = log.end_lsn();
    log.sync_to(ckpt_lsn)?;
    Ok(ckpt_lsn)
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::io::crash::CrashVfs;
    use crate::store::{Store, StoreOptions};
    use std::path::Path;
    use std::sync::Arc;

    /// The in-memory switch after the superblock switch failing (an old
    /// blob's block not allocated as the cut found it) poisons the store:
    /// the next call refuses, naming the cause.
    #[test]
    fn an_error_after_the_superblock_switch_poisons() {
        let vfs = Arc::new(CrashVfs::new());
        let s = Store::create(vfs, Path::new("/db"), StoreOptions::default()).expect("create");
        {
            let mut st = s.lock();
            let sb = st.sb;
            let gone = st.fsm.page_count() + 10;
            let what = st.switch_to(sb, &[(gone, 1)]).expect_err("no block there");
            assert!(what.contains("old metadata blob"), "{what}");
        }
        match s.begin() {
            Err(Error::Poisoned { cause }) => assert!(cause.contains("old metadata blob")),
            other => panic!("expected a poisoned store, got {other:?}"),
        }
    }
}
