//! The unsafe half of the copy architecture (`crate::copy`): the heap
//! buffer one object's copy lives in, viewed as its type, and the write of
//! a modified byte range back into the object's frame.
//!
//! A copy is a buffer of 8-byte words (`UnsafeCell`s, so that a `&T` of a
//! type with interior mutability — a `Lazy` — may point into it), at least
//! the object's size: object bodies are 8-aligned and a `Field` type's
//! alignment is at most 8, so any `Field` of the object's size may be
//! viewed in it.

use super::{Access, Field};
use std::cell::UnsafeCell;

/// One object's bytes, copied out of its frame.
pub struct CopyBuf {
    words: Box<[UnsafeCell<u64>]>,
    /// The object's size in bytes (the buffer may be up to 7 more).
    len: usize,
}

impl std::fmt::Debug for CopyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CopyBuf({} bytes)", self.len)
    }
}

impl CopyBuf {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> CopyBuf {
        let words: Box<[UnsafeCell<u64>]> = (0..bytes.len().div_ceil(8))
            .map(|_| UnsafeCell::new(0))
            .collect();
        // SAFETY: the buffer holds at least `bytes.len()` bytes (whole words
        // rounded up), freshly allocated, so the ranges do not overlap; the
        // pointer comes from the `UnsafeCell`s, which allow the write.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                UnsafeCell::raw_get(words.as_ptr()) as *mut u8,
                bytes.len(),
            )
        };
        CopyBuf {
            words,
            len: bytes.len(),
        }
    }

    /// The object's size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the object is empty (a zero-sized type).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of the copy.
    pub fn bytes(&self) -> &[u8] {
        // No `&mut` into the buffer exists while `&self` does (they are made
        // from `&mut self` only), and a `Lazy` in it is never written
        // through a shared reference (its rewrite is for fields in a
        // database's frames only).
        // SAFETY: `len` bytes lie in the buffer; shared and unwritten as above.
        unsafe { std::slice::from_raw_parts(UnsafeCell::raw_get(self.words.as_ptr()) as *const u8, self.len) }
    }

    /// The copy as a `T`. Panics unless `T` has the object's size (the
    /// caller checks it, as a dereference checks the header's size).
    pub fn view<T: Field>(&self) -> &T {
        assert_eq!(std::mem::size_of::<T>(), self.len, "a copy viewed as another size");
        // Every bit pattern of the object's bytes is a valid `T` where the
        // object was one (`Field`'s contract); the bytes are a live object's
        // of `T`'s size, copied as they were.
        // SAFETY: the buffer holds `len` = `size_of::<T>()` bytes, 8-aligned
        // (words), and `T`'s alignment is at most 8; shared as in `bytes`.
        unsafe { &*(UnsafeCell::raw_get(self.words.as_ptr()) as *const T) }
    }

    /// The `F` at `offset` in the copy. Panics unless it lies in the
    /// object, aligned (the caller checks it).
    pub fn field<F: Field>(&self, offset: usize) -> &F {
        assert!(
            offset.saturating_add(std::mem::size_of::<F>()) <= self.len
                && offset.is_multiple_of(std::mem::align_of::<F>()),
            "a field outside its copy"
        );
        // Every bit pattern is a valid `F` where a valid `F` was (`view`).
        // SAFETY: `[offset, offset + size_of F)` lies in the 8-aligned buffer,
        // aligned for `F` (checked above); shared as in `bytes`.
        unsafe { &*((UnsafeCell::raw_get(self.words.as_ptr()) as *const u8).add(offset) as *const F) }
    }

    /// The `F` at `offset` in the copy, mutably. Panics unless it lies in
    /// the object, aligned (the caller checks it).
    pub fn field_mut<F: Field>(&mut self, offset: usize) -> &mut F {
        assert!(
            offset.saturating_add(std::mem::size_of::<F>()) <= self.len
                && offset.is_multiple_of(std::mem::align_of::<F>()),
            "a field outside its copy"
        );
        // Every bit pattern is a valid `F` where a valid `F` was, and the
        // program may only store valid `F`s through it.
        // SAFETY: `[offset, offset + size_of F)` lies in the 8-aligned buffer,
        // aligned for `F` (checked above); `&mut self` is exclusive.
        unsafe { &mut *((UnsafeCell::raw_get(self.words.as_ptr()) as *mut u8).add(offset) as *mut F) }
    }
}

impl Access {
    /// Bytes `[lo, lo + len)` of the live object of `size` bytes whose body
    /// is at `object`, mutably, the write noted as `field_mut` notes one
    /// (the copy architecture's write-back). The object's frames must be
    /// resident (the caller fetched them). Panics unless a live object of
    /// exactly `size` bytes starts there and the range lies in it.
    pub fn object_range_mut(&mut self, object: u64, size: usize, lo: usize, len: usize) -> &mut [u8] {
        if let Err(why) = self.try_live(object, size, false) {
            panic!("amber: writing a copy back: {}", why.describe(object))
        }
        assert!(lo.saturating_add(len) <= size, "a modified range outside its object");
        let at = object + lo as u64;
        if self.barrier.is_some() {
            self.noted(object, at, len);
        }
        // SAFETY: `[at, at + len)` lies in the live body (checked above), in
        // the mapped reservation; exclusive as in `obj_mut`; any bytes are
        // valid `u8`s.
        unsafe { std::slice::from_raw_parts_mut(at as *mut u8, len) }
    }
}
