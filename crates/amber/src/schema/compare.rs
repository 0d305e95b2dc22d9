//! Comparing two layouts of one stored name, as a message a programmer can
//! act on: the first differing field by name, then size and alignment.
//!
//! Usually the two sides are the program's layout and the database's; when
//! two types of one program claim the same stored name, they are the two
//! program types.
//!
//! Nullability is compared like the rest: a pointer field is `PRef<T>` on
//! both sides or `Option<PRef<T>>` on both (the same for `Smart`). Reading a
//! nullable field as non-null would hand safe code a null `PRef`; reading a
//! non-null one as `Option` is harmless, but the program could then store
//! `None` where every other reader of the database relies on there being
//! none, so that is refused too. A pointer of a version-1 entry, which did
//! not record its nullability, matches either form.

use super::desc::{Nullability, Shape, StoredField, StoredKind, StoredType, kind_name};

/// How the two sides of a comparison are named in messages ("in the
/// program", "in the database").
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    /// The first side.
    pub a: &'a str,
    /// The second side.
    pub b: &'a str,
}

/// The program against the database.
pub const PROGRAM_DATABASE: Sides<'static> = Sides {
    a: "in the program",
    b: "in the database",
};

/// How the program's layout differs from the stored one, as a message
/// naming the first differing field, then any difference of size and
/// alignment; `None` when they agree. A field added, removed, moved or
/// retyped usually changes the size too: the field comes first, because it
/// is what the programmer has to look for.
pub fn first_difference(program: &StoredType, stored: &StoredType) -> Option<String> {
    difference(program, stored, PROGRAM_DATABASE)
}

/// How layout `a` differs from layout `b`, the sides named by `sides`.
pub fn difference(a: &StoredType, b: &StoredType, sides: Sides<'_>) -> Option<String> {
    let Sides { a: sa, b: sb } = sides;
    let b = &resolved(b, a);
    let mut parts = Vec::new();
    match (&a.shape, &b.shape) {
        (Shape::Struct(x), Shape::Struct(y)) => parts.extend(fields_difference(x, y, "", sides)),
        (Shape::Array(x), Shape::Array(y)) if x != y => parts.push(format!(
            "the elements are `{}` {sa}, `{}` {sb}",
            kind_name(x),
            kind_name(y)
        )),
        (Shape::Array(_), Shape::Array(_)) => {}
        _ => parts.push("one is an array type, the other a struct".into()),
    }
    if a.size != b.size {
        parts.push(format!("size is {} bytes {sa}, {} {sb}", a.size, b.size));
    }
    if a.align != b.align {
        parts.push(format!("alignment is {} {sa}, {} {sb}", a.align, b.align));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn fields_difference(
    a: &[StoredField],
    b: &[StoredField],
    prefix: &str,
    sides: Sides<'_>,
) -> Option<String> {
    let Sides { a: sa, b: sb } = sides;
    for (i, fa) in a.iter().enumerate() {
        let path = format!("{prefix}{}", fa.name);
        let Some(fb) = b.get(i) else {
            return Some(format!("field `{path}` is {sa} only"));
        };
        if fa.name != fb.name {
            return Some(format!(
                "field {i} is `{path}` {sa}, `{prefix}{}` {sb}",
                fb.name
            ));
        }
        if fa.offset != fb.offset {
            return Some(format!(
                "field `{path}` is at offset {} {sa}, {} {sb}",
                fa.offset, fb.offset
            ));
        }
        if let (Some((x, ex)), Some((y, ey))) = (inner_fields(&fa.kind), inner_fields(&fb.kind))
            && ex == ey
            && let Some(d) = fields_difference(x, y, &format!("{path}{ex}."), sides)
        {
            return Some(d);
        }
        if fa.kind != fb.kind {
            let (na, nb) = (kind_name(&fa.kind), kind_name(&fb.kind));
            if na == nb {
                // Same spelling, different layout: say where it differs.
                return Some(format!(
                    "field `{path}` is `{na}` in both, but {}",
                    layout_difference(&fa.kind, &fb.kind, sides)
                ));
            }
            return Some(format!("field `{path}` is `{na}` {sa}, `{nb}` {sb}"));
        }
    }
    if b.len() > a.len() {
        return Some(format!("field `{prefix}{}` is {sb} only", b[a.len()].name));
    }
    None
}

/// The fields of a struct held by value in a field of kind `k`, directly or
/// as the elements of arrays and vectors, with how the path reaches them
/// (`""`, `"[_]"`, `"[_][_]"`, ...): a difference there is named by its
/// field.
fn inner_fields(k: &StoredKind) -> Option<(&[StoredField], String)> {
    match k {
        StoredKind::Struct { fields, .. } => Some((fields, String::new())),
        StoredKind::Array { elem, .. } | StoredKind::Vec { elem, .. } => {
            inner_fields(elem).map(|(f, p)| (f, format!("[_]{p}")))
        }
        _ => None,
    }
}

/// How two kinds spelled alike differ (a pointer's target or an element
/// changed size: what swizzling reads).
fn layout_difference(a: &StoredKind, b: &StoredKind, sides: Sides<'_>) -> String {
    use StoredKind::*;
    let Sides { a: sa, b: sb } = sides;
    match (a, b) {
        (
            Ref {
                target,
                target_size: x,
                ..
            }
            | Smart {
                target,
                target_size: x,
                ..
            }
            | Index {
                target,
                target_size: x,
                ..
            },
            Ref { target_size: y, .. }
            | Smart { target_size: y, .. }
            | Index { target_size: y, .. },
        ) if x != y => {
            format!("its target `{target}` is {x} bytes {sa}, {y} {sb}")
        }
        (Vec { elem_size: x, .. }, Vec { elem_size: y, .. })
        | (Array { elem_size: x, .. }, Array { elem_size: y, .. })
            if x != y =>
        {
            format!("its elements are {x} bytes {sa}, {y} {sb}")
        }
        (Vec { elem: x, .. }, Vec { elem: y, .. })
        | (Array { elem: x, .. }, Array { elem: y, .. }) => {
            format!("its elements differ: {}", layout_difference(x, y, sides))
        }
        (Struct { size: x, .. }, Struct { size: y, .. }) if x != y => {
            format!("it is {x} bytes {sa}, {y} {sb}")
        }
        _ => "the layouts differ".to_string(),
    }
}

/// `b` with each pointer of unknown nullability given the nullability of the
/// pointer in the same place of `a`, where the two line up: such a pointer
/// matches either form, and any other difference is then named as if `b`
/// had recorded `a`'s form.
fn resolved(b: &StoredType, a: &StoredType) -> StoredType {
    let shape = match (&b.shape, &a.shape) {
        (Shape::Struct(x), Shape::Struct(y)) => Shape::Struct(resolved_fields(x, y)),
        (Shape::Array(x), Shape::Array(y)) => Shape::Array(resolved_kind(x, y)),
        (shape, _) => shape.clone(),
    };
    StoredType { shape, ..b.clone() }
}

fn resolved_fields(b: &[StoredField], a: &[StoredField]) -> Vec<StoredField> {
    b.iter()
        .enumerate()
        .map(|(i, f)| StoredField {
            name: f.name.clone(),
            offset: f.offset,
            kind: match a.get(i) {
                Some(g) => resolved_kind(&f.kind, &g.kind),
                None => f.kind.clone(),
            },
        })
        .collect()
}

fn resolved_kind(b: &StoredKind, a: &StoredKind) -> StoredKind {
    use StoredKind::*;
    match (b, a) {
        (
            Ref {
                target,
                target_size,
                nullability: Nullability::Unknown,
            },
            Ref { nullability, .. },
        ) => Ref {
            target: target.clone(),
            target_size: *target_size,
            nullability: *nullability,
        },
        (
            Smart {
                target,
                target_size,
                nullability: Nullability::Unknown,
                lazy,
            },
            Smart { nullability, .. },
        ) => Smart {
            target: target.clone(),
            target_size: *target_size,
            nullability: *nullability,
            lazy: *lazy,
        },
        (
            Array {
                elem,
                elem_size,
                len,
            },
            Array { elem: e, .. },
        ) => Array {
            elem: Box::new(resolved_kind(elem, e)),
            elem_size: *elem_size,
            len: *len,
        },
        (Vec { elem, elem_size }, Vec { elem: e, .. }) => Vec {
            elem: Box::new(resolved_kind(elem, e)),
            elem_size: *elem_size,
        },
        (Struct { name, size, fields }, Struct { fields: f, .. }) => Struct {
            name: name.clone(),
            size: *size,
            fields: resolved_fields(fields, f),
        },
        _ => b.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(kind: StoredKind) -> StoredType {
        StoredType {
            name: "Holder".into(),
            size: 16,
            align: 8,
            shape: Shape::Struct(vec![StoredField {
                name: "cells".into(),
                offset: 0,
                kind: StoredKind::Array {
                    elem: Box::new(kind),
                    elem_size: 8,
                    len: 2,
                },
            }]),
        }
    }

    fn pointer(smart: bool, target_size: u32, nullability: Nullability) -> StoredKind {
        let target = "Leaf".to_string();
        if smart {
            StoredKind::Smart {
                target,
                target_size,
                nullability,
                lazy: false,
            }
        } else {
            StoredKind::Ref {
                target,
                target_size,
                nullability,
            }
        }
    }

    #[test]
    fn nullability_is_compared() {
        use Nullability::*;
        for smart in [false, true] {
            let ty = if smart { "Smart" } else { "PRef" };
            let p = |n| holder(pointer(smart, 8, n));
            assert_eq!(first_difference(&p(NonNull), &p(NonNull)), None);
            assert_eq!(first_difference(&p(Nullable), &p(Nullable)), None);
            // Either way round, naming the field and both forms.
            let d = first_difference(&p(NonNull), &p(Nullable)).expect("differ");
            assert_eq!(
                d,
                format!(
                    "field `cells` is `[{ty}<Leaf>; 2]` in the program, \
                     `[Option<{ty}<Leaf>>; 2]` in the database"
                )
            );
            first_difference(&p(Nullable), &p(NonNull)).expect("differ");
            // A version-1 entry matches either form...
            assert_eq!(first_difference(&p(NonNull), &p(Unknown)), None);
            assert_eq!(first_difference(&p(Nullable), &p(Unknown)), None);
            // ... and another difference is named as if it had recorded the
            // program's form.
            let d = first_difference(&p(Nullable), &holder(pointer(smart, 16, Unknown)))
                .expect("the target's size differs");
            assert_eq!(
                d,
                format!(
                    "field `cells` is `[Option<{ty}<Leaf>>; 2]` in both, but its elements \
                     differ: its target `Leaf` is 8 bytes in the program, 16 in the database"
                )
            );
        }
    }
}
