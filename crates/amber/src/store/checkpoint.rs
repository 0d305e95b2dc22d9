//! Checkpoints: installing committed changes into the page file, then
//! recycling the log.
//!
//! Steps, and why a crash at any point is safe:
//!
//! 1. Installation reads: every block with pending changes is read from the
//!    page file (checksum verified) and the changes laid over it. Nothing has
//!    been written yet.
//! 2. New metadata blobs (free-space map, roots, catalog) go to freshly
//!    allocated blocks; the old ones stay untouched (shadow paging).
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
//! 6. The old blobs' blocks are freed (in memory: the new free-space map
//!    already shows them free) and the log is recycled by writing a new log
//!    header (both copies, one after the other) whose base LSN is the new
//!    checkpoint LSN. If the header write is lost, recovery reads the old
//!    header and skips to the checkpoint LSN; no record is appended before
//!    both copies are written.

use super::state::State;
use super::{Store, corrupt};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::PageNo;
use crate::format::meta::{self, MetaKind, blob_pages};
use crate::format::page::{self, BlockKind};
use crate::format::superblock::SLOT_OFFSETS;
use crate::io::IoFile;
use crate::store::alloc::FreeSpace;
use crate::wal::Record;
use crate::wal::record::MAX_INTENT;
use std::path::Path;

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

/// Builds the three metadata blobs into newly allocated blocks of `fsm`
/// (committed allocations), describing `fsm` as it will be once the blocks
/// in `old` are freed. Returns the blob heads (free-space map, roots,
/// catalog) and the sealed block images.
pub(crate) fn build_meta_blobs(
    fsm: &mut FreeSpace,
    st: &State,
    page_size: usize,
    old: &[(PageNo, u32)],
    lsn: u64,
) -> Result<MetaBlobs> {
    let roots: Vec<_> = st.roots.values().cloned().collect();
    let roots_payload = meta::encode_roots(&roots);
    let cat: Vec<_> = st.catalog.iter().map(|(k, v)| (*k, v.clone())).collect();
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

impl Store {
    /// Installs every committed change into the page file and recycles the
    /// log. Refused while a transaction has records in the log already.
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        self.checkpoint_inner(false, false)
    }

    /// A checkpoint even when nothing changed: rewrites the superblock copy
    /// and log header copy that are not current (repairing a damaged one).
    pub(crate) fn checkpoint_forced(&self) -> Result<CheckpointReport> {
        self.checkpoint_inner(true, false)
    }

    /// The checkpoint of a clean close: afterwards the log header says the
    /// epoch is empty, so the next open knows the bytes after it are old.
    pub(crate) fn checkpoint_closing(&self) -> Result<CheckpointReport> {
        self.checkpoint_inner(false, true)
    }

    fn checkpoint_inner(&self, force: bool, closing: bool) -> Result<CheckpointReport> {
        let log = self.log()?;
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let mut st = self.lock();
        if let Some(cause) = &st.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        if !st.early.is_empty() {
            return Err(Error::invalid(
                "checkpoint refused: a transaction in progress has records in the log",
            ));
        }
        let start = log.end_lsn();
        if !force && start == st.sb.checkpoint_lsn && st.pending.is_empty() {
            if closing {
                log.recycle(true)?;
            }
            return Ok(CheckpointReport {
                lsn: start,
                ..CheckpointReport::default()
            });
        }
        // 1. Installation reads.
        let ps = self.page_size;
        let heads: Vec<PageNo> = st.pending.keys().copied().collect();
        for head in heads {
            let Some(p) = st.pending.get(&head) else {
                continue;
            };
            if matches!(p.base, super::pending::Base::File) {
                let mut img = vec![0u8; p.run_len as usize * ps].into_boxed_slice();
                self.read_file_block(head, p.run_len, &mut img)?;
                if let Some(p) = st.pending.get_mut(&head) {
                    p.materialize(img);
                }
            }
        }
        let mut data: Vec<(PageNo, Vec<u8>)> = st
            .pending
            .iter()
            .filter_map(|(h, p)| p.sealed_image().map(|i| (*h, i)))
            .collect();
        data.sort_by_key(|(h, _)| *h);
        // 2. New metadata blobs.
        let old: Vec<(PageNo, u32)> = [st.sb.fsm_page, st.sb.roots_page, st.sb.catalog_page]
            .iter()
            .filter_map(|&p| st.fsm.block_of(p))
            .collect();
        let mut fsm = st.fsm.clone();
        let (blobs, meta_images) = build_meta_blobs(&mut fsm, &st, ps, &old, start)?;
        // 3. Intent.
        let mut entries = Vec::with_capacity((data.len() + 3) * 12);
        for (h, img) in data.iter().chain(meta_images.iter()) {
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
        // 4–5. Blocks, then the superblock switch. A failure from here on
        // leaves the page file in an unknown state: poison the store.
        let result = (|| -> Result<(u64, crate::format::superblock::Superblock)> {
            let mut bytes = write_blocks(&*self.file, &self.path, ps, &data)?;
            bytes += write_blocks(&*self.file, &self.path, ps, &meta_images)?;
            self.file
                .sync_data()
                .map_err(|e| Error::io("sync database", &self.path, e))?;
            let mut sb = st.sb;
            sb.generation += 1;
            sb.checkpoint_lsn = ckpt_lsn;
            sb.fsm_page = blobs[0];
            sb.roots_page = blobs[1];
            sb.catalog_page = blobs[2];
            sb.next_txid = st.next_txid;
            // The copy that is not current first, then the other: a torn
            // write damages one copy while the other describes a complete
            // checkpoint, and afterwards both are the same.
            let first = 1 - st.sb_slot as usize;
            for i in [first, 1 - first] {
                self.file
                    .write_all_at(&sb.encode(), SLOT_OFFSETS[i])
                    .and_then(|()| self.file.sync_data())
                    .map_err(|e| Error::io("write superblock", &self.path, e))?;
            }
            Ok((bytes, sb))
        })();
        let (bytes, sb) = match result {
            Ok(x) => x,
            Err(e) => {
                st.poisoned = Some(e.to_string());
                return Err(e);
            }
        };
        // 6. Switch the in-memory state and recycle the log.
        for (h, l) in old {
            if let Err(what) = fsm.free(h, l) {
                return Err(corrupt(
                    &self.path,
                    FileKind::PageFile,
                    Location::Meta("free-space map"),
                    what,
                ));
            }
        }
        st.fsm = fsm;
        st.sb = sb;
        st.sb_slot = 0;
        st.pending.clear();
        st.pending_bytes = 0;
        if let Err(e) = log.recycle(closing) {
            st.poisoned = Some(e.to_string());
            return Err(e);
        }
        Ok(CheckpointReport {
            blocks: data.len() as u64,
            bytes,
            lsn: ckpt_lsn,
        })
    }

    /// Runs a checkpoint if the log or the pending changes have grown past
    /// the configured limits and no transaction is logging early. The commit
    /// that triggered it has already succeeded, so a failure is not returned
    /// here: it poisons the store, and the next call reports it.
    pub(crate) fn maybe_checkpoint(&self) {
        let Some(log) = &self.log else { return };
        let due = {
            let st = self.lock();
            st.early.is_empty()
                && st.poisoned.is_none()
                && (log.end_lsn().saturating_sub(st.sb.checkpoint_lsn)
                    > self.opts.checkpoint_log_bytes
                    || st.pending_bytes > self.opts.checkpoint_pending_bytes)
        };
        if due && let Err(e) = self.checkpoint() {
            let mut st = self.lock();
            if st.poisoned.is_none() {
                st.poisoned = Some(format!("automatic checkpoint failed: {e}"));
            }
        }
    }
}
