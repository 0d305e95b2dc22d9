//! The catalog encoding of descriptors (`docs/design.md` §4.1): a format
//! version byte, the type's name, size, alignment and shape, then each kind
//! as a tag byte and what that tag carries. Decoding reads bytes from the
//! page file, so it refuses anything it does not know rather than guess.

use super::desc::{Prim, Shape, StoredField, StoredKind, StoredType};

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
    use crate::schema::desc::{FieldDesc, FieldKind, Target, TypeDesc};

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
