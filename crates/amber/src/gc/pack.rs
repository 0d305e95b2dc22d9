//! Compaction: the reached objects laid out afresh in as few pages as they
//! fit in, and every reference to them rewritten.
//!
//! Objects keep their old address order — the placement the program chose
//! (`alloc_near`, the session's allocation page) is kept, only the holes
//! between objects go — and are placed as the object layer places them: an
//! object whose slot fits in a page shares single-page blocks with others,
//! a larger one gets a block of its own of exactly the pages
//! `schema::layout::pages_for` gives for its size (swizzling finds a
//! block's length from the pointer target's size). Each object keeps its
//! type, flags and bytes; its references are rewritten to the new
//! addresses, through the same descent marking used, and a buffer's spare
//! capacity is zeroed (what a `pop` left there names objects of the old
//! file; swizzling converts every element of a buffer, so it must name
//! nothing).

use super::index;
use super::mark::{Role, image_of, type_of};
use crate::error::{Error, Result};
use crate::format::PageNo;
use crate::format::bytes::{get_u64, put_u32, put_u64};
use crate::format::home::Home;
use crate::format::objects::{OBJECT_HEADER, align_up, encode_header, slot_size};
use crate::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use crate::inspect::deep::Types;
use crate::inspect::deep::map::{Blocks, ObjectMap, Start};
use crate::inspect::deep::visit::{self, Slots};
use crate::schema::desc::{Shape, StoredKind, StoredType};
use crate::schema::evolve::Plan;
use crate::schema::layout::{is_large, pages_for};

/// A data block of the compacted file.
#[derive(Debug)]
pub(super) struct NewBlock {
    pub head: PageNo,
    pub pages: u32,
    /// Its objects, by position in the map of starts, in order.
    pub objects: Vec<usize>,
}

/// Where every kept object goes.
#[derive(Debug)]
pub(super) struct Layout {
    /// The new body address of each object, by position in the map of
    /// starts (0: not kept).
    pub fwd: Vec<u64>,
    /// The new data blocks, in page order.
    pub blocks: Vec<NewBlock>,
}

/// Lays out the objects that have a role, from page `first` on, each of
/// the size `plan` gives it (its own without a migration).
pub(super) fn layout(
    map: &ObjectMap,
    roles: &[Option<Role<'_>>],
    first: PageNo,
    plan: Option<&Plan<'_>>,
) -> Layout {
    let ps = map.page_size;
    let mut fwd = vec![0u64; roles.len()];
    let mut blocks: Vec<NewBlock> = Vec::new();
    let mut next = first;
    // The single-page block being filled (its position in `blocks`) and
    // the end of its object area.
    let mut open: Option<(usize, u64)> = None;
    for (i, _) in roles.iter().enumerate().filter(|(_, r)| r.is_some()) {
        let s = &map.starts[i];
        let size = u64::from(plan.map_or(s.size, |p| p.new_size(s.type_id(), s.size)));
        if is_large(size, ps as usize) {
            let pages = pages_for(size, ps as usize);
            fwd[i] = next * ps + (HEADER_SIZE + OBJECT_HEADER) as u64;
            blocks.push(NewBlock {
                head: next,
                pages,
                objects: vec![i],
            });
            next += u64::from(pages);
            continue;
        }
        let slot = slot_size(size as usize) as u64;
        let (b, used) = match open {
            Some((b, used)) if used + slot <= ps => (b, used),
            _ => {
                blocks.push(NewBlock {
                    head: next,
                    pages: 1,
                    objects: Vec::new(),
                });
                next += 1;
                (blocks.len() - 1, HEADER_SIZE as u64)
            }
        };
        let nb = &mut blocks[b];
        fwd[i] = nb.head * ps + used + OBJECT_HEADER as u64;
        nb.objects.push(i);
        open = Some((b, used + slot));
    }
    Layout { fwd, blocks }
}

/// What the new file's objects are read as: the stored types, or a
/// migration's plan and the types after it.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    /// Types by id as the new file has them.
    pub types: &'a Types,
    /// The migration, if one is carried.
    pub plan: Option<&'a Plan<'a>>,
}

/// Builds the sealed image of the new block `nb`: each of its objects
/// copied from its old block (read through `blocks`), converted to the new
/// layout if `to` carries a migration, and its references rewritten by
/// `layout`. `lsn` is the checkpoint LSN the compacted file carries.
pub(super) fn build_block(
    nb: &NewBlock,
    map: &ObjectMap,
    to: Target<'_>,
    roles: &[Option<Role<'_>>],
    layout: &Layout,
    blocks: &mut Blocks<'_>,
    lsn: u64,
) -> Result<Vec<u8>> {
    let ps = map.page_size;
    let mut img = vec![0u8; nb.pages as usize * ps as usize];
    page::format(&mut img, BlockKind::Data, nb.head, nb.pages);
    let mut used = HEADER_SIZE;
    for &i in &nb.objects {
        let s = map.starts[i];
        let at = (layout.fwd[i] - nb.head * ps) as usize;
        let Some((old, off)) = image_of(map, blocks, &s) else {
            blocks.result()?;
            return Err(Error::internal(format!(
                "collect: the block of object {:#x} could not be read again",
                s.addr
            )));
        };
        let old = &old[off..off + s.size as usize];
        let role =
            roles[i].ok_or_else(|| Error::internal("collect: laid out an unmarked object"))?;
        let (old, role) = match to
            .plan
            .and_then(|p| p.conversion(s.type_id()).map(|e| (p, e)))
        {
            None => (std::borrow::Cow::Borrowed(old), role),
            Some((plan, entry)) => {
                let converted = plan.convert(s.type_id(), old).map_err(|what| {
                    Error::internal(format!("migrate: object {:#x}: {what}", s.addr))
                })?;
                (converted.into(), converted_role(role, &entry.new))
            }
        };
        let size = old.len();
        img[at - OBJECT_HEADER..at].copy_from_slice(&encode_header(
            s.type_id(),
            s.flags(),
            size as u32,
        ));
        let new = &mut img[at..at + size];
        new.copy_from_slice(&old);
        rewrite(new, &old, role, &s, to.types, map.home, |v| {
            forward(map, layout, v)
        })
        .map_err(|what| Error::internal(format!("collect: object {:#x}: {what}", s.addr)))?;
        used = at + align_up(size);
    }
    put_u32(&mut img, USED_OFFSET, used as u32);
    page::seal(&mut img, lsn);
    Ok(img)
}

/// The role of a converted object: a buffer's elements are now of its
/// array type's new element kind.
fn converted_role<'a>(role: Role<'a>, new: &'a StoredType) -> Role<'a> {
    match (role, &new.shape) {
        (Role::Buffer { len, .. }, Shape::Array(elem)) => Role::Buffer {
            elem,
            elem_size: new.size,
            len,
        },
        (r, _) => r,
    }
}

/// The new address of the object whose old body address is `v`.
fn forward(map: &ObjectMap, layout: &Layout, v: u64) -> std::result::Result<u64, String> {
    map.start_index(v)
        .map(|i| layout.fwd[i])
        .filter(|&a| a != 0)
        .ok_or_else(|| format!("a reference to {v:#x}, which marking did not reach"))
}

/// Offsets of the reference words of a value: pointer slots, vector buffer
/// pointers, index root pointers; and whether each is stored in the
/// database's encoding (`PRef`s and buffers) rather than as a persistent
/// address (`Smart`s and index roots: `format/home.rs`).
#[derive(Default)]
struct Recorder {
    at: Vec<(usize, bool)>,
}

impl<'a> Slots<'a> for Recorder {
    fn pointer(&mut self, _: &[u8], at: usize, kind: &'a StoredKind) {
        self.at.push((at, matches!(kind, StoredKind::Ref { .. })));
    }

    fn vector(&mut self, _: &[u8], at: usize, _: &'a StoredKind, _: u32) {
        self.at.push((at, true));
    }

    fn index(&mut self, _: &[u8], at: usize, _: &'a StoredKind) {
        self.at.push((at, false));
    }
}

/// Rewrites the references of one object (`new`, a copy of `old`) reached
/// as `role`.
fn rewrite(
    new: &mut [u8],
    old: &[u8],
    role: Role<'_>,
    s: &Start,
    types: &Types,
    home: Home,
    mut fwd: impl FnMut(u64) -> std::result::Result<u64, String>,
) -> std::result::Result<(), String> {
    let mut rec = Recorder::default();
    match role {
        Role::Object => {
            let t = type_of(types, s)?;
            match &t.shape {
                Shape::Struct(fields) => visit::fields(&mut rec, old, 0, fields),
                Shape::Array(elem) => {
                    let n = old.len() as u64 / u64::from(t.size.max(1));
                    visit::elements(&mut rec, old, n, elem, t.size);
                }
            }
        }
        Role::Buffer {
            elem,
            elem_size,
            len,
        } => {
            visit::elements(&mut rec, old, u64::from(len), elem, elem_size);
            let live = (u64::from(len) * u64::from(elem_size)).min(new.len() as u64) as usize;
            new[live..].fill(0);
        }
        Role::Node => return index::relocate(new, fwd),
    }
    for (at, encoded) in rec.at {
        if let Some(v) = get_u64(new, at).filter(|&v| v != 0) {
            let moved = if encoded {
                home.stored(fwd(home.paddr(v))?)?
            } else {
                fwd(v)?
            };
            put_u64(new, at, moved);
        }
    }
    Ok(())
}
