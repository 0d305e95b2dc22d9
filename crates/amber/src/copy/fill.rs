//! Copying objects out of the buffer pool — Amber's frames, filled from the
//! local page file or a server — and writing modified ranges back into
//! them through the transaction's write path.

use crate::db::{Tx, ensure_span, translate};
use crate::error::{Error, Result};
use crate::format::bytes::get_u32;
use crate::format::objects::{MAX_TYPE_ID, OBJECT_HEADER, walk};
use crate::format::page::{HEADER_SIZE, USED_OFFSET};
use crate::schema::layout::pages_for;
use crate::source::Source;
use crate::vm::{Access, CopyBuf, FrameSpace};

/// What copying reads: the frames of a database (or of a transaction).
#[derive(Clone, Copy)]
pub(crate) struct Frames<'a> {
    pub(crate) fs: &'a FrameSpace,
    pub(crate) access: &'a Access,
    pub(crate) source: &'a dyn Source,
}

/// One object copied out of its page.
pub(crate) struct Copied {
    pub(crate) paddr: u64,
    /// Its type id (the object header's), for finding its pointers.
    pub(crate) type_id: u32,
    pub(crate) buf: CopyBuf,
}

impl Frames<'_> {
    /// The virtual address of the live object of `size` bytes at `paddr`,
    /// its frames made resident: every failure an error (a damaged page,
    /// no such object).
    fn live(&self, paddr: u64, size: usize) -> Result<u64> {
        let pages = pages_for(size as u64, self.source.page_size());
        let va = translate(self.fs, paddr, pages)?;
        let header = va.saturating_sub(OBJECT_HEADER as u64);
        ensure_span(self.fs, self.source.name(), header, va + size as u64)?;
        self.access.try_live(va, size, false).map_err(|why| {
            Error::dangling(format!(
                "copying the object at persistent address {paddr:#x}: {}",
                why.describe(va)
            ))
        })?;
        Ok(va)
    }

    /// A copy of the live object of `size` bytes at `paddr` (object
    /// caching).
    pub(crate) fn object(&self, paddr: u64, size: usize) -> Result<Copied> {
        let va = self.live(paddr, size)?;
        let header = self
            .access
            .slice::<u8>(va - OBJECT_HEADER as u64, OBJECT_HEADER);
        let tag =
            get_u32(header, 0).ok_or_else(|| Error::internal("an object header of 8 bytes"))?;
        Ok(Copied {
            paddr,
            type_id: tag & MAX_TYPE_ID,
            buf: CopyBuf::new(self.access.slice::<u8>(va, size)),
        })
    }

    /// Copies of the live objects of the page holding the live object of
    /// `size` bytes at `paddr`, but those `cached` says are cached already
    /// (page caching). An object of a block of several pages is its
    /// block's only object: it is copied alone.
    pub(crate) fn page(
        &self,
        paddr: u64,
        size: usize,
        cached: impl Fn(u64) -> bool,
    ) -> Result<Vec<Copied>> {
        let va = self.live(paddr, size)?;
        let frame = self
            .fs
            .frame_at(va as usize)
            .ok_or_else(|| Error::internal(format!("copy at {va:#x} outside the frames")))?;
        match self.fs.page_of(frame) {
            Some((_, 0, 1)) => {}
            _ => return Ok(vec![self.object(paddr, size)?]),
        }
        let page_size = self.source.page_size();
        let page_va = self.fs.frame_addr(frame) as u64;
        let page_pa = paddr - (va - page_va);
        let block = self.access.slice::<u8>(page_va, page_size);
        let used = u32::from_le_bytes(
            block[USED_OFFSET..USED_OFFSET + 4]
                .try_into()
                .map_err(|_| Error::internal("a block header of 4 bytes"))?,
        ) as usize;
        let mut out = Vec::new();
        for e in walk(block, used.max(HEADER_SIZE)) {
            let e = e.map_err(|m| Error::Corrupt {
                file: crate::error::FileKind::PageFile,
                path: self.source.name().to_path_buf(),
                at: crate::error::Location::Page(page_pa / page_size as u64),
                what: format!("object map at byte {}: {}", m.offset, m.what),
            })?;
            let at = page_pa + e.body as u64;
            if e.is_free() || (at != paddr && cached(at)) {
                continue;
            }
            out.push(Copied {
                paddr: at,
                type_id: e.type_id,
                buf: CopyBuf::new(&block[e.body..e.body + e.size]),
            });
        }
        Ok(out)
    }
}

impl<'db> Tx<'db> {
    /// What copying reads in this transaction.
    pub(crate) fn frames(&self) -> Frames<'_> {
        Frames {
            fs: self.fs,
            access: self.access,
            source: self.source,
        }
    }

    /// Writes `bytes` at byte `lo` of the live object of `size` bytes at
    /// `paddr`, through the transaction's write path: detected and logged
    /// at commit as any update is.
    pub(crate) fn write_back(
        &mut self,
        paddr: u64,
        size: usize,
        lo: usize,
        bytes: &[u8],
    ) -> Result<()> {
        self.tick();
        let va = self.frames().live(paddr, size)?;
        self.access
            .object_range_mut(va, size, lo, bytes.len())
            .copy_from_slice(bytes);
        Ok(())
    }
}
