//! The object cache proper, apart from the database it borrows: the OID
//! table's copies, room made by clock replacement (a modified victim
//! written back first), copies read in by object or by page, and eager
//! swizzling's discovery of a copy's pointers. [`CopyTx`](super::CopyTx)
//! drives it; `docs/design.md` §4.14.

use super::discover::PtrMap;
use super::fill::Copied;
use super::table::{Link, Table};
use super::{Caching, CopyOptions, CopyStats, Obj};
use crate::db::Tx;
use crate::error::{Error, Result};
use crate::fasthash::IntMap;
use crate::vm::Persistent;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::sync::Arc;

/// The cache proper, apart from the database it borrows.
#[derive(Debug)]
pub(super) struct Cache {
    pub(super) opts: CopyOptions,
    pub(super) table: Table,
    pub(super) stats: CopyStats,
    /// A modified victim was written into the open transaction: copies
    /// made since may hold its uncommitted bytes.
    pub(super) wrote_back: bool,
    /// The pointer fields of each type met by eager swizzling, by type id.
    pub(super) ptr_maps: IntMap<u32, Arc<PtrMap>>,
}

impl Cache {
    pub(super) fn stats(&self) -> CopyStats {
        CopyStats {
            objects: self.table.len() as u64,
            bytes: self.table.bytes as u64,
            ..self.stats
        }
    }

    /// Evicts copies until `need` more bytes fit (writing a modified victim
    /// back into `tx` first, as EPVM 2.0 does), or none is left.
    fn make_room(&mut self, tx: &mut Tx<'_>, need: usize) -> Result<()> {
        while self.table.bytes + need > self.opts.capacity_bytes {
            let Some(slot) = self.table.victim() else {
                return Ok(());
            };
            let Some(e) = self.table.remove(slot) else {
                return Err(Error::internal("a clock victim in an empty slot"));
            };
            self.stats.evicted += 1;
            if let Some((lo, hi)) = e.modified {
                self.wrote_back = true;
                self.stats.evicted_dirty += 1;
                tx.write_back(e.paddr, e.buf.len(), lo, &e.buf.bytes()[lo..hi])?;
            }
        }
        Ok(())
    }

    /// The slot of the copy of the object of `size` bytes at `paddr`,
    /// copied in (with its page's objects under page caching) if need be;
    /// whether it was cached already.
    fn slot(&mut self, tx: &mut Tx<'_>, paddr: u64, size: usize) -> Result<(u32, bool)> {
        self.stats.lookups += 1;
        if let Some(s) = self.table.lookup(paddr) {
            return Ok((s, true));
        }
        let copies = self.read_copies(tx, paddr, size)?;
        Ok((self.insert_copies(tx, paddr, copies)?, false))
    }

    /// Copies of the object of `size` bytes at `paddr` (not cached), with
    /// its page's objects not cached under page caching.
    fn read_copies(&mut self, tx: &Tx<'_>, paddr: u64, size: usize) -> Result<Vec<Copied>> {
        Ok(match self.opts.caching {
            Caching::Object => vec![tx.frames().object(paddr, size)?],
            Caching::Page => {
                let t = &self.table;
                let c = tx.frames().page(paddr, size, |pa| t.lookup(pa).is_some())?;
                self.stats.pages_copied += 1;
                c
            }
        })
    }

    /// Caches `copies` (evicting to make room); the slot of the one of the
    /// object at `paddr`.
    fn insert_copies(&mut self, tx: &mut Tx<'_>, paddr: u64, copies: Vec<Copied>) -> Result<u32> {
        let need = copies.iter().map(|c| c.buf.len().div_ceil(8) * 8).sum();
        self.make_room(tx, need)?;
        let mut found = None;
        for c in copies {
            self.stats.copied += 1;
            let s = self.table.insert(c.paddr, c.type_id, c.buf);
            if c.paddr == paddr {
                found = Some(s);
            }
        }
        found.ok_or_else(|| Error::dangling(format!("no object at persistent address {paddr:#x}")))
    }

    /// A handle to the object at `paddr`, of `T`'s size, and whether it
    /// was cached already.
    pub(super) fn obj<T: Persistent>(
        &mut self,
        tx: &mut Tx<'_>,
        paddr: u64,
    ) -> Result<(Obj<T>, bool)> {
        let paddr = NonZeroU64::new(paddr).ok_or_else(|| Error::invalid("null object address"))?;
        let (slot, hit) = self.slot(tx, paddr.get(), size_of::<T>())?;
        self.check_size::<T>(slot, paddr.get())?;
        let o = Obj {
            slot,
            paddr,
            _t: PhantomData,
        };
        Ok((o, hit))
    }

    /// Refuses to take the copy in `slot` for a `T` unless it has `T`'s
    /// size (a page's objects are copied whatever their type), as a
    /// dereference checks the object's header.
    fn check_size<T>(&self, slot: u32, paddr: u64) -> Result<()> {
        self.check_len(slot, paddr, size_of::<T>(), std::any::type_name::<T>())
    }

    /// Refuses the copy in `slot` unless it has `size` bytes (`what`'s).
    fn check_len(&self, slot: u32, paddr: u64, size: usize, what: &str) -> Result<()> {
        let e = self
            .table
            .entry(slot, paddr)
            .ok_or_else(|| Error::internal("a copy just made is gone"))?;
        if e.buf.len() != size {
            return Err(Error::dangling(format!(
                "the object at persistent address {paddr:#x} has {} bytes, not a {what} of {size}",
                e.buf.len(),
            )));
        }
        Ok(())
    }

    /// The pointer fields of type `type_id`.
    fn ptr_map(&mut self, tx: &Tx<'_>, type_id: u32) -> Result<Arc<PtrMap>> {
        if let Some(m) = self.ptr_maps.get(&type_id) {
            return Ok(m.clone());
        }
        let t = tx.registry.get(type_id).ok_or_else(|| {
            Error::dangling(format!("a copied object has unknown type id {type_id}"))
        })?;
        let m = Arc::new(PtrMap::of(&t.stored));
        self.ptr_maps.insert(type_id, m.clone());
        Ok(m)
    }

    /// Eager swizzling upon discovery: discovers the pointer fields in
    /// bytes `[lo, hi)` of the copy in `slot` (of the object at `paddr`),
    /// copying each target in if it is not cached and linking the field to
    /// it. Stops early if the copy itself is evicted to make room.
    pub(super) fn discover(
        &mut self,
        tx: &mut Tx<'_>,
        slot: u32,
        paddr: u64,
        lo: usize,
        hi: usize,
    ) -> Result<()> {
        let Some(e) = self.table.entry(slot, paddr) else {
            return Ok(());
        };
        let map = self.ptr_map(tx, e.type_id)?;
        for f in map.within(lo, hi) {
            let Some(e) = self.table.entry(slot, paddr) else {
                break;
            };
            if let Some(l) = e.link(f.offset) {
                if self.table.entry(l.slot, l.paddr).is_some() {
                    continue;
                }
                self.stats.stale_links += 1;
            }
            let at = f.offset as usize;
            let word = e.buf.bytes()[at..at + 8]
                .try_into()
                .map(u64::from_le_bytes)
                .map_err(|_| Error::internal("a pointer field of 8 bytes"))?;
            // A pointer whose target cannot be copied (a stale pointer, a
            // damaged page, an object of another size) is left unlinked:
            // discovery is the cache's guess, and the program meets the
            // error only if it follows the pointer.
            let target = match f.target(tx, word) {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(_) => {
                    self.stats.undiscovered += 1;
                    continue;
                }
            };
            let size = f.target_size as usize;
            self.stats.lookups += 1;
            let to = match self.table.lookup(target) {
                Some(s) => s,
                None => {
                    let Ok(copies) = self.read_copies(tx, target, size) else {
                        self.stats.undiscovered += 1;
                        continue;
                    };
                    self.stats.copied_on_discovery += copies.len() as u64;
                    self.insert_copies(tx, target, copies)?
                }
            };
            if self.check_len(to, target, size, "target").is_err() {
                self.stats.undiscovered += 1;
                continue;
            }
            if let Some(e) = self.table.entry_mut(slot, paddr) {
                e.set_link(Link {
                    offset: f.offset,
                    slot: to,
                    paddr: target,
                });
                self.stats.swizzled += 1;
            }
        }
        Ok(())
    }

    /// The first use of `o`'s copy in `slot` under eager swizzling:
    /// discovers every pointer in it (once: until a write through
    /// `field_mut` may have stored another); the slot of the copy after
    /// (copied in again if its targets pushed it out, to be discovered at
    /// its next use).
    #[cold]
    pub(super) fn visit<T: Persistent>(
        &mut self,
        tx: Option<&mut Tx<'_>>,
        o: Obj<T>,
        slot: u32,
    ) -> Result<u32> {
        let tx = tx.ok_or_else(|| Error::invalid("transaction already finished"))?;
        self.discover(tx, slot, o.paddr.get(), 0, size_of::<T>())?;
        match self.table.entry_mut(slot, o.paddr.get()) {
            Some(e) => {
                e.discovered = true;
                Ok(slot)
            }
            None => self.resolve(Some(tx), o),
        }
    }

    /// The slot of `o`'s copy, copied in again if it was evicted.
    #[inline]
    pub(super) fn resolve<T: Persistent>(
        &mut self,
        tx: Option<&mut Tx<'_>>,
        o: Obj<T>,
    ) -> Result<u32> {
        if let Some(e) = self.table.entry_mut(o.slot, o.paddr.get()) {
            e.referenced = true;
            return Ok(o.slot);
        }
        let tx = tx.ok_or_else(|| Error::invalid("transaction already finished"))?;
        Ok(self.obj::<T>(tx, o.paddr.get())?.0.slot)
    }

    /// Drops what an abort must not keep: the modified copies, and after a
    /// write-back every copy (one may hold the bytes written back).
    pub(super) fn abort(&mut self) {
        if self.wrote_back {
            self.table.clear();
        } else {
            for s in self.table.modified() {
                self.table.remove(s);
            }
        }
        self.wrote_back = false;
    }
}
