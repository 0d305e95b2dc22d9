//! The local source: the store of this process (page file and log).
//!
//! The calls name `Core`'s methods: on a `Store`, a method call would find
//! this trait's method of the same name before the store's own.

use super::{Source, SourceTx};
use crate::error::Result;
use crate::format::meta::RootEntry;
use crate::format::page::BlockKind;
use crate::format::home::Home;
use crate::format::{PAddr, PageNo};
use crate::store::{ClusterBlock, CommitInfo, Core, Refreshed, Store, StoreStats, StoreTx};
use crate::wal::TxId;
use std::path::Path;

impl Source for Store {
    fn name(&self) -> &Path {
        Core::path(core(self))
    }

    fn page_size(&self) -> usize {
        Core::page_size(core(self))
    }

    fn home(&self) -> Home {
        Core::home(core(self))
    }

    fn page_count(&self) -> PageNo {
        Core::page_count(core(self))
    }

    fn blocks_starting_in(&self, from: PageNo, pages: u64) -> Result<Vec<(PageNo, u32)>> {
        Ok(Core::blocks_starting_in(core(self), from, pages))
    }

    fn read_block(&self, head: PageNo) -> Result<Vec<u8>> {
        Core::read_block(core(self), head)
    }

    fn read_cluster(
        &self,
        from: PageNo,
        pages: u64,
        buf: &mut Vec<u8>,
    ) -> Result<Vec<ClusterBlock>> {
        Ok(Core::read_cluster(core(self), from, pages, buf))
    }

    fn check_in_view<'v>(
        &self,
        from: PageNo,
        pages: u64,
        view: &dyn Fn(PageNo, u64) -> Option<&'v [u8]>,
        check: &mut dyn FnMut(&[ClusterBlock], &[u8]),
    ) -> bool {
        Core::check_in_view(core(self), from, pages, view, check)
    }

    fn types(&self) -> Vec<(u32, Vec<u8>)> {
        Core::types(core(self))
    }

    fn roots(&self) -> Vec<RootEntry> {
        Core::roots(core(self))
    }

    fn root(&self, name: &str) -> Option<RootEntry> {
        Core::root(core(self), name)
    }

    fn refresh(&self) -> Result<Refreshed> {
        Core::refresh(core(self))
    }

    fn stats(&self) -> StoreStats {
        Core::stats(core(self))
    }

    fn at_snapshot(&self) -> bool {
        Core::options(core(self)).read_only
    }

    fn begin(&self) -> Result<Box<dyn SourceTx + '_>> {
        Ok(Box::new(Store::begin(self)?))
    }

    fn take_changed(&self) -> Option<Refreshed> {
        None
    }

    fn forget_tx(&self, txid: TxId) {
        Store::forget_tx(self, txid);
    }
}

impl SourceTx for StoreTx<'_> {
    fn id(&self) -> TxId {
        StoreTx::id(self)
    }

    fn write(&mut self, addr: PAddr, data: &[u8]) -> Result<()> {
        StoreTx::write(self, addr, data)
    }

    fn write_with_before(&mut self, addr: PAddr, before: &[u8], after: &[u8]) -> Result<()> {
        StoreTx::write_with_before(self, addr, before, after)
    }

    fn write_page(&mut self, page: PageNo, image: &[u8]) -> Result<()> {
        StoreTx::write_page(self, page, image)
    }

    fn alloc(&mut self, pages: u32, kind: BlockKind) -> Result<PageNo> {
        StoreTx::alloc(self, pages, kind)
    }

    fn free(&mut self, page: PageNo) -> Result<()> {
        StoreTx::free(self, page)
    }

    fn set_root(&mut self, name: &str, addr: PAddr, type_id: u32) -> Result<()> {
        StoreTx::set_root(self, name, addr, type_id)
    }

    fn roots(&self) -> Vec<RootEntry> {
        StoreTx::roots(self)
    }

    fn root(&self, name: &str) -> Option<RootEntry> {
        StoreTx::root(self, name)
    }

    fn define_type(&mut self, desc: &[u8]) -> Result<u32> {
        StoreTx::define_type(self, desc)
    }

    fn log_early(&mut self) -> Result<()> {
        StoreTx::log_early(self)
    }

    fn commit(self: Box<Self>) -> Result<CommitInfo> {
        StoreTx::commit(*self)
    }

    fn abandon(self: Box<Self>) {
        StoreTx::abandon(*self)
    }
}

/// The store's own methods (see the module docs).
fn core(store: &Store) -> &Core {
    store
}
