//! Type descriptors: what `#[derive(Persistent)]` says about a type, in a form
//! that can be stored in the schema catalog and read back without the
//! program's types.
//!
//! A descriptor is a tree: a struct's fields, each a primitive, a fixed
//! array, a nested struct, or one of Amber's pointer kinds. It is built in
//! const context by the derive (pointer targets go through a function pointer,
//! which breaks the cycle of a type that points to itself), encoded into the
//! catalog when a type is first used, and compared field by field with the
//! stored one (`compare.rs`) for every type a program names and every type
//! those reach (`check.rs`).

/// A static descriptor of a persistent struct, built by the derive.
#[derive(Debug)]
pub struct TypeDesc {
    /// The type's name as written in the program.
    pub name: &'static str,
    /// `size_of`.
    pub size: u32,
    /// `align_of`.
    pub align: u32,
    /// Fields in declaration order.
    pub fields: &'static [FieldDesc],
}

/// One field of a persistent struct.
#[derive(Debug)]
pub struct FieldDesc {
    /// Field name.
    pub name: &'static str,
    /// `offset_of`.
    pub offset: u32,
    /// What it holds.
    pub kind: &'static FieldKind,
}

/// A function returning the descriptor of a pointer's target; a function, not
/// a reference, so that a type may point to itself.
#[derive(Clone, Copy)]
pub struct Target(pub fn() -> &'static TypeDesc);

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str((self.0)().name)
    }
}

/// Primitive field types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Prim {
    U8 = 1,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

impl Prim {
    /// Size in bytes.
    pub const fn size(self) -> u32 {
        match self {
            Prim::U8 | Prim::I8 => 1,
            Prim::U16 | Prim::I16 => 2,
            Prim::U32 | Prim::I32 | Prim::F32 => 4,
            Prim::U64 | Prim::I64 | Prim::F64 => 8,
        }
    }

    /// Rust name.
    pub const fn name(self) -> &'static str {
        match self {
            Prim::U8 => "u8",
            Prim::I8 => "i8",
            Prim::U16 => "u16",
            Prim::I16 => "i16",
            Prim::U32 => "u32",
            Prim::I32 => "i32",
            Prim::U64 => "u64",
            Prim::I64 => "i64",
            Prim::F32 => "f32",
            Prim::F64 => "f64",
        }
    }

    fn from_u8(b: u8) -> Option<Prim> {
        use Prim::*;
        [U8, I8, U16, I16, U32, I32, U64, I64, F32, F64]
            .into_iter()
            .find(|p| *p as u8 == b)
    }
}

/// What a field holds.
#[derive(Debug)]
pub enum FieldKind {
    /// A primitive.
    Prim(Prim),
    /// `[elem; len]`.
    Array {
        /// Element kind.
        elem: &'static FieldKind,
        /// Element size in bytes.
        elem_size: u32,
        /// Elements.
        len: u32,
    },
    /// A nested struct, by value.
    Struct(&'static TypeDesc),
    /// `PRef<T>` or `Option<PRef<T>>`: swizzled when its page is faulted in.
    Ref(Target),
    /// `Smart<T>` or `Option<Smart<T>>`: kept as a persistent address and
    /// translated at each use (Texas's fine-grained smart pointers).
    Smart(Target),
    /// `PVec<T>`: a growable array; its buffer pointer is swizzled.
    Vec {
        /// Element kind.
        elem: &'static FieldKind,
        /// Element size in bytes.
        elem_size: u32,
    },
    /// `PBytes`: a growable byte string; its buffer pointer is swizzled.
    Bytes,
    /// `PIndex<V>`: an ordered map from u64 to `PRef<V>`; its nodes are
    /// reached through persistent addresses translated at each use.
    Index(Target),
}

/// The owned, decoded form of a descriptor, read back from the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredType {
    /// Type name.
    pub name: String,
    /// Size in bytes (for an array type, the element size).
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// What the type is.
    pub shape: Shape,
}

/// A stored type is a struct, or the element type of an array object (the
/// buffer of a `PVec` or `PBytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A struct's fields.
    Struct(Vec<StoredField>),
    /// An array of elements of this kind (count = object size / element size).
    Array(StoredKind),
}

/// A decoded field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredField {
    /// Name.
    pub name: String,
    /// Offset.
    pub offset: u32,
    /// Kind.
    pub kind: StoredKind,
}

/// A decoded field kind. Pointer kinds carry the target's name and size, which
/// is all swizzling needs (how many pages the target's block spans).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredKind {
    /// A primitive.
    Prim(Prim),
    /// A fixed array.
    Array {
        /// Element kind.
        elem: Box<StoredKind>,
        /// Element size.
        elem_size: u32,
        /// Count.
        len: u32,
    },
    /// A nested struct.
    Struct {
        /// Type name.
        name: String,
        /// Size.
        size: u32,
        /// Fields.
        fields: Vec<StoredField>,
    },
    /// A swizzled pointer.
    Ref {
        /// Target type name.
        target: String,
        /// Target size in bytes.
        target_size: u32,
    },
    /// A smart pointer (persistent address in memory).
    Smart {
        /// Target type name.
        target: String,
        /// Target size in bytes.
        target_size: u32,
    },
    /// A growable array.
    Vec {
        /// Element kind.
        elem: Box<StoredKind>,
        /// Element size.
        elem_size: u32,
    },
    /// A byte string.
    Bytes,
    /// An index to `target`.
    Index {
        /// Value type name.
        target: String,
        /// Value size.
        target_size: u32,
    },
}

impl FieldKind {
    /// The owned form.
    pub fn to_stored(&self) -> StoredKind {
        match self {
            FieldKind::Prim(p) => StoredKind::Prim(*p),
            FieldKind::Array {
                elem,
                elem_size,
                len,
            } => StoredKind::Array {
                elem: Box::new(elem.to_stored()),
                elem_size: *elem_size,
                len: *len,
            },
            FieldKind::Struct(d) => StoredKind::Struct {
                name: d.name.to_string(),
                size: d.size,
                fields: d.stored_fields(),
            },
            FieldKind::Ref(t) => StoredKind::Ref {
                target: (t.0)().name.to_string(),
                target_size: (t.0)().size,
            },
            FieldKind::Smart(t) => StoredKind::Smart {
                target: (t.0)().name.to_string(),
                target_size: (t.0)().size,
            },
            FieldKind::Vec { elem, elem_size } => StoredKind::Vec {
                elem: Box::new(elem.to_stored()),
                elem_size: *elem_size,
            },
            FieldKind::Bytes => StoredKind::Bytes,
            FieldKind::Index(t) => StoredKind::Index {
                target: (t.0)().name.to_string(),
                target_size: (t.0)().size,
            },
        }
    }
}

impl TypeDesc {
    fn stored_fields(&self) -> Vec<StoredField> {
        self.fields
            .iter()
            .map(|f| StoredField {
                name: f.name.to_string(),
                offset: f.offset,
                kind: f.kind.to_stored(),
            })
            .collect()
    }

    /// The owned form of this struct type.
    pub fn to_stored(&self) -> StoredType {
        StoredType {
            name: self.name.to_string(),
            size: self.size,
            align: self.align,
            shape: Shape::Struct(self.stored_fields()),
        }
    }
}

impl StoredType {
    /// The array type whose elements are of `elem` kind and `elem_size` bytes
    /// (the type of a `PVec` or `PBytes` buffer object).
    pub fn array_of(elem: StoredKind, elem_size: u32) -> StoredType {
        StoredType {
            name: format!("[{}]", kind_name(&elem)),
            size: elem_size,
            align: 8,
            shape: Shape::Array(elem),
        }
    }
}

/// How a kind is written in messages and dumps.
pub fn kind_name(k: &StoredKind) -> String {
    match k {
        StoredKind::Prim(p) => p.name().to_string(),
        StoredKind::Array { elem, len, .. } => format!("[{}; {len}]", kind_name(elem)),
        StoredKind::Struct { name, .. } => name.clone(),
        StoredKind::Ref { target, .. } => format!("PRef<{target}>"),
        StoredKind::Smart { target, .. } => format!("Smart<{target}>"),
        StoredKind::Vec { elem, .. } => format!("PVec<{}>", kind_name(elem)),
        StoredKind::Bytes => "PBytes".to_string(),
        StoredKind::Index { target, .. } => format!("PIndex<{target}>"),
    }
}

// ---- encoding ---------------------------------------------------------------

const T_PRIM: u8 = 1;
const T_ARRAY: u8 = 2;
const T_STRUCT: u8 = 3;
const T_REF: u8 = 4;
const T_SMART: u8 = 5;
const T_VEC: u8 = 6;
const T_BYTES: u8 = 7;
const T_INDEX: u8 = 8;

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_fields(out: &mut Vec<u8>, fields: &[StoredField]) {
    out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    for f in fields {
        put_str(out, &f.name);
        out.extend_from_slice(&f.offset.to_le_bytes());
        put_kind(out, &f.kind);
    }
}

fn put_kind(out: &mut Vec<u8>, k: &StoredKind) {
    match k {
        StoredKind::Prim(p) => out.extend_from_slice(&[T_PRIM, *p as u8]),
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            out.push(T_ARRAY);
            out.extend_from_slice(&elem_size.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            put_kind(out, elem);
        }
        StoredKind::Struct { name, size, fields } => {
            out.push(T_STRUCT);
            put_str(out, name);
            out.extend_from_slice(&size.to_le_bytes());
            put_fields(out, fields);
        }
        StoredKind::Ref {
            target,
            target_size,
        }
        | StoredKind::Smart {
            target,
            target_size,
        }
        | StoredKind::Index {
            target,
            target_size,
        } => {
            out.push(match k {
                StoredKind::Ref { .. } => T_REF,
                StoredKind::Smart { .. } => T_SMART,
                _ => T_INDEX,
            });
            put_str(out, target);
            out.extend_from_slice(&target_size.to_le_bytes());
        }
        StoredKind::Vec { elem, elem_size } => {
            out.push(T_VEC);
            out.extend_from_slice(&elem_size.to_le_bytes());
            put_kind(out, elem);
        }
        StoredKind::Bytes => out.push(T_BYTES),
    }
}

impl StoredType {
    /// Encodes for the schema catalog.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8]; // descriptor format version
        put_str(&mut out, &self.name);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.align.to_le_bytes());
        match &self.shape {
            Shape::Struct(fields) => {
                out.push(0);
                put_fields(&mut out, fields);
            }
            Shape::Array(k) => {
                out.push(1);
                put_kind(&mut out, k);
            }
        }
        out
    }

    /// Decodes a catalog entry.
    pub fn decode(b: &[u8]) -> Result<StoredType, String> {
        let mut r = Reader { b, pos: 0 };
        if r.u8()? != 1 {
            return Err("unknown descriptor format".into());
        }
        let name = r.str()?;
        let size = r.u32()?;
        let align = r.u32()?;
        let shape = match r.u8()? {
            0 => Shape::Struct(r.fields(0)?),
            1 => Shape::Array(r.kind(0)?),
            x => return Err(format!("unknown descriptor shape {x}")),
        };
        if r.pos != b.len() {
            return Err("trailing bytes in descriptor".into());
        }
        Ok(StoredType {
            name,
            size,
            align,
            shape,
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let s = self
            .b
            .get(self.pos..self.pos + n)
            .ok_or("descriptor truncated")?;
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn str(&mut self) -> Result<String, String> {
        let s = self.take(2)?;
        let n = u16::from_le_bytes([s[0], s[1]]) as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "descriptor name not UTF-8".into())
    }
    fn fields(&mut self, depth: u32) -> Result<Vec<StoredField>, String> {
        let n = self.u32()?;
        if n as usize > self.b.len() {
            return Err("descriptor field count impossible".into());
        }
        (0..n)
            .map(|_| {
                Ok(StoredField {
                    name: self.str()?,
                    offset: self.u32()?,
                    kind: self.kind(depth)?,
                })
            })
            .collect()
    }
    fn kind(&mut self, depth: u32) -> Result<StoredKind, String> {
        if depth > 64 {
            return Err("descriptor nested too deeply".into());
        }
        Ok(match self.u8()? {
            T_PRIM => StoredKind::Prim(Prim::from_u8(self.u8()?).ok_or("unknown primitive")?),
            T_ARRAY => {
                let elem_size = self.u32()?;
                let len = self.u32()?;
                StoredKind::Array {
                    elem: Box::new(self.kind(depth + 1)?),
                    elem_size,
                    len,
                }
            }
            T_STRUCT => StoredKind::Struct {
                name: self.str()?,
                size: self.u32()?,
                fields: self.fields(depth + 1)?,
            },
            t @ (T_REF | T_SMART | T_INDEX) => {
                let target = self.str()?;
                let target_size = self.u32()?;
                match t {
                    T_REF => StoredKind::Ref {
                        target,
                        target_size,
                    },
                    T_SMART => StoredKind::Smart {
                        target,
                        target_size,
                    },
                    _ => StoredKind::Index {
                        target,
                        target_size,
                    },
                }
            }
            T_VEC => {
                let elem_size = self.u32()?;
                StoredKind::Vec {
                    elem: Box::new(self.kind(depth + 1)?),
                    elem_size,
                }
            }
            T_BYTES => StoredKind::Bytes,
            x => return Err(format!("unknown field kind {x}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compare::first_difference;

    static LEAF: TypeDesc = TypeDesc {
        name: "Leaf",
        size: 8,
        align: 8,
        fields: &[FieldDesc {
            name: "v",
            offset: 0,
            kind: &FieldKind::Prim(Prim::U64),
        }],
    };

    static NODE: TypeDesc = TypeDesc {
        name: "Node",
        size: 48,
        align: 8,
        fields: &[
            FieldDesc {
                name: "next",
                offset: 0,
                kind: &FieldKind::Ref(Target(|| &NODE)),
            },
            FieldDesc {
                name: "leaves",
                offset: 8,
                kind: &FieldKind::Array {
                    elem: &FieldKind::Struct(&LEAF),
                    elem_size: 8,
                    len: 2,
                },
            },
            FieldDesc {
                name: "kids",
                offset: 24,
                kind: &FieldKind::Vec {
                    elem: &FieldKind::Ref(Target(|| &LEAF)),
                    elem_size: 8,
                },
            },
            FieldDesc {
                name: "name",
                offset: 40,
                kind: &FieldKind::Bytes,
            },
        ],
    };

    /// The byte-level example of `docs/design.md` §4.1.
    #[test]
    fn encoding_is_the_documented_one() {
        let mut want = vec![1u8, 4, 0];
        want.extend_from_slice(b"Leaf");
        want.extend_from_slice(&[8, 0, 0, 0, 8, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, b'v']);
        want.extend_from_slice(&[0, 0, 0, 0, 1, 7]);
        let got = LEAF.to_stored().encode();
        assert_eq!(got, want);
        assert_eq!(got.len(), 29);
        // Tags and prim codes as documented.
        let tags = [
            T_PRIM, T_ARRAY, T_STRUCT, T_REF, T_SMART, T_VEC, T_BYTES, T_INDEX,
        ];
        assert_eq!(tags, [1, 2, 3, 4, 5, 6, 7, 8]);
        use Prim::*;
        let prims = [U8, I8, U16, I16, U32, I32, U64, I64, F32, F64].map(|p| p as u8);
        assert_eq!(prims, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    }

    #[test]
    fn encode_decode_and_compare() {
        let s = NODE.to_stored();
        let back = StoredType::decode(&s.encode()).expect("decodes");
        assert_eq!(back, s);
        assert_eq!(first_difference(&s, &back), None);
        let mut changed = s.clone();
        if let Shape::Struct(f) = &mut changed.shape {
            f[1].offset = 16;
        }
        let d = first_difference(&changed, &s).expect("differs");
        assert!(d.contains("leaves"), "{d}");
        let a = StoredType::array_of(StoredKind::Prim(Prim::U8), 1);
        assert_eq!(StoredType::decode(&a.encode()).expect("array"), a);
        assert!(StoredType::decode(&[1, 0]).is_err());
    }
}
