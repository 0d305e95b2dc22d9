//! Metadata blobs: the free-space map, the root directory and the schema
//! catalog, each written whole at a checkpoint into a freshly allocated block
//! (shadow paging: the superblock switches to the new blobs atomically).
//!
//! Blob block layout after the 32-byte page header:
//!
//! ```text
//! 32  4  meta kind   1 free-space map, 2 root directory, 3 schema catalog
//! 36  4  zero
//! 40  8  length      payload bytes
//! 48  .. payload
//! ```
//!
//! Payloads (all integers little-endian):
//! - free-space map: `page_count u64`, `n_free u64`, `n_free × (start u64,
//!   len u64)`, `n_runs u64`, `n_runs × (head u64, len u32)`: the high-water
//!   mark, the free extents, and the allocated multi-page blocks.
//! - root directory: `n u32`, `n × (name_len u16, name, addr u64, type_id u32)`.
//! - schema catalog: `n u32`, `n × (type_id u32, len u32, descriptor bytes)`.

use super::bytes::{Cursor, Short};
use super::objects::MAX_TYPE_ID;
use super::page::HEADER_SIZE;
use super::{PAddr, PageNo};

/// Offset of a blob's payload in its block.
pub const PAYLOAD_OFFSET: usize = HEADER_SIZE + 16;

/// The three blobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MetaKind {
    /// Free-space map.
    FreeSpace = 1,
    /// Root directory.
    Roots = 2,
    /// Schema catalog.
    Catalog = 3,
}

impl MetaKind {
    /// Name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            MetaKind::FreeSpace => "free-space map",
            MetaKind::Roots => "root directory",
            MetaKind::Catalog => "schema catalog",
        }
    }
}

/// Pages a blob of `payload` bytes needs.
pub fn blob_pages(payload: usize, page_size: usize) -> u32 {
    (PAYLOAD_OFFSET + payload).div_ceil(page_size) as u32
}

/// Writes the blob framing and payload into a formatted block.
pub fn write_blob(block: &mut [u8], kind: MetaKind, payload: &[u8]) {
    block[HEADER_SIZE..HEADER_SIZE + 4].copy_from_slice(&(kind as u32).to_le_bytes());
    block[HEADER_SIZE + 8..HEADER_SIZE + 16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    block[PAYLOAD_OFFSET..PAYLOAD_OFFSET + payload.len()].copy_from_slice(payload);
}

/// Extracts a blob's payload from its block, checking the kind.
pub fn read_blob(block: &[u8], kind: MetaKind) -> Result<&[u8], String> {
    let mut c = Cursor::new(block.get(HEADER_SIZE..).unwrap_or(&[]));
    let k = c.u32().map_err(|_| "truncated blob".to_string())?;
    if k != kind as u32 {
        return Err(format!("expected a {} blob, found kind {k}", kind.name()));
    }
    let _ = c.u32();
    let len = c.u64().map_err(|_| "truncated blob".to_string())?;
    let end = (len as usize)
        .checked_add(PAYLOAD_OFFSET)
        .filter(|&e| e <= block.len())
        .ok_or_else(|| format!("blob length {len} exceeds its block"))?;
    Ok(&block[PAYLOAD_OFFSET..end])
}

/// The persisted free-space map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsmImage {
    /// Pages `[0, page_count)` exist; higher ones are unallocated.
    pub page_count: u64,
    /// Free extents `(start, len)`, sorted, disjoint, not adjacent.
    pub free: Vec<(PageNo, u64)>,
    /// Allocated multi-page blocks `(head, len)`, sorted.
    pub runs: Vec<(PageNo, u32)>,
}

impl FsmImage {
    /// Encodes the payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24 + self.free.len() * 16 + self.runs.len() * 12);
        v.extend_from_slice(&self.page_count.to_le_bytes());
        v.extend_from_slice(&(self.free.len() as u64).to_le_bytes());
        for (s, l) in &self.free {
            v.extend_from_slice(&s.to_le_bytes());
            v.extend_from_slice(&l.to_le_bytes());
        }
        v.extend_from_slice(&(self.runs.len() as u64).to_le_bytes());
        for (h, l) in &self.runs {
            v.extend_from_slice(&h.to_le_bytes());
            v.extend_from_slice(&l.to_le_bytes());
        }
        v
    }

    /// Decodes a payload.
    pub fn decode(b: &[u8]) -> Result<Self, Short> {
        let mut c = Cursor::new(b);
        let page_count = c.u64()?;
        let n = c.u64()?;
        if n > c.remaining() as u64 / 16 {
            return Err(Short);
        }
        let mut free = Vec::with_capacity(n as usize);
        for _ in 0..n {
            free.push((c.u64()?, c.u64()?));
        }
        let n = c.u64()?;
        if n > c.remaining() as u64 / 12 {
            return Err(Short);
        }
        let mut runs = Vec::with_capacity(n as usize);
        for _ in 0..n {
            runs.push((c.u64()?, c.u32()?));
        }
        Ok(FsmImage {
            page_count,
            free,
            runs,
        })
    }
}

/// A named root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootEntry {
    /// Name.
    pub name: String,
    /// Persistent address it names.
    pub addr: PAddr,
    /// Type id of the object there (0: untyped).
    pub type_id: u32,
}

/// Encodes the root directory payload.
pub fn encode_roots(roots: &[RootEntry]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(roots.len() as u32).to_le_bytes());
    for r in roots {
        v.extend_from_slice(&(r.name.len() as u16).to_le_bytes());
        v.extend_from_slice(r.name.as_bytes());
        v.extend_from_slice(&r.addr.to_le_bytes());
        v.extend_from_slice(&r.type_id.to_le_bytes());
    }
    v
}

/// Decodes the root directory payload.
pub fn decode_roots(b: &[u8]) -> Result<Vec<RootEntry>, String> {
    let mut c = Cursor::new(b);
    let bad = |_| "truncated root directory".to_string();
    let n = c.u32().map_err(bad)?;
    let mut v = Vec::new();
    for _ in 0..n {
        let len = c.u16().map_err(bad)?;
        let name = std::str::from_utf8(c.bytes(len as usize).map_err(bad)?)
            .map_err(|_| "root name is not UTF-8".to_string())?
            .to_string();
        v.push(RootEntry {
            name,
            addr: c.u64().map_err(bad)?,
            type_id: c.u32().map_err(bad)?,
        });
    }
    Ok(v)
}

/// Refuses a type id no object can carry: 0, or above the 24 bits of an
/// object header's tag.
pub fn check_type_id(id: u32) -> Result<(), String> {
    if id == 0 || id > MAX_TYPE_ID {
        return Err(format!(
            "type id {id} is outside 1..={MAX_TYPE_ID}, the ids an object header holds"
        ));
    }
    Ok(())
}

/// Encodes the schema catalog payload.
pub fn encode_catalog(types: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(types.len() as u32).to_le_bytes());
    for (id, d) in types {
        v.extend_from_slice(&id.to_le_bytes());
        v.extend_from_slice(&(d.len() as u32).to_le_bytes());
        v.extend_from_slice(d);
    }
    v
}

/// Decodes the schema catalog payload. A type id must fit an object
/// header's 24 bits (and not be 0): the registry's table is indexed by it.
pub fn decode_catalog(b: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, String> {
    let mut c = Cursor::new(b);
    let bad = |_| "truncated schema catalog".to_string();
    let n = c.u32().map_err(bad)?;
    let mut v = Vec::new();
    for _ in 0..n {
        let id = c.u32().map_err(bad)?;
        check_type_id(id)?;
        let len = c.u32().map_err(bad)?;
        v.push((id, c.bytes(len as usize).map_err(bad)?.to_vec()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip() {
        let f = FsmImage {
            page_count: 100,
            free: vec![(5, 3), (50, 10)],
            runs: vec![(20, 4)],
        };
        assert_eq!(FsmImage::decode(&f.encode()), Ok(f));
        let r = vec![RootEntry {
            name: "parts".into(),
            addr: 8192 + 40,
            type_id: 3,
        }];
        assert_eq!(decode_roots(&encode_roots(&r)), Ok(r));
        let t = vec![(1, vec![1, 2, 3]), (2, vec![])];
        assert_eq!(decode_catalog(&encode_catalog(&t)), Ok(t));
        assert!(FsmImage::decode(&[1, 2, 3]).is_err());
        for id in [0, MAX_TYPE_ID + 1, u32::MAX] {
            assert!(decode_catalog(&encode_catalog(&[(id, vec![])])).is_err());
        }
        let mut block = vec![0u8; 4096];
        write_blob(&mut block, MetaKind::Roots, b"xyz");
        assert_eq!(read_blob(&block, MetaKind::Roots), Ok(&b"xyz"[..]));
        assert!(read_blob(&block, MetaKind::Catalog).is_err());
    }
}
