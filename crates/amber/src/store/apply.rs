//! Applying a committed log record to the store's in-memory state: the one
//! function both commit and the recovery pass use, so that what recovery
//! rebuilds is by construction what the running store had.

use super::pending::{Base, LoggedPage, Patch};
use super::state::State;
use super::wpl::supersedes;
use crate::format::meta::RootEntry;
use crate::format::page::{self, BlockKind};
use crate::format::{PAddr, PageNo};
use crate::wal::{Record, ranges};

impl State {
    /// Applies `rec`, logged at `lsn`, of a transaction that committed at
    /// `commit_lsn`. `replay` is set during recovery, when allocations are
    /// not already reserved in memory.
    pub(crate) fn apply(
        &mut self,
        rec: &Record<'_>,
        lsn: u64,
        commit_lsn: u64,
        replay: bool,
    ) -> Result<(), String> {
        let ps = self.page_size;
        match *rec {
            Record::Range { addr, after, .. } => self.write_range(addr, after, commit_lsn)?,
            Record::Ranges {
                addr, before, body, ..
            } => {
                for r in ranges::iter(addr, before, body) {
                    self.write_range(r.addr, r.after, commit_lsn)?;
                }
            }
            Record::Page { page, image, .. } => {
                let (head, len) = self
                    .fsm
                    .block_of(page)
                    .ok_or_else(|| format!("page image for page {page}, which is not allocated"))?;
                let index = (page - head) as u32;
                let in_memory = !self.images_in_log
                    || matches!(self.pending.get(&head).map(|p| &p.base), Some(Base::Image(_)));
                if in_memory {
                    self.lay_page(head, len, index, image, commit_lsn);
                } else {
                    self.log_page(head, len, LoggedPage { index, lsn, commit_lsn });
                }
            }
            Record::Alloc {
                page: head,
                count,
                kind,
                ..
            } => {
                let kind = BlockKind::from_u8(kind)
                    .ok_or_else(|| format!("allocation of unknown block kind {kind}"))?;
                // Checked before the block's image is made (whole, as the
                // committing transaction held it).
                if count > page::max_run_len(ps) {
                    return Err(format!(
                        "allocation of {count} pages at page {head}: no block is that long"
                    ));
                }
                // Every byte of a block has a 64-bit persistent address.
                let end = head.checked_add(u64::from(count));
                if end.and_then(|e| e.checked_mul(ps as u64)).is_none() {
                    return Err(format!(
                        "allocation of {count} pages at page {head}: beyond every address"
                    ));
                }
                if replay {
                    self.fsm.allocate_at(head, count)?;
                } else {
                    self.fsm.confirm(head);
                }
                self.drop_patch(head);
                let mut img = vec![0u8; count as usize * ps].into_boxed_slice();
                page::format_zeroed(&mut img, kind, head, count);
                let p = Patch::image(count, img, commit_lsn);
                self.pending_bytes += p.bytes();
                self.pending.insert(head, p);
            }
            Record::Free { page, count, .. } => {
                self.fsm.free(page, count)?;
                self.drop_patch(page);
            }
            Record::Root {
                name,
                addr,
                type_id,
                ..
            } => {
                let name =
                    std::str::from_utf8(name).map_err(|_| "root name is not UTF-8".to_string())?;
                self.catalog_changes += 1;
                if addr == 0 {
                    self.roots.remove(name);
                } else {
                    self.roots.insert(
                        name.to_string(),
                        RootEntry {
                            name: name.to_string(),
                            addr,
                            type_id,
                        },
                    );
                }
            }
            Record::Type { type_id, desc, .. } => {
                crate::format::meta::check_type_id(type_id)?;
                self.catalog.insert(type_id, desc.to_vec());
                self.catalog_changes += 1;
                self.next_type_id = self.next_type_id.max(type_id + 1);
            }
            Record::Commit { .. } | Record::Intent { .. } => {}
        }
        Ok(())
    }
}

impl State {
    /// Writes `data` at persistent address `addr` for a transaction that
    /// committed at `lsn`: what [`State::apply`] does for a range record.
    pub(crate) fn write_range(&mut self, addr: PAddr, data: &[u8], lsn: u64) -> Result<(), String> {
        let shift = self.shift();
        let page = addr >> shift;
        let ps = self.page_size;
        // Fast path, one lookup: the first page of a block with changes
        // pending (most records of a busy log land on such blocks).
        if let Some(p) = self.pending.get_mut(&page) {
            let off = (addr - (page << shift)) as usize;
            let block_len = p.run_len as usize * ps;
            if off + data.len() > block_len {
                return Err(format!("range at address {addr} runs past its block"));
            }
            write_counted(&mut self.pending_bytes, p, off as u32, data, lsn, block_len);
            return Ok(());
        }
        let (head, len, off) = self
            .locate(addr)
            .ok_or_else(|| format!("range at address {addr} lies in no allocated block"))?;
        if off as usize + data.len() > len as usize * ps {
            return Err(format!("range at address {addr} runs past its block"));
        }
        self.patch_write(head, len, off, data, lsn);
        Ok(())
    }

    /// Writes bytes at block offset `off` of the block at `head` (of
    /// `run_len` pages), making its patch if there is none.
    pub(crate) fn patch_write(
        &mut self,
        head: PageNo,
        run_len: u32,
        off: u32,
        data: &[u8],
        lsn: u64,
    ) {
        let block_len = run_len as usize * self.page_size;
        let p = self
            .pending
            .entry(head)
            .or_insert_with(|| Patch::over_file(run_len));
        write_counted(&mut self.pending_bytes, p, off, data, lsn, block_len);
    }
}

impl State {
    /// Lays `image` as page `index` of the block at `head` (of `run_len`
    /// pages), but for the header fields the store keeps: what an
    /// in-memory page record does.
    fn lay_page(&mut self, head: PageNo, run_len: u32, index: u32, image: &[u8], lsn: u64) {
        let ps = self.page_size;
        let at = index as usize * ps;
        for (s, e) in supersedes(index, ps).into_iter().filter(|(s, e)| s < e) {
            self.patch_write(head, run_len, s as u32, &image[s - at..e - at], lsn);
        }
    }

    /// Lays the cached image of `page` (`StoreTx::cache_page`) of a
    /// transaction that committed at `commit_lsn`, in place of the range
    /// records on it, which recovery replays instead.
    pub(crate) fn lay_cached(&mut self, page: PageNo, image: &[u8], commit_lsn: u64) -> Result<(), String> {
        let (head, len) = (self.fsm.block_of(page))
            .filter(|&(h, _)| !self.is_meta(h))
            .ok_or_else(|| format!("cached image of page {page}, which is not allocated"))?;
        if image.len() != self.page_size {
            return Err(format!("cached image of page {page} is not a page long"));
        }
        self.lay_page(head, len, (page - head) as u32, image, commit_lsn);
        Ok(())
    }

    /// Makes `page` an entry of the WPL table: the latest committed image
    /// of page `page.index` of the block at `head` (of `run_len` pages) is
    /// in the log.
    fn log_page(&mut self, head: PageNo, run_len: u32, page: LoggedPage) {
        let ps = self.page_size;
        let p = self
            .pending
            .entry(head)
            .or_insert_with(|| Patch::over_file(run_len));
        let before = p.bytes();
        p.log_page(page, &supersedes(page.index, ps));
        self.pending_bytes = self.pending_bytes + p.bytes() - before.min(p.bytes());
    }
}

/// Writes into patch `p` of a `block_len`-byte block, keeping the count of
/// pending bytes right.
fn write_counted(
    pending_bytes: &mut usize,
    p: &mut Patch,
    off: u32,
    data: &[u8],
    lsn: u64,
    block_len: usize,
) {
    let before = p.bytes();
    p.write(off, data, lsn, block_len);
    let after = p.bytes();
    *pending_bytes = *pending_bytes + after - before.min(after);
}
