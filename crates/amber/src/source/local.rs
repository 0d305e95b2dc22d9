//! The local source: the store of this process (page file and log).
//!
//! The calls name `Core`'s methods: on a `Store`, a method call would find
//! this trait's method of the same name before the store's own.

use super::Source;
use crate::error::Result;
use crate::format::PageNo;
use crate::format::meta::RootEntry;
use crate::store::{ClusterBlock, Core, Refreshed, Store, StoreStats};
use std::path::Path;

impl Source for Store {
    fn name(&self) -> &Path {
        Core::path(core(self))
    }

    fn page_size(&self) -> usize {
        Core::page_size(core(self))
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

    fn read_only(&self) -> bool {
        Core::options(core(self)).read_only
    }
}

/// The store's own methods (see the module docs).
fn core(store: &Store) -> &Core {
    store
}
