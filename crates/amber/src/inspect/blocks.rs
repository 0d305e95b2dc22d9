//! One block as `amber inspect --page N` shows it: its header, the page
//! file's copy of it, and (for a data block) each object with its fields
//! decoded by the type's stored descriptor.
//!
//! The bytes come from the file, so nothing here may panic on them: every
//! read is bounds-checked, and a value that lies beyond the object's bytes
//! is [`Value::Truncated`].

use super::{Extent, Inspector};
use crate::error::{Error, Result};
use crate::format::bytes::{get_u32, get_u64};
use crate::format::home::Home;
use crate::format::objects::{FLAG_FREE, FLAG_MARK, ObjectEntry, walk};
use crate::format::page::{BlockKind, HEADER_SIZE, PageHeader, USED_OFFSET, compute_checksum};
use crate::io::{OpenMode, read_at_most};
use crate::schema::desc::{Prim, Shape, StoredField, StoredKind, StoredType};
use std::collections::HashMap;

/// The page file's copy of a block, whose physical fields (checksum, LSN)
/// are stamped when a checkpoint installs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileCopy {
    /// All zeros: allocated since the last checkpoint, not installed yet.
    NotWritten,
    /// Installed.
    Written {
        /// LSN of the last change installed.
        lsn: u64,
        /// Checksum stored in the header.
        checksum: u32,
        /// Checksum of the bytes as they are.
        computed: u32,
    },
}

/// A block: its committed image (the page file's copy with the changes
/// committed in the log laid over it), or, when that copy is damaged, the
/// file's bytes unverified.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockView {
    /// Its pages.
    pub extent: Extent,
    /// The header of the image shown.
    pub header: PageHeader,
    /// The page file's copy.
    pub file: FileCopy,
    /// Whether the log holds committed changes to it not yet installed (the
    /// image shown has them).
    pub pending: bool,
    /// Why the committed image could not be read (a damaged page): the
    /// objects shown are the file's bytes, unverified.
    pub damage: Option<String>,
    /// A data block's objects in map order (empty for other kinds).
    pub objects: Vec<ObjectView>,
    /// Where a data block's object map stops making sense.
    pub map_damage: Option<String>,
}

impl BlockView {
    /// The block's kind, if its kind byte is valid.
    pub fn kind(&self) -> Option<BlockKind> {
        BlockKind::from_u8(self.header.kind)
    }

    /// The object whose slot (header, body or padding) holds byte `offset`
    /// of the block.
    pub fn object_at(&self, offset: usize) -> Option<&ObjectView> {
        self.objects
            .iter()
            .find(|o| (o.header_offset..o.end().max(o.header_offset + 9)).contains(&offset))
    }
}

/// One object of a data block.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectView {
    /// Persistent address of its body (what pointers to it hold).
    pub addr: u64,
    /// Offset of its 8-byte header in the block.
    pub header_offset: usize,
    /// Its type id (see [`Inspector::catalog`]).
    pub type_id: u32,
    /// Its type's name; `None` when the catalog has no decodable
    /// descriptor for the id.
    pub type_name: Option<String>,
    /// Body bytes.
    pub size: usize,
    /// Flag bits: see [`is_free`](Self::is_free), [`is_marked`](Self::is_marked).
    pub flags: u8,
    /// Its contents, decoded.
    pub value: ObjectValue,
}

impl ObjectView {
    /// A freed slot (its type is kept; its bytes are not decoded).
    pub fn is_free(&self) -> bool {
        self.flags & FLAG_FREE != 0
    }

    /// Marked by object-marking update detection.
    pub fn is_marked(&self) -> bool {
        self.flags & FLAG_MARK != 0
    }

    /// Flag bits this build does not know.
    pub fn unknown_flags(&self) -> u8 {
        self.flags & !(FLAG_FREE | FLAG_MARK)
    }

    /// Offset in the block just past its slot (padding included).
    pub fn end(&self) -> usize {
        ObjectEntry {
            header: self.header_offset,
            body: self.header_offset + 8,
            size: self.size,
            type_id: self.type_id,
            flags: self.flags,
        }
        .end()
    }
}

/// An object's contents.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectValue {
    /// A free slot: not decoded.
    Free,
    /// An object of a struct type.
    Struct {
        /// The type's size: more than the object's when the object is too
        /// short (fields beyond it are [`Value::Truncated`]).
        type_size: u32,
        /// Its fields.
        fields: Vec<FieldValue>,
    },
    /// An array object (the buffer of a `PVec` or `PBytes`, or an index
    /// node): elements of one kind.
    Array {
        /// The element kind.
        elem: StoredKind,
        /// Elements (object size over element size).
        count: usize,
        /// The elements, as a [`Value::Array`] or [`Value::Bytes`].
        elements: Value,
    },
    /// Its type is not in the catalog, or its descriptor does not decode:
    /// the first bytes, raw.
    NoDescriptor {
        /// Up to 64 bytes.
        first_bytes: Vec<u8>,
    },
}

/// A field and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldValue {
    /// Its name.
    pub name: String,
    /// Its offset in the enclosing struct.
    pub offset: u32,
    /// Its kind.
    pub kind: StoredKind,
    /// Its value.
    pub value: Value,
}

/// A primitive value.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub enum Scalar {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::U8(v) => v.fmt(f),
            Scalar::I8(v) => v.fmt(f),
            Scalar::U16(v) => v.fmt(f),
            Scalar::I16(v) => v.fmt(f),
            Scalar::U32(v) => v.fmt(f),
            Scalar::I32(v) => v.fmt(f),
            Scalar::U64(v) => v.fmt(f),
            Scalar::I64(v) => v.fmt(f),
            Scalar::F32(v) => v.fmt(f),
            Scalar::F64(v) => v.fmt(f),
        }
    }
}

/// A decoded value. Pointers are shown as the persistent addresses stored
/// (a `PRef`'s or a buffer's word decoded from the database's encoding,
/// `format/home.rs`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A primitive.
    Scalar(Scalar),
    /// An array of `u8` or `i8`, as bytes.
    Bytes(Vec<u8>),
    /// A fixed array of other elements.
    Array(Vec<Value>),
    /// A nested struct.
    Struct(Vec<FieldValue>),
    /// A `PRef` or `Option<PRef>`: the address (0 is null).
    Ref(u64),
    /// A `Smart` or `Option<Smart>`: the address (0 is null).
    Smart(u64),
    /// A `Lazy`: the address, stored as a `Smart`'s (0 is null).
    Lazy(u64),
    /// A `PVec`, `PBytes` or `PString`.
    Vector {
        /// Address of the buffer (0: none).
        buffer: u64,
        /// Elements in use.
        len: u32,
        /// Elements the buffer holds.
        cap: u32,
    },
    /// A `PIndex`.
    Index {
        /// Address of the root node (0: empty).
        root: u64,
        /// Entries.
        len: u64,
    },
    /// The object's bytes end before this value.
    Truncated,
}

fn scalar(b: &[u8], at: usize, p: Prim) -> Option<Scalar> {
    fn get<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
        b.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    Some(match p {
        Prim::U8 => Scalar::U8(*b.get(at)?),
        Prim::I8 => Scalar::I8(*b.get(at)? as i8),
        Prim::U16 => Scalar::U16(u16::from_le_bytes(get(b, at)?)),
        Prim::I16 => Scalar::I16(i16::from_le_bytes(get(b, at)?)),
        Prim::U32 => Scalar::U32(u32::from_le_bytes(get(b, at)?)),
        Prim::I32 => Scalar::I32(i32::from_le_bytes(get(b, at)?)),
        Prim::U64 => Scalar::U64(u64::from_le_bytes(get(b, at)?)),
        Prim::I64 => Scalar::I64(i64::from_le_bytes(get(b, at)?)),
        Prim::F32 => Scalar::F32(f32::from_le_bytes(get(b, at)?)),
        Prim::F64 => Scalar::F64(f64::from_le_bytes(get(b, at)?)),
    })
}

/// The value of kind `k` at `at` in `b`. `left` is how many more values
/// may be made for the object: a descriptor's counts come from the file
/// (an array of 2^32 elements in a 64-byte object once asked for 128 GiB
/// of `Truncated`), so an object shows at most as many values as its body
/// has bytes, plus 64, and the rest as `Truncated`.
fn value(b: &[u8], at: usize, k: &StoredKind, home: Home, left: &mut usize) -> Value {
    let t = Value::Truncated;
    if *left == 0 {
        return t;
    }
    *left -= 1;
    match k {
        StoredKind::Prim(p) => scalar(b, at, *p).map_or(t, Value::Scalar),
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => array(b, at, elem, *elem_size as usize, *len as usize, home, left),
        StoredKind::Struct { fields, .. } => {
            Value::Struct(struct_fields(b, at, fields, home, left))
        }
        StoredKind::Ref { .. } => get_u64(b, at).map_or(t, |v| Value::Ref(decoded(home, v))),
        StoredKind::Smart { lazy: true, .. } => get_u64(b, at).map_or(t, Value::Lazy),
        StoredKind::Smart { .. } => get_u64(b, at).map_or(t, Value::Smart),
        StoredKind::Vec { .. } | StoredKind::Bytes | StoredKind::Str => {
            match (get_u64(b, at), get_u32(b, at + 8), get_u32(b, at + 12)) {
                (Some(word), Some(len), Some(cap)) => Value::Vector {
                    buffer: decoded(home, word),
                    len,
                    cap,
                },
                _ => t,
            }
        }
        StoredKind::Index { .. } => match (get_u64(b, at), get_u64(b, at + 8)) {
            (Some(root), Some(len)) => Value::Index { root, len },
            _ => t,
        },
    }
}

#[allow(clippy::too_many_arguments)]
fn array(
    b: &[u8],
    at: usize,
    elem: &StoredKind,
    size: usize,
    n: usize,
    home: Home,
    left: &mut usize,
) -> Value {
    if matches!(elem, StoredKind::Prim(Prim::U8 | Prim::I8)) {
        return at
            .checked_add(n)
            .and_then(|end| b.get(at..end))
            .map_or(Value::Truncated, |s| Value::Bytes(s.to_vec()));
    }
    Value::Array(
        (0..n.min(*left))
            .map(|i| {
                value(
                    b,
                    at.saturating_add(i.saturating_mul(size)),
                    elem,
                    home,
                    left,
                )
            })
            .collect(),
    )
}

fn struct_fields(
    b: &[u8],
    at: usize,
    fields: &[StoredField],
    home: Home,
    left: &mut usize,
) -> Vec<FieldValue> {
    fields
        .iter()
        .map(|f| FieldValue {
            name: f.name.clone(),
            offset: f.offset,
            kind: f.kind.clone(),
            value: value(b, at.saturating_add(f.offset as usize), &f.kind, home, left),
        })
        .collect()
}

/// The persistent address a stored `PRef` or buffer word stands for (0:
/// null).
fn decoded(home: Home, word: u64) -> u64 {
    if word == 0 { 0 } else { home.paddr(word) }
}

/// Decodes one object of `block` by its type in `types`.
fn object(
    block: &[u8],
    head: u64,
    e: &ObjectEntry,
    types: &HashMap<u32, StoredType>,
    ps: usize,
    home: Home,
) -> ObjectView {
    let body = block.get(e.body..e.body + e.size).unwrap_or(&[]);
    let left = &mut (body.len() + 64);
    let value = match types.get(&e.type_id) {
        _ if e.is_free() => ObjectValue::Free,
        Some(t) => match &t.shape {
            Shape::Struct(fields) => ObjectValue::Struct {
                type_size: t.size,
                fields: struct_fields(body, 0, fields, home, left),
            },
            Shape::Array(k) => {
                let size = t.size.max(1) as usize;
                let count = body.len() / size;
                ObjectValue::Array {
                    elem: k.clone(),
                    count,
                    elements: array(body, 0, k, size, count, home, left),
                }
            }
        },
        None => ObjectValue::NoDescriptor {
            first_bytes: body[..body.len().min(64)].to_vec(),
        },
    };
    ObjectView {
        addr: head * ps as u64 + e.body as u64,
        header_offset: e.header,
        type_id: e.type_id,
        type_name: types.get(&e.type_id).map(|t| t.name.clone()),
        size: e.size,
        flags: e.flags,
        value,
    }
}

impl Inspector {
    /// The block holding `page`, decoded. `Err` when no allocated block
    /// holds it, or the file cannot be read; a damaged block is shown from
    /// the file's bytes with [`BlockView::damage`] set.
    pub fn block(&self, page: u64) -> Result<BlockView> {
        let s = &self.store;
        let ps = s.page_size();
        let ext = self
            .block_of(page)
            .ok_or_else(|| Error::invalid(format!("page {page} is not allocated")))?;
        let mut file = vec![0u8; ext.pages as usize * ps];
        let f = s
            .vfs()
            .open(s.path(), OpenMode::ReadOnly)
            .map_err(|e| Error::io("open", s.path(), e))?;
        read_at_most(&*f, &mut file, ext.start * ps as u64)
            .map_err(|e| Error::io("read page", s.path(), e))?;
        let (image, damage) = match s.read_block(ext.start) {
            Ok(image) => (image, None),
            Err(e) if e.is_corruption() => (file.clone(), Some(e.to_string())),
            Err(e) => return Err(e),
        };
        let header = PageHeader::read(&image)
            .ok_or_else(|| Error::internal("a block shorter than its header"))?;
        let file_copy = match PageHeader::read(&file) {
            Some(h) if file.iter().any(|&x| x != 0) => FileCopy::Written {
                lsn: h.lsn,
                checksum: h.checksum,
                computed: compute_checksum(&file),
            },
            _ => FileCopy::NotWritten,
        };
        let pending = damage.is_none()
            && (image[USED_OFFSET..USED_OFFSET + 4] != file[USED_OFFSET..USED_OFFSET + 4]
                || image[HEADER_SIZE..] != file[HEADER_SIZE..]);
        let mut objects = Vec::new();
        let mut map_damage = None;
        if header.kind == BlockKind::Data as u8 {
            let types: HashMap<u32, StoredType> = self
                .catalog()
                .into_iter()
                .filter_map(|c| Some((c.id, c.decoded.ok()?)))
                .collect();
            for e in walk(&image, header.used as usize) {
                match e {
                    Ok(e) => objects.push(object(&image, ext.start, &e, &types, ps, s.home())),
                    Err(err) => map_damage = Some(err.to_string()),
                }
            }
        }
        Ok(BlockView {
            extent: ext,
            header,
            file: file_copy,
            pending,
            damage,
            objects,
            map_damage,
        })
    }

    /// The object whose slot (header, body or padding) holds persistent
    /// address `addr`; [`block`](Self::block) gives the block around it.
    pub fn object(&self, addr: u64) -> Result<ObjectView> {
        let ps = self.page_size() as u64;
        let b = self.block(addr / ps)?;
        b.object_at((addr - b.extent.start * ps) as usize)
            .cloned()
            .ok_or_else(|| Error::invalid(format!("no object at {}:{}", addr / ps, addr % ps)))
    }
}
