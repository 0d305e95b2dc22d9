//! Swizzling and unswizzling refuse a 0 in a pointer slot that may not hold
//! null (`PRef<T>`, `Smart<T>`, also inside nested structs and fixed
//! arrays), naming the type, the field and the offsets; nullable slots,
//! vector buffers (whose spare capacity is zero) and fields of version-1
//! catalog entries (which do not say) let it through. Driven on a block
//! built by hand, without a database.

use amber::internals::format::bytes::{put_u32, put_u64};
use amber::internals::format::home::Home;
use amber::internals::format::objects::encode_header;
use amber::internals::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use amber::internals::schema::desc::{Nullability, Shape, StoredKind, StoredType};
use amber::internals::schema::layout::Layout;
use amber::internals::schema::registry::{Snapshot, TypeEntry};
use amber::internals::translate::swizzle::{AddrMap, Direction, convert_block};
use amber::{Field, PRef, Persistent, Smart};
use std::mem::offset_of;
use std::sync::Arc;

const PAGE: usize = 4096;
/// Where the map puts persistent addresses in "memory".
const SHIFT: u64 = 1 << 40;

#[derive(Persistent)]
#[repr(C)]
struct Leaf {
    v: u64,
}

#[derive(Persistent)]
#[repr(C)]
struct Cell {
    q: PRef<Leaf>,
}

#[derive(Persistent)]
#[repr(C)]
struct Holder {
    p: PRef<Leaf>,
    o: Option<PRef<Leaf>>,
    s: Smart<Leaf>,
    os: Option<Smart<Leaf>>,
    cells: [Cell; 2],
}

/// Persistent address `pa` lives at `pa + SHIFT`.
struct Shifted;

impl AddrMap for Shifted {
    fn home(&self) -> Home {
        Home::NONE
    }
    fn to_va(&self, paddr: u64, _pages: u32) -> Result<u64, String> {
        Ok(paddr + SHIFT)
    }
    fn to_paddr(&self, va: u64) -> Result<u64, String> {
        Ok(va - SHIFT)
    }
}

/// Type 1 is `t`.
fn types(t: StoredType) -> Snapshot {
    let layout = Layout::of(&t, PAGE);
    let entry = TypeEntry {
        id: 1,
        stored: t,
        layout,
    };
    Arc::new(vec![None, Some(Arc::new(entry))])
}

/// A block holding one object of type 1 whose body is `words`; the body
/// starts at block offset 40.
fn block(words: &[u64]) -> Vec<u8> {
    let mut b = vec![0u8; PAGE];
    page::format(&mut b, BlockKind::Data, 1, 1);
    let size = words.len() as u32 * 8;
    b[HEADER_SIZE..HEADER_SIZE + 8].copy_from_slice(&encode_header(1, 0, size));
    for (i, w) in words.iter().enumerate() {
        put_u64(&mut b, HEADER_SIZE + 8 + i * 8, *w);
    }
    put_u32(&mut b, USED_OFFSET, HEADER_SIZE as u32 + 8 + size);
    b
}

/// The words of a `Holder` in persistent form, every pointer set.
fn holder() -> [u64; 6] {
    [
        8192 + 48,
        8192 + 64,
        8192 + 80,
        8192 + 96,
        8192 + 112,
        8192 + 128,
    ]
}

fn convert(t: &Snapshot, b: &mut [u8], dir: Direction) -> Result<(), String> {
    convert_block(b, PAGE, t, &Shifted, dir).map(drop)
}

#[test]
fn nulls_in_non_null_slots_are_refused() {
    let t = types(Holder::DESC.to_stored());
    assert_eq!(offset_of!(Holder, cells), 32);
    // Every pointer set: swizzled (but for the smart ones) and back.
    let mut b = block(&holder());
    convert(&t, &mut b, Direction::Swizzle).expect("sound");
    let body =
        |b: &[u8], i: usize| u64::from_le_bytes(b[40 + i * 8..48 + i * 8].try_into().unwrap());
    assert_eq!(body(&b, 0), holder()[0] + SHIFT);
    assert_eq!(body(&b, 2), holder()[2], "a smart pointer is not swizzled");
    convert(&t, &mut b, Direction::Unswizzle).expect("sound");
    assert_eq!(b, block(&holder()));
    // The `Option` forms may be null.
    let mut w = holder();
    (w[1], w[3]) = (0, 0);
    convert(&t, &mut block(&w), Direction::Swizzle).expect("nullable");
    // Each non-null slot holding 0, in both directions.
    for (i, field, kind) in [
        (0, "p", "PRef<Leaf>"),
        (2, "s", "Smart<Leaf>"),
        (4, "cells[0].q", "PRef<Leaf>"),
        (5, "cells[1].q", "PRef<Leaf>"),
    ] {
        let mut w = holder();
        w[i] = 0;
        let at = 40 + 8 * i;
        let e = convert(&t, &mut block(&w), Direction::Swizzle).expect_err(field);
        assert_eq!(
            e,
            format!(
                "null in non-null field `Holder.{field}` (`{kind}`): \
                 the object at offset 32, pointer at offset {at}"
            )
        );
        // In memory form: the `PRef`s (not the smart pointers) shifted.
        let mut m = w;
        for j in [0, 1, 4, 5] {
            if m[j] != 0 {
                m[j] += SHIFT;
            }
        }
        let e = convert(&t, &mut block(&m), Direction::Unswizzle).expect_err(field);
        assert!(e.starts_with("internal error: "), "{e}");
        assert!(e.contains(&format!("`Holder.{field}`")), "{e}");
    }
}

#[test]
fn buffers_and_version_1_fields_may_hold_null() {
    // A vector's buffer: its spare capacity is zero.
    let elem = <PRef<Leaf> as Field>::KIND.to_stored();
    let t = types(StoredType::array_of(elem, 8));
    let mut b = block(&[8192 + 48, 8192 + 64, 0, 0]);
    convert(&t, &mut b, Direction::Swizzle).expect("spare capacity");
    // A version-1 entry does not say which form its pointers are.
    let mut v1 = Holder::DESC.to_stored();
    let Shape::Struct(fields) = &mut v1.shape else {
        unreachable!()
    };
    for f in fields.iter_mut() {
        if let StoredKind::Ref { nullability, .. } | StoredKind::Smart { nullability, .. } =
            &mut f.kind
        {
            *nullability = Nullability::Unknown;
        }
    }
    let t = types(v1);
    let mut w = holder();
    (w[0], w[2]) = (0, 0);
    convert(&t, &mut block(&w), Direction::Swizzle).expect("unknown nullability");
}

/// A stored pointer that is not 8-aligned cannot be an object's address
/// (bodies are 8-aligned): swizzling refuses it, so that every pointer in
/// memory is aligned and the dereference need not check (in reference
/// fields, nested ones, and arrays of references alike).
#[test]
fn misaligned_pointers_are_refused() {
    let t = types(Holder::DESC.to_stored());
    for i in [0, 1, 4, 5] {
        let mut w = holder();
        w[i] += 4;
        let e = convert(&t, &mut block(&w), Direction::Swizzle).expect_err("misaligned");
        assert!(e.contains("not 8-aligned"), "{e}");
    }
    // A smart pointer is not swizzled: its alignment is checked when it is
    // followed (`Db::smart`).
    let mut w = holder();
    w[2] += 4;
    convert(&t, &mut block(&w), Direction::Swizzle).expect("smart left alone");
}
