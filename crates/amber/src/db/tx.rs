//! Transactions: updates in place at memory speed, detected by page
//! protection, turned into a minimal log at commit (`commit.rs`).
//!
//! A transaction borrows the database exclusively; `get_mut` hands out a
//! plain `&mut T` into the mapped page (and is where a software write barrier
//! goes for the detection schemes that need one). Allocating and freeing
//! objects is in `alloc.rs`.

use super::pager::Pager;
use super::session::{Parts, Session};
use super::strategy::Strategy;
use super::{Db, View};
use crate::error::{Error, Result};
use crate::ptr::{PBytes, PRef, PVec, Smart};
use crate::schema::check::Program;
use crate::schema::registry::{Binding, Registry};
use crate::source::{Source, SourceTx};
use crate::translate::swizzle::AddrMap;
use crate::vm::{Access, Field, FrameSpace, Persistent};
use std::any::TypeId;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a commit did and what it cost, split as in Hosking et al.'s
/// breakdown: finding the changed pages, diffing and unswizzling them, and
/// writing and syncing the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Blocks found written.
    pub blocks: u64,
    /// Log bytes written (records and commit record).
    pub log_bytes: u64,
    /// Log bytes the minimal-log rule demands for the changes (headers plus
    /// changed bytes, after coalescing), commit record excluded; counted
    /// for what was diffed only: whole-page logging diffs its pages for
    /// this count alone, sub-page logging does not (its blocks logged
    /// without a diff count nothing).
    pub minimal_log_bytes: u64,
    /// Bytes that differ from the committed state.
    pub changed_bytes: u64,
    /// Through a server: the whole pages shipped at commit (the dirty
    /// pages of an ESM scheme, the page records of whole-page logging;
    /// QuickStore's data pages, `papers/002_*` Figure 9).
    pub data_pages_shipped: u64,
    /// Through a server: the range records shipped at commit, in pages
    /// (QuickStore's log-record pages).
    pub log_pages_shipped: u64,
    /// Bytes the detection scheme said may have been written, which the
    /// commit diffed: whole blocks under page protection, the marked
    /// objects, remembered objects or dirty cards under a software scheme
    /// (blocks allocated by the transaction count whole).
    pub noted_bytes: u64,
    /// Blocks diffed against the barrier's clean copies, object by object,
    /// rather than whole against their committed image read back from the
    /// store (software schemes only).
    pub copy_diffed_blocks: u64,
    /// Time to find the written pages.
    pub detect: Duration,
    /// Time to unswizzle and diff them.
    pub diff: Duration,
    /// Time to append the records and sync the log.
    pub write: Duration,
    /// The strategy the transaction ran under (under
    /// [`Strategy::AUTO`], the one chosen for it).
    pub strategy: Strategy,
}

/// Marker so that array types get their own registry key per element type.
struct ArrayOf<T>(PhantomData<T>);

/// An open transaction.
#[derive(Debug)]
pub struct Tx<'db> {
    pub(crate) stx: Option<Box<dyn SourceTx + 'db>>,
    /// Where committed state comes from (and the transaction goes).
    pub(crate) source: &'db dyn Source,
    /// The same store, when it is in this process (counting objects reads
    /// it whole).
    pub(crate) local: Option<&'db crate::store::Store>,
    pub(crate) access: &'db mut Access,
    pub(crate) fs: &'db Arc<FrameSpace>,
    pub(crate) pager: &'db Pager,
    pub(crate) registry: &'db Registry,
    /// Allocation state and this transaction's bookkeeping (kept in the
    /// database, so that a forgotten transaction is found: `session.rs`).
    pub(crate) session: &'db mut Session,
    /// What early logging cost, for the commit's statistics.
    pub(crate) early_stats: CommitStats,
    /// A failure from work done on the way (early logging), reported at
    /// commit.
    pub(crate) failed: Option<Error>,

    pub(crate) page_size: usize,
    /// How this transaction detects its updates.
    pub(crate) strategy: Strategy,
    /// Under `Strategy::AUTO`: what the commit reports of it.
    pub(crate) auto: Option<AutoTx>,
}

/// A transaction of `Strategy::AUTO`, as its commit reports it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AutoTx {
    /// The arm chosen.
    pub(crate) arm: usize,
    /// When its detection was armed.
    pub(crate) armed: Instant,
    /// What switching to it cost, if `begin` switched.
    pub(crate) switch: Option<Duration>,
}

impl<'db> Tx<'db> {
    pub(crate) fn new(db: &'db mut Db, strategy: Strategy) -> Result<Tx<'db>> {
        let Db {
            source,
            store,
            registry,
            pager,
            fs,
            access,
            session,
            ..
        } = db;
        let source: &'db dyn Source = &**source;
        let page_size = source.page_size();
        let stx = source.begin()?;
        // A server's snapshot moved to its latest commit: what changed
        // since leaves memory before the transaction reads anything.
        let parts = Parts {
            source,
            fs,
            pager,
            registry,
        };
        super::reader::apply_changed(&parts, source.take_changed())?;
        // The mapped backend: pages whose changes a checkpoint installed
        // read the page file again, before anything is written.
        if let Some(store) = store {
            super::mapped::settle(fs, store, &mut session.settled)?;
        }
        session.tx.start(stx.id());
        // A server validates the commit against what it read: every
        // reference made from here on notes its frames (`vm/reads.rs`).
        if stx.wants_reads() {
            access.start_reads();
        }
        // Threads of this transaction may write frames from now on: eviction
        // must make sure it drops none written meanwhile.
        fs.set_writers(true);
        Ok(Tx {
            stx: Some(stx),
            source,
            local: store.as_deref(),
            access,
            fs,
            pager,
            registry,
            session,
            early_stats: CommitStats::default(),
            failed: None,
            page_size,
            strategy,
            auto: None,
        })
    }

    /// What rolling back needs.
    pub(crate) fn parts(&self) -> Parts<'_> {
        Parts {
            source: self.source,
            fs: self.fs,
            pager: self.pager,
            registry: self.registry,
        }
    }

    pub(crate) fn stx(&mut self) -> Result<&mut (dyn SourceTx + 'db)> {
        match &mut self.stx {
            Some(stx) => Ok(&mut **stx),
            None => Err(Error::invalid("transaction already finished")),
        }
    }

    /// Reads an object. Panics on a stale pointer, as [`Db::get`] does.
    #[inline(always)]
    pub fn get<T: Persistent>(&self, p: PRef<T>) -> &T {
        self.access.object(p.addr())
    }

    /// Reads an object: [`Db::try_get`] within the transaction.
    pub fn try_get<T: Persistent>(&self, p: PRef<T>) -> Result<&T> {
        View::try_get(self, p)
    }

    /// Updates an object in place: the page is marked written by the
    /// hardware on the first store. Panics on a stale pointer, as
    /// [`Db::get`] does.
    #[inline(always)]
    pub fn get_mut<T: Persistent>(&mut self, p: PRef<T>) -> &mut T {
        self.tick();
        self.access.object_mut(p.addr())
    }

    /// Updates one field of an object in place: `field` projects the
    /// object to the field (`|o| &o.x`), and the field is returned
    /// mutably. Under a software detection scheme the barrier records the
    /// field alone (a card or sub-page scheme then logs only its bytes'
    /// neighbourhood); under page protection it is `get_mut` with a
    /// projection. Panics on a stale pointer, as [`Db::get`] does, and if
    /// `field` returns a reference that is not into the object.
    #[inline(always)]
    pub fn field_mut<T: Persistent, F: Field>(
        &mut self,
        p: PRef<T>,
        field: impl for<'a> FnOnce(&'a T) -> &'a F,
    ) -> &mut F {
        self.tick();
        let object: &T = self.access.object(p.addr());
        let offset = (field(object) as *const F as usize).wrapping_sub(object as *const T as usize);
        self.access.field_mut::<T, F>(p.addr(), offset)
    }

    /// Work owed at an entry into Amber: pages whose recovery-buffer copies
    /// must be logged early.
    #[inline(always)]
    pub(crate) fn tick(&mut self) {
        if let Some(b) = self.pager.rbuf.get()
            && b.attention.load(Ordering::Relaxed)
        {
            self.relieve();
        }
        if self.pager.pressure.load(Ordering::Relaxed) {
            self.spill_dirty();
        }
    }

    #[cold]
    fn relieve(&mut self) {
        let Some(b) = self.pager.rbuf.get() else {
            return;
        };
        for (frame, clean) in b.take_marked() {
            if let Some((head, _, run)) = self.fs.page_of(frame) {
                self.session.tx.early_pages.insert(head, run);
            }
            match self.log_early(frame, clean) {
                Ok(()) => {
                    b.early_logged.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if self.failed.is_none() {
                        self.failed = Some(e);
                    }
                }
            }
        }
    }

    /// The elements of a persistent vector (panics as [`Db::slice`] does).
    pub fn slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> &'a [T] {
        View::slice(self, v)
    }

    /// The bytes of a persistent byte string (panics as [`Db::slice`] does).
    pub fn bytes<'a>(&'a self, b: &'a PBytes) -> &'a [u8] {
        View::bytes(self, b)
    }

    /// Follows a smart pointer, as [`Db::smart`] does.
    pub fn smart<T: Persistent>(&self, s: Smart<T>) -> Result<&T> {
        View::smart(self, s)
    }

    /// The smart (persistent-address) form of a pointer to a live object;
    /// [`Error::Dangling`] for a stale one.
    pub fn to_smart<T: Persistent>(&self, p: PRef<T>) -> Result<Smart<T>> {
        let pa = self.live_paddr::<T>(p.addr())?;
        NonZeroU64::new(pa)
            .map(Smart::from_paddr)
            .ok_or_else(|| Error::internal("a live object at persistent address 0"))
    }

    /// The persistent address of a program's pointer `va`, which must lead
    /// to a live `T` of this database, outside dead space (`dead.rs`): what
    /// is about to be stored as a root, a smart pointer or an index value.
    pub(crate) fn live_paddr<T: Field>(&self, va: u64) -> Result<u64> {
        super::checked::<T>(self.fs, self.access, self.source.name(), va)?;
        let pa = self.paddr(va)?;
        if self.pager.dead.contains(pa, self.page_size.trailing_zeros()) {
            return Err(Error::dangling(format!(
                "pointer {va:#x} leads to an object of a transaction that did not commit"
            )));
        }
        Ok(pa)
    }

    /// The catalog id of a program type, defining it in this transaction if
    /// the database has never seen it; a different stored layout of it or of
    /// any type it reaches is an error naming the type and the field.
    pub(crate) fn type_id_of(&mut self, rust: TypeId, program: Program) -> Result<u32> {
        let stored = match self.registry.bind(rust, program)? {
            Binding::Stored(id) => return Ok(id),
            Binding::New(stored) => stored,
        };
        let id = self.stx()?.define_type(&stored.encode())?;
        self.registry.define(id, Some(rust), stored);
        Ok(id)
    }

    pub(crate) fn struct_id<T: Persistent>(&mut self) -> Result<u32> {
        self.type_id_of(TypeId::of::<T>(), Program::Struct(&T::DESC))
    }

    pub(crate) fn array_id<T: Field>(&mut self) -> Result<u32> {
        self.type_id_of(
            TypeId::of::<ArrayOf<T>>(),
            Program::Array {
                elem: &T::KIND,
                elem_size: std::mem::size_of::<T>() as u32,
            },
        )
    }

    /// The persistent address of virtual address `va` (one Amber itself
    /// made: a new index node).
    pub(crate) fn paddr(&self, va: u64) -> Result<u64> {
        super::fetch::FrameMap::new(self.fs, self.source.home())
            .to_paddr(va)
            .map_err(Error::Invalid)
    }

    /// Names `p` as root `name` (replacing any root of that name). `p` must
    /// lead to a live object ([`Error::Dangling`] otherwise).
    pub fn set_root<T: Persistent>(&mut self, name: &str, p: PRef<T>) -> Result<()> {
        let id = self.struct_id::<T>()?;
        let pa = self.live_paddr::<T>(p.addr())?;
        self.stx()?.set_root(name, pa, id)
    }

    /// Removes root `name` (nothing if there is none). Only the name goes:
    /// the object it named stays stored (pages are not reclaimed without
    /// reachability GC).
    pub fn remove_root(&mut self, name: &str) -> Result<()> {
        self.stx()?.set_root(name, 0, 0)
    }
}
