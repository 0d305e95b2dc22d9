//! Vector operations in a transaction: [`PVec`]'s `Vec`-like methods on
//! [`Tx`], and the buffer machinery byte strings (`text.rs`) share.
//!
//! A vector is a header in its owner object (buffer address, length,
//! capacity) and a buffer object of `capacity` elements. The operations
//! name the vector as a field of an object, `tx.push(obj, |o| &mut o.kids,
//! x)`, so that the header is always one inside a live object of this
//! database; a vector that is still a value (built by [`Tx::new_vec`]
//! before its owner exists) is stored by allocating the owner with it.
//!
//! Capacity grows as `Vec`'s does: when the spare capacity is short, a new
//! buffer of twice the capacity (or what is needed, if more; at least
//! `Vec`'s minimum of 8, 4 or 1 elements by size) is allocated near the old
//! one, the elements are copied, and the old buffer is freed. So `n` pushes
//! copy fewer than `2n` elements, and [`PVec::capacity`] says what `Vec`'s
//! would. Every change is a write into pages of the transaction, so a
//! rollback undoes it like any other write: an operation that fails midway
//! leaves nothing that outlives the rollback.
//!
//! Elements past the length are not values of `T` (a fresh buffer holds
//! zeros, and a `PRef` may not be 0), so they are only ever moved as bytes
//! and written with `write_new`, never read as `T`. The buffer is checked
//! to be a live buffer of at least `capacity` elements before any write
//! into it.
//!
//! Elements that `truncate`, `clear` and `retain` drop are not freed: an
//! element that owns buffers of its own (a struct holding a `PVec` or a
//! `PString`) leaves them unreachable, for reachability collection to
//! reclaim. `pop`, `remove` and `swap_remove` hand the element back and are
//! for `Copy` elements, which own nothing (no owning type is `Copy`).

use super::tx::Tx;
use crate::error::{Error, Result};
use crate::ptr::{PRef, PVec};
use crate::vm::{Field, Persistent};

/// The smallest capacity a vector grows to, as `Vec`'s: 8 elements of one
/// byte, 4 of up to 1 KiB, 1 of more.
fn min_capacity(elem_size: usize) -> u32 {
    match elem_size {
        1 => 8,
        ..=1024 => 4,
        _ => 1,
    }
}

impl Tx<'_> {
    /// The address of field `field` of live object `obj` (panics on a
    /// stale `obj`, as [`get_mut`](Self::get_mut) does).
    pub(crate) fn field_at<O: Persistent, F: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut F,
    ) -> u64 {
        self.tick();
        std::ptr::from_mut(field(self.access.object_mut(obj.addr()))) as u64
    }

    /// The vector header at `at`: buffer, length, capacity.
    pub(crate) fn header<T: Field>(&self, at: u64) -> (u64, u32, u32) {
        let v = self.access.obj::<PVec<T>>(at);
        (v.buf, v.len, v.cap)
    }

    fn set_len<T: Field>(&mut self, at: u64, len: u32) {
        self.access.obj_mut::<PVec<T>>(at).len = len;
    }

    /// The bytes of the first `count` elements' room in the buffer at `buf`,
    /// which must be a live buffer of at least that many (panics naming the
    /// pointer otherwise, as [`slice`](Self::slice) does).
    pub(crate) fn room<T: Field>(&mut self, buf: u64, count: u32) -> &mut [u8] {
        self.access
            .elements_mut::<u8>(buf, count as usize * std::mem::size_of::<T>())
    }

    /// Allocates a buffer of `cap` (> 0) elements of `T` near `near`.
    pub(crate) fn alloc_buffer<T: Field>(&mut self, cap: u32, near: Option<u64>) -> Result<u64> {
        let bytes = u32::try_from(cap as usize * std::mem::size_of::<T>())
            .map_err(|_| Error::invalid("a vector's buffer would exceed 4 GiB"))?;
        let id = self.array_id::<T>()?;
        self.alloc_raw(id, bytes, near)
    }

    /// Makes room for `additional` more elements in the vector at `at`:
    /// a new buffer when the spare capacity is short, of twice the capacity
    /// or what is needed if more (`exact`: of what is needed).
    pub(crate) fn reserve_at<T: Field>(
        &mut self,
        at: u64,
        additional: usize,
        exact: bool,
    ) -> Result<()> {
        let (_, len, cap) = self.header::<T>(at);
        let need = (len as usize)
            .checked_add(additional)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::invalid("a vector may hold at most 2^32 - 1 elements"))?;
        if need <= cap {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        let new_cap = if exact {
            need
        } else {
            // Doubling stops where a buffer would pass 4 GiB (an object's
            // size is a u32); what is needed is still asked for.
            let most = u32::try_from(u32::MAX as usize / size.max(1)).unwrap_or(u32::MAX);
            need.max(cap.saturating_mul(2).max(min_capacity(size)).min(most))
        };
        self.regrow::<T>(at, new_cap)
    }

    /// Moves the elements of the vector at `at` into a new buffer of
    /// `new_cap` elements (none: no buffer), frees the old one, and points
    /// the header to the new one.
    fn regrow<T: Field>(&mut self, at: u64, new_cap: u32) -> Result<()> {
        let (buf, len, _) = self.header::<T>(at);
        let new = if new_cap == 0 {
            0
        } else {
            let new = self.alloc_buffer::<T>(new_cap, Some(if buf != 0 { buf } else { at }))?;
            let old = self.room::<T>(buf, len).to_vec();
            self.room::<T>(new, len).copy_from_slice(&old);
            new
        };
        if buf != 0 {
            self.free_raw(buf)?;
        }
        let v = self.access.obj_mut::<PVec<T>>(at);
        v.buf = new;
        v.cap = new_cap;
        Ok(())
    }

    /// Appends `value` to the vector at `at`.
    pub(crate) fn push_at<T: Field>(&mut self, at: u64, value: T) -> Result<()> {
        self.reserve_at::<T>(at, 1, false)?;
        let (buf, len, cap) = self.header::<T>(at);
        // Checks that the buffer is live and holds `cap` elements.
        self.room::<T>(buf, cap);
        self.access
            .write_new(buf + u64::from(len) * std::mem::size_of::<T>() as u64, value);
        self.set_len::<T>(at, len + 1);
        Ok(())
    }

    /// A new vector holding `items`, not yet in any object: store it by
    /// allocating its owner with it (`tx.alloc(Node { kids, .. })`, or
    /// [`alloc_with`](Self::alloc_with)). Its capacity is its length. A
    /// vector never stored is left unreachable, like an object no pointer
    /// leads to.
    pub fn new_vec<T: Field>(&mut self, items: impl IntoIterator<Item = T>) -> Result<PVec<T>> {
        self.tick();
        let items: Vec<T> = items.into_iter().collect();
        let len = u32::try_from(items.len())
            .map_err(|_| Error::invalid("a vector may hold at most 2^32 - 1 elements"))?;
        if len == 0 {
            return Ok(PVec::new());
        }
        let buf = self.alloc_buffer::<T>(len, None)?;
        self.room::<T>(buf, len);
        let size = std::mem::size_of::<T>() as u64;
        for (i, v) in items.into_iter().enumerate() {
            self.access.write_new(buf + i as u64 * size, v);
        }
        Ok(PVec::from_parts(buf, len, len))
    }

    /// Appends `value` to the vector `field` of `obj`, growing its buffer
    /// (doubling) when full.
    pub fn push<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        value: T,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.push_at(at, value)
    }

    /// Appends every item of `items`, reserving room for as many as the
    /// iterator says it has at least.
    pub fn extend<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        items: impl IntoIterator<Item = T>,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        let mut items = items.into_iter();
        self.reserve_at::<T>(at, items.size_hint().0, false)?;
        items.try_for_each(|v| self.push_at(at, v))
    }

    /// Appends copies of `items`.
    pub fn extend_from_slice<O: Persistent, T: Field + Copy>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        items: &[T],
    ) -> Result<()> {
        self.extend(obj, field, items.iter().copied())
    }

    /// Inserts `value` at `index`, shifting the elements after it up.
    /// An index past the length is [`Error::Invalid`] (nothing changes).
    pub fn insert<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        index: usize,
        value: T,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        let len = self.header::<T>(at).1 as usize;
        if index > len {
            return Err(Error::invalid(format!(
                "insert at index {index} in a vector of {len} elements"
            )));
        }
        self.reserve_at::<T>(at, 1, false)?;
        let (buf, len, cap) = self.header::<T>(at);
        let size = std::mem::size_of::<T>();
        self.room::<T>(buf, cap)
            .copy_within(index * size..len as usize * size, (index + 1) * size);
        self.access.write_new(buf + (index * size) as u64, value);
        self.set_len::<T>(at, len + 1);
        Ok(())
    }

    /// Removes and returns the last element of vector `field` of `obj`.
    pub fn pop<O: Persistent, T: Field + Copy>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
    ) -> Option<T> {
        let at = self.field_at(obj, field);
        let len = self.header::<T>(at).1 as usize;
        self.remove_at::<T>(at, len.checked_sub(1)?)
    }

    /// Removes and returns the element at `index`, shifting the elements
    /// after it down; `None` (nothing changes) if `index` is past the end.
    pub fn remove<O: Persistent, T: Field + Copy>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        index: usize,
    ) -> Option<T> {
        let at = self.field_at(obj, field);
        self.remove_at::<T>(at, index)
    }

    fn remove_at<T: Field + Copy>(&mut self, at: u64, index: usize) -> Option<T> {
        let (buf, len, _) = self.header::<T>(at);
        let value = *self.access.elements::<T>(buf, len as usize).get(index)?;
        let size = std::mem::size_of::<T>();
        self.room::<T>(buf, len)
            .copy_within((index + 1) * size.., index * size);
        self.set_len::<T>(at, len - 1);
        Some(value)
    }

    /// Removes and returns the element at `index`, putting the last element
    /// in its place (constant time, order not kept); `None` (nothing
    /// changes) if `index` is past the end.
    pub fn swap_remove<O: Persistent, T: Field + Copy>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        index: usize,
    ) -> Option<T> {
        let at = self.field_at(obj, field);
        let (buf, len, _) = self.header::<T>(at);
        let elems = self.access.elements_mut::<T>(buf, len as usize);
        let value = *elems.get(index)?;
        elems[index] = elems[len as usize - 1];
        self.set_len::<T>(at, len - 1);
        Some(value)
    }

    /// Shortens the vector to `len` elements (nothing if it is not
    /// longer); the capacity stays. What the dropped elements own (their
    /// vectors', strings' and indexes' storage) is freed with them, as
    /// [`free`](Self::free) frees an object's.
    pub fn truncate<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        len: usize,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        let (buf, cur, _) = self.header::<T>(at);
        if (len as u64) < u64::from(cur) {
            self.release_elements::<T>(buf, len as u32..cur)?;
            self.set_len::<T>(at, len as u32);
        }
        Ok(())
    }

    /// Removes every element (freeing what they own, as
    /// [`truncate`](Self::truncate)); the capacity stays.
    pub fn clear<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
    ) -> Result<()> {
        self.truncate(obj, field, 0)
    }

    /// Keeps the elements for which `keep` returns true, in order, freeing
    /// what the others own (as [`truncate`](Self::truncate)). `keep` sees
    /// every element before anything changes, so a panic in it leaves the
    /// vector as it was.
    pub fn retain<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        mut keep: impl FnMut(&T) -> bool,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        let (buf, len, _) = self.header::<T>(at);
        let kept: Vec<bool> = self
            .access
            .elements::<T>(buf, len as usize)
            .iter()
            .map(&mut keep)
            .collect();
        for (i, _) in kept.iter().enumerate().filter(|(_, k)| !**k) {
            self.release_elements::<T>(buf, i as u32..i as u32 + 1)?;
        }
        let size = std::mem::size_of::<T>();
        let room = self.room::<T>(buf, len);
        let mut w = 0;
        for (i, _) in kept.iter().enumerate().filter(|(_, k)| **k) {
            if w != i {
                room.copy_within(i * size..(i + 1) * size, w * size);
            }
            w += 1;
        }
        self.set_len::<T>(at, w as u32);
        Ok(())
    }

    /// Makes room for at least `additional` more elements, growing the
    /// capacity as pushing would (at least doubling), so that the next
    /// `additional` pushes allocate nothing.
    pub fn reserve<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        additional: usize,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.reserve_at::<T>(at, additional, false)
    }

    /// Makes room for exactly `additional` more elements (no more, unless
    /// there is room already).
    pub fn reserve_exact<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
        additional: usize,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.reserve_at::<T>(at, additional, true)
    }

    /// Shrinks the capacity to the length: the elements move to a buffer
    /// of exactly that size (an empty vector keeps none), and the old
    /// buffer is freed.
    pub fn shrink_to_fit<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        let (_, len, cap) = self.header::<T>(at);
        if cap > len {
            self.regrow::<T>(at, len)?;
        }
        Ok(())
    }

    /// The elements of vector `field` of `obj`, mutably.
    pub fn slice_mut<O: Persistent, T: Field>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PVec<T>,
    ) -> &mut [T] {
        let at = self.field_at(obj, field);
        let (buf, len, _) = self.header::<T>(at);
        self.access.elements_mut(buf, len as usize)
    }
}
