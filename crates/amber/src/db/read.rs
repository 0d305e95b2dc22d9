//! Reading, written once for [`Db`] and [`Tx`]: the [`View`] trait.
//!
//! Read-only code takes `&impl View` (or `&dyn`-free generics) and runs on
//! a database between transactions and inside a transaction alike, where it
//! sees the transaction's own writes: its objects, its roots, its
//! allocations and frees in the counts.
//!
//! Every method is provided, on top of one hidden one that hands out what
//! reading needs ([`Reading`]: the frame space and its one [`Access`], the
//! store, the type registry, and in a transaction its own roots and
//! counts), so the two implementations are two lines each. `Db` and `Tx`
//! keep the inherent methods they had (`get`, `try_get`, `slice`, `bytes`,
//! `smart`, and `Db::root`), which forward here, so existing code needs no
//! import; the rest (`str`, the `try_` forms of the buffer reads, `roots`,
//! `count`, `census`) come with `use amber::View`.

use super::session::TxState;
use super::{Db, Tx, checked, translate};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::meta::RootEntry;
use crate::format::objects::{OBJECT_ALIGN, OBJECT_HEADER};
use crate::db::index::{IndexKey, IndexRange, IndexValues, Nodes, multi_suffix, reads};
use crate::ptr::{Lazy, PBytes, PIndex, PMultiIndex, PRef, PString, PVec, Smart};
use crate::translate::lazy::{Discovery, discover};
use std::ops::RangeBounds;
use crate::schema::check::Program;
use crate::schema::layout::pages_for;
use crate::schema::registry::{Binding, Registry};
use crate::source::{Source, SourceTx};
use crate::store::Store;
use crate::translate::swizzle::AddrMap;
use crate::vm::{Access, Field, FrameSpace, NotLive, Persistent};
use std::any::TypeId;
use std::num::NonZeroU64;

/// What reading needs of an open database; made by [`View::reading`].
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Reading<'a> {
    access: &'a Access,
    fs: &'a FrameSpace,
    source: &'a dyn Source,
    /// The same store, when it is in this process.
    store: Option<&'a Store>,
    registry: &'a Registry,
    /// In a transaction: its store transaction (its own roots) and its
    /// bookkeeping (its own allocations and frees).
    tx: Option<(&'a dyn SourceTx, &'a TxState)>,
}

impl<'a> Reading<'a> {
    /// What reading an index needs.
    pub(crate) fn nodes(self) -> Nodes<'a> {
        Nodes {
            access: self.access,
            fs: self.fs,
            path: self.source.name(),
        }
    }
}

/// Reading a database, the same on a [`Db`] and in a [`Tx`]: write
/// read-only code once, as `fn show(v: &impl View, ...)`, and call it with
/// either.
///
/// ```
/// use amber::{Db, Options, PRef, PString, PVec, Persistent, View};
///
/// #[derive(Persistent)]
/// #[repr(C)]
/// struct Dir { name: PString, kids: PVec<PRef<Dir>> }
///
/// /// The names below `d`, depth first: on a `Db` or in a `Tx`.
/// fn names(v: &impl View, d: PRef<Dir>, out: &mut Vec<String>) {
///     let dir = v.get(d);
///     out.push(v.str(&dir.name).to_string());
///     for &k in v.slice(&dir.kids) {
///         names(v, k, out);
///     }
/// }
///
/// # fn main() -> amber::Result<()> {
/// # let dir = tempfile::tempdir().expect("a temporary directory");
/// let mut db = Db::create(dir.path().join("dirs.amber"), Options::default())?;
/// let mut tx = db.begin()?;
/// let etc = tx.alloc_with(|tx| Ok(Dir { name: tx.new_string("etc")?, kids: PVec::new() }))?;
/// let root = tx.alloc_with(|tx| Ok(Dir { name: tx.new_string("/")?, kids: tx.new_vec([etc])? }))?;
/// tx.set_root("root", root)?;
/// let mut seen = Vec::new();
/// names(&tx, root, &mut seen); // in the transaction
/// tx.commit()?;
/// let mut after = Vec::new();
/// names(&db, root, &mut after); // on the database
/// assert_eq!(seen, after);
/// assert_eq!(db.roots(), [("root".to_string(), "Dir".to_string())]);
/// assert_eq!(db.count::<Dir>()?, 2);
/// # Ok(()) }
/// ```
///
/// The plain forms ([`get`](Self::get), [`slice`](Self::slice),
/// [`bytes`](Self::bytes), [`str`](Self::str)) panic, naming the pointer, on
/// a stale pointer or buffer (and on a string whose bytes are not UTF-8);
/// the `try_` forms return the error instead, and fetch the page first so
/// that a damaged page is an [`Error::Corrupt`] rather than a fatal fault.
pub trait View {
    /// What reading needs (Amber's; not for use by programs).
    #[doc(hidden)]
    fn reading(&self) -> Reading<'_>;

    /// Follows a pointer: a plain load once the page is resident. Panics on
    /// a stale pointer (see [`Db::get`]).
    #[inline(always)]
    fn get<T: Persistent>(&self, p: PRef<T>) -> &T {
        self.reading().access.object(p.addr())
    }

    /// Follows a pointer, every failure an error: [`Error::Dangling`] for a
    /// stale pointer, [`Error::Corrupt`] for a damaged page.
    fn try_get<T: Persistent>(&self, p: PRef<T>) -> Result<&T> {
        let r = self.reading();
        checked(r.fs, r.access, r.source.name(), p.addr())
    }

    /// The elements of a persistent vector (iterate with `.iter()`).
    /// Panics if its buffer is not a live buffer of this database.
    #[inline(always)]
    fn slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> &'a [T] {
        self.reading().access.elements(v.buf, v.len as usize)
    }

    /// [`slice`](Self::slice), every failure an error.
    fn try_slice<'a, T: Field>(&'a self, v: &'a PVec<T>) -> Result<&'a [T]> {
        self.reading().elements(v.buf, v.len as usize)
    }

    /// The bytes of a persistent byte string (panics as
    /// [`slice`](Self::slice) does).
    #[inline(always)]
    fn bytes<'a>(&'a self, b: &'a PBytes) -> &'a [u8] {
        self.reading().access.elements(b.buf, b.len as usize)
    }

    /// [`bytes`](Self::bytes), every failure an error.
    fn try_bytes<'a>(&'a self, b: &'a PBytes) -> Result<&'a [u8]> {
        self.reading().elements(b.buf, b.len as usize)
    }

    /// The text of a persistent string. Its bytes are checked to be UTF-8
    /// at each read (they may come from a damaged disk; the check runs at
    /// memory speed). Panics, naming the buffer, on a stale buffer or bytes
    /// that are not UTF-8; [`try_str`](Self::try_str) returns the error.
    fn str<'a>(&'a self, s: &'a PString) -> &'a str {
        let r = self.reading();
        let bytes = r.access.elements(s.bytes.buf, s.bytes.len as usize);
        match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => panic!("amber: {}", r.not_utf8(s.bytes.buf, e)),
        }
    }

    /// [`str`](Self::str), every failure an error: [`Error::Corrupt`] (naming
    /// the buffer's page) for bytes that are not UTF-8.
    fn try_str<'a>(&'a self, s: &'a PString) -> Result<&'a str> {
        let r = self.reading();
        let bytes = r.elements(s.bytes.buf, s.bytes.len as usize)?;
        std::str::from_utf8(bytes).map_err(|e| r.not_utf8(s.bytes.buf, e))
    }

    /// Follows a smart pointer: its persistent address is translated at
    /// each use. A stale one is [`Error::Dangling`], a damaged page
    /// [`Error::Corrupt`].
    fn smart<T: Persistent>(&self, s: Smart<T>) -> Result<&T> {
        let r = self.reading();
        let pages = pages_for(u64::from(T::DESC.size), r.source.page_size());
        let va = translate(r.fs, s.paddr(), pages)?;
        checked(r.fs, r.access, r.source.name(), va)
    }

    /// Follows a lazy pointer, swizzling it upon discovery; `None` if it is
    /// null. A swizzled field is a load, as [`get`](Self::get) is; an
    /// unswizzled one is translated as a [`Smart`] is, and the field
    /// rewritten in memory to the direct address when the target is
    /// already resident (a rewrite that is never logged). Panics on a stale
    /// pointer, as `get` does; [`try_lazy`](Self::try_lazy) returns the
    /// error.
    #[inline(always)]
    fn lazy<'a, T: Persistent>(&'a self, l: &Lazy<T>) -> Option<&'a T> {
        self.reading().lazy(l, Discovery::Lazy)
    }

    /// [`lazy`](Self::lazy), every failure an error: [`Error::Dangling`]
    /// for a stale pointer, [`Error::Corrupt`] for a damaged page.
    fn try_lazy<'a, T: Persistent>(&'a self, l: &Lazy<T>) -> Result<Option<&'a T>> {
        let r = self.reading();
        match r.lazy_va(l, Discovery::Lazy)? {
            0 => Ok(None),
            va => checked(r.fs, r.access, r.source.name(), va).map(Some),
        }
    }

    /// [`lazy`](Self::lazy) in its eager variant: an unswizzled field is
    /// rewritten at its first read whether its target is resident or not
    /// (its frame is reserved, and the dereference faults it in). For
    /// comparing the two, as White & DeWitt did.
    fn lazy_eager<'a, T: Persistent>(&'a self, l: &Lazy<T>) -> Option<&'a T> {
        self.reading().lazy(l, Discovery::Eager)
    }

    /// A named root, if it exists (in a transaction, as it set it). Its
    /// stored type must be `T`, and the stored layouts of `T` and of every
    /// type it reaches must be the program's.
    fn root<T: Persistent>(&self, name: &str) -> Result<Option<PRef<T>>> {
        let r = self.reading();
        let Some(root) = r.root_entry(name) else {
            return Ok(None);
        };
        let id = r.stored_id::<T>()?;
        if id != Some(root.type_id) {
            return Err(Error::SchemaMismatch {
                type_name: T::DESC.name.to_string(),
                what: format!("root `{name}` holds a `{}`", r.type_name(root.type_id)),
            });
        }
        if !root.addr.is_multiple_of(OBJECT_ALIGN as u64) {
            return Err(Error::Corrupt {
                file: FileKind::PageFile,
                path: r.source.name().to_path_buf(),
                at: Location::Meta("root directory"),
                what: format!(
                    "root `{name}` holds {:#x}, not an object's address",
                    root.addr
                ),
            });
        }
        let pages = pages_for(u64::from(T::DESC.size), r.source.page_size());
        let va = translate(r.fs, root.addr, pages)?;
        Ok(NonZeroU64::new(va).map(PRef::from_addr))
    }

    /// The named roots (in a transaction, with its own changes), by name:
    /// each root's name and the stored name of its object's type, to pick
    /// the `T` of [`root`](Self::root).
    fn roots(&self) -> Vec<(String, String)> {
        let r = self.reading();
        let roots = match r.tx {
            Some((stx, _)) => stx.roots(),
            None => r.source.roots(),
        };
        roots
            .into_iter()
            .map(|e| {
                let ty = r.type_name(e.type_id);
                (e.name, ty)
            })
            .collect()
    }

    /// The number of live objects of type `T` (in a transaction, with the
    /// objects it allocated and freed). A census of the whole database:
    /// reads every committed block, as the first pass of deep verification
    /// does, so its cost grows with the database, not with the count.
    fn count<T: Persistent>(&self) -> Result<u64> {
        let r = self.reading();
        let Some(id) = r.stored_id::<T>()? else {
            return Ok(0);
        };
        Ok(r.counts()?.get(&id).copied().unwrap_or(0))
    }

    /// Live objects per stored type: every type of the schema catalog with
    /// at least one (vector and string buffers are types `[T]`), by name.
    /// Costs what [`count`](Self::count) does.
    fn census(&self) -> Result<Vec<(String, u64)>> {
        let r = self.reading();
        let mut out: Vec<(String, u64)> = r
            .counts()?
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(id, n)| (r.type_name(id), n))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The object under `key` in index `idx`.
    fn index_get<V: Persistent, K: IndexKey>(
        &self,
        idx: &PIndex<V, K>,
        key: &K::Borrowed,
    ) -> Result<Option<PRef<V>>> {
        reads::get::<V, K::Borrowed>(self.reading().nodes(), idx.root, key)
    }

    /// Whether index `idx` has an entry under `key`.
    fn index_contains<V: Persistent, K: IndexKey>(
        &self,
        idx: &PIndex<V, K>,
        key: &K::Borrowed,
    ) -> Result<bool> {
        Ok(self.index_get(idx, key)?.is_some())
    }

    /// The entries of index `idx` with keys in `range`, in key order, by
    /// iterator (see [`Db::index_range`]).
    fn index_range<'a, V: Persistent, K: IndexKey>(
        &'a self,
        idx: &PIndex<V, K>,
        range: impl RangeBounds<K::Borrowed>,
    ) -> Result<IndexRange<'a, V, K>> {
        reads::range(self.reading().nodes(), idx.root, &range, 0)
    }

    /// All entries of index `idx`, in key order.
    fn index_iter<'a, V: Persistent, K: IndexKey>(
        &'a self,
        idx: &PIndex<V, K>,
    ) -> Result<IndexRange<'a, V, K>> {
        reads::range::<V, K>(self.reading().nodes(), idx.root, &.., 0)
    }

    /// The objects under `key` in multi-index `idx`, in the order of their
    /// addresses (of insertion in an index of the first format).
    fn multi_get<'a, V: Persistent, K: IndexKey>(
        &'a self,
        idx: &PMultiIndex<V, K>,
        key: &K::Borrowed,
    ) -> Result<IndexValues<'a, V>> {
        reads::values::<V, K::Borrowed>(self.reading().nodes(), idx.root, key)
    }

    /// Whether multi-index `idx` has an entry under `key`.
    fn multi_contains<V: Persistent, K: IndexKey>(
        &self,
        idx: &PMultiIndex<V, K>,
        key: &K::Borrowed,
    ) -> Result<bool> {
        self.multi_get(idx, key)?.next().transpose().map(|v| v.is_some())
    }

    /// The entries of multi-index `idx` with keys in `range`, in key order
    /// and, within a key, in the order of the values' addresses.
    fn multi_range<'a, V: Persistent, K: IndexKey>(
        &'a self,
        idx: &PMultiIndex<V, K>,
        range: impl RangeBounds<K::Borrowed>,
    ) -> Result<IndexRange<'a, V, K>> {
        reads::range(self.reading().nodes(), idx.root, &range, multi_suffix(idx.next))
    }

    /// All entries of multi-index `idx`, in key order.
    fn multi_iter<'a, V: Persistent, K: IndexKey>(
        &'a self,
        idx: &PMultiIndex<V, K>,
    ) -> Result<IndexRange<'a, V, K>> {
        reads::range::<V, K>(self.reading().nodes(), idx.root, &.., multi_suffix(idx.next))
    }

}

impl<'a> Reading<'a> {
    /// What `l` leads to (`None`: null), the field swizzled as `how` says;
    /// panics on a stale pointer, as `get` does.
    #[inline(always)]
    fn lazy<T: Persistent>(self, l: &Lazy<T>, how: Discovery) -> Option<&'a T> {
        match self.lazy_va(l, how) {
            Ok(0) => None,
            Ok(va) => Some(self.access.object(va)),
            Err(e) => panic!("amber: following a lazy pointer: {e}"),
        }
    }

    /// The virtual address lazy pointer `l` leads to (to a `T`; 0 if it is
    /// null), the field swizzled as `how` says.
    #[inline(always)]
    fn lazy_va<T: Persistent>(&self, l: &Lazy<T>, how: Discovery) -> Result<u64> {
        match l.load() {
            Ok(va) => Ok(va),
            Err(0) => Ok(0),
            Err(paddr) => {
                let pages = pages_for(u64::from(T::DESC.size), self.source.page_size());
                discover(self.fs, self.source.name(), l, paddr, pages, how)
            }
        }
    }

    /// The `count` elements of the buffer at `buf`, fetched first, every
    /// failure an error.
    fn elements<T: Field>(&self, buf: u64, count: usize) -> Result<&'a [T]> {
        if count == 0 {
            return Ok(&[]);
        }
        self.fs
            .frame_at(buf as usize)
            .ok_or_else(|| not_live(buf, self.access.try_elements::<T>(buf, count).err()))?;
        let (fs, path) = (self.fs, self.source.name());
        let header = buf.saturating_sub(OBJECT_HEADER as u64);
        super::ensure_span(fs, path, header, buf + 1)?;
        let items = (self.access.try_elements(buf, count)).map_err(|why| not_live(buf, Some(why)))?;
        super::ensure_span(fs, path, buf, buf.saturating_add(std::mem::size_of_val(items) as u64))?;
        Ok(items)
    }

    /// The error for a string buffer at `buf` whose bytes are not UTF-8.
    fn not_utf8(&self, buf: u64, e: std::str::Utf8Error) -> Error {
        let paddr = super::fetch::FrameMap::new(self.fs, self.source.home())
            .to_paddr(buf)
            .unwrap_or(0);
        let ps = self.source.page_size() as u64;
        Error::Corrupt {
            file: FileKind::PageFile,
            path: self.source.name().to_path_buf(),
            at: Location::Page(paddr / ps),
            what: format!(
                "the string buffer at {}:{} is not UTF-8: {e}",
                paddr / ps,
                paddr % ps
            ),
        }
    }

    /// The catalog id of `T` if the database has it stored (`None`: no
    /// object of it exists); a different stored layout is an error.
    fn stored_id<T: Persistent>(&self) -> Result<Option<u32>> {
        Ok(
            match self
                .registry
                .bind(TypeId::of::<T>(), Program::Struct(&T::DESC))?
            {
                Binding::Stored(id) => Some(id),
                Binding::New(_) => None,
            },
        )
    }

    /// The stored name of type `id`.
    fn type_name(&self, id: u32) -> String {
        self.registry
            .get(id)
            .map_or_else(|| format!("type id {id}"), |e| e.stored.name.clone())
    }

    fn root_entry(&self, name: &str) -> Option<RootEntry> {
        match self.tx {
            Some((stx, _)) => stx.root(name),
            None => self.source.root(name),
        }
    }

    /// Live objects by type id: the committed census, with a
    /// transaction's own allocations and frees.
    fn counts(&self) -> Result<std::collections::HashMap<u32, u64>> {
        let store = self.store.ok_or_else(|| {
            Error::invalid(format!(
                "{}: counting objects through a server is not built yet",
                self.source.name().display()
            ))
        })?;
        let mut counts = crate::inspect::census(store)?;
        if let Some((_, st)) = self.tx {
            for (&id, &delta) in &st.counts {
                let n = counts.entry(id).or_default();
                *n = n.checked_add_signed(delta).ok_or_else(|| {
                    Error::internal(format!(
                        "type id {id}: the transaction freed more objects than were stored"
                    ))
                })?;
            }
        }
        Ok(counts)
    }
}

/// The error for a buffer pointer `buf` that leads to no live buffer.
fn not_live(buf: u64, why: Option<NotLive>) -> Error {
    match why.unwrap_or(NotLive::Foreign) {
        NotLive::Foreign => Error::invalid(NotLive::Foreign.describe(buf)),
        why => Error::dangling(why.describe(buf)),
    }
}

impl View for Db {
    fn reading(&self) -> Reading<'_> {
        Reading {
            access: &self.access,
            fs: &self.fs,
            source: &*self.source,
            store: self.store.as_deref(),
            registry: &self.registry,
            tx: None,
        }
    }
}

impl View for Tx<'_> {
    fn reading(&self) -> Reading<'_> {
        Reading {
            access: self.access,
            fs: self.fs,
            source: self.source,
            store: self.local,
            registry: self.registry,
            tx: self.stx.as_deref().map(|stx| (stx as &dyn SourceTx, &self.session.tx)),
        }
    }
}
