//! Byte strings and strings in a transaction: [`PBytes`] and [`PString`]
//! made with their contents, replaced and appended to.
//!
//! Both have a `PVec<u8>`'s layout, and their buffers are `[u8]` array
//! objects, so they grow through the vector machinery (`vec.rs`): amortised
//! doubling, a new buffer near the old one, the old one freed. A
//! `PString`'s bytes are only ever set from `&str`, so in memory they are
//! UTF-8; they are checked again where they are read as `&str`
//! (`read.rs`), since bytes that came from disk may be damaged.

use super::tx::Tx;
use crate::error::{Error, Result};
use crate::ptr::{PBytes, PRef, PString, PVec};
use crate::vm::Persistent;

impl Tx<'_> {
    /// Replaces the bytes of the byte string (or string) whose header is at
    /// `at` with `data` (`append`: adds them after its bytes).
    fn put_bytes(&mut self, at: u64, data: &[u8], append: bool) -> Result<()> {
        if !append {
            self.access.obj_mut::<PVec<u8>>(at).len = 0;
        }
        self.reserve_at::<u8>(at, data.len(), false)?;
        let (buf, len, _) = self.header::<u8>(at);
        let end = len as usize + data.len();
        self.room::<u8>(buf, end as u32)[len as usize..].copy_from_slice(data);
        self.access.obj_mut::<PVec<u8>>(at).len = end as u32;
        Ok(())
    }

    /// A buffer holding `data` exactly, not yet in any object: the parts
    /// of a new byte string or string.
    fn new_text(&mut self, data: &[u8]) -> Result<PBytes> {
        self.tick();
        let len = u32::try_from(data.len())
            .map_err(|_| Error::invalid("a byte string may hold at most 4 GiB - 1 bytes"))?;
        if len == 0 {
            return Ok(PBytes::new());
        }
        let buf = self.alloc_buffer::<u8>(len, None)?;
        self.room::<u8>(buf, len).copy_from_slice(data);
        Ok(PBytes { buf, len, cap: len })
    }

    /// Replaces the contents of byte string `field` of `obj`. The buffer
    /// grows as a vector's does; it does not shrink.
    pub fn set_bytes<O: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PBytes,
        data: &[u8],
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.put_bytes(at, data, false)
    }

    /// Appends `data` to byte string `field` of `obj`.
    pub fn push_bytes<O: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PBytes,
        data: &[u8],
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.put_bytes(at, data, true)
    }

    /// A new byte string holding `data` (capacity = length), not yet in
    /// any object: store it by allocating its owner with it, as for
    /// [`new_vec`](Self::new_vec).
    pub fn new_bytes(&mut self, data: &[u8]) -> Result<PBytes> {
        self.new_text(data)
    }

    /// Replaces the text of string `field` of `obj`.
    pub fn set_str<O: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PString,
        text: &str,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.put_bytes(at, text.as_bytes(), false)
    }

    /// Appends `text` to string `field` of `obj`.
    pub fn push_str<O: Persistent>(
        &mut self,
        obj: PRef<O>,
        field: impl FnOnce(&mut O) -> &mut PString,
        text: &str,
    ) -> Result<()> {
        let at = self.field_at(obj, field);
        self.put_bytes(at, text.as_bytes(), true)
    }

    /// A new string holding `text` (capacity = length), not yet in any
    /// object: store it by allocating its owner with it, or in one call
    /// with [`alloc_with`](Self::alloc_with). A string never stored is left
    /// unreachable, like an object no pointer leads to.
    ///
    /// ```
    /// use amber::{Db, Options, PString, PVec, Persistent, View};
    ///
    /// #[derive(Persistent)]
    /// #[repr(C)]
    /// struct Node { id: u64, name: PString, tags: PVec<u32> }
    ///
    /// # fn main() -> amber::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// let mut db = Db::create(dir.path().join("nodes.amber"), Options::default())?;
    /// let mut tx = db.begin()?;
    /// let name = tx.new_string("first")?;
    /// let a = tx.alloc(Node { id: 1, name, tags: PVec::new() })?;
    /// let b = tx.alloc_with(|tx| {
    ///     Ok(Node { id: 2, name: tx.new_string("second")?, tags: tx.new_vec([7, 8])? })
    /// })?;
    /// tx.push_str(a, |n| &mut n.name, " node")?;
    /// assert_eq!(tx.str(&tx.get(a).name), "first node");
    /// assert_eq!(tx.slice(&tx.get(b).tags), [7, 8]);
    /// # Ok(()) }
    /// ```
    pub fn new_string(&mut self, text: &str) -> Result<PString> {
        Ok(PString {
            bytes: self.new_text(text.as_bytes())?,
        })
    }
}
