//! The index operations of `Db` and `Tx`: keys encoded, bounds turned into
//! bounds on encoded keys, values turned into pointers. Reads are written
//! once over [`Nodes`] and offered by both.

use super::key::IndexKey;
use super::read::{Cursor, Nodes};
use crate::db::tx::Tx;
use crate::db::{Db, translate};
use crate::error::{Error, FileKind, Location, Result};
use crate::format::objects::OBJECT_ALIGN;
use crate::ptr::{PIndex, PMultiIndex, PRef};
use crate::schema::layout::pages_for;
use crate::db::View;
use crate::vm::Persistent;
use std::fmt;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::ops::{Bound, RangeBounds};

/// Bytes of a multi-index entry's sequence number, the last of its tree key.
const SEQ: usize = 8;

/// Set in a multi-index header's `next` word when its tree keys are the
/// key, the value's persistent address, then the sequence number (format
/// 2: a key's entries ordered by value, so that a removal descends to its
/// entry); clear for the first format, the key then the sequence number.
pub(crate) const BY_VALUE: u64 = 1 << 63;

/// The bytes after the key in the tree keys of a multi-index whose header's
/// `next` word is `next`: the value's address (format 2) and the sequence
/// number.
pub(crate) fn multi_suffix(next: u64) -> usize {
    if next & BY_VALUE != 0 { 8 + SEQ } else { SEQ }
}

fn encode<Q: IndexKey + ?Sized>(key: &Q) -> Vec<u8> {
    let mut out = Vec::new();
    key.encode(&mut out);
    out
}

/// The bytes every tree key of `key`'s entries in a multi-index starts with.
fn multi_prefix<Q: IndexKey + ?Sized>(key: &Q) -> Vec<u8> {
    let mut out = Vec::new();
    key.encode_nested(&mut out);
    out
}

/// `prefix` followed by the largest suffix of either format: at or above
/// every tree key of the prefix's key, below every tree key of a larger key
/// (a nested encoding is never the start of another's).
fn multi_last(mut prefix: Vec<u8>) -> Vec<u8> {
    prefix.extend_from_slice(&[0xFF; 8 + SEQ]);
    prefix
}

/// The bounds on tree keys of the entries whose keys are within `range`.
fn tree_bounds<Q: IndexKey + ?Sized>(
    range: &impl RangeBounds<Q>,
    multi: bool,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    use Bound::*;
    if !multi {
        return (
            range.start_bound().map(|k| encode(k)),
            range.end_bound().map(|k| encode(k)),
        );
    }
    let lo = match range.start_bound() {
        Included(k) => Included(multi_prefix(k)),
        Excluded(k) => Excluded(multi_last(multi_prefix(k))),
        Unbounded => Unbounded,
    };
    let hi = match range.end_bound() {
        Included(k) => Included(multi_last(multi_prefix(k))),
        Excluded(k) => Excluded(multi_prefix(k)),
        Unbounded => Unbounded,
    };
    (lo, hi)
}

/// The pointer an index value (a persistent address) stands for.
fn to_ref<V: Persistent>(n: &Nodes<'_>, paddr: u64) -> Result<PRef<V>> {
    if paddr == 0 || !paddr.is_multiple_of(OBJECT_ALIGN as u64) {
        return Err(Error::Corrupt {
            file: FileKind::PageFile,
            path: n.path.to_path_buf(),
            at: Location::Page(paddr >> n.fs.frame_size().trailing_zeros()),
            what: format!("an index value, {paddr:#x}, is not an object's address"),
        });
    }
    let va = translate(
        n.fs,
        paddr,
        pages_for(u64::from(V::DESC.size), n.fs.frame_size()),
    )?;
    NonZeroU64::new(va)
        .map(PRef::from_addr)
        .ok_or_else(|| Error::invalid("index value at address 0"))
}

/// Entries of an index in key order, with their keys: what
/// `index_range`/`multi_range` return. Each item is a `Result`: a damaged
/// node met on the way is an `Error::Corrupt` naming its page, after which
/// the iteration ends.
pub struct IndexRange<'a, V, K> {
    cursor: Cursor<'a>,
    nodes: Nodes<'a>,
    /// Bytes after the key in each tree key (0: a `PIndex`).
    suffix: usize,
    _t: PhantomData<fn() -> (V, K)>,
}

impl<V: Persistent, K: IndexKey> IndexRange<'_, V, K> {
    /// The key a tree key stands for.
    fn decode(&self, bytes: &[u8]) -> Option<K> {
        if self.suffix == 0 {
            return K::decode(bytes);
        }
        let key = bytes.get(..bytes.len().checked_sub(self.suffix)?)?;
        match K::decode_nested(key)? {
            (k, used) if used == key.len() => Some(k),
            _ => None,
        }
    }
}

impl<V: Persistent, K: IndexKey> Iterator for IndexRange<'_, V, K> {
    type Item = Result<(K, PRef<V>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (at, bytes, v) = match self.cursor.next()? {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        let Some(key) = self.decode(bytes) else {
            self.cursor.stop();
            return Some(Err(self.nodes.damaged(
                at,
                format!("a key does not decode as a `{}`", K::name()),
            )));
        };
        Some(to_ref(&self.nodes, v).map(|v| (key, v)))
    }
}

impl<V, K> fmt::Debug for IndexRange<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexRange")
    }
}

/// The values under one key of a multi-index, in the order of their
/// addresses (of insertion in an index of the first format): what
/// `multi_get` returns (errors as for [`IndexRange`]).
pub struct IndexValues<'a, V> {
    cursor: Cursor<'a>,
    nodes: Nodes<'a>,
    _t: PhantomData<fn() -> V>,
}

impl<V: Persistent> Iterator for IndexValues<'_, V> {
    type Item = Result<PRef<V>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.cursor.next()?.and_then(|(_, _, v)| to_ref(&self.nodes, v)))
    }
}

impl<V> fmt::Debug for IndexValues<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexValues")
    }
}

/// The reads, over what a `Db` and a `Tx` both have.
pub(crate) mod reads {
    use super::*;

    pub fn get<V: Persistent, Q: IndexKey + ?Sized>(
        n: Nodes<'_>,
        root: u64,
        key: &Q,
    ) -> Result<Option<PRef<V>>> {
        n.get(root, &encode(key))?
            .map(|pa| to_ref(&n, pa))
            .transpose()
    }

    pub fn range<'a, V, K: IndexKey>(
        n: Nodes<'a>,
        root: u64,
        range: &impl RangeBounds<K::Borrowed>,
        suffix: usize,
    ) -> Result<IndexRange<'a, V, K>>
    {
        let (lo, hi) = tree_bounds(range, suffix > 0);
        Ok(IndexRange {
            cursor: n.range(root, lo.as_ref().map(|k| k.as_slice()), hi)?,
            nodes: n,
            suffix,
            _t: PhantomData,
        })
    }

    pub fn values<'a, V, Q: IndexKey + ?Sized>(
        n: Nodes<'a>,
        root: u64,
        key: &Q,
    ) -> Result<IndexValues<'a, V>> {
        let lo = multi_prefix(key);
        let hi = Bound::Included(multi_last(lo.clone()));
        Ok(IndexValues {
            cursor: n.range(root, Bound::Included(&lo), hi)?,
            nodes: n,
            _t: PhantomData,
        })
    }
}

/// The read methods of `Db` and `Tx`: inherent, so that calling them needs
/// no import; each forwards to [`View`](crate::View), where they are
/// written once.
macro_rules! index_reads {
    ($t:ty) => {
        impl $t {
            /// The object under `key` in `idx`.
            pub fn index_get<V: Persistent, K: IndexKey>(
                &self,
                idx: &PIndex<V, K>,
                key: &K::Borrowed,
            ) -> Result<Option<PRef<V>>> {
                View::index_get(self, idx, key)
            }

            /// Whether `idx` has an entry under `key`.
            pub fn index_contains<V: Persistent, K: IndexKey>(
                &self,
                idx: &PIndex<V, K>,
                key: &K::Borrowed,
            ) -> Result<bool> {
                View::index_contains(self, idx, key)
            }

            /// The entries of `idx` with keys in `range`, in key order, by
            /// iterator: `5..10`, `..=u64::MAX`, `..`; bounds are of the
            /// key's borrowed form (`str` for `String`:
            /// `(Bound::Included("a"), Bound::Excluded("c"))`).
            pub fn index_range<'a, V: Persistent, K: IndexKey>(
                &'a self,
                idx: &PIndex<V, K>,
                range: impl RangeBounds<K::Borrowed>,
            ) -> Result<IndexRange<'a, V, K>> {
                View::index_range(self, idx, range)
            }

            /// All entries of `idx`, in key order.
            pub fn index_iter<'a, V: Persistent, K: IndexKey>(
                &'a self,
                idx: &PIndex<V, K>,
            ) -> Result<IndexRange<'a, V, K>> {
                View::index_iter(self, idx)
            }

            /// The objects under `key` in `idx`, in the order of their
            /// addresses (of insertion in an index of the first format).
            pub fn multi_get<'a, V: Persistent, K: IndexKey>(
                &'a self,
                idx: &PMultiIndex<V, K>,
                key: &K::Borrowed,
            ) -> Result<IndexValues<'a, V>> {
                View::multi_get(self, idx, key)
            }

            /// Whether `idx` has an entry under `key`.
            pub fn multi_contains<V: Persistent, K: IndexKey>(
                &self,
                idx: &PMultiIndex<V, K>,
                key: &K::Borrowed,
            ) -> Result<bool> {
                View::multi_contains(self, idx, key)
            }

            /// The entries of `idx` with keys in `range`, in key order and,
            /// within a key, in the order of the values' addresses (of
            /// insertion in an index of the first format).
            pub fn multi_range<'a, V: Persistent, K: IndexKey>(
                &'a self,
                idx: &PMultiIndex<V, K>,
                range: impl RangeBounds<K::Borrowed>,
            ) -> Result<IndexRange<'a, V, K>> {
                View::multi_range(self, idx, range)
            }

            /// All entries of `idx`, in key order.
            pub fn multi_iter<'a, V: Persistent, K: IndexKey>(
                &'a self,
                idx: &PMultiIndex<V, K>,
            ) -> Result<IndexRange<'a, V, K>> {
                View::multi_iter(self, idx)
            }
        }
    };
}

index_reads!(Db);
index_reads!(Tx<'_>);

impl Tx<'_> {
    /// The address of the index header `field` selects in `obj`.
    fn head_of<O: Persistent, I>(&mut self, obj: PRef<O>, field: impl Fn(&mut O) -> &mut I) -> u64 {
        self.tick();
        std::ptr::from_mut(field(self.access.object_mut(obj.addr()))) as u64
    }

    /// Maps `key` to `value` in index `field` of `obj`; returns the value it
    /// replaced. A key whose encoding is longer than 1,024 bytes is
    /// [`Error::Invalid`]; `value` must be live ([`Error::Dangling`]).
    pub fn index_insert<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PIndex<V, K>,
        key: &K::Borrowed,
        value: PRef<V>,
    ) -> Result<Option<PRef<V>>>
    {
        let head = self.head_of(obj, field);
        let vpa = self.live_paddr::<V>(value.addr())?;
        let old = self.tree_insert(head, obj.addr(), &encode(key), vpa)?;
        old.map(|pa| to_ref(&self.nodes(), pa)).transpose()
    }

    /// Removes `key` from index `field` of `obj`; returns its value.
    pub fn index_remove<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PIndex<V, K>,
        key: &K::Borrowed,
    ) -> Result<Option<PRef<V>>>
    {
        let head = self.head_of(obj, field);
        let old = self.tree_remove(head, &encode(key))?;
        old.map(|pa| to_ref(&self.nodes(), pa)).transpose()
    }

    /// Removes every entry of index `field` of `obj` and frees its nodes
    /// (the objects it pointed to stay).
    pub fn index_clear<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PIndex<V, K>,
    ) -> Result<()> {
        let head = self.head_of(obj, field);
        self.tree_clear(head)
    }

    /// Adds `value` under `key` in multi-index `field` of `obj` (the same
    /// value twice is two entries). A key's values are kept in the order of
    /// their addresses (in an index of the first format, of insertion).
    /// Limits as for [`index_insert`](Self::index_insert).
    pub fn multi_insert<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PMultiIndex<V, K>,
        key: &K::Borrowed,
        value: PRef<V>,
    ) -> Result<()>
    {
        self.multi_insert_as(obj, field, key, value, BY_VALUE)
    }

    /// [`multi_insert`](Self::multi_insert) into an index that, if it is
    /// empty, takes the first format (entries in insertion order): for
    /// tests of that format, which Amber reads and writes but no longer
    /// makes.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn multi_insert_first_format<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PMultiIndex<V, K>,
        key: &K::Borrowed,
        value: PRef<V>,
    ) -> Result<()> {
        self.multi_insert_as(obj, field, key, value, 0)
    }

    /// `multi_insert`; an empty index takes the format of `format`
    /// (`BY_VALUE` or 0), whatever it had.
    fn multi_insert_as<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PMultiIndex<V, K>,
        key: &K::Borrowed,
        value: PRef<V>,
        format: u64,
    ) -> Result<()> {
        let head = self.head_of(obj, field);
        let vpa = self.live_paddr::<V>(value.addr())?;
        let [root, _, mut next] = *self.access.obj::<[u64; 3]>(head);
        if root == 0 {
            next = format;
        }
        let seq = next & !BY_VALUE;
        if seq == !BY_VALUE {
            return Err(Error::invalid("a multi-index has used all its sequence numbers"));
        }
        let mut k = multi_prefix(key);
        if next & BY_VALUE != 0 {
            k.extend_from_slice(&vpa.to_be_bytes());
        }
        k.extend_from_slice(&seq.to_be_bytes());
        if self.tree_insert(head, obj.addr(), &k, vpa)?.is_some() {
            return Err(Error::internal(
                "a multi-index sequence number was already in use",
            ));
        }
        self.access.obj_mut::<[u64; 3]>(head)[2] = next + 1;
        Ok(())
    }

    /// Removes one entry of `value` under `key` from multi-index `field` of
    /// `obj`; whether there was one. Finding it descends to the entries of
    /// (`key`, `value`); in an index of the first format (or for a value
    /// that a collection moved since it was inserted) it reads the key's
    /// entries in order.
    pub fn multi_remove<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PMultiIndex<V, K>,
        key: &K::Borrowed,
        value: PRef<V>,
    ) -> Result<bool>
    {
        let head = self.head_of(obj, field);
        let vpa = self.paddr(value.addr())?;
        let [root, _, next] = *self.access.obj::<[u64; 3]>(head);
        let prefix = multi_prefix(key);
        let mut found = None;
        if next & BY_VALUE != 0 {
            let mut lo = prefix.clone();
            lo.extend_from_slice(&vpa.to_be_bytes());
            let mut hi = lo.clone();
            hi.extend_from_slice(&[0xFF; SEQ]);
            found = self.find_value(root, &lo, Bound::Included(hi), vpa)?;
        }
        if found.is_none() {
            let hi = Bound::Included(multi_last(prefix.clone()));
            found = self.find_value(root, &prefix, hi, vpa)?;
        }
        let Some(k) = found else {
            return Ok(false);
        };
        self.tree_remove(head, &k)?;
        Ok(true)
    }

    /// The tree key of the first entry from `lo` up to `hi` whose value is
    /// `vpa`.
    fn find_value(&self, root: u64, lo: &[u8], hi: Bound<Vec<u8>>, vpa: u64) -> Result<Option<Vec<u8>>> {
        for e in self.nodes().range(root, Bound::Included(lo), hi)? {
            let (_, k, v) = e?;
            if v == vpa {
                return Ok(Some(k.to_vec()));
            }
        }
        Ok(None)
    }

    /// Removes every entry of multi-index `field` of `obj` and frees its
    /// nodes.
    pub fn multi_clear<O: Persistent, V: Persistent, K: IndexKey>(
        &mut self,
        obj: PRef<O>,
        field: impl Fn(&mut O) -> &mut PMultiIndex<V, K>,
    ) -> Result<()> {
        let head = self.head_of(obj, field);
        self.tree_clear(head)?;
        self.access.obj_mut::<[u64; 3]>(head)[2] = 0;
        Ok(())
    }
}
