//! Checking a program's type against the catalog together with every type it
//! reaches.
//!
//! A stored descriptor names its pointer targets only by name and size (all
//! that swizzling needs), so checking only the type that `Db::root` or
//! `alloc` names would let a pointed-to type change under it: two same-size
//! fields swapped would read each other's bytes, and a `u64` holding 0 turned
//! into a `PRef` would hand safe code a null non-null pointer. So binding a
//! type walks everything reachable from its descriptor — nested structs,
//! array elements, pointer targets, `PVec`/`PBytes` buffers, `PIndex` nodes
//! and values — and compares each with the catalog's entry of that name.
//!
//! A type the catalog lacks is fine (nothing of it is stored); its layout is
//! remembered, so that when it is first stored it is stored as checked, and a
//! second type of the program claiming the same name with another layout is
//! refused. What has been checked is kept for the life of the open database
//! (the catalog only changes by types this program defines, which are the
//! layouts checked), so each name is walked once per open.

use super::compare::{Sides, difference, first_difference};
use super::desc::{FieldKind, Prim, StoredType, TypeDesc};
use super::evolve::same_bytes;
use crate::error::{Error, Result};
use std::collections::HashMap;

/// A type of the program, as allocation and roots name it.
#[derive(Debug, Clone, Copy)]
pub enum Program {
    /// A persistent struct.
    Struct(&'static TypeDesc),
    /// The array type of `PVec`/`PBytes` buffers and `PIndex` nodes.
    Array {
        /// Element kind.
        elem: &'static FieldKind,
        /// Element size in bytes.
        elem_size: u32,
    },
}

impl Program {
    /// The descriptor as it is stored.
    pub fn stored(&self) -> StoredType {
        match *self {
            Program::Struct(d) => d.to_stored(),
            Program::Array { elem, elem_size } => StoredType::array_of(elem.to_stored(), elem_size),
        }
    }
}

/// Layouts already checked in this open, by stored name.
pub type Checked = HashMap<String, StoredType>;

/// Checks `top` and every type it reaches against `catalog` (stored layouts
/// by name), skipping names in `checked`; when all agree, adds those it
/// checked (only then: a type whose reached types differ must be refused
/// again next time). Returns `top`'s layout. A difference is
/// `Error::SchemaMismatch` naming the type that differs, its field, and the
/// path from `top` to it.
pub fn check<'c>(
    top: Program,
    catalog: impl Fn(&str) -> Option<&'c StoredType>,
    checked: &mut Checked,
) -> Result<StoredType> {
    let top_layout = top.stored();
    let mut now = Checked::new();
    let mut work = vec![(top, String::new())];
    // A type whose layout differs only in its pointers' target sizes is
    // reported only if no reached type differs in its own fields: the
    // field that changed is what the programmer looks for.
    let mut retargeted = None;
    while let Some((p, via)) = work.pop() {
        let program = p.stored();
        let seen = checked.get(&program.name).or(now.get(&program.name));
        match seen {
            Some(seen) if *seen == program => continue,
            Some(seen) => return Err(conflict(&program, seen, &via)),
            None => {}
        }
        if let Some(stored) = catalog(&program.name)
            && let Some(what) = first_difference(&program, stored)
        {
            let e = Error::SchemaMismatch {
                type_name: program.name.clone(),
                what: format!(
                    "{what}{}; a migration converts the stored objects (amber::Migration)",
                    reached_through(&via)
                ),
            };
            if !same_bytes(&program, stored) {
                return Err(e);
            }
            retargeted.get_or_insert(e);
        }
        reached(p, &program.name, &via, &mut work);
        now.insert(program.name.clone(), program);
    }
    if let Some(e) = retargeted {
        return Err(e);
    }
    checked.extend(now);
    Ok(top_layout)
}

/// Two types of the program under one stored name, with different layouts.
fn conflict(program: &StoredType, seen: &StoredType, via: &str) -> Error {
    let sides = Sides {
        a: "in one",
        b: "in the other",
    };
    let diff = difference(program, seen, sides).unwrap_or_default();
    Error::SchemaMismatch {
        type_name: program.name.clone(),
        what: format!(
            "two types of the program have this stored name but different layouts ({diff}); \
             give one of them another name with #[persistent(name = \"...\")]{}",
            reached_through(via)
        ),
    }
}

fn reached_through(via: &str) -> String {
    if via.is_empty() {
        String::new()
    } else {
        format!(" (reached through {via})")
    }
}

/// The path to a field of `name`, after `via`.
fn step(via: &str, name: &str, field: &str) -> String {
    let here = format!("`{name}.{field}`");
    if via.is_empty() {
        here
    } else {
        format!("{via} → {here}")
    }
}

/// Pushes the types `p` reaches directly.
pub(super) fn reached_types(p: Program, out: &mut Vec<Program>) {
    let mut work = Vec::new();
    reached(p, "", "", &mut work);
    out.extend(work.into_iter().map(|(p, _)| p));
}

/// Pushes the types `p` (stored as `name`, reached through `via`) reaches.
fn reached(p: Program, name: &str, via: &str, work: &mut Vec<(Program, String)>) {
    match p {
        Program::Struct(d) => {
            for f in d.fields {
                kind(f.kind, &step(via, name, f.name), work);
            }
        }
        Program::Array { elem, .. } => kind(elem, &step(via, name, "[_]"), work),
    }
}

/// Pushes the types a field of kind `k` reaches.
fn kind(k: &'static FieldKind, via: &str, work: &mut Vec<(Program, String)>) {
    match k {
        FieldKind::Prim(_) => {}
        FieldKind::Array { elem, .. } => kind(elem, via, work),
        FieldKind::Struct(d) => work.push((Program::Struct(d), via.to_string())),
        FieldKind::Ref { target, .. } | FieldKind::Smart { target, .. } => {
            work.push((Program::Struct((target.0)()), via.to_string()));
        }
        FieldKind::Index { target: t, .. } => {
            // Nodes are arrays of u64 (`db/index/node.rs`); values are `PRef<V>`.
            work.push((
                Program::Array {
                    elem: &FieldKind::Prim(Prim::U64),
                    elem_size: 8,
                },
                via.to_string(),
            ));
            work.push((Program::Struct((t.0)()), via.to_string()));
        }
        FieldKind::Vec { elem, elem_size } => work.push((
            Program::Array {
                elem,
                elem_size: *elem_size,
            },
            via.to_string(),
        )),
        FieldKind::Bytes | FieldKind::Str => work.push((
            Program::Array {
                elem: &FieldKind::Prim(Prim::U8),
                elem_size: 1,
            },
            via.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::desc::{FieldDesc, Target};

    static LEAF: TypeDesc = TypeDesc {
        name: "Leaf",
        size: 16,
        align: 8,
        fields: &[
            FieldDesc {
                name: "a",
                offset: 0,
                kind: &FieldKind::Prim(Prim::U64),
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "b",
                offset: 8,
                kind: &FieldKind::Prim(Prim::U64),
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    /// `Leaf` with its fields swapped: same size, same kinds.
    static LEAF_SWAPPED: TypeDesc = TypeDesc {
        name: "Leaf",
        size: 16,
        align: 8,
        fields: &[
            FieldDesc {
                name: "b",
                offset: 0,
                kind: &FieldKind::Prim(Prim::U64),
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "a",
                offset: 8,
                kind: &FieldKind::Prim(Prim::U64),
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    /// Points to itself and, through a vector, to a leaf.
    static NODE: TypeDesc = TypeDesc {
        name: "Node",
        size: 24,
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
                kind: &FieldKind::Vec {
                    elem: &FieldKind::Ref {
                        target: Target(|| &LEAF),
                        nullable: false,
                    },
                    elem_size: 8,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    /// `Node` reaching the swapped leaf.
    static NODE2: TypeDesc = TypeDesc {
        name: "Node",
        size: 24,
        align: 8,
        fields: &[
            FieldDesc {
                name: "next",
                offset: 0,
                kind: &FieldKind::Ref {
                    target: Target(|| &NODE2),
                    nullable: true,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
            FieldDesc {
                name: "leaves",
                offset: 8,
                kind: &FieldKind::Vec {
                    elem: &FieldKind::Ref {
                        target: Target(|| &LEAF_SWAPPED),
                        nullable: false,
                    },
                    elem_size: 8,
                },
                evolution: crate::schema::desc::Evolution::NONE,
            },
        ],
    };

    fn catalog(types: &[&'static TypeDesc]) -> HashMap<String, StoredType> {
        types
            .iter()
            .map(|d| (d.name.to_string(), d.to_stored()))
            .collect()
    }

    #[test]
    fn walks_cycles_and_caches() {
        let cat = catalog(&[&NODE, &LEAF]);
        let mut checked = Checked::new();
        let top = check(Program::Struct(&NODE), |n| cat.get(n), &mut checked).expect("same");
        assert_eq!(top.name, "Node");
        let mut names: Vec<_> = checked.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["Leaf", "Node", "[PRef<Leaf>]"]);
        // Cached: an empty catalog now changes nothing.
        check(Program::Struct(&NODE), |_| None, &mut checked).expect("cached");
    }

    #[test]
    fn a_reached_type_that_differs_is_named_with_its_path() {
        let cat = catalog(&[&NODE, &LEAF]);
        let e = check(Program::Struct(&NODE2), |n| cat.get(n), &mut Checked::new())
            .expect_err("the leaf differs");
        let Error::SchemaMismatch { type_name, what } = e else {
            panic!("{e}")
        };
        assert_eq!(type_name, "Leaf");
        assert!(what.contains("`b`"), "{what}");
        assert!(
            what.contains("`Node.leaves` → `[PRef<Leaf>].[_]`"),
            "{what}"
        );
    }

    #[test]
    fn a_refused_type_is_refused_again() {
        let cat = catalog(&[&NODE, &LEAF]);
        let mut checked = Checked::new();
        for _ in 0..2 {
            check(Program::Struct(&NODE2), |n| cat.get(n), &mut checked)
                .expect_err("the leaf differs");
        }
        assert!(checked.is_empty(), "{checked:?}");
    }

    #[test]
    fn two_program_layouts_under_one_name_are_refused() {
        let mut checked = Checked::new();
        check(Program::Struct(&NODE), |_| None, &mut checked).expect("nothing stored");
        let e = check(Program::Struct(&LEAF_SWAPPED), |_| None, &mut checked)
            .expect_err("two layouts named Leaf");
        assert!(e.to_string().contains("persistent(name"), "{e}");
    }
}
