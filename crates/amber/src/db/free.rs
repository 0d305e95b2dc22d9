//! Freeing: what `free` releases, and `free_tree`.
//!
//! An object *owns* the buffers of its `PVec`, `PBytes` and `PString` fields (and,
//! through a vector's elements, the buffers those own): they were made for
//! it and nothing else can point at them, so [`Tx::free`] releases them
//! with it, and the nodes of its indexes. An object does not own what its pointers lead to — a graph
//! shares objects — so `free` leaves those alone; [`Tx::free_tree`] is for
//! structures where pointers do mean ownership (a tree of nodes): it frees
//! everything reachable from the object through its pointer fields.
//!
//! What is owned is read from the program's type descriptors
//! ([`crate::desc`]), which the catalog has checked against the stored
//! layout: no stored type information is needed.
//!
//! Freeing marks headers free and nothing more (`alloc.rs`): a freed slot is
//! never reused in this format until reachability collection proves no
//! pointer to it is left, so a stale pointer to a freed object or buffer is
//! refused at its next dereference, never led to another object.
//!
//! A buffer or target that is not live — freed already, from another
//! database, or space of a transaction that did not commit — is not this
//! object's to free, and is skipped: freeing never fails on what was
//! already released. A page that cannot be read is an error, and the
//! transaction can then be aborted as a whole.

use super::tx::Tx;
use crate::error::{Error, Result};
use crate::format::objects::{FLAG_FREE, MAX_TYPE_ID, OBJECT_HEADER, encode_header};
use crate::ptr::{LAZY_DIRECT, PRef};
use crate::schema::desc::{FieldKind, TypeDesc};
use crate::schema::layout::pages_for;
use crate::vm::{Field, NotLive, Persistent};
use std::collections::HashSet;

/// Whether a value of `kind` owns storage (a buffer or index nodes) that
/// freeing it must release.
fn owns(kind: &FieldKind) -> bool {
    match kind {
        FieldKind::Prim(_) | FieldKind::Ref { .. } | FieldKind::Smart { .. } => false,
        FieldKind::Array { elem, .. } => owns(elem),
        FieldKind::Struct(d) => d.fields.iter().any(|f| owns(f.kind)),
        FieldKind::Vec { .. } | FieldKind::Bytes | FieldKind::Str | FieldKind::Index { .. } => true,
    }
}

/// What a walk over an object's fields found: buffers it owns, and objects
/// its pointer fields lead to (with their types).
#[derive(Default)]
struct Found {
    buffers: Vec<u64>,
    /// Headers of the object's indexes, whose nodes it owns, with their
    /// value types.
    indexes: Vec<(u64, &'static TypeDesc)>,
    targets: Vec<(u64, &'static TypeDesc)>,
}

impl Tx<'_> {
    /// Frees an object and the buffers it owns (those of its `PVec` and
    /// `PBytes` fields, and of the elements of its vectors). What its
    /// pointers lead to stays: see [`free_tree`](Self::free_tree).
    ///
    /// The slots are never reused until a collection proves no pointer to
    /// them is left, so a stale pointer to the object is refused at its
    /// next dereference ([`Error::Dangling`] from `try_get`). Freeing an
    /// object twice, or one that is not live, is [`Error::Dangling`].
    pub fn free<T: Persistent>(&mut self, p: PRef<T>) -> Result<()> {
        self.tick();
        self.ensure_live(p.addr(), &T::DESC, "free")?;
        let mut found = Found::default();
        self.walk_struct(&T::DESC, p.addr(), &mut found)?;
        self.release(&found)?;
        self.free_raw(p.addr())
    }

    /// Frees an object, the buffers it owns, and every object reachable
    /// from it through pointer fields (`PRef`, `Option<PRef>`, `Smart`,
    /// `Option<Smart>`, in fields and in vectors) and through its indexes'
    /// values, with theirs: for data
    /// whose pointers mean ownership, such as a tree. Shared and cyclic
    /// structures are fine (each object is freed once); a pointer anywhere
    /// else into what was freed is refused at its next dereference.
    /// Targets that are not live (freed already) are skipped. Returns the
    /// number of objects freed (buffers not counted).
    pub fn free_tree<T: Persistent>(&mut self, p: PRef<T>) -> Result<u64> {
        self.tick();
        self.ensure_live(p.addr(), &T::DESC, "free_tree")?;
        let mut seen = HashSet::from([p.addr()]);
        let mut todo = vec![(p.addr(), &T::DESC)];
        let mut freed = 0;
        while let Some((va, desc)) = todo.pop() {
            let mut found = Found::default();
            self.walk_struct(desc, va, &mut found)?;
            for &(head, d) in &found.indexes {
                let pages = pages_for(u64::from(d.size), self.page_size);
                for pa in self.tree_values(head)? {
                    if let Ok(to) = super::translate(self.fs, pa, pages) {
                        found.targets.push((to, d));
                    }
                }
            }
            self.release(&found)?;
            for (t, d) in found.targets {
                if seen.insert(t) && self.is_live(t, d)? {
                    todo.push((t, d));
                }
            }
            self.free_raw(va)?;
            freed += 1;
        }
        Ok(freed)
    }

    /// Frees what the elements `range` of the vector buffer at `buf` own
    /// (elements a vector drops: `truncate`, `clear`, `retain`).
    pub(crate) fn release_elements<T: Field>(
        &mut self,
        buf: u64,
        range: std::ops::Range<u32>,
    ) -> Result<()> {
        if !owns(&T::KIND) {
            return Ok(());
        }
        let size = std::mem::size_of::<T>() as u64;
        let mut found = Found::default();
        for i in range {
            self.walk(&T::KIND, buf + u64::from(i) * size, &mut found)?;
        }
        self.release(&found)
    }

    /// [`Error::Dangling`] naming `op` unless a live object of `desc`'s
    /// size starts at `va`.
    fn ensure_live(&self, va: u64, desc: &TypeDesc, op: &str) -> Result<()> {
        if self.is_live(va, desc)? {
            return Ok(());
        }
        let why = self
            .access
            .try_live(va, desc.size as usize, false)
            .err()
            .unwrap_or(NotLive::NoObject);
        Err(Error::dangling(format!("{op}: {}", why.describe(va))))
    }

    /// Frees the nodes of the indexes found and the buffers still live
    /// among those found (one can appear twice: two objects' walks meeting
    /// the same vector).
    fn release(&mut self, found: &Found) -> Result<()> {
        for &(head, _) in &found.indexes {
            self.tree_clear(head)?;
        }
        for &b in &found.buffers {
            if self.access.try_live(b, 0, true).is_ok() {
                self.free_raw(b)?;
            }
        }
        Ok(())
    }

    /// Whether a live object of `desc`'s size starts at `va` (its page
    /// made resident first, so that damage is an error, not an abort).
    fn is_live(&self, va: u64, desc: &TypeDesc) -> Result<bool> {
        self.live_bytes(va, desc.size as usize, false)
    }

    /// Whether a live object of `len` bytes (at least `len`, for a
    /// buffer) has its body at `va`, after making its page resident.
    fn live_bytes(&self, va: u64, len: usize, at_least: bool) -> Result<bool> {
        let Some(f) = self.fs.frame_at(va as usize) else {
            return Ok(false);
        };
        self.fs
            .ensure_resident(f)
            .map_err(|e| super::fault_error(self.source.name(), e))?;
        Ok(self.access.try_live(va, len, at_least).is_ok())
    }

    fn walk_struct(&self, desc: &'static TypeDesc, va: u64, found: &mut Found) -> Result<()> {
        for f in desc.fields {
            self.walk(f.kind, va + u64::from(f.offset), found)?;
        }
        Ok(())
    }

    /// Records what the value of `kind` at `va` (in a live object or
    /// buffer) owns and points to.
    fn walk(&self, kind: &'static FieldKind, va: u64, found: &mut Found) -> Result<()> {
        match kind {
            FieldKind::Prim(_) => {}
            FieldKind::Array {
                elem,
                elem_size,
                len,
            } => {
                for i in 0..u64::from(*len) {
                    self.walk(elem, va + i * u64::from(*elem_size), found)?;
                }
            }
            FieldKind::Struct(d) => self.walk_struct(d, va, found)?,
            FieldKind::Ref { target, .. } => {
                let to = *self.access.obj::<u64>(va);
                if to != 0 {
                    found.targets.push((to, (target.0)()));
                }
            }
            // A `Lazy` read since its page was fetched holds the direct
            // address (bit 0 set, `ptr.rs`).
            FieldKind::Smart {
                target, lazy: true, ..
            } if *self.access.obj::<u64>(va) & LAZY_DIRECT != 0 => {
                let to = *self.access.obj::<u64>(va) & !LAZY_DIRECT;
                found.targets.push((to, (target.0)()));
            }
            FieldKind::Smart { target, .. } => {
                let pa = *self.access.obj::<u64>(va);
                if pa != 0 {
                    let d = (target.0)();
                    let pages = pages_for(u64::from(d.size), self.page_size);
                    if let Ok(to) = super::translate(self.fs, pa, pages) {
                        found.targets.push((to, d));
                    }
                }
            }
            FieldKind::Vec { elem, elem_size } => {
                let [buf, len] = *self.access.obj::<[u64; 2]>(va);
                let len = u64::from(len as u32);
                let bytes = len.saturating_mul(u64::from(*elem_size)) as usize;
                if buf != 0 && self.live_bytes(buf, bytes, true)? {
                    for i in 0..len {
                        self.walk(elem, buf + i * u64::from(*elem_size), found)?;
                    }
                    found.buffers.push(buf);
                }
            }
            FieldKind::Bytes | FieldKind::Str => {
                let buf = *self.access.obj::<u64>(va);
                if buf != 0 && self.live_bytes(buf, 0, true)? {
                    found.buffers.push(buf);
                }
            }
            // An index owns its nodes; the objects its values lead to are
            // targets, as a pointer's are (`free_tree` follows them).
            FieldKind::Index { target, .. } => found.indexes.push((va, (target.0)())),
        }
        Ok(())
    }

    /// Marks the live object whose body is at `va` free.
    pub(crate) fn free_raw(&mut self, va: u64) -> Result<()> {
        let hdr = *self.access.obj::<[u32; 2]>(va - OBJECT_HEADER as u64);
        let [tag, size] = hdr;
        let flags = (tag >> 24) as u8;
        if flags & FLAG_FREE != 0 || tag & MAX_TYPE_ID == 0 {
            let why = if tag & MAX_TYPE_ID == 0 {
                NotLive::NoObject
            } else {
                NotLive::Freed
            };
            return Err(Error::dangling(format!("free: {}", why.describe(va))));
        }
        self.access.write_new(
            va - OBJECT_HEADER as u64,
            encode_header(tag & MAX_TYPE_ID, flags | FLAG_FREE, size),
        );
        *self.session.tx.counts.entry(tag & MAX_TYPE_ID).or_default() -= 1;
        Ok(())
    }
}
