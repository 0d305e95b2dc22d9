//! Reading committed blocks: the page-file image, verified, with the changes
//! logged since the checkpoint laid over it (the pages of the WPL table read
//! from the log, then the pending changes); one block, or a fetch cluster
//! of them with one `pread`. Reads never hold the state lock across I/O, so
//! a page fault never waits for a checkpoint's reads, writes and syncs
//! (docs/design.md §3.1 says what a read sees at each step of one).

use super::pending::{Base, LoggedPage};
use super::state::State;
use super::{Core, corrupt, wpl};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::PageNo;
use crate::format::page;
use crate::io::IoFile;
use std::path::Path;

/// One block of a fetch cluster read by `Store::read_cluster`.
#[derive(Debug)]
pub struct ClusterBlock {
    /// Its first page.
    pub head: PageNo,
    /// Its pages.
    pub pages: u32,
    /// Where its image starts in the cluster buffer.
    pub at: usize,
    /// Whether the image there is its committed image, or what is wrong.
    pub image: Result<()>,
}

impl Core {
    /// The committed image of the block whose first page is `head`.
    pub fn read_block(&self, head: PageNo) -> Result<Vec<u8>> {
        let block = |st: &State| {
            st.fsm
                .block_of(head)
                .filter(|&(h, _)| h == head)
                .ok_or_else(|| {
                    Error::invalid(format!("page {head} does not start an allocated block"))
                })
        };
        loop {
            let (len, installs, logged) = {
                let st = self.lock();
                let (_, len) = block(&st)?;
                if has_image(&st, head) {
                    let mut buf = vec![0u8; len as usize * self.page_size];
                    self.committed_in_place(&st, head, len, &mut buf, None, &[])?;
                    return Ok(buf);
                }
                (len, st.installs, logged_of(&st, head))
            };
            let mut buf = vec![0u8; len as usize * self.page_size];
            read_block_raw(&*self.file, &self.path, head, self.page_size, &mut buf)?;
            let verified = self.verify_file_image(head, len, &buf);
            let verified = self.reread_if_torn(head, len, &mut buf, verified);
            let recs = self.read_logged(head, &logged);
            let st = self.lock();
            // A log read that failed after the table moved on (a checkpoint
            // installed the page and recycled the log) is read again too.
            if st.installs != installs
                || block(&st)? != (head, len)
                || logged_of(&st, head) != logged
            {
                continue;
            }
            self.committed_in_place(&st, head, len, &mut buf, Some(verified), &recs?)?;
            return Ok(buf);
        }
    }

    /// The allocated blocks `(head, pages)` that start in pages
    /// `from..from + pages`, ascending.
    pub fn blocks_starting_in(&self, from: PageNo, pages: u64) -> Vec<(PageNo, u32)> {
        heads_in(&self.lock(), from, pages)
    }

    /// The committed images of the blocks that start in pages
    /// `from..from + pages`, read from the page file with one `pread` into
    /// `buf` (a fetch cluster; the caller keeps the buffer for the next one,
    /// so that a fault does not allocate it again). Each block says where its image
    /// starts in `buf` and whether it is good; the images are verified and
    /// carry the changes committed since the last checkpoint.
    ///
    /// The state lock is never held across the `pread` nor the checksums:
    /// it is taken to list the blocks, let go to read and verify them, and
    /// taken again to lay the pending changes over what was read — unless a
    /// checkpoint moved committed bytes meanwhile or the blocks changed, and
    /// then the read is made again (docs/design.md §3.1).
    pub fn read_cluster(&self, from: PageNo, pages: u64, buf: &mut Vec<u8>) -> Vec<ClusterBlock> {
        let ps = self.page_size;
        loop {
            let (blocks, in_memory, logged, installs) = {
                let st = self.lock();
                let blocks = heads_in(&st, from, pages);
                let in_memory: Vec<bool> = blocks.iter().map(|&(h, _)| has_image(&st, h)).collect();
                let logged: Vec<Vec<LoggedPage>> =
                    blocks.iter().map(|&(h, _)| logged_of(&st, h)).collect();
                (blocks, in_memory, logged, st.installs)
            };
            let (Some(&(first, _)), Some(&(last, last_n))) = (blocks.first(), blocks.last()) else {
                return Vec::new();
            };
            let span = (last + u64::from(last_n) - first) as usize * ps;
            if buf.len() < span {
                buf.resize(span, 0);
            }
            let raw = &mut buf[..span];
            let read = read_block_raw(&*self.file, &self.path, first, ps, raw);
            let at = |head: PageNo| (head - first) as usize * ps;
            // What the page file holds of each block not held whole in
            // memory: verified, or why not.
            let mut verified: Vec<Option<Result<()>>> = Vec::with_capacity(blocks.len());
            let recs: Vec<Result<Vec<Vec<u8>>>> = blocks
                .iter()
                .zip(&logged)
                .map(|(&(head, _), l)| self.read_logged(head, l))
                .collect();
            for (&(head, n), &whole) in blocks.iter().zip(&in_memory) {
                let img = &mut raw[at(head)..at(head) + n as usize * ps];
                verified.push((!whole).then(|| match &read {
                    Err(e) => Err(Error::invalid(format!("reading pages {first}..: {e}"))),
                    Ok(()) => {
                        let v = self.verify_file_image(head, n, img);
                        self.reread_if_torn(head, n, img, v)
                    }
                }));
            }
            let st = self.lock();
            if st.installs != installs
                || heads_in(&st, from, pages) != blocks
                || blocks.iter().zip(&logged).any(|(&(h, _), l)| logged_of(&st, h) != *l)
            {
                continue;
            }
            return blocks
                .into_iter()
                .zip(verified)
                .zip(recs)
                .map(|(((head, pages), verified), recs)| {
                    let img = &mut raw[at(head)..at(head) + pages as usize * ps];
                    let image = recs.and_then(|recs| {
                        self.committed_in_place(&st, head, pages, img, verified, &recs)
                    });
                    ClusterBlock {
                        head,
                        pages,
                        at: at(head),
                        image,
                    }
                })
                .collect();
        }
    }

    /// The `mapped` backend's check of the blocks that start in pages
    /// `from..from + pages`, reading them where the page file lies in
    /// memory rather than copying them (`view`: the file's pages `[first,
    /// first + n)`, or None past its end). False, with nothing checked,
    /// when a block's committed image is not the page file's alone
    /// (changes pending, or a pending image) or lies past its end: the
    /// caller reads the cluster instead (`read_cluster`).
    ///
    /// Each block's checksum is verified in the view (its entry says
    /// whether it is good) and `check` is given the blocks and the span
    /// they lie in, all with the state lock let go; the outcome stands if
    /// afterwards no checkpoint has moved committed bytes and the blocks
    /// still have no changes pending (a checkpoint writes only blocks
    /// with some, so their bytes did not change meanwhile). Otherwise it
    /// is made again, and `check` called again.
    pub fn check_in_view<'v>(
        &self,
        from: PageNo,
        pages: u64,
        view: &dyn Fn(PageNo, u64) -> Option<&'v [u8]>,
        check: &mut dyn FnMut(&[ClusterBlock], &[u8]),
    ) -> bool {
        let ps = self.page_size;
        let file_only = |st: &State, blocks: &[(PageNo, u32)]| blocks.iter().all(|&(h, _)| st.patch(h).is_none());
        loop {
            let (blocks, installs) = {
                let st = self.lock();
                let blocks = heads_in(&st, from, pages);
                if !file_only(&st, &blocks) {
                    return false;
                }
                (blocks, st.installs)
            };
            let (Some(&(first, _)), Some(&(last, last_n))) = (blocks.first(), blocks.last()) else {
                check(&[], &[]);
                return true;
            };
            let Some(span) = view(first, last + u64::from(last_n) - first) else {
                return false;
            };
            let checked: Vec<ClusterBlock> = blocks
                .iter()
                .map(|&(head, n)| {
                    let at = (head - first) as usize * ps;
                    ClusterBlock {
                        head,
                        pages: n,
                        at,
                        image: self.verify_file_image(head, n, &span[at..at + n as usize * ps]),
                    }
                })
                .collect();
            check(&checked, span);
            let st = self.lock();
            if st.installs == installs && heads_in(&st, from, pages) == blocks && file_only(&st, &blocks) {
                return true;
            }
        }
    }

    /// Turns the page-file image of block `head` in `img` into its committed
    /// image, with the changes logged since the checkpoint; `verified` says
    /// whether the page-file image passed its checksum (`None`: not checked
    /// yet), `logged` holds the page records of its WPL table entries, read
    /// from the log. A whole pending image replaces `img` altogether.
    fn committed_in_place(
        &self,
        st: &State,
        head: PageNo,
        len: u32,
        img: &mut [u8],
        verified: Option<Result<()>>,
        logged: &[Vec<u8>],
    ) -> Result<()> {
        match st.patch(head).map(|p| &p.base) {
            Some(Base::Image(pending)) if pending.len() == img.len() => {
                img.copy_from_slice(pending);
            }
            Some(Base::Image(_)) => {
                return Err(Error::invalid(format!(
                    "block {head}: its pending image is not {len} pages"
                )));
            }
            Some(Base::File) | None => {
                verified.unwrap_or_else(|| self.verify_file_image(head, len, img))?;
                if let Some(p) = st.patch(head) {
                    wpl::lay_records(img, &p.logged, logged, self.page_size);
                }
            }
        }
        if let Some(p) = st.patch(head) {
            p.apply(img);
        }
        Ok(())
    }

    /// A reader's page-file read that fails its checksum may have met the
    /// writer's checkpoint overwriting the block (`readers.rs`): it is made
    /// again holding the reader table's lock, which a checkpoint holds
    /// while it writes; a block still bad then is damaged.
    fn reread_if_torn(&self, head: PageNo, len: u32, img: &mut [u8], verified: Result<()>) -> Result<()> {
        match (&verified, self.reader_table()) {
            (Err(_), Some(t)) => {
                let _g = t.lock()?;
                read_block_raw(&*self.file, &self.path, head, self.page_size, img)?;
                self.verify_file_image(head, len, img)
            }
            _ => verified,
        }
    }

    /// Reads a block from the page file and verifies it.
    pub(crate) fn read_file_block(&self, head: PageNo, len: u32, buf: &mut [u8]) -> Result<()> {
        read_block_raw(&*self.file, &self.path, head, self.page_size, buf)?;
        self.verify_file_image(head, len, buf)
    }

    /// Checks a page-file image of block `head`: a bad one is corruption of
    /// the page file at that page, whichever read found it.
    fn verify_file_image(&self, head: PageNo, len: u32, img: &[u8]) -> Result<()> {
        page::verify(img, head, len).map_err(|e| {
            corrupt(
                &self.path,
                FileKind::PageFile,
                Location::Page(head),
                e.to_string(),
            )
        })?;
        Ok(())
    }
}

/// Whether block `head`'s committed image is all in memory (a whole
/// pending image), so that reading it needs nothing from the page file.
fn has_image(st: &State, head: PageNo) -> bool {
    matches!(st.patch(head).map(|p| &p.base), Some(Base::Image(_)))
}

/// Block `head`'s entries of the WPL table.
fn logged_of(st: &State, head: PageNo) -> Vec<LoggedPage> {
    st.patch(head).map(|p| p.logged.clone()).unwrap_or_default()
}

/// The allocated blocks that start in pages `from..from + pages`, but for
/// the metadata blobs: no object points into them, and a reader that gave
/// them frames would meet their pages again, freed by a later checkpoint
/// and reused as blocks of other shapes, with frames of the old shape.
fn heads_in(st: &State, from: PageNo, pages: u64) -> Vec<(PageNo, u32)> {
    let mut blocks = Vec::new();
    let mut page = from;
    while page < from.saturating_add(pages) {
        match st.fsm.block_of(page) {
            Some((h, n)) if h == page => {
                if !st.is_meta(h) {
                    blocks.push((h, n));
                }
                page += u64::from(n);
            }
            Some((h, n)) => page = h + u64::from(n),
            None => page += 1,
        }
    }
    blocks
}

/// Reads `buf.len()` bytes of block `head` from the page file without
/// verifying them. Bytes past the end of the file read as zero (a block
/// allocated but never installed).
pub(crate) fn read_block_raw(
    file: &dyn IoFile,
    path: &Path,
    head: PageNo,
    page_size: usize,
    buf: &mut [u8],
) -> Result<()> {
    let off = head
        .checked_mul(page_size as u64)
        .ok_or_else(|| Error::invalid(format!("page {head} is beyond any file")))?;
    crate::io::read_at_most(file, buf, off).map_err(|e| Error::io("read page", path, e))?;
    Ok(())
}
