//! The WPL table: pages whose latest committed image is a page record in
//! the log (whole-page logging, QuickStore's WPL; docs/design.md §2.2).
//!
//! A committed page record does not keep its image in memory: its page
//! becomes an entry of the table ([`LoggedPage`]: the page record's LSN and
//! its commit's), kept in the pending patch of the page's block, so that
//! everything that moves, installs or drops a block's pending changes moves,
//! installs or drops its entries with them. Reading the block reads the
//! image from the log ([`Core::read_logged`]), checksum verified; a
//! checkpoint installs it the same way, before the log is recycled
//! (`checkpoint.rs`); restart rebuilds the table by one backward scan of the
//! log (`recovery.rs`).
//!
//! Two cases keep page images in memory instead, as the other records'
//! changes are: a block allocated since the checkpoint (its whole image is
//! in memory already: the page is copied into it), and a read-only store
//! (a reader's snapshot has no log writer to read images through, and the
//! writer may recycle the log under it).

use super::pending::LoggedPage;
use super::{Core, corrupt};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::PageNo;
use crate::format::page::{HEADER_SIZE, USED_OFFSET};
use crate::io::IoFile;
use crate::wal::Record;
use crate::wal::header::RECORDS_START;
use crate::wal::record::{PAGE_IMAGE, TRAILER, checksum_ok, decode_verified, record_len};
use std::path::Path;

/// The byte ranges of a block that the image of its page `index` replaces:
/// the whole page, but for the block's first page the header fields the
/// store owns (all but `used`).
pub(crate) fn supersedes(index: u32, page_size: usize) -> [(usize, usize); 2] {
    if index == 0 {
        [(USED_OFFSET, USED_OFFSET + 4), (HEADER_SIZE, page_size)]
    } else {
        let s = index as usize * page_size;
        [(s, s + page_size), (s, s)]
    }
}

/// Lays the image of page `index` over the block image `block`.
pub(crate) fn lay_page(block: &mut [u8], index: u32, image: &[u8], page_size: usize) {
    let at = index as usize * page_size;
    for (s, e) in supersedes(index, page_size) {
        block[s..e].copy_from_slice(&image[s - at..e - at]);
    }
}

/// Bytes of the page record of a `page_size`-byte page.
pub(crate) fn record_bytes(page_size: usize) -> usize {
    PAGE_IMAGE + page_size + TRAILER
}

/// Checks that `rec`, read from the log at `lsn`, is the page record of
/// `page`; returns the page image in it. Anything else is damage of the
/// log, named by the page and the record's place.
pub(crate) fn logged_image<'r>(
    rec: &'r [u8],
    lsn: u64,
    page: PageNo,
    base_lsn: u64,
    path: &Path,
) -> Result<&'r [u8]> {
    let page_size = rec.len() - PAGE_IMAGE - TRAILER;
    let what = match record_len(rec, page_size) {
        Ok(n) if n == rec.len() && checksum_ok(rec, n, lsn) => match decode_verified(rec, n) {
            Ok((Record::Page { page: p, image, .. }, _)) if p == page => return Ok(image),
            Ok((Record::Page { page: p, .. }, _)) => format!("it holds page {p}'s image"),
            Ok(_) => "it is not a page record".to_string(),
            Err(e) => e.to_string(),
        },
        Ok(_) => "checksum mismatch".to_string(),
        Err(e) => e.to_string(),
    };
    Err(corrupt(
        path,
        FileKind::Log,
        Location::Lsn(lsn),
        format!(
            "the image of page {page} logged there (file offset {}) is damaged: {what}",
            RECORDS_START.saturating_add(lsn.saturating_sub(base_lsn))
        ),
    ))
}

/// Reads the logged image of page `head + l.index` from the log `file`
/// (whose first record has LSN `base_lsn`) and lays it over `block`.
pub(crate) fn lay_from_file(
    file: &dyn IoFile,
    path: &Path,
    base_lsn: u64,
    head: PageNo,
    l: &LoggedPage,
    block: &mut [u8],
    page_size: usize,
) -> Result<()> {
    let mut rec = vec![0u8; record_bytes(page_size)];
    let off = RECORDS_START + l.lsn.saturating_sub(base_lsn);
    file.read_exact_at(&mut rec, off)
        .map_err(|e| Error::io("read log", path, e))?;
    let page = head + u64::from(l.index);
    let image = logged_image(&rec, l.lsn, page, base_lsn, path)?;
    lay_page(block, l.index, image, page_size);
    Ok(())
}

impl Core {
    /// Reads the logged images of block `head`'s pages `logged` from the
    /// log, checksum verified, in that order.
    pub(crate) fn read_logged(&self, head: PageNo, logged: &[LoggedPage]) -> Result<Vec<Vec<u8>>> {
        if logged.is_empty() {
            return Ok(Vec::new());
        }
        let log = self.log()?;
        logged
            .iter()
            .map(|l| {
                let mut rec = vec![0u8; record_bytes(self.page_size)];
                log.read_at(l.lsn, &mut rec)?;
                let page = head + u64::from(l.index);
                logged_image(&rec, l.lsn, page, log.base_lsn(), &self.wal_path)?;
                Ok(rec)
            })
            .collect()
    }
}

/// Lays logged page records `recs` (as [`Core::read_logged`] returned them,
/// for the entries `logged`) over `block`.
pub(crate) fn lay_records(
    block: &mut [u8],
    logged: &[LoggedPage],
    recs: &[Vec<u8>],
    page_size: usize,
) {
    for (l, rec) in logged.iter().zip(recs) {
        lay_page(block, l.index, &rec[PAGE_IMAGE..PAGE_IMAGE + page_size], page_size);
    }
}
