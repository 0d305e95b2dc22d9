//! `#[derive(Persistent)]`: the descriptors it generates, checked against the
//! compiler's layout (`size_of`, `align_of`, `offset_of!`), their catalog
//! encoding, and the swizzling layout computed from them.
//!
//! The crate forbids unsafe code: the derive's `unsafe impl` must not trip
//! the lint in a crate that forbids it (an `allow` would be an error there).
#![forbid(unsafe_code)]
// Nor may the expansion warn.
#![deny(warnings)]

use amber::Persistent;
use amber::internals::schema::desc::{
    FieldKind, Nullability, Prim, Shape, StoredField, StoredKind, StoredType, TypeDesc,
};
use amber::internals::schema::layout::{Layout, PtrSlot, SlotKind};
use amber::{Lazy, PBytes, PIndex, PRef, PVec, Smart};
use std::mem::{align_of, offset_of, size_of};

const PAGE: usize = 4096;

// ---- the types ---------------------------------------------------------------

/// Every primitive width, largest first so that there is no padding.
#[derive(Persistent)]
#[repr(C)]
struct Prims {
    a: u64,
    b: i64,
    c: f64,
    d: u32,
    e: i32,
    f: f32,
    g: u16,
    h: i16,
    i: u8,
    j: i8,
    _pad: [u8; 6],
}

/// The example of the design: nested arrays, pointers, a vector of
/// pointers and a pointer to its own type.
#[derive(Persistent)]
#[repr(C)]
struct Part {
    id: u32,
    kind: [u8; 10],
    _pad: [u8; 2],
    x: i32,
    y: i32,
    build: i64,
    out: [PRef<Conn>; 3],
    incoming: PVec<PRef<Conn>>,
    next: Option<PRef<Part>>,
}

#[derive(Persistent)]
#[repr(C)]
struct Conn {
    from: PRef<Part>,
    to: PRef<Part>,
    length: u32,
    kind: [u8; 4],
}

#[derive(Persistent)]
#[repr(C)]
struct Point {
    x: i32,
    y: i32,
}

/// Nested structs by value and an array of them; 2-D arrays.
#[derive(Persistent)]
#[repr(C)]
struct Shape2 {
    min: Point,
    max: Point,
    corners: [Point; 4],
    grid: [[u16; 3]; 2],
    _pad: [u8; 4],
}

#[derive(Persistent)]
#[repr(C)]
struct Leaf {
    v: u64,
}

/// 4056 bytes: with the page header and the object header, exactly one page.
#[derive(Persistent)]
#[repr(C)]
struct FitsOnePage {
    bytes: [u8; 4056],
}

/// One byte more: a block of two pages.
#[derive(Persistent)]
#[repr(C)]
struct TwoPages {
    bytes: [u8; 4057],
}

/// 10,000 bytes: three pages.
#[derive(Persistent)]
#[repr(C)]
struct Big {
    words: [u64; 1250],
}

/// A struct holding pointers, used by value.
#[derive(Persistent)]
#[repr(C)]
struct Slot {
    p: PRef<Leaf>,
    q: Option<PRef<Leaf>>,
}

/// Every pointer kind.
#[derive(Persistent)]
#[repr(C)]
struct Ptrs {
    r: PRef<Leaf>,
    or: Option<PRef<Leaf>>,
    s: Smart<Leaf>,
    os: Option<Smart<Leaf>>,
    v: PVec<u32>,
    vs: PVec<Slot>,
    b: PBytes,
    ix: PIndex<Leaf>,
    one: PRef<FitsOnePage>,
    two: Option<PRef<TwoPages>>,
    big: PRef<Big>,
    slots: [Slot; 2],
    refs: [Option<PRef<Big>>; 2],
    l: Lazy<Leaf>,
    lv: PVec<Lazy<Leaf>>,
}

/// `Self` in a field type; a pointer to its own type.
#[derive(Persistent)]
#[repr(C)]
struct List {
    val: u64,
    next: Option<PRef<Self>>,
    smart_next: Option<Smart<Self>>,
    kids: PVec<PRef<Self>>,
}

/// A stored name other than the identifier.
#[derive(Persistent)]
#[persistent(name = "geo::Point3")]
#[repr(C)]
struct RenamedPoint {
    x: f32,
    y: f32,
    z: f32,
}

/// Tuple structs are accepted; their fields are named "0", "1", ….
#[derive(Persistent)]
#[repr(C)]
struct Pair(u32, u32, PRef<Leaf>);

/// Raw identifiers are stored without `r#`.
#[derive(Persistent)]
#[repr(C)]
struct RawNames {
    r#type: u32,
    r#match: u32,
}

/// `repr(C, align(8))` is accepted.
#[derive(Persistent)]
#[repr(C, align(8))]
struct Aligned {
    a: u32,
    b: u32,
}

/// Separate repr attributes are accepted too.
#[derive(Persistent)]
#[repr(align(4))]
#[repr(C)]
struct TwoReprs {
    a: u16,
    b: u16,
}

/// A persistent struct may share a name with a generic standard type: only
/// `Cell<..>` is taken for `std::cell::Cell`.
mod grid {
    use amber::Persistent;

    #[derive(Persistent)]
    #[repr(C)]
    pub struct Cell {
        pub v: u32,
    }
}

#[derive(Persistent)]
#[repr(C)]
struct Grid {
    cells: [grid::Cell; 2],
    first: Option<amber::PRef<grid::Cell>>,
}

// ---- the descriptors are constants -------------------------------------------

const PART: &TypeDesc = &Part::DESC;
static LIST: &TypeDesc = &<List as Persistent>::DESC;
const _: () = assert!(PART.fields.len() == 9);
const _: () = assert!(PART.fields[8].offset == 72);
const _: () = assert!(PART.size == 80);
const _: () = assert!(Ptrs::DESC.fields.len() == 15);
const _: () = assert!(LIST.size == 40);
const fn field_offset(d: &TypeDesc, i: usize) -> u32 {
    d.fields[i].offset
}
const _: () = assert!(field_offset(&Shape2::DESC, 3) == 48);
const _: () = assert!(matches!(
    Conn::DESC.fields[0].kind,
    FieldKind::Ref {
        nullable: false,
        ..
    }
));
const _: () = assert!(matches!(
    Part::DESC.fields[8].kind,
    FieldKind::Ref { nullable: true, .. }
));

// ---- helpers -----------------------------------------------------------------

/// Checks name, size, align and every field's (name, offset, kind) against
/// expectations; returns the stored form.
fn check<T: Persistent>(name: &str, fields: &[(&str, usize, StoredKind)]) -> StoredType {
    let d = &T::DESC;
    assert_eq!(d.name, name);
    assert_eq!(d.size as usize, size_of::<T>(), "{name} size");
    assert_eq!(d.align as usize, align_of::<T>(), "{name} align");
    assert_eq!(d.fields.len(), fields.len(), "{name} field count");
    for (f, (fname, off, kind)) in d.fields.iter().zip(fields) {
        assert_eq!(f.name, *fname, "{name}");
        assert_eq!(f.offset as usize, *off, "{name}.{fname} offset");
        assert_eq!(&f.kind.to_stored(), kind, "{name}.{fname} kind");
    }
    let stored = d.to_stored();
    let back = StoredType::decode(&stored.encode()).expect("descriptor decodes");
    assert_eq!(back, stored, "{name} encode/decode round trip");
    assert_eq!(
        amber::internals::schema::compare::first_difference(&stored, &back),
        None
    );
    stored
}

fn prim(p: Prim) -> StoredKind {
    StoredKind::Prim(p)
}

fn array(elem: StoredKind, elem_size: u32, len: u32) -> StoredKind {
    StoredKind::Array {
        elem: Box::new(elem),
        elem_size,
        len,
    }
}

/// `PRef<target>`.
fn pref(target: &str, target_size: u32) -> StoredKind {
    StoredKind::Ref {
        target: target.to_string(),
        target_size,
        nullability: Nullability::NonNull,
    }
}

/// `Option<PRef<target>>`.
fn opt_pref(target: &str, target_size: u32) -> StoredKind {
    StoredKind::Ref {
        target: target.to_string(),
        target_size,
        nullability: Nullability::Nullable,
    }
}

/// `Smart<target>`.
fn smart(target: &str, target_size: u32) -> StoredKind {
    StoredKind::Smart {
        target: target.to_string(),
        target_size,
        nullability: Nullability::NonNull,
        lazy: false,
    }
}

/// `Lazy<target>`: stored as `Smart<target>`, another kind in memory.
fn lazy(target: &str, target_size: u32) -> StoredKind {
    StoredKind::Smart {
        target: target.to_string(),
        target_size,
        nullability: Nullability::Nullable,
        lazy: true,
    }
}

/// `Option<Smart<target>>`.
fn opt_smart(target: &str, target_size: u32) -> StoredKind {
    StoredKind::Smart {
        target: target.to_string(),
        target_size,
        nullability: Nullability::Nullable,
        lazy: false,
    }
}

fn pvec(elem: StoredKind, elem_size: u32) -> StoredKind {
    StoredKind::Vec {
        elem: Box::new(elem),
        elem_size,
    }
}

fn nested<T: Persistent>() -> StoredKind {
    let s = T::DESC.to_stored();
    let Shape::Struct(fields) = s.shape else {
        panic!("not a struct")
    };
    StoredKind::Struct {
        name: s.name,
        size: s.size,
        fields,
    }
}

fn point() -> StoredKind {
    StoredKind::Struct {
        name: "Point".into(),
        size: 8,
        fields: vec![
            StoredField {
                name: "x".into(),
                offset: 0,
                kind: prim(Prim::I32),
            },
            StoredField {
                name: "y".into(),
                offset: 4,
                kind: prim(Prim::I32),
            },
        ],
    }
}

fn slots(t: &StoredType) -> Vec<(u32, SlotKind)> {
    let l = Layout::of(t, PAGE);
    assert!(!l.array);
    assert_eq!(l.size, t.size);
    l.slots
        .iter()
        .map(|PtrSlot { offset, kind }| (*offset, *kind))
        .collect()
}

/// A `PRef` to a one-page block: 0 refused.
const REF1: SlotKind = SlotKind::Ref {
    pages: 1,
    nullable: false,
};
/// An `Option<PRef>` to a one-page block.
const OPT1: SlotKind = SlotKind::Ref {
    pages: 1,
    nullable: true,
};

// ---- tests -------------------------------------------------------------------

#[test]
fn primitives_of_every_width() {
    use Prim::*;
    let s = check::<Prims>(
        "Prims",
        &[
            ("a", offset_of!(Prims, a), prim(U64)),
            ("b", offset_of!(Prims, b), prim(I64)),
            ("c", offset_of!(Prims, c), prim(F64)),
            ("d", offset_of!(Prims, d), prim(U32)),
            ("e", offset_of!(Prims, e), prim(I32)),
            ("f", offset_of!(Prims, f), prim(F32)),
            ("g", offset_of!(Prims, g), prim(U16)),
            ("h", offset_of!(Prims, h), prim(I16)),
            ("i", offset_of!(Prims, i), prim(U8)),
            ("j", offset_of!(Prims, j), prim(I8)),
            ("_pad", offset_of!(Prims, _pad), array(prim(U8), 1, 6)),
        ],
    );
    assert_eq!(size_of::<Prims>(), 48);
    assert_eq!(offset_of!(Prims, j), 41);
    assert!(!Layout::of(&s, PAGE).has_pointers());
}

#[test]
fn part_with_pointers_and_self_reference() {
    let conn = pref("Conn", 24);
    let s = check::<Part>(
        "Part",
        &[
            ("id", offset_of!(Part, id), prim(Prim::U32)),
            ("kind", offset_of!(Part, kind), array(prim(Prim::U8), 1, 10)),
            ("_pad", offset_of!(Part, _pad), array(prim(Prim::U8), 1, 2)),
            ("x", offset_of!(Part, x), prim(Prim::I32)),
            ("y", offset_of!(Part, y), prim(Prim::I32)),
            ("build", offset_of!(Part, build), prim(Prim::I64)),
            ("out", offset_of!(Part, out), array(conn.clone(), 8, 3)),
            ("incoming", offset_of!(Part, incoming), pvec(conn, 8)),
            ("next", offset_of!(Part, next), opt_pref("Part", 80)),
        ],
    );
    assert_eq!((size_of::<Part>(), align_of::<Part>()), (80, 8));
    assert_eq!(
        slots(&s),
        vec![
            (32, REF1),
            (40, REF1),
            (48, REF1),
            (56, SlotKind::Buffer { elem_size: 8 }),
            (72, OPT1),
        ]
    );
    let c = check::<Conn>(
        "Conn",
        &[
            ("from", 0, pref("Part", 80)),
            ("to", 8, pref("Part", 80)),
            ("length", 16, prim(Prim::U32)),
            ("kind", 20, array(prim(Prim::U8), 1, 4)),
        ],
    );
    assert_eq!(slots(&c), vec![(0, REF1), (8, REF1)]);
    // Following the pointer's target function gives Part's descriptor.
    let FieldKind::Ref { target: t, .. } = Part::DESC.fields[8].kind else {
        panic!("next is a Ref")
    };
    let target = (t.0)();
    assert_eq!(
        (target.name, target.size, target.fields.len()),
        ("Part", 80, 9)
    );
}

#[test]
fn nested_structs_and_arrays_of_them() {
    let s = check::<Shape2>(
        "Shape2",
        &[
            ("min", offset_of!(Shape2, min), point()),
            ("max", offset_of!(Shape2, max), point()),
            ("corners", offset_of!(Shape2, corners), array(point(), 8, 4)),
            (
                "grid",
                offset_of!(Shape2, grid),
                array(array(prim(Prim::U16), 2, 3), 6, 2),
            ),
            (
                "_pad",
                offset_of!(Shape2, _pad),
                array(prim(Prim::U8), 1, 4),
            ),
        ],
    );
    assert_eq!(size_of::<Shape2>(), 64);
    assert_eq!(nested::<Point>(), point());
    assert!(slots(&s).is_empty());
}

#[test]
fn every_pointer_kind() {
    let leaf = pref("Leaf", 8);
    let slot = nested::<Slot>();
    let s = check::<Ptrs>(
        "Ptrs",
        &[
            ("r", offset_of!(Ptrs, r), leaf.clone()),
            ("or", offset_of!(Ptrs, or), opt_pref("Leaf", 8)),
            ("s", offset_of!(Ptrs, s), smart("Leaf", 8)),
            ("os", offset_of!(Ptrs, os), opt_smart("Leaf", 8)),
            ("v", offset_of!(Ptrs, v), pvec(prim(Prim::U32), 4)),
            ("vs", offset_of!(Ptrs, vs), pvec(slot.clone(), 16)),
            ("b", offset_of!(Ptrs, b), StoredKind::Bytes),
            (
                "ix",
                offset_of!(Ptrs, ix),
                StoredKind::Index {
                    target: "Leaf".into(),
                    target_size: 8,
                    key: "u64".into(),
                    multi: false,
                },
            ),
            ("one", offset_of!(Ptrs, one), pref("FitsOnePage", 4056)),
            ("two", offset_of!(Ptrs, two), opt_pref("TwoPages", 4057)),
            ("big", offset_of!(Ptrs, big), pref("Big", 10_000)),
            ("slots", offset_of!(Ptrs, slots), array(slot.clone(), 16, 2)),
            (
                "refs",
                offset_of!(Ptrs, refs),
                array(opt_pref("Big", 10_000), 8, 2),
            ),
            ("l", offset_of!(Ptrs, l), lazy("Leaf", 8)),
            ("lv", offset_of!(Ptrs, lv), pvec(lazy("Leaf", 8), 8)),
        ],
    );
    // r 0, or 8, s 16, os 24, v 32, vs 48, b 64, ix 80, one 96, two 104,
    // big 112, slots 120..152, refs 152..168, l 168, lv 176.
    assert_eq!(offset_of!(Ptrs, ix), 80);
    assert_eq!(offset_of!(Ptrs, refs), 152);
    assert_eq!(size_of::<Ptrs>(), 192);
    let ref3 = |nullable| SlotKind::Ref { pages: 3, nullable };
    assert_eq!(
        slots(&s),
        vec![
            (0, REF1),
            (8, OPT1),
            // Smart pointers are not swizzled; a non-null one (16) is
            // checked, a nullable one (24) needs nothing, nor does the
            // index (80).
            (16, SlotKind::Smart),
            (32, SlotKind::Buffer { elem_size: 4 }),
            (48, SlotKind::Buffer { elem_size: 16 }),
            (64, SlotKind::Buffer { elem_size: 1 }),
            (96, REF1),
            (
                104,
                SlotKind::Ref {
                    pages: 2,
                    nullable: true
                }
            ),
            (112, ref3(false)),
            (120, REF1),
            (128, OPT1),
            (136, REF1),
            (144, OPT1),
            (152, ref3(true)),
            (160, ref3(true)),
            // A lazy pointer is unswizzled at commit (it may have been
            // swizzled upon discovery), and checked aligned at fetch; 0 is
            // null.
            (168, SlotKind::Lazy),
            (176, SlotKind::Buffer { elem_size: 8 }),
        ]
    );
    // A buffer of lazy pointers: each element a slot (0 is null, as in a
    // field).
    let lbuf = StoredType::array_of(lazy("Leaf", 8), 8);
    assert_eq!(lbuf.name, "[Lazy<Leaf>]");
    let l = Layout::of(&lbuf, PAGE);
    let lbuf_slots: Vec<_> = l.slots.iter().map(|s| (s.offset, s.kind)).collect();
    assert_eq!(lbuf_slots, vec![(0, SlotKind::Lazy)]);
    check::<Slot>(
        "Slot",
        &[("p", 0, pref("Leaf", 8)), ("q", 8, opt_pref("Leaf", 8))],
    );
    // Buffers of vectors of either form are arrays of different types.
    assert_eq!(
        StoredType::array_of(pref("Leaf", 8), 8).name,
        "[PRef<Leaf>]"
    );
    assert_eq!(
        StoredType::array_of(opt_pref("Leaf", 8), 8).name,
        "[Option<PRef<Leaf>>]"
    );
    // The buffer of `vs` is an array of Slots, each with two pointers.
    let StoredKind::Vec { elem, elem_size } = pvec(slot, 16) else {
        unreachable!()
    };
    let buf = StoredType::array_of(*elem, elem_size);
    assert_eq!(StoredType::decode(&buf.encode()).expect("decodes"), buf);
    let l = Layout::of(&buf, PAGE);
    assert!(l.array);
    assert_eq!(l.size, 16);
    let buf_slots: Vec<_> = l.slots.iter().map(|s| (s.offset, s.kind)).collect();
    // Elements of a buffer are not checked for null (its spare capacity is
    // zero): both pointers may hold 0 there.
    assert_eq!(buf_slots, vec![(0, OPT1), (8, OPT1)]);
}

#[test]
fn large_targets_span_pages() {
    for (size, pages) in [(4056, 1), (4057, 2), (10_000, 3)] {
        assert_eq!(
            amber::internals::schema::layout::pages_for(size, PAGE),
            pages
        );
    }
    check::<FitsOnePage>(
        "FitsOnePage",
        &[("bytes", 0, array(prim(Prim::U8), 1, 4056))],
    );
    check::<TwoPages>("TwoPages", &[("bytes", 0, array(prim(Prim::U8), 1, 4057))]);
    check::<Big>("Big", &[("words", 0, array(prim(Prim::U64), 8, 1250))]);
    // With 16 KiB pages the large target fits in one.
    let s = Ptrs::DESC.to_stored();
    let l = Layout::of(&s, 16384);
    assert!(l.slots.iter().all(|s| matches!(
        s.kind,
        SlotKind::Ref { pages: 1, .. } | SlotKind::Buffer { .. } | SlotKind::Smart | SlotKind::Lazy
    )));
}

#[test]
fn self_reference_through_self() {
    let s = check::<List>(
        "List",
        &[
            ("val", 0, prim(Prim::U64)),
            ("next", 8, opt_pref("List", 40)),
            ("smart_next", 16, opt_smart("List", 40)),
            ("kids", 16 + 8, pvec(pref("List", 40), 8)),
        ],
    );
    assert_eq!(LIST.name, "List");
    assert_eq!(
        slots(&s),
        vec![(8, OPT1), (24, SlotKind::Buffer { elem_size: 8 })]
    );
}

#[test]
fn renamed_type() {
    let s = check::<RenamedPoint>(
        "geo::Point3",
        &[
            ("x", 0, prim(Prim::F32)),
            ("y", 4, prim(Prim::F32)),
            ("z", 8, prim(Prim::F32)),
        ],
    );
    assert_eq!(s.name, "geo::Point3");
    assert_eq!((s.size, s.align), (12, 4));
}

#[test]
fn tuple_struct_fields_are_numbered() {
    let s = check::<Pair>(
        "Pair",
        &[
            ("0", offset_of!(Pair, 0), prim(Prim::U32)),
            ("1", offset_of!(Pair, 1), prim(Prim::U32)),
            ("2", offset_of!(Pair, 2), pref("Leaf", 8)),
        ],
    );
    assert_eq!(slots(&s), vec![(8, REF1)]);
}

#[test]
fn raw_identifiers_and_reprs() {
    check::<RawNames>(
        "RawNames",
        &[("type", 0, prim(Prim::U32)), ("match", 4, prim(Prim::U32))],
    );
    let s = check::<Aligned>(
        "Aligned",
        &[("a", 0, prim(Prim::U32)), ("b", 4, prim(Prim::U32))],
    );
    assert_eq!((s.size, s.align), (8, 8));
    let s = check::<TwoReprs>(
        "TwoReprs",
        &[("a", 0, prim(Prim::U16)), ("b", 2, prim(Prim::U16))],
    );
    assert_eq!((s.size, s.align), (4, 4));
}

#[test]
fn struct_named_like_a_std_type() {
    let cell = nested::<grid::Cell>();
    let s = check::<Grid>(
        "Grid",
        &[
            ("cells", 0, array(cell, 4, 2)),
            ("first", 8, opt_pref("Cell", 4)),
        ],
    );
    assert_eq!(slots(&s), vec![(8, OPT1)]);
}

#[test]
fn descriptors_differ_where_layouts_differ() {
    // The stored forms of two different types are told apart, naming the
    // field.
    let a = Point::DESC.to_stored();
    let b = Aligned::DESC.to_stored();
    let d = amber::internals::schema::compare::first_difference(&a, &b).expect("differ");
    assert!(d.contains("alignment"), "{d}");
    let d = amber::internals::schema::compare::first_difference(&Pair::DESC.to_stored(), &{
        let mut p = Pair::DESC.to_stored();
        if let Shape::Struct(f) = &mut p.shape {
            f[2].kind = pref("Leaf", 16);
        }
        p
    })
    .expect("differ");
    assert!(d.contains("`2`"), "{d}");
}
