//! The part schemas the versions over Amber's objects (`mapped` and the
//! copy architecture's) run on: OO1's part ([`Oo1`], Texas's all-raw part:
//! 104 bytes), and White & DeWitt's Figure 11 part ([`Fig11`]), whose
//! non-pointer data is an array of 19 integers (76 bytes) of which an
//! update changes a given number.
//!
//! **(choice)** In the Figure 11 part, `x` and `y` (the values the visit
//! passes on and OO1's update increments) are the array's first two
//! integers, so that every answer stays checkable against the OO1
//! reference evaluator; an update increments the first `ints` integers,
//! `ints` from 2 (x and y, 11% of the array) to 19 (all of it). The other
//! integers start equal to `y`, so that a read-back can tell every update
//! reached them. The paper's x-axis starts at no update; ours at two
//! integers (its p = 0 point is the read-only traversal of Table 1).

use amber::{CopyTx, Db, Obj, PRef, PVec, Persistent};

use super::mapped::{CHUNK, Chunk, Root};
use crate::oo1::database::{GeneratedDb, Kind, PartId};
use crate::oo1::engine::{EngineError, ResultExt};
use crate::texas::schema::all_raw::{self, Part};

/// Integers in the Figure 11 part's array.
pub const INTS: usize = 19;

/// A part schema: its types, how a visit reads a part and an update
/// changes it, and how its parts are built.
pub trait Schema: 'static {
    /// The part.
    type Part: Persistent;
    /// A page of the index: [`CHUNK`] part pointers.
    type Chunk: Persistent;
    /// The root: the index chunks and the part count.
    type Root: Persistent;

    /// The values a visit reads: id, x, y, kind.
    fn values(p: &Self::Part) -> (PartId, i32, i32, &Kind);
    /// Connection `slot`'s target.
    fn to(p: &Self::Part, slot: usize) -> &Option<PRef<Self::Part>>;
    /// Entry `i` of an index chunk.
    fn entry(c: &Self::Chunk, i: usize) -> &Option<PRef<Self::Part>>;
    /// The root's chunks and part count.
    fn index(r: &Self::Root) -> (&PVec<PRef<Self::Chunk>>, u64);
    /// A chunk of these entries, and a root.
    fn chunk(parts: [Option<PRef<Self::Part>>; CHUNK]) -> Self::Chunk;
    fn root(chunks: PVec<PRef<Self::Chunk>>, parts: u64) -> Self::Root;
    /// The update of a visit, in place: x and y, and (Figure 11) the first
    /// `ints` integers in all.
    fn update(p: &mut Self::Part, ints: usize);
    /// The same through an object cache, one `field_mut` per integer (as
    /// each assignment of an E program widens the modified range).
    fn update_copy(tx: &mut CopyTx<'_>, o: Obj<Self::Part>, ints: usize) -> amber::Result<()>;
    /// Adds the parts of `data` with their connections; by id.
    fn build_parts(db: &mut Db, data: &GeneratedDb) -> Result<Vec<PRef<Self::Part>>, EngineError>;
    /// What a read-back finds of a part's array after updates of `ints`
    /// integers (Figure 11: [`array_check`]); `None` without one.
    fn arrays(_p: &Self::Part, _ints: usize) -> Option<(i64, bool)> {
        None
    }
}

/// OO1's part (the Texas all-raw part).
pub struct Oo1;

impl Schema for Oo1 {
    type Part = Part;
    type Chunk = Chunk;
    type Root = Root;

    #[inline]
    fn values(p: &Part) -> (PartId, i32, i32, &Kind) {
        (p.id, p.x, p.y, &p.kind)
    }
    #[inline]
    fn to(p: &Part, slot: usize) -> &Option<PRef<Part>> {
        &p.out[slot].to
    }
    fn entry(c: &Chunk, i: usize) -> &Option<PRef<Part>> {
        &c.parts[i]
    }
    fn index(r: &Root) -> (&PVec<PRef<Chunk>>, u64) {
        (&r.chunks, r.parts)
    }
    fn chunk(parts: [Option<PRef<Part>>; CHUNK]) -> Chunk {
        Chunk { parts }
    }
    fn root(chunks: PVec<PRef<Chunk>>, parts: u64) -> Root {
        Root { chunks, parts }
    }
    fn update(p: &mut Part, _ints: usize) {
        p.x = p.x.wrapping_add(1);
        p.y = p.y.wrapping_add(1);
    }
    fn update_copy(tx: &mut CopyTx<'_>, o: Obj<Part>, _ints: usize) -> amber::Result<()> {
        let x = tx.field_mut(o, |p| &p.x)?;
        *x = x.wrapping_add(1);
        let y = tx.field_mut(o, |p| &p.y)?;
        *y = y.wrapping_add(1);
        Ok(())
    }
    fn build_parts(db: &mut Db, data: &GeneratedDb) -> Result<Vec<PRef<Part>>, EngineError> {
        all_raw::build_parts(db, data)
    }
}

/// Figure 11's part: OO1's with an array of [`INTS`] integers for its
/// non-pointer data (x = `vals[0]`, y = `vals[1]`).
#[derive(Persistent)]
#[persistent(name = "epvm::Part19")]
#[repr(C)]
pub struct Part19 {
    pub id: u32,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub vals: [i32; INTS],
    pub _pad2: u32,
    pub build: i64,
    pub out: [Out19; 3],
}

/// A connection of a [`Part19`].
#[derive(Persistent)]
#[persistent(name = "epvm::Out19")]
#[repr(C)]
pub struct Out19 {
    pub to: Option<PRef<Part19>>,
    pub kind: [u8; 10],
    pub _pad: [u8; 2],
    pub length: i32,
}

/// An index chunk of [`Part19`]s.
#[derive(Persistent)]
#[persistent(name = "epvm::Chunk19")]
#[repr(C)]
pub struct Chunk19 {
    pub parts: [Option<PRef<Part19>>; CHUNK],
}

/// The root of the Figure 11 database.
#[derive(Persistent)]
#[persistent(name = "epvm::Root19")]
#[repr(C)]
pub struct Root19 {
    pub chunks: PVec<PRef<Chunk19>>,
    pub parts: u64,
}

/// Figure 11's schema.
pub struct Fig11;

impl Schema for Fig11 {
    type Part = Part19;
    type Chunk = Chunk19;
    type Root = Root19;

    #[inline]
    fn values(p: &Part19) -> (PartId, i32, i32, &Kind) {
        (p.id, p.vals[0], p.vals[1], &p.kind)
    }
    #[inline]
    fn to(p: &Part19, slot: usize) -> &Option<PRef<Part19>> {
        &p.out[slot].to
    }
    fn entry(c: &Chunk19, i: usize) -> &Option<PRef<Part19>> {
        &c.parts[i]
    }
    fn index(r: &Root19) -> (&PVec<PRef<Chunk19>>, u64) {
        (&r.chunks, r.parts)
    }
    fn chunk(parts: [Option<PRef<Part19>>; CHUNK]) -> Chunk19 {
        Chunk19 { parts }
    }
    fn root(chunks: PVec<PRef<Chunk19>>, parts: u64) -> Root19 {
        Root19 { chunks, parts }
    }
    fn update(p: &mut Part19, ints: usize) {
        for v in &mut p.vals[..ints.clamp(2, INTS)] {
            *v = v.wrapping_add(1);
        }
    }
    fn update_copy(tx: &mut CopyTx<'_>, o: Obj<Part19>, ints: usize) -> amber::Result<()> {
        for i in 0..ints.clamp(2, INTS) {
            let v = tx.field_mut(o, |p| &p.vals[i])?;
            *v = v.wrapping_add(1);
        }
        Ok(())
    }
    fn build_parts(db: &mut Db, data: &GeneratedDb) -> Result<Vec<PRef<Part19>>, EngineError> {
        let mut refs = Vec::with_capacity(data.parts.len());
        let mut tx = db.begin().ctx("beginning the build")?;
        for p in &data.parts {
            let out = |slot: usize| {
                let c = data.outgoing(p.id).get(slot).copied();
                Out19 {
                    to: None,
                    kind: c.map_or([0; 10], |c| c.kind),
                    _pad: [0; 2],
                    length: c.map_or(0, |c| c.length),
                }
            };
            let mut vals = [p.y; INTS];
            vals[0] = p.x;
            let part = Part19 {
                id: p.id,
                kind: p.kind,
                _pad: [0; 2],
                vals,
                _pad2: 0,
                build: p.build,
                out: [out(0), out(1), out(2)],
            };
            refs.push(tx.alloc(part).ctx("allocating a part")?);
        }
        for p in &data.parts {
            let from: PRef<Part19> = refs[(p.id - 1) as usize];
            for (slot, c) in data.outgoing(p.id).iter().enumerate() {
                let to = (c.to as usize)
                    .checked_sub(1)
                    .and_then(|i| refs.get(i).copied())
                    .ok_or(EngineError::MissingPart { id: c.to })?;
                tx.get_mut(from).out[slot].to = Some(to);
            }
        }
        tx.commit().ctx("committing the parts")?;
        Ok(refs)
    }
    fn arrays(p: &Part19, ints: usize) -> Option<(i64, bool)> {
        Some(array_check(p, ints))
    }
}

/// What the read-back of a Figure 11 database found of its arrays, beside
/// x and y (which the reference checks): the increments of `vals[1]` over
/// the untouched last integer, summed (0 when all 19 are updated), and
/// whether every part's updated integers agree with `vals[1]` and its
/// others with the last.
pub fn array_check(p: &Part19, ints: usize) -> (i64, bool) {
    let k = ints.clamp(2, INTS);
    let y = p.vals[1];
    let last = p.vals[INTS - 1];
    let agree = p.vals[1..k].iter().all(|&v| v == y) && p.vals[k..].iter().all(|&v| v == last);
    let increments = if k < INTS {
        i64::from(y.wrapping_sub(last))
    } else {
        0
    };
    (increments, agree)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(x: i32, y: i32) -> Part19 {
        let out = || Out19 {
            to: None,
            kind: [0; 10],
            _pad: [0; 2],
            length: 0,
        };
        let mut vals = [y; INTS];
        vals[0] = x;
        Part19 {
            id: 1,
            kind: [0; 10],
            _pad: [0; 2],
            vals,
            _pad2: 0,
            build: 0,
            out: [out(), out(), out()],
        }
    }

    #[test]
    fn the_array_check_counts_updates_and_finds_partial_ones() {
        for ints in [2, 5, 19] {
            let mut p = part(10, 20);
            assert_eq!(array_check(&p, ints), (0, true));
            for _ in 0..3 {
                Fig11::update(&mut p, ints);
            }
            assert_eq!((p.vals[0], p.vals[1]), (13, 23), "x and y incremented");
            let want = if ints < INTS { 3 } else { 0 };
            assert_eq!(array_check(&p, ints), (want, true), "{ints} integers");
            // One integer past y the update should have changed, left
            // alone (x and y are the reference's to check).
            if ints > 2 {
                p.vals[ints - 1] -= 1;
                assert!(!array_check(&p, ints).1, "{ints}: a partial update found");
            }
        }
    }
}
