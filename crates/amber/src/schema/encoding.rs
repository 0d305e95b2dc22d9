//! The catalog encoding of descriptors (`docs/design.md` §4.1): a format
//! version byte, the type's name, size, alignment and shape, then each kind
//! as a tag byte and what that tag carries. Decoding reads bytes from the
//! page file, so it refuses anything it does not know rather than guess.

use super::desc::{
    LEGACY_INDEX_KEY, Nullability, Prim, Shape, StoredField, StoredKind, StoredType,
};

/// The format version written for a type without a `Lazy<T>`. Version 2
/// records whether each pointer field may hold null (tags 9 and 10 for the
/// non-null forms); version 1, which gave both forms of a pointer one tag,
/// is still read.
const VERSION: u8 = 2;
/// The format version written for a type with a `Lazy<T>` (tag 12), so
/// that an Amber that does not know the kind refuses the entry by its
/// version, and every other entry stays as an older Amber wrote and reads
/// it.
const VERSION_LAZY: u8 = 3;

const T_PRIM: u8 = 1;
const T_ARRAY: u8 = 2;
const T_STRUCT: u8 = 3;
/// `Option<PRef<T>>`; in version 1, `PRef<T>` or `Option<PRef<T>>`.
const T_OPT_REF: u8 = 4;
/// `Option<Smart<T>>`; in version 1, `Smart<T>` or `Option<Smart<T>>`.
const T_OPT_SMART: u8 = 5;
const T_VEC: u8 = 6;
const T_BYTES: u8 = 7;
/// `PIndex<V>` of the first index format (u64 keys in word arrays): read,
/// as a kind no program has (`LEGACY_INDEX_KEY`), never written.
const T_INDEX: u8 = 8;
/// `PRef<T>` (version 2).
const T_REF: u8 = 9;
/// `Smart<T>` (version 2).
const T_SMART: u8 = 10;
/// `PString` (version 2; Amber before it reads the tag as unknown).
const T_STR: u8 = 11;
/// `Lazy<T>` (version 3; 0 is null): target name, target size u32, as
/// `Smart<T>`.
const T_LAZY: u8 = 12;
/// `PIndex<V, K>` / `PMultiIndex<V, K>`: the target as for a pointer, then
/// the key type's name and a multi flag byte (0 or 1).
const T_KEYED_INDEX: u8 = 16;

pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
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

fn put_target(out: &mut Vec<u8>, tag: u8, target: &str, target_size: u32) {
    out.push(tag);
    put_str(out, target);
    out.extend_from_slice(&target_size.to_le_bytes());
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
            nullability,
        }
        | StoredKind::Smart {
            target,
            target_size,
            nullability,
            ..
        } => {
            let smart = matches!(k, StoredKind::Smart { .. });
            let lazy = matches!(k, StoredKind::Smart { lazy: true, .. });
            let tag = match (smart, *nullability == Nullability::NonNull) {
                // A `Lazy<T>` may always be null (`ptr.rs`).
                _ if lazy => T_LAZY,
                (false, true) => T_REF,
                (false, false) => T_OPT_REF,
                (true, true) => T_SMART,
                (true, false) => T_OPT_SMART,
            };
            put_target(out, tag, target, *target_size);
        }
        StoredKind::Index {
            target,
            target_size,
            key,
            multi,
        } => {
            put_target(out, T_KEYED_INDEX, target, *target_size);
            put_str(out, key);
            out.push(u8::from(*multi));
        }
        StoredKind::Vec { elem, elem_size } => {
            out.push(T_VEC);
            out.extend_from_slice(&elem_size.to_le_bytes());
            put_kind(out, elem);
        }
        StoredKind::Bytes => out.push(T_BYTES),
        StoredKind::Str => out.push(T_STR),
    }
}

impl StoredType {
    /// Encodes for the schema catalog, in the current format version. A
    /// pointer of unknown nullability (only a version-1 entry has one, and
    /// Amber never writes those back) is written as the `Option` form: that
    /// it may hold null is all that is known of it.
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.has_lazy() { VERSION_LAZY } else { VERSION };
        let mut out = vec![version];
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

    /// Whether the entry's encoding holds tag 12: a field of this type, of a
    /// struct or array it holds by value, or a vector's element kind, is a
    /// `Lazy<T>`.
    fn has_lazy(&self) -> bool {
        fn kind(k: &StoredKind) -> bool {
            match k {
                StoredKind::Smart { lazy, .. } => *lazy,
                StoredKind::Array { elem, .. } | StoredKind::Vec { elem, .. } => kind(elem),
                StoredKind::Struct { fields, .. } => fields.iter().any(|f| kind(&f.kind)),
                _ => false,
            }
        }
        match &self.shape {
            Shape::Struct(fields) => fields.iter().any(|f| kind(&f.kind)),
            Shape::Array(k) => kind(k),
        }
    }

    /// Decodes a catalog entry of format version 1, 2 or 3.
    pub fn decode(b: &[u8]) -> Result<StoredType, String> {
        let version = match b.first() {
            Some(&v @ (1 | VERSION | VERSION_LAZY)) => v,
            Some(v) => return Err(format!("unknown descriptor format version {v}")),
            None => return Err("empty descriptor".into()),
        };
        let mut r = Reader { b, pos: 1, version };
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
        let slots = match &shape {
            Shape::Struct(fields) => fields_slots(fields, size)?,
            Shape::Array(k) => slots_in(k, u64::from(size))?,
        };
        if slots > MAX_POINTER_SLOTS {
            return Err(format!(
                "descriptor has {slots} pointer slots, more than {MAX_POINTER_SLOTS}"
            ));
        }
        Ok(StoredType {
            name,
            size,
            align,
            shape,
        })
    }
}

/// The most pointer slots a stored type may have (an object's pointers,
/// or an array element's). Its swizzling layout costs 16 bytes a slot, and
/// is built from the catalog when a database is opened, so this bounds
/// what a catalog entry can make an open allocate (16 MiB a type) whatever
/// its bytes say. No program type comes near: it would be a struct of
/// 8 MiB of pointers.
pub const MAX_POINTER_SLOTS: u64 = 1 << 20;

/// The pointer slots of `fields`, the fields of a struct of `size` bytes:
/// each field must start inside it, and each pointer lie inside it (the
/// swizzling layout adds offsets in 32 bits, and walks every element of an
/// array of pointers).
fn fields_slots(fields: &[StoredField], size: u32) -> Result<u64, String> {
    let mut n = 0u64;
    for f in fields {
        let room = size.checked_sub(f.offset).ok_or_else(|| {
            format!("field `{}` at offset {} lies past the end of its {size}-byte struct", f.name, f.offset)
        })?;
        n = n.saturating_add(slots_in(&f.kind, u64::from(room))?);
    }
    Ok(n)
}

/// The pointer slots of a value of kind `k` that has `room` bytes from its
/// offset to the end of its enclosing type, if they all lie inside.
fn slots_in(k: &StoredKind, room: u64) -> Result<u64, String> {
    let fits = |n: u64, what: &str| {
        if n <= room {
            Ok(())
        } else {
            Err(format!("{what} of {n} bytes runs past the end of its type"))
        }
    };
    Ok(match k {
        StoredKind::Prim(_) | StoredKind::Index { .. } => 0,
        // The slot is the pointer word (a vector's buffer address comes
        // first; swizzling reads its capacity after it with a bounds check).
        StoredKind::Ref { .. }
        | StoredKind::Smart { .. }
        | StoredKind::Vec { .. }
        | StoredKind::Bytes
        | StoredKind::Str => {
            fits(8, "a pointer")?;
            1
        }
        StoredKind::Array {
            elem,
            elem_size,
            len,
        } => {
            let inner = slots_in(elem, u64::from(*elem_size))?;
            if inner == 0 || *len == 0 {
                return Ok(0);
            }
            fits(u64::from(*elem_size) * u64::from(*len), "an array")?;
            inner.saturating_mul(u64::from(*len))
        }
        StoredKind::Struct { size, fields, .. } => {
            fits(u64::from(*size), "a nested struct")?;
            fields_slots(fields, *size)?
        }
    })
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    /// The entry's format version (1 or 2).
    version: u8,
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
            T_INDEX => StoredKind::Index {
                target: self.str()?,
                target_size: self.u32()?,
                key: LEGACY_INDEX_KEY.to_string(),
                multi: false,
            },
            T_KEYED_INDEX => StoredKind::Index {
                target: self.str()?,
                target_size: self.u32()?,
                key: self.str()?,
                multi: match self.u8()? {
                    0 => false,
                    1 => true,
                    m => return Err(format!("an index's multi flag is {m}")),
                },
            },
            t @ (T_OPT_REF | T_OPT_SMART | T_REF | T_SMART) => {
                let nullability = match (t, self.version) {
                    (T_REF | T_SMART, 1) => {
                        return Err(format!("unknown field kind {t} in a version-1 descriptor"));
                    }
                    (T_REF | T_SMART, _) => Nullability::NonNull,
                    (_, 1) => Nullability::Unknown,
                    _ => Nullability::Nullable,
                };
                let target = self.str()?;
                let target_size = self.u32()?;
                if matches!(t, T_OPT_REF | T_REF) {
                    StoredKind::Ref {
                        target,
                        target_size,
                        nullability,
                    }
                } else {
                    StoredKind::Smart {
                        target,
                        target_size,
                        nullability,
                        lazy: false,
                    }
                }
            }
            T_LAZY if self.version >= VERSION_LAZY => StoredKind::Smart {
                target: self.str()?,
                target_size: self.u32()?,
                nullability: Nullability::Nullable,
                lazy: true,
            },
            T_VEC => {
                let elem_size = self.u32()?;
                StoredKind::Vec {
                    elem: Box::new(self.kind(depth + 1)?),
                    elem_size,
                }
            }
            T_BYTES => StoredKind::Bytes,
            T_STR => StoredKind::Str,
            x => return Err(format!("unknown field kind {x}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::compare::first_difference;
    use crate::schema::desc::{FieldDesc, FieldKind, Target, TypeDesc, kind_name};

    static LEAF: TypeDesc = TypeDesc {
        name: "Leaf",
        size: 8,
        align: 8,
        fields: &[FieldDesc {
            name: "v",
            offset: 0,
            kind: &FieldKind::Prim(Prim::U64),
            evolution: crate::schema::desc::Evolution::NONE,
        }],
    };

    /// `struct Link { next: PRef<Link>, prev: Option<PRef<Link>> }`.
    static LINK: TypeDesc = TypeDesc {
        name: "Link",
        size: 16,
        align: 8,
        fields: &[
            FieldDesc {
                name: "next",
                offset: 0,
                kind: &FieldKind::Ref {
                    target: Target(|| &LINK),
                    nullable: false,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "prev",
                offset: 8,
                kind: &FieldKind::Ref {
                    target: Target(|| &LINK),
                    nullable: true,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    static NODE: TypeDesc = TypeDesc {
        name: "Node",
        size: 72,
        align: 8,
        fields: &[
            FieldDesc {
                name: "next",
                offset: 0,
                kind: &FieldKind::Ref {
                    target: Target(|| &NODE),
                    nullable: true,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "leaves",
                offset: 8,
                kind: &FieldKind::Array {
                    elem: &FieldKind::Struct(&LEAF),
                    elem_size: 8,
                    len: 2,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "kids",
                offset: 24,
                kind: &FieldKind::Vec {
                    elem: &FieldKind::Ref {
                        target: Target(|| &LEAF),
                        nullable: false,
                    },
                    elem_size: 8,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "name",
                offset: 40,
                kind: &FieldKind::Bytes,
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "home",
                offset: 56,
                kind: &FieldKind::Smart {
                    target: Target(|| &LEAF),
                    nullable: false,
                    lazy: false,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "away",
                offset: 64,
                kind: &FieldKind::Smart {
                    target: Target(|| &LEAF),
                    nullable: true,
                    lazy: false,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    /// `Link` as the design's example spells it, with `version` first and
    /// the given tags for `next` and `prev`.
    fn link_bytes(version: u8, next: u8, prev: u8) -> Vec<u8> {
        let mut b = vec![version, 4, 0];
        b.extend_from_slice(b"Link");
        b.extend_from_slice(&[16, 0, 0, 0, 8, 0, 0, 0, 0, 2, 0, 0, 0]);
        for (name, offset, tag) in [(b"next", 0u8, next), (b"prev", 8, prev)] {
            b.extend_from_slice(&[4, 0]);
            b.extend_from_slice(name);
            b.extend_from_slice(&[offset, 0, 0, 0, tag, 4, 0]);
            b.extend_from_slice(b"Link");
            b.extend_from_slice(&[16, 0, 0, 0]);
        }
        b
    }

    /// The byte-level examples of `docs/design.md` §4.1.
    #[test]
    fn encoding_is_the_documented_one() {
        let mut want = vec![2u8, 4, 0];
        want.extend_from_slice(b"Leaf");
        want.extend_from_slice(&[8, 0, 0, 0, 8, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, b'v']);
        want.extend_from_slice(&[0, 0, 0, 0, 1, 7]);
        let got = LEAF.to_stored().encode();
        assert_eq!(got, want);
        assert_eq!(got.len(), 29);
        // A non-null and a nullable pointer.
        let got = LINK.to_stored().encode();
        assert_eq!(got, link_bytes(2, 9, 4));
        assert_eq!(got.len(), 62);
        // Tags and prim codes as documented.
        let tags = [
            T_PRIM,
            T_ARRAY,
            T_STRUCT,
            T_OPT_REF,
            T_OPT_SMART,
            T_VEC,
            T_BYTES,
            T_INDEX,
            T_REF,
            T_SMART,
            T_STR,
            T_LAZY,
            T_KEYED_INDEX,
        ];
        assert_eq!(tags, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16]);
        use Prim::*;
        let prims = [U8, I8, U16, I16, U32, I32, U64, I64, F32, F64].map(|p| p as u8);
        assert_eq!(prims, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    }

    #[test]
    fn every_pointer_form_round_trips() {
        let s = NODE.to_stored();
        let b = s.encode();
        assert_eq!(StoredType::decode(&b).expect("decodes"), s);
        let Shape::Struct(f) = &s.shape else {
            panic!("a struct")
        };
        let names: Vec<String> = f.iter().map(|f| kind_name(&f.kind)).collect();
        assert_eq!(
            names,
            [
                "Option<PRef<Node>>",
                "[Leaf; 2]",
                "PVec<PRef<Leaf>>",
                "PBytes",
                "Smart<Leaf>",
                "Option<Smart<Leaf>>"
            ]
        );
    }

    /// A version-1 entry (both forms of a pointer under tags 4 and 5) reads
    /// as pointers of unknown nullability; the version-2 tags are unknown
    /// there.
    #[test]
    fn version_1_entries_read_with_unknown_nullability() {
        let v1 = StoredType::decode(&link_bytes(1, 4, 4)).expect("a version-1 entry");
        let Shape::Struct(f) = &v1.shape else {
            panic!("a struct")
        };
        for f in f {
            let StoredKind::Ref { nullability, .. } = &f.kind else {
                panic!("{f:?}")
            };
            assert_eq!(*nullability, Nullability::Unknown, "{}", f.name);
            assert_eq!(kind_name(&f.kind), "PRef<Link> or Option<PRef<Link>>");
        }
        // It matches the program's layout, whichever form each field takes.
        assert_eq!(first_difference(&LINK.to_stored(), &v1), None);
        let e = StoredType::decode(&link_bytes(1, 9, 4)).expect_err("tag 9 in version 1");
        assert!(e.contains("kind 9"), "{e}");
        let e = StoredType::decode(&link_bytes(4, 9, 4)).expect_err("version 4");
        assert!(e.contains("version 4"), "{e}");
        // Unknown nullability is written as the nullable form.
        assert_eq!(v1.encode(), link_bytes(2, 4, 4));
    }

    /// `struct Mixed { r: PRef<Leaf>, s: Smart<Leaf>, l: Lazy<Leaf> }`:
    /// the three pointer kinds in one struct.
    static MIXED: TypeDesc = TypeDesc {
        name: "Mixed",
        size: 24,
        align: 8,
        fields: &[
            FieldDesc {
                name: "r",
                offset: 0,
                kind: &FieldKind::Ref {
                    target: Target(|| &LEAF),
                    nullable: false,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "s",
                offset: 8,
                kind: &FieldKind::Smart {
                    target: Target(|| &LEAF),
                    nullable: false,
                    lazy: false,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "l",
                offset: 16,
                kind: &FieldKind::Smart {
                    target: Target(|| &LEAF),
                    nullable: true,
                    lazy: true,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    /// A type with a `Lazy<T>` is written in version 3, tag 12 after the
    /// field's offset, and round-trips; tag 12 is unknown in a version-2
    /// entry; a `Lazy` and a `Smart` field differ in the schema check
    /// (same bytes on disk, another form in memory), named by their kinds.
    #[test]
    fn lazy_fields_are_version_3() {
        let s = MIXED.to_stored();
        let b = s.encode();
        assert_eq!(b[0], 3);
        let mut lazy_field = vec![1, 0, b'l', 16, 0, 0, 0, 12, 4, 0];
        lazy_field.extend_from_slice(b"Leaf");
        lazy_field.extend_from_slice(&[8, 0, 0, 0]);
        assert!(b.ends_with(&lazy_field), "{b:?}");
        assert_eq!(StoredType::decode(&b).expect("decodes"), s);
        let Shape::Struct(f) = &s.shape else {
            panic!("a struct")
        };
        let names: Vec<String> = f.iter().map(|f| kind_name(&f.kind)).collect();
        assert_eq!(names, ["PRef<Leaf>", "Smart<Leaf>", "Lazy<Leaf>"]);
        // A lazy pointer may be null: its kind says so.
        assert!(matches!(
            f[2].kind,
            StoredKind::Smart {
                nullability: Nullability::Nullable,
                lazy: true,
                ..
            }
        ));
        let mut v2 = b.clone();
        v2[0] = 2;
        let e = StoredType::decode(&v2).expect_err("tag 12 in version 2");
        assert!(e.contains("kind 12"), "{e}");
        // A vector of lazy pointers carries tag 12 in its holder's entry.
        let vec_holder = StoredType {
            name: "Holder".into(),
            size: 16,
            align: 8,
            shape: Shape::Struct(vec![StoredField {
                name: "v".into(),
                offset: 0,
                kind: StoredKind::Vec {
                    elem: Box::new(f[2].kind.clone()),
                    elem_size: 8,
                },
            }]),
        };
        assert_eq!(vec_holder.encode()[0], 3);
        // Types without one stay in version 2.
        assert_eq!(NODE.to_stored().encode()[0], 2);
        let mut smart = s.clone();
        if let Shape::Struct(f) = &mut smart.shape {
            f[2].kind = f[1].kind.clone();
        }
        let d = first_difference(&s, &smart).expect("Lazy is not Smart");
        assert!(
            d.contains("field `l` is `Lazy<Leaf>` in the program, `Smart<Leaf>` in the database"),
            "{d}"
        );
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
        assert!(StoredType::decode(&[]).is_err());
    }

    /// Indexes: the key type and the multi flag round-trip and are compared;
    /// an entry of the first index format (tag 8) reads as a kind no program
    /// has, refused with a message that names the format.
    #[test]
    fn index_kinds() {
        let index = |key: &str, multi| StoredKind::Index {
            target: "Leaf".into(),
            target_size: 8,
            key: key.into(),
            multi,
        };
        let holder = |k: StoredKind| StoredType {
            name: "Holder".into(),
            size: 24,
            align: 8,
            shape: Shape::Struct(vec![StoredField {
                name: "idx".into(),
                offset: 0,
                kind: k,
            }]),
        };
        for (k, shown) in [
            (index("u64", false), "PIndex<Leaf>"),
            (index("String", false), "PIndex<Leaf, String>"),
            (index("(u32, String)", true), "PMultiIndex<Leaf, (u32, String)>"),
        ] {
            assert_eq!(kind_name(&k), shown);
            let t = holder(k);
            assert_eq!(StoredType::decode(&t.encode()).expect("decodes"), t);
        }
        let d = first_difference(&holder(index("String", false)), &holder(index("u64", false)))
            .expect("differs");
        assert!(d.contains("`PIndex<Leaf, String>` in the program"), "{d}");
        // The first format: tag 8, the target and its size, nothing more.
        let mut old = holder(index("u64", false)).encode();
        let at = old.iter().position(|&b| b == T_KEYED_INDEX).expect("the tag");
        old[at] = T_INDEX;
        old.truncate(old.len() - (2 + 3 + 1));
        let old = StoredType::decode(&old).expect("a first-format entry");
        let d = first_difference(&holder(index("u64", false)), &old).expect("refused");
        assert!(d.contains("rebuild the index"), "{d}");
    }
}
