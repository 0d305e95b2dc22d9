//! The mutable state behind the store's lock (superblock, free-space map,
//! roots, catalog and pending changes), and how a checkpoint's state is
//! loaded from the page file when a database is opened.

use super::alloc::FreeSpace;
use super::corrupt;
use super::pending::Patch;
use super::read::read_block_raw;
use crate::error::{Error, FileKind, Location, Result};
use crate::fasthash::IntMap;
use crate::format::meta::{self, FsmImage, MetaKind, RootEntry};
use crate::format::page::{self, BlockKind, PageHeader};
use crate::format::superblock::Superblock;
use crate::format::{PAddr, PageNo, first_data_page};
use crate::io::IoFile;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// Mutable state behind the store's lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) sb: Superblock,
    pub(crate) sb_slot: u8,
    pub(crate) fsm: FreeSpace,
    pub(crate) roots: BTreeMap<String, RootEntry>,
    pub(crate) catalog: BTreeMap<u32, Vec<u8>>,
    pub(crate) next_type_id: u32,
    /// Goes up with every root or type record applied (not persisted: what
    /// it tells is whether the catalog moved between two looks at one
    /// state, as a served connection's refresh asks).
    pub(crate) catalog_changes: u64,
    /// Committed changes not yet installed (during a checkpoint: since its
    /// cut, which no commit can be until it ends).
    pub(crate) pending: IntMap<PageNo, Patch>,
    pub(crate) pending_bytes: usize,
    /// During a checkpoint, the pending changes it installs: taken out of
    /// `pending` at its cut, shared so that it reads them without the lock,
    /// and replaced by the blocks' whole images once it has built them.
    pub(crate) installing: Option<Arc<Changes>>,
    /// During a checkpoint, the heads of the metadata blobs it is writing:
    /// allocated at its cut, named by the superblock only at its end.
    pub(crate) new_meta: Option<[PageNo; 3]>,
    /// Goes up whenever a checkpoint changes where committed bytes are kept
    /// (whole images published in place of pending changes; installed
    /// changes dropped). A read that went to the page file without the state
    /// lock checks, under the lock again, that it has not moved meanwhile,
    /// else it reads again (`read.rs`).
    pub(crate) installs: u64,
    pub(crate) next_txid: u64,
    /// Active transactions that have records in the log already.
    pub(crate) early: HashSet<u32>,
    pub(crate) poisoned: Option<String>,
    pub(crate) page_size: usize,
    /// Committed page records leave their images in the log, as entries of
    /// the WPL table (`wpl.rs`): set for a writer; a read-only store keeps
    /// them in memory.
    pub(crate) images_in_log: bool,
    /// Pages that checkpoints installed from their image in the log, and
    /// the log bytes they read for it.
    pub(crate) wpl_installed: (u64, u64),
}

/// Pending changes, per block.
pub(crate) type Changes = IntMap<PageNo, Patch>;

impl State {
    /// An empty state in the place of one being replayed (under the lock,
    /// so never seen).
    pub(crate) fn placeholder(sb: Superblock, page_size: usize) -> State {
        State {
            sb,
            sb_slot: 0,
            fsm: FreeSpace::new(first_data_page(page_size)),
            roots: BTreeMap::new(),
            catalog: BTreeMap::new(),
            next_type_id: 0,
            catalog_changes: 0,
            pending: IntMap::default(),
            pending_bytes: 0,
            installing: None,
            new_meta: None,
            installs: 0,
            next_txid: 0,
            early: HashSet::new(),
            poisoned: None,
            page_size,
            images_in_log: false,
            wpl_installed: (0, 0),
        }
    }

    /// The committed changes of block `head` not yet in the page file, if
    /// any: pending, or being installed by a checkpoint.
    pub(crate) fn patch(&self, head: PageNo) -> Option<&Patch> {
        self.pending
            .get(&head)
            .or_else(|| self.installing.as_deref()?.get(&head))
    }

    pub(crate) fn shift(&self) -> u32 {
        self.page_size.trailing_zeros()
    }

    pub(crate) fn drop_patch(&mut self, head: PageNo) {
        if let Some(p) = self.pending.remove(&head) {
            self.pending_bytes = self.pending_bytes.saturating_sub(p.bytes());
        }
    }

    /// Whether the block at `head` is one of the store's own metadata blobs
    /// (those of the current checkpoint, or of one being written), which
    /// transactions may not touch and no object points into.
    pub(crate) fn is_meta(&self, head: PageNo) -> bool {
        [self.sb.fsm_page, self.sb.roots_page, self.sb.catalog_page].contains(&head)
            || self.new_meta.is_some_and(|m| m.contains(&head))
    }

    /// The block containing persistent address `addr`, and the offset in it.
    pub(crate) fn locate(&self, addr: PAddr) -> Option<(PageNo, u32, u32)> {
        let page = addr >> self.shift();
        // Fast path: the first page of a block with changes pending (most
        // records of a busy log land on such blocks).
        if let Some(p) = self.pending.get(&page) {
            return Some((page, p.run_len, (addr - (page << self.shift())) as u32));
        }
        let (head, len) = self.fsm.block_of(page)?;
        let off = addr - (head << self.shift());
        Some((head, len, u32::try_from(off).ok()?))
    }
}

/// Reads a metadata blob whose block starts at `head`.
pub(crate) fn read_meta_blob(
    file: &dyn IoFile,
    path: &Path,
    head: PageNo,
    page_size: usize,
    kind: MetaKind,
) -> Result<(Vec<u8>, u32)> {
    let at = Location::Meta(kind.name());
    let mut first = vec![0u8; page_size];
    read_block_raw(file, path, head, page_size, &mut first)?;
    let h = PageHeader::read(&first)
        .ok_or_else(|| corrupt(path, FileKind::PageFile, at.clone(), "truncated header"))?;
    // A checkpoint writes its blobs before the superblock naming them, so
    // a blob lies in the file: a run past its end is damage, refused before
    // a buffer of that size is made.
    let file_pages = file
        .size()
        .map_err(|e| Error::io("read page", path, e))?
        / page_size as u64;
    if h.run_len == 0 || head.saturating_add(u64::from(h.run_len)) > file_pages {
        return Err(corrupt(
            path,
            FileKind::PageFile,
            at,
            format!(
                "page {head}: impossible run length {} (the page file has {file_pages} pages)",
                h.run_len
            ),
        ));
    }
    let mut block = vec![0u8; h.run_len as usize * page_size];
    read_block_raw(file, path, head, page_size, &mut block)?;
    page::verify(&block, head, h.run_len).map_err(|e| {
        corrupt(
            path,
            FileKind::PageFile,
            at.clone(),
            format!("page {head}: {e}"),
        )
    })?;
    if h.kind != BlockKind::Meta as u8 {
        return Err(corrupt(
            path,
            FileKind::PageFile,
            at,
            format!("page {head} is not a metadata block"),
        ));
    }
    let payload = meta::read_blob(&block, kind)
        .map_err(|e| corrupt(path, FileKind::PageFile, at, format!("page {head}: {e}")))?
        .to_vec();
    Ok((payload, h.run_len))
}

/// Builds the in-memory state as of the superblock's checkpoint.
pub(super) fn load_state(
    file: &dyn IoFile,
    path: &Path,
    sb: Superblock,
    sb_slot: u8,
) -> Result<State> {
    let ps = sb.page_size as usize;
    let first = first_data_page(ps);
    let (fsm_bytes, _) = read_meta_blob(file, path, sb.fsm_page, ps, MetaKind::FreeSpace)?;
    let bad = |what: String| {
        corrupt(
            path,
            FileKind::PageFile,
            Location::Meta("free-space map"),
            what,
        )
    };
    let img = FsmImage::decode(&fsm_bytes).map_err(|_| bad("truncated".into()))?;
    // Every block a checkpoint's map counts was installed by it or an
    // earlier one, so the map's pages lie in the file. A larger count is
    // damage, refused before anything walks a billion blocks that are not
    // there.
    let file_pages = file
        .size()
        .map_err(|e| Error::io("read page", path, e))?
        / ps as u64;
    if img.page_count > file_pages {
        return Err(bad(format!(
            "it counts {} pages, the page file holds {file_pages}",
            img.page_count
        )));
    }
    let fsm = FreeSpace::from_image(&img, first).map_err(bad)?;
    for (name, p) in [
        ("free-space map", sb.fsm_page),
        ("root directory", sb.roots_page),
        ("schema catalog", sb.catalog_page),
    ] {
        if fsm.block_of(p).is_none_or(|(h, _)| h != p) {
            return Err(corrupt(
                path,
                FileKind::PageFile,
                Location::Meta(name),
                format!("its block at page {p} is not allocated in the free-space map"),
            ));
        }
    }
    let (roots_bytes, _) = read_meta_blob(file, path, sb.roots_page, ps, MetaKind::Roots)?;
    let roots = meta::decode_roots(&roots_bytes).map_err(|e| {
        corrupt(
            path,
            FileKind::PageFile,
            Location::Meta("root directory"),
            e,
        )
    })?;
    let (cat_bytes, _) = read_meta_blob(file, path, sb.catalog_page, ps, MetaKind::Catalog)?;
    let catalog = meta::decode_catalog(&cat_bytes).map_err(|e| {
        corrupt(
            path,
            FileKind::PageFile,
            Location::Meta("schema catalog"),
            e,
        )
    })?;
    let next_type_id = catalog.iter().map(|(id, _)| *id + 1).max().unwrap_or(1);
    Ok(State {
        sb,
        sb_slot,
        fsm,
        roots: roots.into_iter().map(|r| (r.name.clone(), r)).collect(),
        catalog: catalog.into_iter().collect(),
        next_type_id,
        catalog_changes: 0,
        pending: IntMap::default(),
        pending_bytes: 0,
        installing: None,
        new_meta: None,
        installs: 0,
        next_txid: sb.next_txid,
        early: HashSet::new(),
        poisoned: None,
        page_size: ps,
        images_in_log: false,
        wpl_installed: (0, 0),
    })
}
