//! Type descriptors: what `#[derive(Persistent)]` says about a type, in a form
//! that can be stored in the schema catalog and read back without the
//! program's types.
//!
//! A descriptor is a tree: a struct's fields, each a primitive, a fixed
//! array, a nested struct, or one of Amber's pointer kinds. It is built in
//! const context by the derive (pointer targets go through a function pointer,
//! which breaks the cycle of a type that points to itself), encoded into the
//! catalog when a type is first used (`encoding.rs`), and compared field by
//! field with the stored one (`compare.rs`) for every type a program names
//! and every type those reach (`check.rs`).

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
    /// How a migration fills it in from an older layout
    /// (`#[persistent(default ..)]`, `#[persistent(renamed_from = ..)]`).
    pub evolution: Evolution,
}

/// What a field's attributes tell a migration (`gc/migrate.rs`): the names
/// it had in older layouts, and the value it takes where an older layout
/// lacks it. Not part of the stored layout: two layouts that differ only
/// here are the same layout.
#[derive(Debug, Clone, Copy)]
pub struct Evolution {
    /// Earlier names of the field, newest first.
    pub renamed_from: &'static [&'static str],
    /// Its value in objects of a layout without it.
    pub default: FieldDefault,
}

impl Evolution {
    /// A field with no earlier names and no default.
    pub const NONE: Evolution = Evolution {
        renamed_from: &[],
        default: FieldDefault::None,
    };
}

/// The field types `#[persistent(default = VALUE)]` takes: primitives,
/// whose value the derive stores as little-endian bytes.
#[diagnostic::on_unimplemented(
    message = "`#[persistent(default = VALUE)]` is for primitive fields, and `{Self}` is not one",
    label = "a value default on a `{Self}`",
    note = "write `#[persistent(default)]` for zero, an empty vector, string or index, or `None`"
)]
pub trait PrimitiveDefault {}

macro_rules! primitive_default {
    ($($t:ty),*) => {$(impl PrimitiveDefault for $t {})*};
}
primitive_default!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

/// The value a migration gives a field that the older layout lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldDefault {
    /// None declared: a migration that must add the field is refused,
    /// naming it.
    None,
    /// `#[persistent(default)]`: all bytes zero — 0, an empty vector,
    /// string or index, `None` for an `Option` pointer. Refused for a
    /// field where zero is not a value (a `PRef`).
    Zero,
    /// `#[persistent(default = EXPR)]` on a primitive field: its
    /// little-endian bytes.
    Bytes(&'static [u8]),
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

    pub(super) fn from_u8(b: u8) -> Option<Prim> {
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
    /// `PRef<T>` (`nullable: false`) or `Option<PRef<T>>`: swizzled when its
    /// page is faulted in.
    Ref {
        /// The target's descriptor.
        target: Target,
        /// Whether 0 is a value (`None`). A `PRef` is a `NonZeroU64`, so a
        /// page holding 0 in one is refused when it is fetched.
        nullable: bool,
    },
    /// `Smart<T>` (`nullable: false`) or `Option<Smart<T>>`: kept as a
    /// persistent address and translated at each use (Texas's fine-grained
    /// smart pointers); or `Lazy<T>` (`lazy: true`, always nullable): stored
    /// the same, and rewritten in memory to the direct address when it is
    /// followed while its target is resident.
    Smart {
        /// The target's descriptor.
        target: Target,
        /// Whether 0 is a value (`None`), as for `Ref`.
        nullable: bool,
        /// A `Lazy<T>`: in memory, the word may hold the direct address.
        lazy: bool,
    },
    /// `PVec<T>`: a growable array; its buffer pointer is swizzled.
    Vec {
        /// Element kind.
        elem: &'static FieldKind,
        /// Element size in bytes.
        elem_size: u32,
    },
    /// `PBytes`: a growable byte string; its buffer pointer is swizzled.
    Bytes,
    /// `PString`: a `PBytes` holding UTF-8 (deep verification checks it).
    Str,
    /// `PIndex<V, K>` or `PMultiIndex<V, K>`: an ordered map from keys of
    /// type `K` to `PRef<V>`; its nodes are reached through persistent
    /// addresses translated at each use.
    Index {
        /// The value type.
        target: Target,
        /// The key type's name ([`IndexKey::name`](crate::IndexKey::name)).
        key: fn() -> String,
        /// Whether several values per key (`PMultiIndex`).
        multi: bool,
    },
}

/// The key type name a catalog entry of the first index format (tag 8:
/// u64 keys in nodes of u64 words) is read with: no program's key type has
/// it, so such an index is refused by name (`kind_name`).
pub const LEGACY_INDEX_KEY: &str = "u64 (index format 1)";

/// Whether a stored pointer field may hold null (persistent address 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nullability {
    /// `PRef<T>`, `Smart<T>`: never null. A fetched page holding 0 in such a
    /// field is refused as damaged.
    NonNull,
    /// `Option<PRef<T>>`, `Option<Smart<T>>`: 0 is `None`.
    Nullable,
    /// Written by a version-1 catalog entry, which did not record it: the
    /// field may be either form, and matches either (`compare.rs`).
    Unknown,
}

impl Nullability {
    /// A program field's: `nullable` or not.
    pub const fn of(nullable: bool) -> Nullability {
        if nullable {
            Nullability::Nullable
        } else {
            Nullability::NonNull
        }
    }
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
        /// Whether it may hold null.
        nullability: Nullability,
    },
    /// A smart pointer (persistent address in memory), or a lazy one
    /// (`lazy`: stored the same, swizzled upon discovery in memory).
    Smart {
        /// Target type name.
        target: String,
        /// Target size in bytes.
        target_size: u32,
        /// Whether it may hold null.
        nullability: Nullability,
        /// `Lazy<T>` rather than `Smart<T>`: the same bytes on disk, another
        /// form in memory, so a different kind for the schema check.
        lazy: bool,
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
    /// A UTF-8 string (a byte string's layout).
    Str,
    /// An index to `target`.
    Index {
        /// Value type name.
        target: String,
        /// Value size.
        target_size: u32,
        /// Key type name; `LEGACY_INDEX_KEY` for an index of the node
        /// format before keys were encoded (u64 keys in word arrays).
        key: String,
        /// Whether several values per key (`PMultiIndex`).
        multi: bool,
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
            FieldKind::Ref { target, nullable } => StoredKind::Ref {
                target: (target.0)().name.to_string(),
                target_size: (target.0)().size,
                nullability: Nullability::of(*nullable),
            },
            FieldKind::Smart {
                target,
                nullable,
                lazy,
            } => StoredKind::Smart {
                target: (target.0)().name.to_string(),
                target_size: (target.0)().size,
                nullability: Nullability::of(*nullable),
                lazy: *lazy,
            },
            FieldKind::Vec { elem, elem_size } => StoredKind::Vec {
                elem: Box::new(elem.to_stored()),
                elem_size: *elem_size,
            },
            FieldKind::Bytes => StoredKind::Bytes,
            FieldKind::Str => StoredKind::Str,
            FieldKind::Index { target, key, multi } => StoredKind::Index {
                target: (target.0)().name.to_string(),
                target_size: (target.0)().size,
                key: key(),
                multi: *multi,
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
    /// (the type of a `PVec`, `PBytes` or `PString` buffer object).
    pub fn array_of(elem: StoredKind, elem_size: u32) -> StoredType {
        StoredType {
            name: format!("[{}]", kind_name(&elem)),
            size: elem_size,
            align: 8,
            shape: Shape::Array(elem),
        }
    }
}

/// How a kind is written in messages and dumps, and in the names of array
/// types (`[Option<PRef<Node>>]`). A pointer of unknown nullability (from a
/// version-1 entry) is written as both forms.
pub fn kind_name(k: &StoredKind) -> String {
    let pointer = |ty: &str, target: &str, n: Nullability| match n {
        Nullability::NonNull => format!("{ty}<{target}>"),
        Nullability::Nullable => format!("Option<{ty}<{target}>>"),
        Nullability::Unknown => format!("{ty}<{target}> or Option<{ty}<{target}>>"),
    };
    match k {
        StoredKind::Prim(p) => p.name().to_string(),
        StoredKind::Array { elem, len, .. } => format!("[{}; {len}]", kind_name(elem)),
        StoredKind::Struct { name, .. } => name.clone(),
        StoredKind::Ref {
            target,
            nullability,
            ..
        } => pointer("PRef", target, *nullability),
        StoredKind::Smart {
            target,
            nullability,
            lazy,
            ..
        } if *lazy => format!("Lazy<{target}>"),
        StoredKind::Smart {
            target,
            nullability,
            ..
        } => pointer("Smart", target, *nullability),
        StoredKind::Vec { elem, .. } => format!("PVec<{}>", kind_name(elem)),
        StoredKind::Bytes => "PBytes".to_string(),
        StoredKind::Str => "PString".to_string(),
        StoredKind::Index { target, key, .. } if key == LEGACY_INDEX_KEY => format!(
            "PIndex<{target}> of the node format before encoded keys (u64 keys in word \
             arrays), which this version of Amber does not read: rebuild the index"
        ),
        StoredKind::Index {
            target,
            key,
            multi,
        .. } => {
            let ty = if *multi { "PMultiIndex" } else { "PIndex" };
            if key == "u64" {
                format!("{ty}<{target}>")
            } else {
                format!("{ty}<{target}, {key}>")
            }
        }
    }
}
