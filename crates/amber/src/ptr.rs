//! Persistent pointer and collection types, as they lie in objects.
//!
//! In memory a [`PRef`] holds a plain virtual address, so following it is a
//! pointer load; on disk and on the wire it holds a persistent address
//! (page number × page size + offset). The fault handler swizzles one form
//! into the other a page at a time. A [`Smart`] holds a persistent address
//! even in memory and is translated at each use (Texas's fine-grained
//! pointers, for sparse, high-fanout structures). A [`Lazy`] holds a
//! persistent address until it is followed while its target is resident,
//! and is then rewritten in memory to the direct address (swizzling upon
//! discovery). [`PVec`], [`PBytes`] and
//! [`PString`] are growable arrays whose buffer is a separate object
//! (swizzled like a `PRef`);
//! [`PIndex`] is an ordered map whose nodes are reached through smart
//! pointers, so faulting in a node does not reserve frames for all its
//! children.
//!
//! Values of these types are only made by Amber (allocation, roots, reading
//! fields); reading them from objects and dereferencing them goes through
//! the database ([`crate::Db::get`]).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// A persistent pointer to a `T`: a virtual address while in memory.
/// `Option<PRef<T>>` is a nullable one (null is 0, also on disk).
#[repr(transparent)]
pub struct PRef<T> {
    addr: NonZeroU64,
    _t: PhantomData<fn() -> T>,
}

impl<T> PRef<T> {
    pub(crate) fn from_addr(addr: NonZeroU64) -> Self {
        PRef {
            addr,
            _t: PhantomData,
        }
    }

    /// The in-memory address (for diagnostics; not stable across runs).
    pub fn addr(self) -> u64 {
        self.addr.get()
    }
}

impl<T> Clone for PRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PRef<T> {}
impl<T> PartialEq for PRef<T> {
    fn eq(&self, o: &Self) -> bool {
        self.addr == o.addr
    }
}
impl<T> Eq for PRef<T> {}
impl<T> Hash for PRef<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.addr.hash(h)
    }
}
impl<T> fmt::Debug for PRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PRef({:#x})", self.addr)
    }
}

/// A smart pointer: holds the persistent address even in memory and is
/// translated at each use. Equality compares persistent addresses.
#[repr(transparent)]
pub struct Smart<T> {
    paddr: NonZeroU64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Smart<T> {
    pub(crate) fn from_paddr(paddr: NonZeroU64) -> Self {
        Smart {
            paddr,
            _t: PhantomData,
        }
    }

    /// The persistent address.
    pub fn paddr(self) -> u64 {
        self.paddr.get()
    }
}

impl<T> Clone for Smart<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Smart<T> {}
impl<T> PartialEq for Smart<T> {
    fn eq(&self, o: &Self) -> bool {
        self.paddr == o.paddr
    }
}
impl<T> Eq for Smart<T> {}
impl<T> Hash for Smart<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.paddr.hash(h)
    }
}
impl<T> fmt::Debug for Smart<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Smart({:#x})", self.paddr)
    }
}

/// A pointer swizzled upon discovery (EPVM 2.0's lazy swizzling, White &
/// DeWitt 1992): stored as a persistent address, like a [`Smart`]; when the
/// program follows it ([`View::lazy`](crate::View::lazy)) and its target is
/// already resident, the field itself is rewritten in memory to the direct
/// address, so later reads are a load, a bit test and a load, as a
/// [`PRef`]'s. The rewrite is not an update: it is never logged, a commit
/// writes the persistent address, and it goes through a path that no
/// detection scheme counts as a write (`docs/design.md` §4.2.3).
///
/// The word holds either form, told apart by bit 0 (object bodies are
/// 8-aligned, so neither form uses it): clear, a persistent address; set,
/// a virtual address plus 1. It is an atomic, so threads following the
/// same field see one form or the other. Not `Copy` (an atomic). It may be
/// null ([`Lazy::null`], 0, also on disk), as an `Option<PRef<T>>` may:
/// there is no `Option<Lazy<T>>`, the atomic having no spare bit pattern
/// for `None`, so the one type is both forms.
#[repr(transparent)]
pub struct Lazy<T> {
    word: AtomicU64,
    _t: PhantomData<fn() -> T>,
}

/// Bit 0 of a [`Lazy`] word: set when it holds a direct (virtual) address.
pub(crate) const LAZY_DIRECT: u64 = 1;

impl<T> Lazy<T> {
    pub(crate) fn from_word(word: u64) -> Self {
        Lazy {
            word: AtomicU64::new(word),
            _t: PhantomData,
        }
    }

    /// The word as it is now (a persistent address, or a virtual address
    /// with bit 0 set).
    #[inline(always)]
    pub(crate) fn word(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    /// What the word holds, read once: `Ok` the direct address, `Err` the
    /// persistent address.
    #[inline(always)]
    pub(crate) fn load(&self) -> Result<u64, u64> {
        let w = self.word();
        if w & LAZY_DIRECT != 0 {
            Ok(w & !LAZY_DIRECT)
        } else {
            Err(w)
        }
    }

    /// The word's address (the field's, when it lies in an object).
    pub(crate) fn word_addr(&self) -> usize {
        self.word.as_ptr() as usize
    }

    /// The null lazy pointer (0).
    pub const fn null() -> Self {
        Lazy {
            word: AtomicU64::new(0),
            _t: PhantomData,
        }
    }

    /// Whether it is null.
    pub fn is_null(&self) -> bool {
        self.word() == 0
    }

    /// Whether the field holds its target's direct address (it has been
    /// swizzled upon discovery since its page was fetched).
    pub fn is_swizzled(&self) -> bool {
        self.word() & LAZY_DIRECT != 0
    }
}

impl<T> From<PRef<T>> for Lazy<T> {
    /// A lazy pointer holding `p`'s direct address (a commit stores its
    /// persistent address, refusing one of another database as it does a
    /// `PRef`).
    fn from(p: PRef<T>) -> Self {
        Lazy::from_word(p.addr() | LAZY_DIRECT)
    }
}

impl<T> From<Smart<T>> for Lazy<T> {
    /// A lazy pointer holding `s`'s persistent address.
    fn from(s: Smart<T>) -> Self {
        Lazy::from_word(s.paddr())
    }
}

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy::null()
    }
}

impl<T> Clone for Lazy<T> {
    fn clone(&self) -> Self {
        Lazy::from_word(self.word())
    }
}

impl<T> fmt::Debug for Lazy<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.word();
        if w == 0 {
            write!(f, "Lazy(null)")
        } else if w & LAZY_DIRECT != 0 {
            write!(f, "Lazy(direct {:#x})", w & !LAZY_DIRECT)
        } else {
            write!(f, "Lazy(persistent {w:#x})")
        }
    }
}

/// A growable array of `T` stored in a separate buffer object. Not `Copy`:
/// one header owns its buffer.
#[repr(C)]
pub struct PVec<T> {
    pub(crate) buf: u64,
    pub(crate) len: u32,
    pub(crate) cap: u32,
    _t: PhantomData<fn() -> T>,
}

impl<T> PVec<T> {
    /// An empty vector (no buffer).
    pub const fn new() -> Self {
        Self::from_parts(0, 0, 0)
    }

    pub(crate) const fn from_parts(buf: u64, len: u32, cap: u32) -> Self {
        PVec {
            buf,
            len,
            cap,
            _t: PhantomData,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements the buffer has room for (grown as `Vec`'s capacity is).
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }
}

impl<T> Default for PVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for PVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PVec(len {}, cap {})", self.len, self.cap)
    }
}

/// A growable byte string stored in a separate buffer object. Same layout
/// as a `PVec<u8>`.
#[repr(C)]
pub struct PBytes {
    pub(crate) buf: u64,
    pub(crate) len: u32,
    pub(crate) cap: u32,
}

impl PBytes {
    /// An empty string.
    pub const fn new() -> Self {
        PBytes {
            buf: 0,
            len: 0,
            cap: 0,
        }
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the buffer has room for.
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }
}

impl Default for PBytes {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PBytes(len {})", self.len)
    }
}

/// A growable UTF-8 string stored in a separate buffer object: a
/// [`PBytes`] whose bytes Amber only ever sets from `&str`, and checks to
/// be UTF-8 whenever it reads them as `&str` ([`View::str`](crate::View::str)),
/// since bytes from disk may be damaged. Made empty ([`PString::new`]) or with
/// its text by [`Tx::new_string`](crate::Tx::new_string); changed by
/// [`Tx::set_str`](crate::Tx::set_str) and
/// [`Tx::push_str`](crate::Tx::push_str).
#[repr(C)]
pub struct PString {
    pub(crate) bytes: PBytes,
}

impl PString {
    /// An empty string (no buffer).
    pub const fn new() -> Self {
        PString {
            bytes: PBytes::new(),
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Bytes the buffer has room for.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

impl Default for PString {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PString(len {})", self.len())
    }
}

/// An ordered map from `u64` keys to `PRef<V>`, or from any key type `K`
/// with an order-preserving encoding ([`IndexKey`](crate::IndexKey):
/// integers, strings, byte strings, tuples): a B+tree whose nodes are
/// reached through persistent addresses translated at each use. One value
/// per key; [`PMultiIndex`] keeps several. Read with `Db::index_get`,
/// `index_range`, …, changed with `Tx::index_insert` and `index_remove`.
#[repr(C)]
pub struct PIndex<V, K = u64> {
    pub(crate) root: u64,
    pub(crate) len: u64,
    _v: PhantomData<fn() -> V>,
    _k: PhantomData<fn() -> K>,
}

impl<V, K> PIndex<V, K> {
    /// An empty index.
    pub const fn new() -> Self {
        PIndex {
            root: 0,
            len: 0,
            _v: PhantomData,
            _k: PhantomData,
        }
    }
}

/// An ordered multi-map from keys of type `K` to `PRef<V>`: like
/// [`PIndex`], but inserting under a key that is present adds a value
/// beside the others instead of replacing it (a build-date index where
/// many parts share a date). A key's values come back in the order of
/// their addresses (in an index made by Amber before format 2 of the
/// multi-index, of insertion); `Tx::multi_remove(key, value)` removes one,
/// finding it by descending the tree.
#[repr(C)]
pub struct PMultiIndex<V, K = u64> {
    pub(crate) root: u64,
    pub(crate) len: u64,
    /// The sequence number the next insertion gets (entries are ordered by
    /// key, then by it).
    pub(crate) next: u64,
    _v: PhantomData<fn() -> V>,
    _k: PhantomData<fn() -> K>,
}

impl<V, K> PMultiIndex<V, K> {
    /// An empty multi-index.
    pub const fn new() -> Self {
        PMultiIndex {
            root: 0,
            len: 0,
            next: 0,
            _v: PhantomData,
            _k: PhantomData,
        }
    }
}

/// What both index types offer beside `new`.
macro_rules! index_common {
    ($t:ident) => {
        impl<V, K> $t<V, K> {
            /// Entries (for a multi-index, values counted under every key).
            pub fn len(&self) -> u64 {
                self.len
            }

            /// Whether empty.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
        }

        impl<V, K> Default for $t<V, K> {
            fn default() -> Self {
                Self::new()
            }
        }

        impl<V, K> fmt::Debug for $t<V, K> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(len {})", stringify!($t), self.len)
            }
        }
    };
}

index_common!(PIndex);
index_common!(PMultiIndex);
