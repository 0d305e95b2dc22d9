//! The body of a ranges record (kind 9, log format version 3): many byte
//! ranges of one transaction in one record.
//!
//! A range record of version 2 (kind 1) carries one range and costs 24
//! bytes beyond its images; a transaction that changes many small fields
//! far apart (OO7's T2b: 8 bytes of each of 10,000 parts, 80 bytes apart)
//! paid those 24 bytes per field. A ranges record pays its header once, and
//! each further range four bytes:
//!
//! ```text
//!   record header (record.rs): crc, kind 9, flags (bit 0: before-images),
//!                              len = bytes of the body, txid u32,
//!                              addr u64 = address of the first range
//!   body:
//!     first range   len u16, after-image (len bytes), before-image (len
//!                   bytes) if flag 1; it starts at addr
//!     each further  gap u16, len u16, after-image, before-image if flag 1;
//!                   it starts `gap` bytes after the end of the range before
//!   trailer: total u32
//! ```
//!
//! Ranges are in ascending address order and never overlap (a gap may be
//! 0); every `len` is at least 1; the entries fill the body exactly, and
//! the last range ends at or below `u64::MAX`. [`check`] holds a body to
//! this before a scan accepts the record, so every consumer iterates a
//! well-formed body and computes addresses without overflow.
//!
//! What a ranges record costs: [`RECORD`] bytes (its 20-byte header and
//! 4-byte trailer, less the two bytes of gap its first range does not
//! carry) plus, per range, [`ENTRY`] bytes and its images. So a record of
//! `m` ranges covering `c` bytes with `k` images each costs
//! `RECORD + ENTRY · m + k · c`: the cost model of the minimal-log rule
//! (`coalesce.rs`).

use crate::format::PAddr;

/// What a ranges record costs beyond its ranges' entries: its header and
/// trailer (24 bytes) less the gap field its first range does without.
pub const RECORD: usize = super::record::RANGE_AFTER + super::record::TRAILER - 2;
/// What each range of a ranges record costs beyond its images: a length
/// and a gap (for the first, the length and the two bytes [`RECORD`]
/// leaves out).
pub const ENTRY: usize = 4;
/// The most body bytes a ranges record holds (its `len` is a u16).
pub const MAX_BODY: usize = u16::MAX as usize;
/// The longest range a ranges record holds alone, with `images` images
/// per byte: the body's first entry is its two-byte length and its images.
pub const fn max_range(images: usize) -> usize {
    (MAX_BODY - 2) / images
}

/// One range of a ranges record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeImage<'a> {
    /// First byte changed.
    pub addr: PAddr,
    /// Offset of the after-image in the body.
    pub at: usize,
    /// New bytes.
    pub after: &'a [u8],
    /// Old bytes, when logged before commit.
    pub before: Option<&'a [u8]>,
}

/// The ranges of the body `body` of a record whose first range starts at
/// `addr`, with before-images when `before`. A body [`check`] refused
/// yields its ranges up to the first malformed entry.
pub fn iter(addr: PAddr, before: bool, body: &[u8]) -> impl Iterator<Item = RangeImage<'_>> + '_ {
    let k = if before { 2 } else { 1 };
    let (mut at, mut end) = (0usize, Some(addr));
    std::iter::from_fn(move || {
        let gap = match at {
            0 => 0,
            _ => u16_at(body, at)?,
        };
        let head = if at == 0 { 2 } else { 4 };
        let len = u16_at(body, at + head - 2)? as usize;
        let start = end?.checked_add(u64::from(gap))?;
        let images = body.get(at + head..at + head + k * len)?;
        if len == 0 {
            return None;
        }
        let (after, old) = images.split_at(len);
        let r = RangeImage {
            addr: start,
            at: at + head,
            after,
            before: before.then_some(old),
        };
        end = start.checked_add(len as u64);
        at += head + k * len;
        Some(r)
    })
}

/// Whether `body` is a well-formed body (module docs) for a record whose
/// first range starts at `addr`: its entries fill it exactly, every range
/// is at least a byte long, and the last ends at or below `u64::MAX`.
pub fn check(addr: PAddr, before: bool, body: &[u8]) -> bool {
    let k = if before { 2 } else { 1 };
    let (mut at, mut end) = (0usize, addr);
    while at < body.len() {
        let head = if at == 0 { 2 } else { 4 };
        let (Some(len), Some(gap)) = (
            u16_at(body, at + head - 2),
            if at == 0 { Some(0) } else { u16_at(body, at) },
        ) else {
            return false;
        };
        let Some(e) = end
            .checked_add(u64::from(gap))
            .and_then(|s| s.checked_add(u64::from(len)))
        else {
            return false;
        };
        if len == 0 {
            return false;
        }
        end = e;
        at += head + k * len as usize;
    }
    at == body.len() && !body.is_empty()
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

/// A ranges record's body being built: ranges are added while they follow
/// the last one (ascending, within a u16 gap) and the body has room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    /// Address of the first range.
    pub addr: PAddr,
    /// Whether every range carries its before-image.
    pub before: bool,
    /// The encoded entries.
    pub bytes: Vec<u8>,
    /// Ranges in it.
    pub count: usize,
    /// End of the last range.
    end: u64,
}

impl Body {
    /// A body holding the range `after` (with `before`, its old bytes) at
    /// `addr`; `None` if the range is empty, longer than a record holds
    /// alone ([`max_range`]) or ends past `u64::MAX`.
    pub fn new(addr: PAddr, after: &[u8], before: Option<&[u8]>) -> Option<Body> {
        let k = if before.is_some() { 2 } else { 1 };
        if after.is_empty() || after.len() > max_range(k) || before.is_some_and(|b| b.len() != after.len()) {
            return None;
        }
        let end = addr.checked_add(after.len() as u64)?;
        let mut bytes = Vec::with_capacity(2 + k * after.len());
        bytes.extend_from_slice(&(after.len() as u16).to_le_bytes());
        bytes.extend_from_slice(after);
        bytes.extend_from_slice(before.unwrap_or(&[]));
        Some(Body {
            addr,
            before: before.is_some(),
            bytes,
            count: 1,
            end,
        })
    }

    /// Adds the range `after` (with `before`) at `addr` if it can follow
    /// the last one in this record: the same images, at or after its end
    /// and at most `u16::MAX` bytes after it, and room in the body.
    pub fn push(&mut self, addr: PAddr, after: &[u8], before: Option<&[u8]>) -> bool {
        let k = if self.before { 2 } else { 1 };
        let fits = before.is_some() == self.before
            && before.is_none_or(|b| b.len() == after.len())
            && !after.is_empty()
            && after.len() <= u16::MAX as usize
            && addr >= self.end
            && addr - self.end <= u64::from(u16::MAX)
            && self.bytes.len() + ENTRY + k * after.len() <= MAX_BODY;
        let Some(end) = fits.then(|| addr.checked_add(after.len() as u64)).flatten() else {
            return false;
        };
        self.bytes.extend_from_slice(&((addr - self.end) as u16).to_le_bytes());
        self.bytes.extend_from_slice(&(after.len() as u16).to_le_bytes());
        self.bytes.extend_from_slice(after);
        self.bytes.extend_from_slice(before.unwrap_or(&[]));
        self.count += 1;
        self.end = end;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(ranges: &[(u64, &[u8])]) -> Body {
        let mut b = Body::new(ranges[0].0, ranges[0].1, None).expect("first");
        for &(a, d) in &ranges[1..] {
            assert!(b.push(a, d, None), "range at {a}");
        }
        b
    }

    #[test]
    fn ranges_come_back_in_order() {
        let b = body(&[(100, b"ab"), (110, b"c"), (111, b"defg"), (60_000, b"h")]);
        assert!(check(b.addr, false, &b.bytes));
        let got: Vec<(u64, &[u8])> = iter(b.addr, false, &b.bytes).map(|r| (r.addr, r.after)).collect();
        assert_eq!(
            got,
            vec![(100, &b"ab"[..]), (110, b"c"), (111, b"defg"), (60_000, b"h")]
        );
        // Cost: RECORD + ENTRY per range + the bytes.
        let whole = super::super::record::RANGE_AFTER + b.bytes.len() + super::super::record::TRAILER;
        assert_eq!(whole, RECORD + 4 * ENTRY + 8);
    }

    #[test]
    fn what_cannot_follow_is_refused() {
        let mut b = body(&[(1000, b"xy")]);
        assert!(!b.push(1001, b"z", None), "overlaps");
        assert!(!b.push(900, b"z", None), "descends");
        assert!(!b.push(1002 + 65_536, b"z", None), "gap past u16");
        assert!(!b.push(1002, b"z", Some(b"w")), "other images");
        assert!(!b.push(1002, b"", None), "empty");
        assert!(b.push(1002 + 65_535, b"z", None));
        assert!(Body::new(1, &vec![0; max_range(1) + 1], None).is_none());
        assert!(Body::new(u64::MAX, b"a", None).is_none(), "ends past 2^64");
        let mut full = Body::new(0, &vec![1; max_range(1) - 10], None).expect("fits alone");
        assert!(!full.push(70_000, &[1; 7], None), "no room");
        assert!(full.push(70_000, &[1; 6], None));
        assert_eq!(full.bytes.len(), MAX_BODY);
    }

    #[test]
    fn before_images_ride_with_each_range() {
        let mut b = Body::new(10, b"new", Some(b"old")).expect("first");
        assert!(b.push(20, b"N", Some(b"O")));
        assert!(check(10, true, &b.bytes));
        assert!(!check(10, false, &b.bytes));
        let got: Vec<_> = iter(10, true, &b.bytes).map(|r| (r.addr, r.after, r.before)).collect();
        assert_eq!(
            got,
            vec![(10, &b"new"[..], Some(&b"old"[..])), (20, b"N", Some(b"O"))]
        );
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let b = body(&[(100, b"ab"), (110, b"c")]);
        assert!(!check(100, false, &[]));
        assert!(!check(100, false, &b.bytes[..b.bytes.len() - 1]), "short");
        let mut long = b.bytes.clone();
        long.push(0);
        assert!(!check(100, false, &long), "a byte left over");
        let mut zero = b.bytes.clone();
        zero[0] = 0; // the first range's length
        zero[1] = 0;
        assert!(!check(100, false, &zero), "empty range");
        // The last range would end past 2^64.
        assert!(!check(u64::MAX - 5, false, &b.bytes));
        assert!(check(u64::MAX - 11, false, &b.bytes));
        assert_eq!(iter(u64::MAX - 5, false, &b.bytes).count(), 1);
    }
}
