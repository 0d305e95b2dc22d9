//! Schema evolution: how each stored layout of a database becomes the
//! program's, and the conversion of one object's bytes from the one to the
//! other.
//!
//! The program's layouts (`Wanted`) are those of the types a migration names
//! and every type they reach, with each field's [`Evolution`] (earlier
//! names, default). A [`Plan`] pairs every catalog entry with its new
//! layout: the program's where the program has that name, else the stored
//! one with its pointers' target sizes brought up to date (a pointer's
//! target size says how many pages the target's block spans, and a target
//! that grew spans more). The plan is checked whole before anything is
//! written: a field that is new and has no default, a primitive whose type
//! changed with no conversion given, a type held by value in a type the
//! migration does not name — each refuses the migration, naming the type
//! and the field.
//!
//! Fields are matched by name (or an earlier name), never by position, so
//! reordering needs nothing; a field the new layout lacks is dropped (and
//! listed in the plan's changes). Converting a value copies pointer words
//! as they are: the collection that carries the migration (`gc/`) rewrites
//! them afterwards to the objects' new addresses, reading the new layout.

use super::check::{Checked, Program, check};
use super::desc::{
    Evolution, FieldDefault, Nullability, Shape, StoredField, StoredKind, StoredType, kind_name,
};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};

/// How a change line ends for a field the new layout lacks.
pub const DROPPED: &str = "removed (its values dropped)";

/// A conversion's function: the old value's bytes to the new value's.
pub type ConvertFn = Box<dyn Fn(&[u8], &mut [u8]) + Send + Sync>;

/// A conversion of one field's value, given by the program
/// (`Migration::convert_field`): the old value's bytes to the new value's.
pub struct Converter {
    /// The field's kind in the stored layout the conversion reads.
    pub from: StoredKind,
    /// The field's kind in the program's layout.
    pub to: StoredKind,
    /// Old bytes to new bytes (both little-endian, of `from` and `to`).
    pub f: ConvertFn,
}

impl std::fmt::Debug for Converter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", kind_name(&self.from), kind_name(&self.to))
    }
}

/// What a migration knows of one field beside its layout: its earlier
/// names and its default (owned: it may come from a schema file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldEvolution {
    /// Earlier names, newest first.
    pub renamed_from: Vec<String>,
    /// The value it takes where an older layout lacks it.
    pub default: Fill,
}

/// An owned [`FieldDefault`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Fill {
    /// None declared.
    #[default]
    None,
    /// All bytes zero.
    Zero,
    /// These bytes.
    Bytes(Vec<u8>),
}

impl From<Evolution> for FieldEvolution {
    fn from(e: Evolution) -> Self {
        FieldEvolution {
            renamed_from: e.renamed_from.iter().map(|n| n.to_string()).collect(),
            default: match e.default {
                FieldDefault::None => Fill::None,
                FieldDefault::Zero => Fill::Zero,
                FieldDefault::Bytes(b) => Fill::Bytes(b.to_vec()),
            },
        }
    }
}

/// The program's layouts a migration converts to.
#[derive(Debug, Default)]
pub struct Wanted {
    /// By stored name: structs and the array types of buffers.
    pub(super) layouts: Checked,
    /// By struct name, then field name.
    pub(super) evolution: HashMap<String, HashMap<String, FieldEvolution>>,
    /// By struct name, then (new) field name.
    converters: HashMap<String, HashMap<String, Converter>>,
}

impl Wanted {
    /// Adds `top` and every type it reaches. Two program types claiming one
    /// stored name with different layouts are refused, as when binding.
    pub fn add(&mut self, top: Program) -> Result<()> {
        check(top, |_| None, &mut self.layouts)?;
        let mut work = vec![top];
        let mut seen = std::collections::HashSet::new();
        while let Some(p) = work.pop() {
            if !seen.insert(p.stored().name) {
                continue;
            }
            if let Program::Struct(d) = p {
                self.evolution.insert(
                    d.name.to_string(),
                    d.fields
                        .iter()
                        .map(|f| (f.name.to_string(), f.evolution.into()))
                        .collect(),
                );
            }
            super::check::reached_types(p, &mut work);
        }
        Ok(())
    }

    /// Registers a conversion of field `field` of the struct stored as
    /// `ty` (which must be among the added types).
    pub fn convert(&mut self, ty: &str, field: &str, c: Converter) -> Result<()> {
        let Some(Shape::Struct(fields)) = self.layouts.get(ty).map(|t| &t.shape) else {
            return Err(Error::invalid(format!(
                "a conversion of `{ty}.{field}` was given, but no type named `{ty}` was \
                 added to the migration (upgrade::<T>() first)"
            )));
        };
        let Some(f) = fields.iter().find(|f| f.name == field) else {
            return Err(Error::invalid(format!(
                "a conversion of `{ty}.{field}` was given, but `{ty}` has no field `{field}` \
                 in the program"
            )));
        };
        if f.kind != c.to {
            return Err(Error::invalid(format!(
                "the conversion of `{ty}.{field}` returns `{}`, but the field is `{}` in the \
                 program",
                kind_name(&c.to),
                kind_name(&f.kind)
            )));
        }
        self.converters
            .entry(ty.to_string())
            .or_default()
            .insert(field.to_string(), c);
        Ok(())
    }

    /// Whether the program gave conversions (code, which a schema file
    /// cannot hold).
    pub fn has_conversions(&self) -> bool {
        !self.converters.is_empty()
    }

    /// The size of its largest layout: converting one object to it takes
    /// that much memory (up to 4 GiB, the largest object the format holds).
    pub fn largest_layout(&self) -> u32 {
        self.layouts.values().map(|t| t.size).max().unwrap_or(0)
    }
}

/// One catalog entry's fate in a migration.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The stored layout.
    pub old: StoredType,
    /// The layout after the migration.
    pub new: StoredType,
    /// Whether its objects' bytes must be converted (the layouts differ in
    /// more than pointer target sizes).
    pub converts: bool,
}

/// Every catalog entry's new layout, checked convertible.
#[derive(Debug)]
pub struct Plan<'w> {
    wanted: &'w Wanted,
    /// By catalog id.
    pub entries: BTreeMap<u32, Entry>,
    /// What changes, one line each ("`Task`: field `done` added (its
    /// default)").
    pub changes: Vec<String>,
    /// Checking only (a zeroed object): the program's conversions are not
    /// called.
    probe: bool,
}

impl<'w> Plan<'w> {
    /// The plan for a catalog (type id and stored layout).
    pub fn new(catalog: &[(u32, StoredType)], wanted: &'w Wanted) -> Result<Plan<'w>> {
        let sizes: HashMap<&str, u32> = wanted
            .layouts
            .values()
            .filter(|t| matches!(t.shape, Shape::Struct(_)))
            .map(|t| (t.name.as_str(), t.size))
            .collect();
        let mut plan = Plan {
            wanted,
            entries: BTreeMap::new(),
            changes: Vec::new(),
            probe: false,
        };
        for (id, old) in catalog {
            let new = match wanted.layouts.get(&old.name) {
                Some(w) => w.clone(),
                None => {
                    refuse_held_changed(old, wanted)?;
                    retargeted(old, &sizes)
                }
            };
            let converts = !same_bytes(old, &new);
            if converts {
                plan.check_type(old, &new)?;
            }
            plan.entries.insert(*id, Entry {
                old: old.clone(),
                new,
                converts,
            });
        }
        Ok(plan)
    }

    /// Whether any object's bytes change.
    pub fn converts_any(&self) -> bool {
        self.entries.values().any(|e| e.converts)
    }

    /// The entry of type id `id` if its objects are converted.
    pub fn conversion(&self, id: u32) -> Option<&Entry> {
        self.entries.get(&id).filter(|e| e.converts)
    }

    /// The size an object of type `id` and `size` bytes has after the
    /// migration (an array object keeps its element count).
    pub fn new_size(&self, id: u32, size: u32) -> u32 {
        match self.conversion(id) {
            None => size,
            Some(e) => match e.new.shape {
                Shape::Struct(_) => e.new.size,
                Shape::Array(_) => (size / e.old.size.max(1)).saturating_mul(e.new.size),
            },
        }
    }

    /// The bytes of an object of type `id` (`old`, in the stored layout)
    /// in the new layout; pointer words are copied unchanged.
    pub fn convert(&self, id: u32, old: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let Some(e) = self.conversion(id) else {
            return Ok(old.to_vec());
        };
        let size = self.new_size(id, old.len() as u32) as usize;
        let mut out = vec![0u8; size];
        match (&e.old.shape, &e.new.shape) {
            (Shape::Struct(a), Shape::Struct(b)) => {
                self.fields(&e.new.name, a, e.old.size, b, e.new.size, old, &mut out)?;
            }
            (Shape::Array(a), Shape::Array(b)) => {
                let (sa, sb) = (e.old.size as usize, e.new.size as usize);
                for (x, y) in elements(old, sa, &mut out, sb)? {
                    self.value(a, b, x, y)?;
                }
            }
            _ => return Err(format!("`{}` changed between struct and array", e.new.name)),
        }
        Ok(out)
    }

    /// Checks that the objects of `old` convert to `new`, recording the
    /// changes; refuses naming the field otherwise. Converting a zeroed
    /// object exercises every rule the real objects will meet.
    fn check_type(&mut self, old: &StoredType, new: &StoredType) -> Result<()> {
        match (&old.shape, &new.shape) {
            (Shape::Struct(a), Shape::Struct(b)) => self.describe(&new.name, a, b),
            (Shape::Array(a), Shape::Array(b)) => self.describe_held(a, b),
            _ => {}
        }
        let zero = vec![0u8; old.size as usize];
        let probe = Plan {
            wanted: self.wanted,
            entries: BTreeMap::from([(
                0,
                Entry {
                    old: old.clone(),
                    new: new.clone(),
                    converts: true,
                },
            )]),
            changes: Vec::new(),
            probe: true,
        };
        probe.convert(0, &zero).map(drop).map_err(|what| Error::SchemaMismatch {
            type_name: new.name.clone(),
            what: format!("cannot migrate: {what}"),
        })
    }

    /// Records the changes of the structs held by value in a value of kind
    /// `a` becoming `b`.
    fn describe_held(&mut self, a: &StoredKind, b: &StoredKind) {
        use StoredKind::*;
        match (a, b) {
            (Struct { fields: x, .. }, Struct { name, fields: y, .. }) if x != y => {
                self.describe(name, x, y);
            }
            (Array { elem: x, .. }, Array { elem: y, .. }) => self.describe_held(x, y),
            _ => {}
        }
    }

    /// Records the field-level changes of struct `ty` (once per struct).
    fn describe(&mut self, ty: &str, a: &[StoredField], b: &[StoredField]) {
        let head = format!("`{ty}`: ");
        if self.changes.iter().any(|c| c.starts_with(&head)) {
            return;
        }
        let mut used = vec![false; a.len()];
        for f in b {
            match self.source(ty, &f.name, a) {
                Some((i, name)) => {
                    used[i] = true;
                    self.describe_held(&a[i].kind, &f.kind);
                    if name != f.name {
                        self.changes
                            .push(format!("`{ty}`: field `{name}` renamed to `{}`", f.name));
                    }
                    if self.converter(ty, &f.name).is_some() {
                        self.changes.push(format!(
                            "`{ty}`: field `{}` converted from `{}` to `{}`",
                            f.name,
                            kind_name(&a[i].kind),
                            kind_name(&f.kind)
                        ));
                    }
                }
                None => self
                    .changes
                    .push(format!("`{ty}`: field `{}` added (its default)", f.name)),
            }
        }
        for (f, _) in a.iter().zip(used).filter(|(_, u)| !u) {
            self.changes
                .push(format!("`{ty}`: field `{}` {DROPPED}", f.name));
        }
    }

    fn evolution(&self, ty: &str, field: &str) -> Option<&'w FieldEvolution> {
        self.wanted.evolution.get(ty)?.get(field)
    }

    fn converter(&self, ty: &str, field: &str) -> Option<&Converter> {
        self.wanted.converters.get(ty)?.get(field)
    }

    /// The old field a new field `field` of struct `ty` takes its value
    /// from: the one of its name, else of its newest earlier name.
    fn source<'a>(
        &self,
        ty: &str,
        field: &'a str,
        old: &'a [StoredField],
    ) -> Option<(usize, &'a str)>
    where
        'w: 'a,
    {
        let by = |n: &str| old.iter().position(|f| f.name == n);
        if let Some(i) = by(field) {
            return Some((i, field));
        }
        self.evolution(ty, field)?
            .renamed_from
            .iter()
            .find_map(|n| by(n).map(|i| (i, n.as_str())))
    }

    /// Converts the fields of struct `ty`.
    #[allow(clippy::too_many_arguments)]
    fn fields(
        &self,
        ty: &str,
        a: &[StoredField],
        a_size: u32,
        b: &[StoredField],
        b_size: u32,
        old: &[u8],
        out: &mut [u8],
    ) -> std::result::Result<(), String> {
        for (j, fb) in b.iter().enumerate() {
            let end_b = b.get(j + 1).map_or(b_size, |n| n.offset);
            let out_len = out.len();
            let dst = out
                .get_mut(fb.offset as usize..end_b as usize)
                .ok_or_else(|| outside(ty, &fb.name, fb.offset, end_b, out_len))?;
            let Some((i, _)) = self.source(ty, &fb.name, a) else {
                let fill = self.evolution(ty, &fb.name).map_or(&Fill::None, |e| &e.default);
                fill_default(ty, fb, fill, dst)?;
                continue;
            };
            let fa = &a[i];
            let end_a = a.get(i + 1).map_or(a_size, |n| n.offset);
            let src = old
                .get(fa.offset as usize..end_a as usize)
                .ok_or_else(|| outside(ty, &fa.name, fa.offset, end_a, old.len()))?;
            match self.converter(ty, &fb.name) {
                Some(c) if c.from == fa.kind => {
                    if !self.probe {
                        (c.f)(src, dst);
                    }
                }
                Some(c) => {
                    return Err(format!(
                        "the conversion of `{ty}.{}` reads `{}`, but the field is `{}` in the \
                         database",
                        fb.name,
                        kind_name(&c.from),
                        kind_name(&fa.kind)
                    ));
                }
                None => self
                    .value(&fa.kind, &fb.kind, src, dst)
                    .map_err(|w| format!("field `{ty}.{}`: {w}", fb.name))?,
            }
        }
        Ok(())
    }

    /// Converts one value of kind `a` to kind `b`.
    fn value(
        &self,
        a: &StoredKind,
        b: &StoredKind,
        old: &[u8],
        out: &mut [u8],
    ) -> std::result::Result<(), String> {
        use StoredKind::*;
        let copy = |out: &mut [u8]| {
            if out.len() != old.len() {
                return Err(format!(
                    "it spans {} bytes in the database and {} in the program (a layout no \
                     program has: fields with gaps between them)",
                    old.len(),
                    out.len()
                ));
            }
            out.copy_from_slice(old);
            Ok(())
        };
        match (a, b) {
            (Prim(x), Prim(y)) if x == y => copy(out),
            (
                Ref {
                    target: t, nullability: n, ..
                },
                Ref {
                    target: u, nullability: m, ..
                },
            )
            | (
                Smart {
                    target: t, nullability: n, ..
                },
                Smart {
                    target: u, nullability: m, ..
                },
            ) if t == u && widens(*n, *m) => copy(out),
            (Bytes, Bytes) | (Str, Str) => copy(out),
            (
                Index {
                    target: t,
                    key: k,
                    multi: x,
                    ..
                },
                Index {
                    target: u,
                    key: l,
                    multi: y,
                    ..
                },
            ) if t == u && k == l && x == y => copy(out),
            // The header (buffer, length, capacity) stays; the buffer is an
            // object of its own, converted by its array type.
            (Vec { elem: x, .. }, Vec { elem: y, .. }) if same_target(x, y) => copy(out),
            (
                Array {
                    elem: x,
                    elem_size: sx,
                    len: n,
                },
                Array {
                    elem: y,
                    elem_size: sy,
                    len: m,
                },
            ) if n == m => {
                for (o, d) in elements(old, *sx as usize, out, *sy as usize)? {
                    self.value(x, y, o, d)?;
                }
                Ok(())
            }
            (
                Struct {
                    name: p,
                    size: sp,
                    fields: f,
                },
                Struct {
                    name: q,
                    size: sq,
                    fields: g,
                },
            ) if p == q => self.fields(q, f, *sp, g, *sq, old, out),
            _ => Err(format!(
                "it is `{}` in the database and `{}` in the program, which a migration does \
                 not convert by itself: give a conversion (Migration::convert_field)",
                kind_name(a),
                kind_name(b)
            )),
        }
    }
}

/// Why field `field` of struct `ty` cannot be converted: its span
/// `from..to` does not lie inside its `len`-byte value, in order (a layout
/// no program has: one from a damaged catalog or a crafted schema file).
fn outside(ty: &str, field: &str, from: u32, to: u32, len: usize) -> String {
    format!("field `{ty}.{field}` spans bytes {from}..{to} of a {len}-byte value (a layout no program has)")
}

/// The elements of two arrays, of `sa` and `sb` bytes each: as many in
/// each, or an error (a layout no program has, or a damaged object).
fn elements<'a, 'b>(
    old: &'a [u8],
    sa: usize,
    out: &'b mut [u8],
    sb: usize,
) -> std::result::Result<impl Iterator<Item = (&'a [u8], &'b mut [u8])>, String> {
    if sa == 0 || sb == 0 || !old.len().is_multiple_of(sa) || old.len() / sa != out.len() / sb {
        return Err(format!(
            "an array of {} bytes in elements of {sa} does not convert to {} bytes in elements \
             of {sb}",
            old.len(),
            out.len()
        ));
    }
    Ok(old.chunks_exact(sa).zip(out.chunks_exact_mut(sb)))
}

/// Fills a new field with its declared default.
fn fill_default(
    ty: &str,
    f: &StoredField,
    default: &Fill,
    out: &mut [u8],
) -> std::result::Result<(), String> {
    match default {
        Fill::None => Err(format!(
            "field `{ty}.{}` is new and has no default: declare one with \
             #[persistent(default)] (zero, empty, None) or #[persistent(default = VALUE)]",
            f.name
        )),
        Fill::Zero if !zero_is_value(&f.kind) => Err(format!(
            "field `{ty}.{}` is new and its default is zero, which a `{}` cannot hold: make \
             it an Option, or set it with a conversion",
            f.name,
            kind_name(&f.kind)
        )),
        Fill::Zero => {
            out.fill(0);
            Ok(())
        }
        Fill::Bytes(b) if b.len() == out.len() => {
            out.copy_from_slice(b);
            Ok(())
        }
        Fill::Bytes(b) => Err(format!(
            "field `{ty}.{}`: its default has {} bytes, the field {}",
            f.name,
            b.len(),
            out.len()
        )),
    }
}

/// Whether all-zero bytes are a value of `k`.
fn zero_is_value(k: &StoredKind) -> bool {
    match k {
        StoredKind::Ref { nullability, .. } | StoredKind::Smart { nullability, .. } => {
            *nullability == Nullability::Nullable
        }
        StoredKind::Array { elem, .. } => zero_is_value(elem),
        StoredKind::Struct { fields, .. } => fields.iter().all(|f| zero_is_value(&f.kind)),
        _ => true,
    }
}

/// Whether a pointer of nullability `from` may be read as one of `to`:
/// the same, or a non-null one becoming an `Option`.
fn widens(from: Nullability, to: Nullability) -> bool {
    from == to || from == Nullability::Unknown || to == Nullability::Nullable
}

/// Whether two vector element kinds name the same thing (their layouts may
/// differ: the buffer's array type converts).
fn same_target(a: &StoredKind, b: &StoredKind) -> bool {
    kind_name(&without_sizes_kind(a)) == kind_name(&without_sizes_kind(b))
}

/// Whether objects of `a` and `b` have the same bytes: the layouts agree
/// but for pointer target sizes.
pub(super) fn same_bytes(a: &StoredType, b: &StoredType) -> bool {
    without_sizes(a) == without_sizes(b)
}

fn without_sizes(t: &StoredType) -> StoredType {
    let shape = match &t.shape {
        Shape::Struct(f) => Shape::Struct(map_fields(f, &without_sizes_kind)),
        Shape::Array(k) => Shape::Array(without_sizes_kind(k)),
    };
    StoredType {
        shape,
        ..t.clone()
    }
}

fn without_sizes_kind(k: &StoredKind) -> StoredKind {
    map_kind(k, &|_, _| 0)
}

/// `t` with each pointer's target size taken from `sizes` where it names
/// the target.
fn retargeted(t: &StoredType, sizes: &HashMap<&str, u32>) -> StoredType {
    let f = |target: &str, size: u32| sizes.get(target).copied().unwrap_or(size);
    let shape = match &t.shape {
        Shape::Struct(fs) => Shape::Struct(map_fields(fs, &|k| map_kind(k, &f))),
        Shape::Array(k) => Shape::Array(map_kind(k, &f)),
    };
    StoredType {
        shape,
        ..t.clone()
    }
}

fn map_fields(fs: &[StoredField], f: &dyn Fn(&StoredKind) -> StoredKind) -> Vec<StoredField> {
    fs.iter()
        .map(|x| StoredField {
            name: x.name.clone(),
            offset: x.offset,
            kind: f(&x.kind),
        })
        .collect()
}

/// `k` with every pointer target size replaced by `size(target, size)`.
fn map_kind(k: &StoredKind, size: &dyn Fn(&str, u32) -> u32) -> StoredKind {
    use StoredKind::*;
    match k {
        Ref {
            target,
            target_size,
            nullability,
        } => Ref {
            target: target.clone(),
            target_size: size(target, *target_size),
            nullability: *nullability,
        },
        Smart {
            target,
            target_size,
            nullability,
            lazy,
        } => Smart {
            target: target.clone(),
            target_size: size(target, *target_size),
            nullability: *nullability,
            lazy: *lazy,
        },
        Index {
            target,
            target_size,
            key,
            multi,
        } => Index {
            target: target.clone(),
            target_size: size(target, *target_size),
            key: key.clone(),
            multi: *multi,
        },
        Array {
            elem,
            elem_size,
            len,
        } => Array {
            elem: Box::new(map_kind(elem, size)),
            elem_size: *elem_size,
            len: *len,
        },
        Vec { elem, elem_size } => Vec {
            elem: Box::new(map_kind(elem, size)),
            elem_size: *elem_size,
        },
        Struct { name, size: s, fields } => Struct {
            name: name.clone(),
            size: *s,
            fields: map_fields(fields, &|x| map_kind(x, size)),
        },
        Prim(_) | Bytes | Str => k.clone(),
    }
}

/// Refuses a stored type the migration does not name that holds, by value,
/// a struct whose layout the migration changes: its own layout changes
/// with it, and only the program knows the new one.
fn refuse_held_changed(t: &StoredType, wanted: &Wanted) -> Result<()> {
    fn held<'a>(k: &'a StoredKind, out: &mut Vec<&'a StoredKind>) {
        match k {
            StoredKind::Struct { fields, .. } => {
                out.push(k);
                fields.iter().for_each(|f| held(&f.kind, out));
            }
            StoredKind::Array { elem, .. } | StoredKind::Vec { elem, .. } => held(elem, out),
            _ => {}
        }
    }
    let mut inner = Vec::new();
    match &t.shape {
        Shape::Struct(fs) => fs.iter().for_each(|f| held(&f.kind, &mut inner)),
        Shape::Array(k) => held(k, &mut inner),
    }
    for k in inner {
        let StoredKind::Struct { name, size, fields } = k else {
            continue;
        };
        let Some(w) = wanted.layouts.get(name) else {
            continue;
        };
        let stored = StoredType {
            name: name.clone(),
            size: *size,
            align: w.align,
            shape: Shape::Struct(fields.clone()),
        };
        if !same_bytes(&stored, w) {
            return Err(Error::SchemaMismatch {
                type_name: t.name.clone(),
                what: format!(
                    "cannot migrate: it holds a `{name}` by value, whose layout the migration \
                     changes; add `{}` to the migration (upgrade::<T>() for its program type)",
                    t.name
                ),
            });
        }
    }
    Ok(())
}
