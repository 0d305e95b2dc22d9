//! The node format of a `PIndex` B+tree: slotted nodes holding their keys'
//! bytes, read and changed in place. `docs/design.md` ("Index nodes") has
//! the layout byte by byte; in short:
//!
//! ```text
//! [0..2)    count: entries (leaf) or keys (inner), u16 LE
//! [2]       kind: 1 leaf, 2 inner (anything else is refused)
//! [3]       0
//! [4..6)    heap: offset of the lowest key byte, u16 LE (NODE_BYTES if none)
//! [6..8)    garbage: heap bytes no slot uses (left by removals), u16 LE
//! [8..16)   inner: child 0 (persistent address, LE); leaf: 0
//! [16..)    count slots of 16 bytes, in key order:
//!             [0..4)  the key's first 4 bytes, zero-padded (a prefix that
//!                     decides most comparisons without touching the heap)
//!             [4..6)  key offset in the node, u16 LE
//!             [6..8)  key length, u16 LE
//!             [8..16) leaf: the value's persistent address; inner: the
//!                     child right of this key (keys >= it), LE
//! heap      key bytes, growing down from the node's end
//! ```
//!
//! Everything here works on the node's bytes alone, so that the database
//! (which reports a violation as `Error::Corrupt` naming the page) and deep
//! verification (which reports a finding) share it. A node's header is
//! checked once when it is read ([`header`]); each key is checked as it is
//! read ([`key`]); so a damaged node yields an error, never a read outside
//! it.

use std::cmp::Ordering;

/// u64 words per node object (nodes are stored as `[u64]` arrays: a type
/// that says they hold no pointers to swizzle).
pub(crate) const WORDS: usize = 507;
/// Bytes per node: with the page and object headers, a 4 KiB page.
pub(crate) const NODE_BYTES: usize = WORDS * 8;
/// Header bytes.
const HDR: usize = 16;
/// Bytes per slot.
const SLOT: usize = 16;
/// Bytes a node can give to slots and keys.
const BODY: usize = NODE_BYTES - HDR;
/// The longest encoded key: three entries of this size fit in a node, so a
/// split always leaves both halves room for the entry that caused it.
pub(crate) const MAX_KEY: usize = 1024;
/// An entry of a node: its key and its value (leaf) or right child
/// (inner).
pub(crate) type Entry<'a> = (&'a [u8], u64);
/// Node kinds (byte 2).
const KIND_LEAF: u8 = 1;
const KIND_INNER: u8 = 2;

/// A node's header, checked: its slots lie below its heap, its heap within
/// the node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub count: usize,
    pub leaf: bool,
    heap: usize,
    garbage: usize,
    /// Inner nodes: the leftmost child.
    pub child0: u64,
}

fn u16_at(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u16(b: &mut [u8], at: usize, v: usize) {
    b[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The header of node bytes `b` (`NODE_BYTES` long), or what is wrong.
pub(crate) fn header(b: &[u8]) -> Result<Header, String> {
    if b.len() != NODE_BYTES {
        return Err(format!("it is {} bytes, not {NODE_BYTES}", b.len()));
    }
    let leaf = match b[2] {
        KIND_LEAF => true,
        KIND_INNER => false,
        k => return Err(format!("its kind byte is {k}, neither leaf (1) nor inner (2)")),
    };
    let count = u16_at(b, 0);
    let heap = u16_at(b, 4);
    let garbage = u16_at(b, 6);
    if HDR + count * SLOT > heap || heap > NODE_BYTES || garbage > NODE_BYTES - heap {
        return Err(format!(
            "its {count} slots, key heap at {heap} and {garbage} garbage bytes do not fit in a node"
        ));
    }
    let child0 = u64_at(b, 8);
    if !leaf && child0 == 0 {
        return Err("child 0 is null".into());
    }
    Ok(Header {
        count,
        leaf,
        heap,
        garbage,
        child0,
    })
}

/// The byte offsets in node `b` of the persistent addresses it holds (an
/// inner node's children, child 0 first; a leaf's values), with its
/// header: what the collector relocates.
pub(crate) fn address_offsets(b: &[u8]) -> Result<(Header, Vec<usize>), String> {
    let h = header(b)?;
    let mut at = Vec::with_capacity(h.count + 1);
    if !h.leaf {
        at.push(8);
    }
    at.extend((0..h.count).map(|i| HDR + i * SLOT + 8));
    Ok((h, at))
}

/// The unused bytes between node `b`'s slots and its key heap (what
/// removals left there may be old addresses: the collector zeroes them).
pub(crate) fn gap(h: &Header) -> std::ops::Range<usize> {
    HDR + h.count * SLOT..h.heap
}

/// The value (leaf) or right child (inner) of slot `i < count`.
pub(crate) fn value(b: &[u8], i: usize) -> u64 {
    u64_at(b, HDR + i * SLOT + 8)
}

/// Child `j <= count` of an inner node.
pub(crate) fn child(b: &[u8], h: &Header, j: usize) -> u64 {
    if j == 0 { h.child0 } else { value(b, j - 1) }
}

/// The key of slot `i < count`, checked to lie in the heap.
pub(crate) fn key<'b>(b: &'b [u8], h: &Header, i: usize) -> Result<&'b [u8], String> {
    let s = HDR + i * SLOT;
    let (off, len) = (u16_at(b, s + 4), u16_at(b, s + 6));
    if off < h.heap || off + len > NODE_BYTES {
        return Err(format!(
            "key {i} ({len} bytes at {off}) lies outside the key heap ({}..{NODE_BYTES})",
            h.heap
        ));
    }
    Ok(&b[off..off + len])
}

/// The first four bytes of `key`, zero-padded, as a number that orders like
/// them: a smaller prefix means a smaller key.
fn prefix(key: &[u8]) -> u32 {
    let mut p = [0u8; 4];
    let n = key.len().min(4);
    p[..n].copy_from_slice(&key[..n]);
    u32::from_be_bytes(p)
}

/// Where `key` is among the node's keys: `Ok(i)` at slot `i`, `Err(i)` if
/// it would go at slot `i`.
pub(crate) fn search(b: &[u8], h: &Header, key: &[u8]) -> Result<Result<usize, usize>, String> {
    let p = prefix(key);
    let (mut lo, mut hi) = (0, h.count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let sp = u32::from_be_bytes(b[HDR + mid * SLOT..][..4].try_into().expect("4 bytes"));
        let ord = match sp.cmp(&p) {
            Ordering::Equal => self::key(b, h, mid)?.cmp(key),
            o => o,
        };
        match ord {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(Ok(mid)),
        }
    }
    Ok(Err(lo))
}

/// Which child of an inner node holds `key`: the number of keys <= it.
pub(crate) fn child_for(b: &[u8], h: &Header, key: &[u8]) -> Result<usize, String> {
    Ok(match search(b, h, key)? {
        Ok(i) => i + 1,
        Err(i) => i,
    })
}

/// Makes `b` an empty node.
pub(crate) fn init(b: &mut [u8], leaf: bool, child0: u64) {
    b[..HDR].fill(0);
    b[2] = if leaf { KIND_LEAF } else { KIND_INNER };
    put_u16(b, 4, NODE_BYTES);
    put_u64(b, 8, child0);
}

/// Sets the value (leaf) or right child (inner) of slot `i`.
pub(crate) fn set_value(b: &mut [u8], i: usize, v: u64) {
    put_u64(b, HDR + i * SLOT + 8, v);
}

/// Sets child 0 of an inner node.
pub(crate) fn set_child0(b: &mut [u8], v: u64) {
    put_u64(b, 8, v);
}

/// Bytes an entry with a key of `len` bytes takes.
fn cost(len: usize) -> usize {
    SLOT + len
}

/// Inserts `(key, v)` at slot `i` if the node has room (compacting the heap
/// first if only its garbage makes room); `false` if it must split.
pub(crate) fn insert(b: &mut [u8], i: usize, key: &[u8], v: u64) -> Result<bool, String> {
    let mut h = header(b)?;
    let slots_end = HDR + h.count * SLOT;
    if h.heap - slots_end < cost(key.len()) {
        if h.heap - slots_end + h.garbage < cost(key.len()) {
            return Ok(false);
        }
        compact(b)?;
        h = header(b)?;
    }
    let heap = h.heap - key.len();
    b[heap..h.heap].copy_from_slice(key);
    let at = HDR + i * SLOT;
    b.copy_within(at..HDR + h.count * SLOT, at + SLOT);
    write_slot(b, i, key, heap, v);
    put_u16(b, 0, h.count + 1);
    put_u16(b, 4, heap);
    Ok(true)
}

fn write_slot(b: &mut [u8], i: usize, key: &[u8], off: usize, v: u64) {
    let at = HDR + i * SLOT;
    b[at..at + 4].copy_from_slice(&prefix(key).to_be_bytes());
    put_u16(b, at + 4, off);
    put_u16(b, at + 6, key.len());
    put_u64(b, at + 8, v);
}

/// Removes slot `i`; its key bytes become garbage.
pub(crate) fn remove(b: &mut [u8], i: usize) -> Result<(), String> {
    let h = header(b)?;
    let len = key(b, &h, i)?.len();
    let at = HDR + i * SLOT;
    b.copy_within(at + SLOT..HDR + h.count * SLOT, at);
    put_u16(b, 0, h.count - 1);
    put_u16(b, 6, h.garbage + len);
    Ok(())
}

/// Removes child `j` of an inner node, with the key beside it (child 0
/// takes child 1's place). `false` if it was the only child: the node is
/// then left as it was, and must go.
pub(crate) fn remove_child(b: &mut [u8], j: usize) -> Result<bool, String> {
    let h = header(b)?;
    if h.count == 0 {
        return Ok(false);
    }
    if j == 0 {
        set_child0(b, value(b, 0));
        remove(b, 0)?;
    } else {
        remove(b, j - 1)?;
    }
    Ok(true)
}

/// The node's entries: its keys and values (children), borrowed from `b`
/// (a copy, when the node is to be rewritten from them).
pub(crate) fn entries(b: &[u8]) -> Result<(Header, Vec<Entry<'_>>), String> {
    let h = header(b)?;
    let e = (0..h.count)
        .map(|i| Ok((key(b, &h, i)?, value(b, i))))
        .collect::<Result<_, String>>()?;
    Ok((h, e))
}

/// Rewrites `b` as a node holding `entries` (which must fit), its heap
/// without garbage.
pub(crate) fn build(b: &mut [u8], leaf: bool, child0: u64, entries: &[Entry<'_>]) {
    init(b, leaf, child0);
    let mut heap = NODE_BYTES;
    for (i, (k, v)) in entries.iter().enumerate() {
        heap -= k.len();
        b[heap..heap + k.len()].copy_from_slice(k);
        write_slot(b, i, k, heap, *v);
    }
    put_u16(b, 0, entries.len());
    put_u16(b, 4, heap);
}

/// Rewrites the node without its heap's garbage.
fn compact(b: &mut [u8]) -> Result<(), String> {
    let copy = b.to_vec();
    let (h, e) = entries(&copy)?;
    build(b, h.leaf, h.child0, &e);
    Ok(())
}

/// Whether `entries` fit in one node.
pub(crate) fn fits(entries: &[Entry<'_>]) -> bool {
    entries.iter().map(|(k, _)| cost(k.len())).sum::<usize>() <= BODY
}

/// Where to split `entries` (one more than a full node holds): the index
/// that halves their bytes, kept so that each side has at least one entry
/// (`min_right` of them on the right: 1 for a leaf, 2 for an inner node,
/// whose first right entry moves up).
pub(crate) fn split_point(entries: &[Entry<'_>], min_right: usize) -> usize {
    let total: usize = entries.iter().map(|(k, _)| cost(k.len())).sum();
    let mut acc = 0;
    let mut m = entries.len();
    for (j, (k, _)) in entries.iter().enumerate() {
        if acc + cost(k.len()) / 2 >= total / 2 {
            m = j;
            break;
        }
        acc += cost(k.len());
    }
    m.clamp(1, entries.len().saturating_sub(min_right).max(1))
}

/// The shortest separator `s` with `left < s <= right` (for `left < right`):
/// `right` cut one byte past where it departs from `left`. Shorter
/// separators make inner nodes hold more of them.
pub(crate) fn separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}
