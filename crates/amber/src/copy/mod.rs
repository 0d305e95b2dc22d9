//! The copy architecture (White & DeWitt 1992, EPVM 2.0; `papers/003_*`
//! §3): objects copied out of the buffer pool into an object cache on first
//! use, found through an OID hash table, their pointers swizzled upon
//! discovery, their updates kept as a modified byte range per object and
//! written back into the store's objects at commit.
//!
//! The buffer pool is Amber's frames (the page file's pages, or a
//! server's); a copy's identity is its object's persistent address (a
//! [`Smart`]'s). Reads return `&T` into the copy, borrowed from the
//! transaction mutably, so no copy can be evicted while the program holds
//! a reference into it; between calls the program holds [`Obj`] handles,
//! which name a slot and the object's address, and a handle whose copy was
//! evicted is copied in again. Pointers followed through the cache
//! ([`CopyTx::follow`]) are swizzled beside the copy, never in it: a copy
//! holds its object's bytes as stored (a `Smart` a persistent address, a
//! `PRef` or a `Lazy` as the frames hold them), so nothing read from a
//! copy can be taken for something it is not. Eager swizzling discovers
//! every pointer of a copy at its first use (`discover.rs`). See
//! `docs/design.md` §4.14.

mod cache;
mod discover;
mod fill;
mod table;

use crate::db::{CommitStats, Db, Tx};
use crate::error::{Error, Result};
use crate::fasthash::IntMap;
use crate::ptr::{Lazy, PRef, Smart};
use crate::vm::{Field, Persistent};
use cache::Cache;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::ops::DerefMut;
use table::{Link, Table};

/// How objects are copied out of their pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caching {
    /// One object at a time, at its first use (OC).
    Object,
    /// Every object of a page at the first use of one of them (PC).
    Page,
}

/// When a pointer followed through the cache is swizzled (made to lead to
/// its target's copy without a hash-table lookup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swizzle {
    /// Never: every pointer followed is looked up (OC-NO, PC-NO).
    None,
    /// Upon discovery, when its target is already cached; a target copied
    /// in by the follow is swizzled at the next (EPVM 2.0).
    Lazy,
    /// Upon discovery, copying its target in if need be: the first use of
    /// a copy ([`CopyTx::get`]) discovers every pointer in it, so the
    /// targets of the pointers of every object used are copied in, used or
    /// not (not their targets in turn: those are discovered at their own
    /// first use). [`CopyTx::read`] of one field discovers that field's.
    Eager,
}

/// How a copy cache caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOptions {
    /// Object or page caching.
    pub caching: Caching,
    /// The bytes of copies the cache holds before it evicts (each copy
    /// charged its size in whole words); one object larger than this is
    /// held alone.
    pub capacity_bytes: usize,
    /// When pointers are swizzled.
    pub swizzle: Swizzle,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            caching: Caching::Object,
            capacity_bytes: 8 << 20,
            swizzle: Swizzle::Lazy,
        }
    }
}

/// What a copy cache did since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Lookups in the OID hash table.
    pub lookups: u64,
    /// Objects copied in.
    pub copied: u64,
    /// Of `copied`, those copied in because eager swizzling discovered a
    /// pointer to them, not because the program used them.
    pub copied_on_discovery: u64,
    /// Pages whose objects were copied in together (page caching).
    pub pages_copied: u64,
    /// Copies evicted.
    pub evicted: u64,
    /// Modified copies written back into the store's objects at eviction.
    pub evicted_dirty: u64,
    /// Modified ranges written back at commit.
    pub committed_ranges: u64,
    /// Pointers swizzled.
    pub swizzled: u64,
    /// Pointers eager swizzling discovered but left unlinked, their
    /// targets not copyable (stale, damaged, of another size): the error
    /// is the program's only if it follows one.
    pub undiscovered: u64,
    /// Pointers followed through a swizzled link (no lookup).
    pub followed_swizzled: u64,
    /// Swizzled links met whose target had been evicted since (its slot
    /// names another object, or none): looked up again, copying the
    /// target in again, and linked anew.
    pub stale_links: u64,
    /// Copies held now.
    pub objects: u64,
    /// Bytes charged for them.
    pub bytes: u64,
}

/// A cached object: its slot in the cache and its persistent address. Valid
/// across evictions (an evicted object is copied in again by the next use)
/// and across transactions of the same cache.
pub struct Obj<T> {
    slot: u32,
    paddr: NonZeroU64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Obj<T> {
    /// The object's identity, as a smart pointer.
    pub fn smart(self) -> Smart<T> {
        Smart::from_paddr(self.paddr)
    }
}

impl<T> Clone for Obj<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Obj<T> {}
impl<T> PartialEq for Obj<T> {
    fn eq(&self, o: &Self) -> bool {
        self.paddr == o.paddr
    }
}
impl<T> Eq for Obj<T> {}
impl<T> std::fmt::Debug for Obj<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Obj({:#x} in slot {})", self.paddr, self.slot)
    }
}

/// A pointer field the cache can follow: [`Smart`], `Option<Smart>`,
/// [`PRef`], `Option<PRef>` and [`Lazy`]. Sealed.
pub trait CopyPtr<T>: Field + private::Sealed {
    /// The target's persistent address (`None` for null).
    #[doc(hidden)]
    fn target(&self, tx: &Tx<'_>) -> Result<Option<u64>>;
}

mod private {
    pub trait Sealed {}
    impl<T> Sealed for crate::ptr::Smart<T> {}
    impl<T> Sealed for Option<crate::ptr::Smart<T>> {}
    impl<T> Sealed for crate::ptr::PRef<T> {}
    impl<T> Sealed for Option<crate::ptr::PRef<T>> {}
    impl<T> Sealed for crate::ptr::Lazy<T> {}
}

impl<T: Persistent> CopyPtr<T> for Smart<T> {
    fn target(&self, _: &Tx<'_>) -> Result<Option<u64>> {
        Ok(Some(self.paddr()))
    }
}
impl<T: Persistent> CopyPtr<T> for Option<Smart<T>> {
    fn target(&self, _: &Tx<'_>) -> Result<Option<u64>> {
        Ok(self.map(Smart::paddr))
    }
}
impl<T: Persistent> CopyPtr<T> for PRef<T> {
    fn target(&self, tx: &Tx<'_>) -> Result<Option<u64>> {
        tx.paddr(self.addr()).map(Some)
    }
}
impl<T: Persistent> CopyPtr<T> for Option<PRef<T>> {
    fn target(&self, tx: &Tx<'_>) -> Result<Option<u64>> {
        self.map(|p| tx.paddr(p.addr())).transpose()
    }
}
impl<T: Persistent> CopyPtr<T> for Lazy<T> {
    fn target(&self, tx: &Tx<'_>) -> Result<Option<u64>> {
        match self.load() {
            Ok(va) => tx.paddr(va).map(Some),
            Err(0) => Ok(None),
            Err(pa) => Ok(Some(pa)),
        }
    }
}

/// An object cache over a database, made by [`Db::copy_cache`] (borrowing
/// it) or [`CopyCache::new`] (over any exclusive handle, such as a
/// `Box<Db>` it owns). It holds the database exclusively, so nothing but
/// its transactions changes what it copied (a server's database, which
/// others change, is read afresh: each transaction starts with the cache
/// emptied).
#[derive(Debug)]
pub struct CopyCache<D: DerefMut<Target = Db>> {
    db: D,
    cache: Cache,
}

impl Db {
    /// An object cache over this database (the copy architecture, EPVM 2.0):
    /// see [`CopyCache`].
    pub fn copy_cache(&mut self, opts: CopyOptions) -> CopyCache<&mut Db> {
        CopyCache::new(self, opts)
    }
}

impl<D: DerefMut<Target = Db>> CopyCache<D> {
    /// An empty object cache over `db`.
    pub fn new(db: D, opts: CopyOptions) -> Self {
        CopyCache {
            db,
            cache: Cache {
                opts,
                table: Table::default(),
                stats: CopyStats::default(),
                wrote_back: false,
                ptr_maps: IntMap::default(),
            },
        }
    }

    /// Starts a transaction that reads and updates through the cache.
    pub fn begin(&mut self) -> Result<CopyTx<'_>> {
        if self.db.source.at_snapshot() {
            self.cache.table.clear();
        }
        let tx = self.db.begin()?;
        Ok(CopyTx {
            tx: Some(tx),
            cache: &mut self.cache,
        })
    }

    /// What the cache did, and holds.
    pub fn stats(&self) -> CopyStats {
        self.cache.stats()
    }

    /// The options it was made with.
    pub fn options(&self) -> CopyOptions {
        self.cache.opts
    }

    /// Drops every copy (none is modified between transactions).
    pub fn clear(&mut self) {
        self.cache.table.clear();
    }

    /// The database, for reading between transactions (what it reads is
    /// what the copies hold: none is modified between transactions).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The database handle back, the copies dropped.
    pub fn into_inner(self) -> D {
        self.db
    }
}

/// A transaction over a [`CopyCache`]: reads return the copies, writes
/// change them and widen their modified ranges, and [`commit`](Self::commit)
/// writes the ranges back into the objects and commits. Dropped without a
/// commit, it aborts.
#[derive(Debug)]
pub struct CopyTx<'c> {
    tx: Option<Tx<'c>>,
    cache: &'c mut Cache,
}

impl<'c> CopyTx<'c> {
    /// The cached object `s` leads to, copied in if it is not cached.
    pub fn fetch<T: Persistent>(&mut self, s: Smart<T>) -> Result<Obj<T>> {
        let tx = open(&mut self.tx)?;
        Ok(self.cache.obj(tx, s.paddr())?.0)
    }

    /// The cached object `p` leads to (a pointer of this database).
    pub fn fetch_ref<T: Persistent>(&mut self, p: PRef<T>) -> Result<Obj<T>> {
        let tx = open(&mut self.tx)?;
        let pa = tx.paddr(p.addr())?;
        Ok(self.cache.obj(tx, pa)?.0)
    }

    /// Reads an object's copy (copied in again if it was evicted). Under
    /// eager swizzling its first use discovers every pointer in it.
    #[inline]
    pub fn get<T: Persistent>(&mut self, o: Obj<T>) -> Result<&T> {
        let mut slot = self.cache.resolve(self.tx.as_mut(), o)?;
        if self.cache.opts.swizzle == Swizzle::Eager
            && !self
                .cache
                .table
                .entry(slot, o.paddr.get())
                .is_some_and(|e| e.discovered)
        {
            slot = self.cache.visit(self.tx.as_mut(), o, slot)?;
        }
        let e = self
            .cache
            .table
            .entry(slot, o.paddr.get())
            .ok_or_else(gone)?;
        Ok(e.buf.view::<T>())
    }

    /// Follows the pointer field `field` of `o`'s copy (`|o| &o.next`)
    /// through the cache: by its swizzled link if it has one, else by a
    /// lookup in the OID hash table (copying the target in if it is not
    /// cached), swizzling it as the cache's [`Swizzle`] says. `None` for a
    /// null pointer. The target must be a `U`'s size.
    pub fn follow<T: Persistent, U: Persistent, P: CopyPtr<U>>(
        &mut self,
        o: Obj<T>,
        field: impl FnOnce(&T) -> &P,
    ) -> Result<Option<Obj<U>>> {
        let swizzle = self.cache.opts.swizzle;
        let (slot, offset) = self.locate(o, field, "follow")?;
        let target = {
            let e = self
                .cache
                .table
                .entry(slot, o.paddr.get())
                .ok_or_else(gone)?;
            if let Some(l) = e.link(offset as u32) {
                if self.cache.table.entry(l.slot, l.paddr).is_some() {
                    self.cache.stats.followed_swizzled += 1;
                    return Ok(Some(Obj {
                        slot: l.slot,
                        paddr: NonZeroU64::new(l.paddr)
                            .ok_or_else(|| Error::internal("a null link"))?,
                        _t: PhantomData,
                    }));
                }
                self.cache.stats.stale_links += 1;
            }
            let tx = self
                .tx
                .as_ref()
                .ok_or_else(|| Error::invalid("transaction already finished"))?;
            e.buf.field::<P>(offset).target(tx)?
        };
        let Some(target) = target else {
            return Ok(None);
        };
        let tx = open(&mut self.tx)?;
        let (to, cached) = self.cache.obj::<U>(tx, target)?;
        let swizzle_now = match swizzle {
            Swizzle::None => false,
            Swizzle::Lazy => cached,
            Swizzle::Eager => true,
        };
        // `o`'s copy may have been evicted to make room for the target.
        if swizzle_now && let Some(e) = self.cache.table.entry_mut(slot, o.paddr.get()) {
            e.set_link(Link {
                offset: offset as u32,
                slot: to.slot,
                paddr: target,
            });
            self.cache.stats.swizzled += 1;
        }
        Ok(Some(to))
    }

    /// One field of `o`'s copy (`|o| &o.parts[i]`), by value: a use of
    /// that field alone, so eager swizzling discovers only the pointers in
    /// it (as EPVM reading `index[i]` discovers one pointer), where
    /// [`get`](Self::get) discovers every pointer of the object.
    pub fn read<T: Persistent, F: Field + Copy>(
        &mut self,
        o: Obj<T>,
        field: impl FnOnce(&T) -> &F,
    ) -> Result<F> {
        let (slot, offset) = self.locate(o, field, "read")?;
        let pa = o.paddr.get();
        let e = self.cache.table.entry(slot, pa).ok_or_else(gone)?;
        let value = *e.buf.field::<F>(offset);
        if self.cache.opts.swizzle == Swizzle::Eager && !e.discovered {
            let tx = open(&mut self.tx)?;
            self.cache
                .discover(tx, slot, pa, offset, offset + size_of::<F>())?;
        }
        Ok(value)
    }

    /// Updates one field of `o`'s copy (`|o| &o.x`), returned mutably; the
    /// copy's modified range is widened to cover it, and its swizzled
    /// pointers there are dropped. The store's object changes at commit.
    pub fn field_mut<T: Persistent, F: Field>(
        &mut self,
        o: Obj<T>,
        field: impl FnOnce(&T) -> &F,
    ) -> Result<&mut F> {
        let (slot, offset) = self.locate(o, field, "field_mut")?;
        let e = self
            .cache
            .table
            .entry_mut(slot, o.paddr.get())
            .ok_or_else(gone)?;
        e.note_write(offset, offset + size_of::<F>());
        Ok(e.buf.field_mut::<F>(offset))
    }

    /// The slot of `o`'s copy (copied in again if it was evicted) and the
    /// offset in it of the field `field` returns (`what` names the call in
    /// an error).
    fn locate<T: Persistent, F>(
        &mut self,
        o: Obj<T>,
        field: impl FnOnce(&T) -> &F,
        what: &str,
    ) -> Result<(u32, usize)> {
        let slot = self.cache.resolve(self.tx.as_mut(), o)?;
        let e = self
            .cache
            .table
            .entry(slot, o.paddr.get())
            .ok_or_else(gone)?;
        let copy = e.buf.view::<T>();
        Ok((slot, offset_in(copy, field(copy), what)?))
    }

    /// Writes every modified range back into its object through the
    /// transaction (detected and logged there as any update), then commits.
    /// On failure the transaction is rolled back and the cache emptied, so
    /// that memory and disk stay at the last commit.
    pub fn commit(mut self) -> Result<CommitStats> {
        let mut tx = self
            .tx
            .take()
            .ok_or_else(|| Error::invalid("transaction already finished"))?;
        let written = self.write_ranges(&mut tx);
        let done = written.and_then(|()| tx.commit());
        self.cache.wrote_back = false;
        if done.is_err() {
            self.cache.table.clear();
        }
        done
    }

    fn write_ranges(&mut self, tx: &mut Tx<'_>) -> Result<()> {
        for slot in self.cache.table.modified() {
            let Some(e) = self.cache.table.at(slot) else {
                continue;
            };
            if let Some((lo, hi)) = e.modified.take() {
                tx.write_back(e.paddr, e.buf.len(), lo, &e.buf.bytes()[lo..hi])?;
                self.cache.stats.committed_ranges += 1;
            }
        }
        Ok(())
    }

    /// Rolls the transaction back: the store's objects as they were, the
    /// modified copies dropped.
    pub fn abort(mut self) -> Result<()> {
        self.cache.abort();
        match self.tx.take() {
            Some(tx) => tx.abort(),
            None => Ok(()),
        }
    }

    /// What the cache did, and holds.
    pub fn stats(&self) -> CopyStats {
        self.cache.stats()
    }

    /// Blocks the database has fetched into its frames so far (the buffer
    /// pool's reads, as [`DbStats::fetched`](crate::DbStats::fetched)).
    pub fn blocks_fetched(&self) -> u64 {
        self.tx.as_ref().map_or(0, |tx| {
            tx.pager
                .stats
                .fetched
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// The transaction beneath (for reading what the cache does not).
    pub fn tx(&self) -> Option<&Tx<'c>> {
        self.tx.as_ref()
    }
}

impl Drop for CopyTx<'_> {
    fn drop(&mut self) {
        if self.tx.is_some() {
            self.cache.abort();
        }
    }
}

/// The transaction, unless it has finished.
fn open<'a, 'c>(tx: &'a mut Option<Tx<'c>>) -> Result<&'a mut Tx<'c>> {
    tx.as_mut()
        .ok_or_else(|| Error::invalid("transaction already finished"))
}

/// The error for a copy gone between its resolution and its use.
fn gone() -> Error {
    Error::internal("a copy resolved is gone")
}

/// The offset of `f`, a field of `copy` (as a closure returned it), in the
/// `T`; refused unless it lies inside, aligned (`what` names the call).
fn offset_in<T, F>(copy: &T, f: &F, what: &str) -> Result<usize> {
    let offset = (f as *const F as usize).wrapping_sub(copy as *const T as usize);
    if offset.saturating_add(size_of::<F>()) > size_of::<T>()
        || !offset.is_multiple_of(align_of::<F>())
    {
        return Err(Error::invalid(format!(
            "{what}: the field is not inside the {}",
            std::any::type_name::<T>()
        )));
    }
    Ok(offset)
}
