//! The typed view of frames: which Rust types may lie in persistent memory,
//! and the only place where a frame address becomes a Rust reference.
//!
//! A type may be overlaid on frame bytes when every bit pattern of its size is
//! a valid value, it has no padding (padding bytes are uninitialised in Rust
//! values, and commits read every byte), it needs no drop, its alignment is at
//! most 8 (object bodies are 8-aligned), and the descriptor it reports gives
//! the exact offset and kind of each field, so that the fault handler swizzles
//! exactly the pointer fields. [`Field`] and [`Persistent`] are `unsafe`
//! traits for that reason; `#[derive(Persistent)]` implements them after
//! checking all of this at compile time.
//!
//! References are handed out through [`Access`], of which each frame space
//! has at most one: shared references borrow it shared, mutable references
//! borrow it exclusively, so Rust's borrow rules keep them from aliasing. Every
//! dereference checks that the address lies in this frame space, so a pointer
//! taken from another database is refused rather than followed.
//!
//! Dereferencing a program's pointer ([`Access::object`], [`Access::elements`])
//! also checks the object header just before the body: it must say a live
//! object (a type id, not freed). Freed slots are never reused and the
//! space of transactions that did not commit is never handed out again in
//! the session (`db/dead.rs`), so a stale pointer lands on a freed header or
//! on zeros and is refused, by a panic naming the pointer, or as an error
//! from the checked calls ([`Access::try_object`]). One load and one
//! compare, on the cache line the body starts on.

use super::reads::ReadSet;
use super::space::FrameSpace;
use super::types::FrameNo;
use crate::format::objects::{FLAG_FREE, MAX_TYPE_ID, OBJECT_HEADER};
use crate::db::index::IndexKey;
use crate::ptr::{Lazy, PBytes, PIndex, PMultiIndex, PRef, PString, PVec, Smart};
use crate::schema::desc::{FieldKind, Prim, Target, TypeDesc};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A type that can be a field of a persistent object.
///
/// # Safety
///
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid `Self`
/// except where `KIND` declares a non-null pointer; `Self` must have no
/// padding, no drop glue and alignment at most 8; and `KIND` must describe its
/// layout exactly. Implemented by Amber for primitives, arrays and its pointer
/// types, and by `#[derive(Persistent)]` (through [`Persistent`]) for structs.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a field of a persistent object",
    label = "not a persistent field type",
    note = "persistent fields are u8..u64, i8..i64, f32, f64, fixed arrays of them, #[derive(Persistent)] structs, \
            PRef<T> / Option<PRef<T>> (instead of Box, &, Rc), Smart<T>, Lazy<T>, PVec<T> (instead of Vec), PString (instead of String), PBytes, PIndex<V>"
)]
pub unsafe trait Field: Sized + 'static {
    /// The field's layout.
    const KIND: FieldKind;
}

/// A persistent struct: the type of an object in the persistent heap.
///
/// # Safety
///
/// As for [`Field`]; `DESC` must list every field with its exact offset.
/// Implement it with `#[derive(Persistent)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a persistent struct",
    label = "not a persistent struct",
    note = "add #[derive(Persistent)] and #[repr(C)] to it"
)]
pub unsafe trait Persistent: Field {
    /// The type's descriptor.
    const DESC: TypeDesc;
}

/// The `unsafe impl` of [`Persistent`] that `#[derive(Persistent)]` expands
/// to, kept here so that the workspace's one unsafe trait implementation for
/// user types sits in the virtual-memory module, beside the trait whose
/// contract it discharges. Not for direct use: only the derive has checked
/// the promises below.
#[doc(hidden)]
#[macro_export]
macro_rules! __impl_persistent {
    ($ty:ty, $desc:expr) => {
        // SAFETY: the derive calls this beside a constant that checks, at
        // compile time, that the struct has no padding, no drop glue and
        // alignment at most 8; it checked that the struct is `#[repr(C)]` and
        // not generic; every field's type implements `Field` (the bound in
        // each field's kind); and `$desc` lists every field with its
        // `offset_of!`.
        #[automatically_derived]
        unsafe impl $crate::Persistent for $ty {
            const DESC: $crate::desc::TypeDesc = $desc;
        }
    };
}

// SAFETY: a struct whose `Persistent` impl holds its promises is a valid field
// by value; its kind is its descriptor.
unsafe impl<T: Persistent> Field for T {
    const KIND: FieldKind = FieldKind::Struct(&T::DESC);
}

macro_rules! prim {
    ($($t:ty => $p:ident),*) => {$(
        // SAFETY: every bit pattern is a valid value; no padding, no drop,
        // alignment at most 8.
        unsafe impl Field for $t {
            const KIND: FieldKind = FieldKind::Prim(Prim::$p);
        }
    )*};
}
prim!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
      u64 => U64, i64 => I64, f32 => F32, f64 => F64);

// SAFETY: an array of valid fields is a valid field: no padding between
// elements (size is a multiple of alignment), no drop, same alignment.
unsafe impl<F: Field, const N: usize> Field for [F; N] {
    const KIND: FieldKind = FieldKind::Array {
        elem: &F::KIND,
        elem_size: std::mem::size_of::<F>() as u32,
        len: N as u32,
    };
}

// SAFETY: `PRef` is a transparent non-zero u64; the descriptor declares it a
// non-null pointer, so the fault handler refuses a page holding 0 in it and
// only ever stores non-zero frame addresses in it.
unsafe impl<T: Persistent> Field for PRef<T> {
    const KIND: FieldKind = FieldKind::Ref {
        target: Target(|| &T::DESC),
        nullable: false,
    };
}

// SAFETY: `Option<PRef<T>>` is a u64 (null pointer optimisation); 0 is `None`.
unsafe impl<T: Persistent> Field for Option<PRef<T>> {
    const KIND: FieldKind = FieldKind::Ref {
        target: Target(|| &T::DESC),
        nullable: true,
    };
}

// SAFETY: a transparent non-zero u64 holding a persistent address, never
// swizzled; the descriptor declares it non-null, so the fault handler refuses
// a page holding 0 in it.
unsafe impl<T: Persistent> Field for Smart<T> {
    const KIND: FieldKind = FieldKind::Smart {
        target: Target(|| &T::DESC),
        nullable: false,
        lazy: false,
    };
}

// SAFETY: as above; 0 is `None`.
unsafe impl<T: Persistent> Field for Option<Smart<T>> {
    const KIND: FieldKind = FieldKind::Smart {
        target: Target(|| &T::DESC),
        nullable: true,
        lazy: false,
    };
}

// SAFETY: a transparent `AtomicU64` (8 bytes, 8-aligned, every bit pattern
// valid, no drop glue) and a zero-sized marker; 0 is null. Its word is only
// ever followed through `View::lazy`, which checks what it leads to.
unsafe impl<T: Persistent> Field for Lazy<T> {
    const KIND: FieldKind = FieldKind::Smart {
        target: Target(|| &T::DESC),
        nullable: true,
        lazy: true,
    };
}

// SAFETY: `repr(C)` u64, u32, u32 plus a zero-sized marker: 16 bytes, no
// padding, any bit pattern valid (the buffer pointer is only followed through
// checked accessors).
unsafe impl<T: Field> Field for PVec<T> {
    const KIND: FieldKind = FieldKind::Vec {
        elem: &T::KIND,
        elem_size: std::mem::size_of::<T>() as u32,
    };
}

// SAFETY: as for `PVec`.
unsafe impl Field for PBytes {
    const KIND: FieldKind = FieldKind::Bytes;
}

// SAFETY: a `repr(C)` `PBytes`, as for `PVec`; its bytes are checked to be
// UTF-8 where they are read as `&str`.
unsafe impl Field for PString {
    const KIND: FieldKind = FieldKind::Str;
}

// SAFETY: `repr(C)` u64, u64 plus markers; any bit pattern valid (the root
// is a persistent address translated through checked lookups).
unsafe impl<V: Persistent, K: IndexKey + 'static> Field for PIndex<V, K> {
    const KIND: FieldKind = FieldKind::Index {
        target: Target(|| &V::DESC),
        key: K::name,
        multi: false,
    };
}

// SAFETY: `repr(C)` u64, u64, u64 plus markers; as for `PIndex`.
unsafe impl<V: Persistent, K: IndexKey + 'static> Field for PMultiIndex<V, K> {
    const KIND: FieldKind = FieldKind::Index {
        target: Target(|| &V::DESC),
        key: K::name,
        multi: true,
    };
}

/// Compile-time checks the derive asks for: no padding, no drop, alignment at
/// most 8. Evaluated in a `const` item, so a violation is a compile error.
pub const fn check_layout<T>(fields_size: usize) {
    assert!(
        std::mem::size_of::<T>() == fields_size,
        "a persistent type must have no padding: add explicit `_pad: [u8; N]` fields"
    );
    assert!(
        !std::mem::needs_drop::<T>(),
        "a persistent type must not implement Drop or contain fields that do"
    );
    assert!(
        std::mem::align_of::<T>() <= 8,
        "a persistent type's alignment must be at most 8"
    );
}

/// The one handle through which frame addresses become references.
#[derive(Debug)]
pub struct Access {
    fs: Arc<FrameSpace>,
    lo: u64,
    hi: u64,
    /// The upper bound the inline range checks compare with: `hi`, or `lo`
    /// while a read set is armed, so that every check goes the out-of-line
    /// way, which notes the read (`reads.rs`).
    fast_hi: u64,
    /// log2 of the frame size.
    frame_shift: u32,
    /// The read set of a transaction that wants one.
    reads: Option<Box<ReadSet>>,
    /// The software write barrier, when a software detection scheme is in
    /// use (`barrier.rs`); `None` under page protection, where every
    /// mutable accessor pays one predictable branch for it.
    pub(crate) barrier: Option<Box<dyn super::Barrier>>,
}

/// Marks that a frame space's [`Access`] was taken.
#[derive(Debug, Default)]
pub(crate) struct AccessTaken(AtomicBool);

impl Access {
    /// Takes the frame space's only `Access`; `None` if it was taken before
    /// (a database's frame space has given its own to the database).
    pub fn take(fs: &Arc<FrameSpace>) -> Option<Access> {
        if fs.access_taken.0.swap(true, Ordering::AcqRel) {
            return None;
        }
        let lo = fs.base() as u64;
        let hi = lo + u64::from(fs.frame_count()) * fs.frame_size() as u64;
        Some(Access {
            fs: fs.clone(),
            lo,
            hi,
            fast_hi: hi,
            frame_shift: fs.frame_size().trailing_zeros(),
            reads: None,
            barrier: None,
        })
    }

    /// Arms a fresh read set: from now on every reference made notes the
    /// frames it spans, until [`take_reads`](Self::take_reads).
    pub fn start_reads(&mut self) {
        self.reads = Some(Box::default());
        self.fast_hi = self.lo;
    }

    /// Disarms the read set; the frames read since it was armed, ascending
    /// (`None` if none was).
    pub fn take_reads(&mut self) -> Option<Vec<FrameNo>> {
        self.fast_hi = self.hi;
        self.reads.take().map(|r| r.into_frames())
    }

    /// Whether `len` bytes at `start`, aligned to `2^shift`, lie below
    /// `hi` in the reservation: one subtraction, one rotation and one
    /// compare. With `off = start - lo` (`lo` is page-aligned), rotating
    /// `off` right by `shift` moves any misaligned low bits to the top,
    /// where they exceed every in-range offset.
    #[inline(always)]
    fn fits(&self, hi: u64, start: u64, len: u64, shift: u32) -> bool {
        let off = start.wrapping_sub(self.lo);
        match (hi - self.lo).checked_sub(len) {
            Some(room) => off.rotate_right(shift) <= room >> shift,
            None => false,
        }
    }

    /// Where the inline check failed: a read to note, if a read set is
    /// armed and `len` bytes at `start` do lie in the reservation.
    #[cold]
    #[inline(never)]
    fn noted_read(&self, start: u64, len: u64, shift: u32) -> bool {
        let Some(reads) = &self.reads else {
            return false;
        };
        if !self.fits(self.hi, start, len, shift) {
            return false;
        }
        let first = (start - self.lo) >> self.frame_shift;
        let last = (start - self.lo + len.max(1) - 1) >> self.frame_shift;
        reads.note(first as FrameNo, last as FrameNo);
        true
    }

    /// The frame space.
    pub fn space(&self) -> &Arc<FrameSpace> {
        &self.fs
    }

    /// Whether `[addr, addr + len)` lies in this frame space.
    #[inline(always)]
    pub fn contains(&self, addr: u64, len: usize) -> bool {
        addr >= self.lo && addr.saturating_add(len as u64) <= self.hi
    }

    /// Panics unless `count` `T`s at `addr` lie in this frame space, aligned.
    /// Every dereference runs it ([`fits`](Self::fits)).
    #[inline(always)]
    fn check<T>(&self, addr: u64, count: usize) {
        let len = (std::mem::size_of::<T>() as u64).saturating_mul(count as u64);
        let shift = std::mem::align_of::<T>().trailing_zeros();
        if !self.fits(self.fast_hi, addr, len, shift) && !self.noted_read(addr, len, shift) {
            bad_pointer(addr)
        }
    }

    /// The object of type `T` at `addr`.
    #[inline(always)]
    pub fn obj<T: Field>(&self, addr: u64) -> &T {
        self.check::<T>(addr, 1);
        // The reservation stays mapped while `self.fs` lives: frames are never
        // unmapped, a non-resident frame is filled on touch, atomically, and
        // an evicted frame comes back with the same bytes. Every bit pattern
        // is a valid `T` (`Field`'s contract; the fault handler only stores
        // frame addresses in pointer fields).
        // SAFETY: `check` proved `addr` aligned and `[addr, addr + size)` in
        // the mapped reservation (above); no `&mut` to these bytes exists, as
        // those are only made from `&mut Access`, which `&self` excludes.
        unsafe { &*(addr as *const T) }
    }

    /// The object of type `T` at `addr`, mutably.
    #[inline(always)]
    pub fn obj_mut<T: Field>(&mut self, addr: u64) -> &mut T {
        self.check::<T>(addr, 1);
        if self.barrier.is_some() {
            self.noted(0, addr, std::mem::size_of::<T>());
        }
        // SAFETY: as for `obj`; exclusive because `&mut self` is the only way
        // to any reference into this frame space.
        unsafe { &mut *(addr as *mut T) }
    }

    /// Writes `value` at `addr` without reading or dropping what was there
    /// (a new object or element, whose bytes need not be a valid `T` yet).
    #[inline(always)]
    pub fn write_new<T: Field>(&mut self, addr: u64, value: T) {
        self.check::<T>(addr, 1);
        if self.barrier.is_some() {
            self.noted(0, addr, std::mem::size_of::<T>());
        }
        // SAFETY: aligned and inside the reservation (checked); `ptr::write`
        // neither reads nor drops the old bytes; exclusive as in `obj_mut`.
        unsafe { std::ptr::write(addr as *mut T, value) }
    }

    /// `count` consecutive `T`s at `addr` (a `PVec` buffer).
    #[inline(always)]
    pub fn slice<T: Field>(&self, addr: u64, count: usize) -> &[T] {
        if count == 0 {
            return &[];
        }
        self.check::<T>(addr, count);
        // SAFETY: as for `obj`, for each element.
        unsafe { std::slice::from_raw_parts(addr as *const T, count) }
    }

    /// `count` consecutive `T`s at `addr`, mutably.
    #[inline(always)]
    pub fn slice_mut<T: Field>(&mut self, addr: u64, count: usize) -> &mut [T] {
        if count == 0 {
            return &mut [];
        }
        self.check::<T>(addr, count);
        if self.barrier.is_some() {
            self.noted(0, addr, std::mem::size_of::<T>() * count);
        }
        // SAFETY: as for `obj_mut`, for each element.
        unsafe { std::slice::from_raw_parts_mut(addr as *mut T, count) }
    }

    /// `slice_mut` without the barrier (its caller noted the write).
    #[inline(always)]
    fn unnoted_slice_mut<T: Field>(&mut self, addr: u64, count: usize) -> &mut [T] {
        self.check::<T>(addr, count);
        // SAFETY: as for `obj_mut`, for each element.
        unsafe { std::slice::from_raw_parts_mut(addr as *mut T, count) }
    }
}

/// Why no live object starts at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotLive {
    /// The address is outside this database's reservation.
    Foreign,
    /// The address is in the reservation of a database closed before.
    Closed,
    /// The object there was freed.
    Freed,
    /// No object starts there: space of a transaction that did not commit,
    /// or (for a buffer) fewer bytes than asked for.
    NoObject,
}

impl NotLive {
    /// Says what is wrong with the pointer `addr`.
    pub fn describe(self, addr: u64) -> String {
        match self {
            NotLive::Foreign => format!("pointer {addr:#x} does not belong to this database"),
            NotLive::Closed => format!(
                "pointer {addr:#x} comes from a session of a database that was closed \
                 (pointers held in memory do not survive a close; keep a root or a Smart)"
            ),
            NotLive::Freed => format!("pointer {addr:#x} leads to an object that was freed"),
            NotLive::NoObject => format!(
                "pointer {addr:#x} leads to no live object (it was allocated by a \
                 transaction that aborted or failed to commit)"
            ),
        }
    }
}

/// The bits of an object header's tag that say whether it is live: the
/// type id and the free flag.
const LIVE_MASK: u32 = MAX_TYPE_ID | (FLAG_FREE as u32) << 24;

/// Whether an object header's tag says a live object: a type id (never
/// 0), not freed. One subtraction and one compare: the tag masked to type
/// and free bit, minus one, is below `MAX_TYPE_ID` exactly then.
#[inline(always)]
fn live(tag: u32) -> bool {
    (tag & LIVE_MASK).wrapping_sub(1) < MAX_TYPE_ID
}

impl Access {
    /// Whether a live object of `len` bytes (exactly, or with `at_least`
    /// at least), aligned to `2^shift`, has its body at `addr`; why not if
    /// not. The range check covers the header and the body with the one
    /// subtraction, rotation and compare of [`check`](Self::check); then
    /// the header is read, on the cache line the body starts on, and for an
    /// exact size checked with two compares.
    #[inline(always)]
    fn live_at(&self, addr: u64, len: usize, shift: u32, at_least: bool) -> Result<(), NotLive> {
        let span = (len as u64).saturating_add(OBJECT_HEADER as u64);
        // The header and the body, checked as one span. `lo` is page-aligned
        // and the header 8 bytes (a multiple of any alignment up to 8) before
        // the body, so it is aligned exactly when the body is.
        let at = addr.wrapping_sub(OBJECT_HEADER as u64);
        if !self.fits(self.fast_hi, at, span, shift) && !self.noted_read(at, span, shift) {
            return Err(if closed(addr) {
                NotLive::Closed
            } else {
                NotLive::Foreign
            });
        }
        // SAFETY: `[at, at + span)` lies in the mapped reservation (checked
        // above); a non-resident frame is faulted in by the read; any bit
        // pattern is a valid `u64`; the read is unaligned-safe (a body
        // aligned to less than 8 may have a header aligned to less too).
        let header = u64::from_le(unsafe { std::ptr::read_unaligned(at as *const u64) });
        let (tag, size) = (header as u32, (header >> 32) as u32);
        let ok = if at_least || len == 0 {
            live(tag) && len <= size as usize
        } else {
            // An object of exactly `len` (> 0) bytes, not freed. No type id
            // check is needed: nothing but a live or freed object's header
            // holds a nonzero size (dead space and the space past a page's
            // object area are zeros, and freed slots are never reused), so
            // two compares of the header's words, the one on a constant.
            size as usize == len && tag & (u32::from(FLAG_FREE) << 24) == 0
        };
        if ok {
            Ok(())
        } else if tag & (u32::from(FLAG_FREE) << 24) != 0 && tag & MAX_TYPE_ID != 0 {
            Err(NotLive::Freed)
        } else {
            Err(NotLive::NoObject)
        }
    }

    /// The object of type `T` whose body is at `addr`: a program's pointer.
    /// Panics naming the pointer unless a live object starts there.
    ///
    /// The address's alignment is not checked here: a program's pointers
    /// are object bodies, 8-aligned, made so by Amber (allocation) or
    /// checked where they enter memory (swizzling refuses a misaligned
    /// stored pointer; roots and index values are checked as they are
    /// read), and `T`'s alignment is at most 8 (`Field`'s contract). That
    /// spares the dereference a rotation and a shift (a tenth of OO1's hot
    /// lookup).
    #[inline(always)]
    pub fn object<T: Field>(&self, addr: u64) -> &T {
        if let Err(why) = self.live_at(addr, std::mem::size_of::<T>(), 0, false) {
            dangling(addr, why)
        }
        // SAFETY: `live_at` proved `[addr, addr + size)` in the mapped
        // reservation; `addr` is 8-aligned (above) and `T`'s alignment at
        // most 8; shared as in `obj`; every bit pattern is a valid `T`.
        unsafe { &*(addr as *const T) }
    }

    /// [`object`](Self::object), mutably.
    #[inline(always)]
    pub fn object_mut<T: Field>(&mut self, addr: u64) -> &mut T {
        if let Err(why) = self.live_at(addr, std::mem::size_of::<T>(), 0, false) {
            dangling(addr, why)
        }
        if self.barrier.is_some() {
            self.noted(addr, addr, std::mem::size_of::<T>());
        }
        // SAFETY: `live_at` proved `[addr, addr + size)` in the mapped
        // reservation; aligned as in `object`; exclusive as in `obj_mut`;
        // every bit pattern is a valid `T` (`Field`'s contract).
        unsafe { &mut *(addr as *mut T) }
    }

    /// The `F` at `offset` in the object of type `T` whose body is at
    /// `object` (checked as [`object_mut`](Self::object_mut) checks it),
    /// mutably; the barrier is told of the field alone. Panics unless the
    /// field lies in the object, aligned.
    #[inline(always)]
    pub fn field_mut<T: Field, F: Field>(&mut self, object: u64, offset: usize) -> &mut F {
        if let Err(why) = self.live_at(object, std::mem::size_of::<T>(), 0, false) {
            dangling(object, why)
        }
        let at = object.wrapping_add(offset as u64);
        if offset.saturating_add(std::mem::size_of::<F>()) > std::mem::size_of::<T>()
            || !at.is_multiple_of(std::mem::align_of::<F>() as u64)
        {
            bad_field(object, offset);
        }
        if self.barrier.is_some() {
            self.noted(object, at, std::mem::size_of::<F>());
        }
        // Every bit pattern is a valid `F` (`Field`'s contract).
        // SAFETY: `[at, at + size_of F)` lies in the live body, aligned for
        // `F` (checked above); exclusive as in `obj_mut`.
        unsafe { &mut *(at as *mut F) }
    }

    /// [`object`](Self::object), with the reason instead of a panic; the
    /// alignment checked too (smart pointers reach it untranslated).
    #[inline(always)]
    pub fn try_object<T: Field>(&self, addr: u64) -> Result<&T, NotLive> {
        let shift = std::mem::align_of::<T>().trailing_zeros();
        self.live_at(addr, std::mem::size_of::<T>(), shift, false)?;
        // SAFETY: `live_at` proved `addr` aligned for `T` and `[addr, addr +
        // size)` in the mapped reservation; shared as in `obj`; every bit
        // pattern is a valid `T`.
        Ok(unsafe { &*(addr as *const T) })
    }

    /// Whether a live object of exactly `len` bytes (with `at_least`, at
    /// least `len`) has its body, 8-aligned, at `addr`; why not if not. For
    /// objects known by descriptor rather than by type (freeing walks).
    pub fn try_live(&self, addr: u64, len: usize, at_least: bool) -> Result<(), NotLive> {
        self.live_at(addr, len, 3, at_least)
    }

    /// The `count` elements of the buffer object whose body is at `addr` (a
    /// vector's): panics naming the pointer unless a live buffer of at least
    /// that many elements starts there.
    #[inline(always)]
    pub fn elements<T: Field>(&self, addr: u64, count: usize) -> &[T] {
        if count == 0 {
            return &[];
        }
        self.check_elements::<T>(addr, count);
        self.slice(addr, count)
    }

    /// [`elements`](Self::elements), mutably.
    #[inline(always)]
    pub fn elements_mut<T: Field>(&mut self, addr: u64, count: usize) -> &mut [T] {
        if count == 0 {
            return &mut [];
        }
        self.check_elements::<T>(addr, count);
        if self.barrier.is_some() {
            let len = std::mem::size_of::<T>() * count;
            self.noted(addr, addr, len);
        }
        self.unnoted_slice_mut(addr, count)
    }

    /// [`elements`](Self::elements), with the reason instead of a panic.
    pub fn try_elements<T: Field>(&self, addr: u64, count: usize) -> Result<&[T], NotLive> {
        if count == 0 {
            return Ok(&[]);
        }
        let len = std::mem::size_of::<T>().saturating_mul(count);
        self.live_at(addr, len, std::mem::align_of::<T>().trailing_zeros(), true)?;
        Ok(self.slice(addr, count))
    }

    #[inline(always)]
    fn check_elements<T>(&self, addr: u64, count: usize) {
        let len = std::mem::size_of::<T>().saturating_mul(count);
        let shift = std::mem::align_of::<T>().trailing_zeros();
        if let Err(why) = self.live_at(addr, len, shift, true) {
            dangling(addr, why)
        }
    }
}

#[cold]
#[inline(never)]
fn dangling(addr: u64, why: NotLive) -> ! {
    panic!(
        "amber: dangling {} (Db::try_get reports this as Error::Dangling)",
        why.describe(addr)
    )
}

/// The reservations of databases closed in this process: `[lo, hi)`. Their
/// address space stays reserved and inaccessible for the life of the
/// process (`FrameSpace`'s drop), so no later reservation overlaps one and
/// a pointer into one is known to come from a closed session.
static CLOSED: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Whether `addr` lies in the reservation of a database closed before.
fn closed(addr: u64) -> bool {
    CLOSED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|&(lo, hi)| (lo..hi).contains(&addr))
}

impl Drop for Access {
    fn drop(&mut self) {
        self.fs.access_taken.0.store(false, Ordering::Release);
        CLOSED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((self.lo, self.hi));
    }
}

#[cold]
#[inline(never)]
fn bad_field(object: u64, offset: usize) -> ! {
    panic!(
        "amber: field_mut: the projection of the object at {object:#x} returned a reference \
         at offset {offset:#x}, not a field of that object"
    )
}

#[cold]
#[inline(never)]
fn bad_pointer(addr: u64) -> ! {
    panic!(
        "persistent pointer {addr:#x} does not belong to this database \
         (it came from another database, or one that was closed)"
    )
}
