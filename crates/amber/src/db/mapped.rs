//! What the mapped backends (`vm/mapped.rs`, `vm/mapped_checks.rs`) need of the
//! object layer: whether a database can be served so, the runs of its
//! blocks of several pages (which no fetch records there), and, between
//! transactions, giving the pages whose changes a checkpoint has installed
//! back to the page file (docs/design.md §4.3.1).

use std::cell::Cell;

use super::fetch::{FrameMap, fault_kind};
use super::options::Options;
use super::pager::{Pager, Scratch};
use crate::format::PageNo;
use crate::schema::registry::Snapshot;
use crate::source::Source;
use crate::store::{ClusterBlock, Store};
use crate::translate::check::check_block;
use crate::vm::{FaultError, FaultKind, FrameNo, FrameSpace, MappedFile};

/// The page file for the mapped backend, or why this database cannot be
/// served by it. Only a writer's database in this process, without a cache
/// budget, fits in half the reservation (the identity region).
pub(super) fn page_file(source: &dyn Source, store: Option<&Store>, opts: &Options) -> Result<MappedFile, String> {
    let Some(store) = store else {
        return Err("a database reached through a server".into());
    };
    if source.at_snapshot() {
        return Err("opened read-only at a snapshot, which a writer's checkpoints would \
                    change under the mapping"
            .into());
    }
    if opts.cache_bytes.is_some() {
        return Err("a cache budget, which the kernel's page cache is not counted in".into());
    }
    let ps = source.page_size() as u64;
    if source.page_count().saturating_mul(ps) > opts.reserve_bytes / 2 {
        return Err("the database is larger than half the reservation".into());
    }
    // The mapping covers the page file as it is now and shows its bytes as
    // they are; a checkpoint writes in place only pages this process wrote
    // (docs/design.md §4.3.1). So what the open recovered, which its
    // checkpointer thread installs after the open returned, is installed
    // first.
    if crate::vm::chooses_mapped(opts.backend) {
        store.wait_for_checkpointer();
    }
    let (fd, len) = store
        .page_file()
        .ok_or("its page file is no file of the operating system (a model)")?;
    Ok(MappedFile { fd, len })
}

/// Records the runs of the blocks of several pages in the frame table: the
/// other backends learn them as they swizzle pointers and fetch windows,
/// neither of which happens here.
pub(super) fn record_runs(fs: &FrameSpace, store: &Store) -> crate::error::Result<()> {
    for (head, pages) in store.blocks() {
        if pages > 1 {
            fs.assign(head, pages)
                .map_err(|e| e.into_error(store.path(), &format!("frames of block {head}")))?;
        }
    }
    Ok(())
}

/// Between transactions: if a checkpoint has moved committed bytes since
/// the last call (`installs`, kept by the caller), every block holding a
/// private copy whose committed image is now the page file's reads the file
/// again. `unsettled` and the copies are looked at with no transaction
/// open, so no copy changes meanwhile; a block still pending keeps its
/// copy, and one that is no longer an allocated block (dead space, which
/// must read as zeros) too.
pub(super) fn settle(fs: &FrameSpace, store: &Store, installs: &mut u64) -> crate::error::Result<()> {
    if !fs.backend().is_mapped() || store.installs() == *installs {
        return Ok(());
    }
    let (unsettled, now) = store.unsettled();
    let frames = fs
        .copies()
        .map_err(|e| e.into_error(store.path(), "listing pages written"))?;
    let mut blocks: Vec<(FrameNo, u32)> = Vec::new();
    let mut last: Option<PageNo> = None;
    for f in frames {
        let Some((head, idx, run)) = fs.page_of(f) else {
            continue;
        };
        if last == Some(head) || unsettled.contains(&head) || store.block_of(head) != Some((head, run)) {
            continue;
        }
        last = Some(head);
        blocks.push((f - idx, run));
    }
    fs.to_file(&blocks)
        .map_err(|e| e.into_error(store.path(), "mapping settled pages to the page file"))?;
    *installs = now;
    Ok(())
}

impl Pager {
    /// The mapped backends' fault service: `mapped-unverified`'s for a
    /// block first reached through a call that can return an error
    /// (`try_get`, a locked copy), `mapped`'s for every first touch. The
    /// block's committed image is checked as a fetch checks one
    /// (`prepare`'s checks, nothing swizzled: `check_image`), then its
    /// frames are known clean; with `mapped` the
    /// other blocks starting in its check window too (`check_window`).
    /// Nothing is installed: the kernel serves the file's bytes, or the
    /// copy written here. Dead space (`dead.rs`) was given zeros, which the
    /// dereference refuses: nothing to check.
    pub(super) fn check_mapped(
        &self,
        fs: &FrameSpace,
        head: PageNo,
        frame: FrameNo,
        run: u32,
    ) -> Result<(), FaultError> {
        if let Some((lo, end)) = fs.check_window(frame)
            && let Some(own) = self.with_scratch(|s| self.check_window(fs, head, (lo, end), s))
        {
            return own;
        }
        self.check_block(fs, head, frame, run)
    }

    /// Checks the committed image `img` of a block of `run` pages as a
    /// fetch checks one (`prepare`), without swizzling it: at home the
    /// program reads the stored words as they are (`translate/check.rs`).
    fn check_image(&self, run: u32, img: &[u8], map: &FrameMap<'_>, types: &Snapshot) -> Result<(), String> {
        self.check_shape(run, img)?;
        check_block(img, self.page_size, types, map)
    }

    /// Checks block `head` alone.
    fn check_block(&self, fs: &FrameSpace, head: PageNo, frame: FrameNo, run: u32) -> Result<(), FaultError> {
        if self.dead.block(head).is_none() {
            let img = self
                .source
                .read_block(head)
                .map_err(|e| FaultError::new(head, fault_kind(&e), e.to_string()))?;
            let map = FrameMap::new(fs, self.source.home());
            self.check_image(run, &img, &map, &self.registry.snapshot())
                .map_err(|m| FaultError::new(head, FaultKind::Corrupt, m))?;
        }
        for k in 0..run {
            fs.note_checked(frame + k);
        }
        Ok(())
    }

    /// `mapped`: checks the blocks that start in the frames `[lo, end)`
    /// (identity frames: page = frame), noting the clean ones checked; a
    /// damaged neighbour is left for its own touch. They are read where
    /// the page file lies in memory (`FrameSpace::file_view`), or, when a
    /// block's committed image is not the file's alone, with one read. The
    /// outcome for block `head`, if it starts there and is allocated (else
    /// None: the caller checks it alone).
    fn check_window(
        &self,
        fs: &FrameSpace,
        head: PageNo,
        (lo, end): (FrameNo, FrameNo),
        scratch: &mut Scratch,
    ) -> Option<Result<(), FaultError>> {
        let map = FrameMap::new(fs, self.source.home());
        let types = self.registry.snapshot();
        let mut judged = Vec::new();
        let read = Cell::new(None);
        let view = |page: PageNo, pages: u64| {
            read.set(Some((page, pages)));
            fs.file_view(page, pages)
        };
        let mut judge = |blocks: &[ClusterBlock], span: &[u8]| {
            judged = self.judge(fs, head, blocks, span, &map, &types);
        };
        let viewed = self
            .source
            .check_in_view(PageNo::from(lo), u64::from(end - lo), &view, &mut judge);
        if let Some((page, pages)) = read.get() {
            fs.release_view(page, pages);
        }
        if !viewed {
            let blocks = match self.source.read_cluster(PageNo::from(lo), u64::from(end - lo), &mut scratch.buf) {
                Ok(b) => b,
                Err(e) => return Some(Err(FaultError::new(head, fault_kind(&e), e.to_string()))),
            };
            judged = self.judge(fs, head, &blocks, &scratch.buf, &map, &types);
        }
        let mut own = None;
        for (b, frame, pages, outcome) in judged {
            if outcome.is_ok() {
                for k in 0..pages {
                    fs.note_checked(frame + k);
                }
            }
            if b == head {
                own = Some(outcome);
            }
        }
        own
    }

    /// The outcome of checking each of `blocks` (images in `buf`) that is
    /// not known clean yet, and block `head`'s always: `(head, first
    /// frame, pages, outcome)`.
    fn judge(
        &self,
        fs: &FrameSpace,
        head: PageNo,
        blocks: &[ClusterBlock],
        buf: &[u8],
        map: &FrameMap<'_>,
        types: &Snapshot,
    ) -> Vec<(PageNo, FrameNo, u32, Result<(), FaultError>)> {
        let mut out = Vec::with_capacity(blocks.len());
        for b in blocks {
            let Some(f) = fs.lookup(b.head) else { continue };
            if b.head != head && (0..b.pages).all(|k| fs.checked(f + k)) {
                continue;
            }
            let outcome = match &b.image {
                Ok(()) => {
                    let img = &buf[b.at..b.at + b.pages as usize * self.page_size];
                    self.check_image(b.pages, img, map, types)
                        .map_err(|m| FaultError::new(b.head, FaultKind::Corrupt, m))
                }
                Err(e) => Err(FaultError::new(b.head, fault_kind(e), e.to_string())),
            };
            out.push((b.head, f, b.pages, outcome));
        }
        out
    }
}
