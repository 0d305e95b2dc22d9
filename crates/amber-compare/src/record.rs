//! Fixed-size byte records shared by the `lmdb` and `redb` engines. Records are
//! read in place (zero-copy) from the engine's buffer: a field is decoded only
//! when it is used, with no allocation.
//!
//! - part (26 bytes): `x: i32 LE | y: i32 LE | build: i64 LE | kind: [u8; 10]`
//! - outgoing connection (19 bytes): `slot: u8 | to: u32 BE | kind: [u8; 10] | length: i32 LE`;
//!   stored as a sorted duplicate of its `from` key, so the leading slot keeps
//!   them in slot order.
//! - incoming connection (5 bytes): `from: u32 BE | slot: u8`, a sorted duplicate
//!   of its `to` key.

use amber_bench::oo1::{Connection, EngineError, Kind, Part, PartId};

pub const PART_LEN: usize = 26;
pub const OUT_LEN: usize = 19;
pub const IN_LEN: usize = 5;

pub fn encode_part(p: &Part) -> [u8; PART_LEN] {
    let mut r = [0u8; PART_LEN];
    r[0..4].copy_from_slice(&p.x.to_le_bytes());
    r[4..8].copy_from_slice(&p.y.to_le_bytes());
    r[8..16].copy_from_slice(&p.build.to_le_bytes());
    r[16..26].copy_from_slice(&p.kind);
    r
}

/// A part record, borrowed from the engine's buffer.
#[derive(Clone, Copy, Debug)]
pub struct PartRef<'a>(&'a [u8; PART_LEN]);

impl<'a> PartRef<'a> {
    /// Checks the length of a stored part record.
    pub fn new(id: PartId, bytes: &'a [u8]) -> Result<PartRef<'a>, EngineError> {
        bytes.try_into().map(PartRef).map_err(|_| {
            EngineError::corrupt(format!(
                "part {id}: record of {} bytes, expected {PART_LEN}",
                bytes.len()
            ))
        })
    }

    /// A part record of the right type already.
    pub fn from_array(bytes: &'a [u8; PART_LEN]) -> PartRef<'a> {
        PartRef(bytes)
    }

    #[inline]
    pub fn x(&self) -> i32 {
        i32::from_le_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    #[inline]
    pub fn y(&self) -> i32 {
        i32::from_le_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    #[inline]
    pub fn kind(&self) -> &'a Kind {
        let kind: &[u8; 10] = self.0[16..26].try_into().unwrap_or(&[0; 10]);
        kind
    }

    /// The record with `x` and `y` incremented by 1.
    pub fn incremented(&self) -> [u8; PART_LEN] {
        let mut r = *self.0;
        r[0..4].copy_from_slice(&(self.x() + 1).to_le_bytes());
        r[4..8].copy_from_slice(&(self.y() + 1).to_le_bytes());
        r
    }
}

pub fn encode_out(slot: u8, c: &Connection) -> [u8; OUT_LEN] {
    let mut r = [0u8; OUT_LEN];
    r[0] = slot;
    r[1..5].copy_from_slice(&c.to.to_be_bytes());
    r[5..15].copy_from_slice(&c.kind);
    r[15..19].copy_from_slice(&c.length.to_le_bytes());
    r
}

/// The target of a stored outgoing connection.
pub fn out_target(from: PartId, bytes: &[u8]) -> Result<PartId, EngineError> {
    match bytes {
        [_, a, b, c, d, ..] if bytes.len() == OUT_LEN => {
            Ok(PartId::from_be_bytes([*a, *b, *c, *d]))
        }
        _ => Err(EngineError::corrupt(format!(
            "part {from}: outgoing connection of {} bytes, expected {OUT_LEN}",
            bytes.len()
        ))),
    }
}

pub fn encode_in(from: PartId, slot: u8) -> [u8; IN_LEN] {
    let mut r = [0u8; IN_LEN];
    r[0..4].copy_from_slice(&from.to_be_bytes());
    r[4] = slot;
    r
}

/// The source of a stored incoming connection.
pub fn in_source(to: PartId, bytes: &[u8]) -> Result<PartId, EngineError> {
    match bytes {
        [a, b, c, d, _] => Ok(PartId::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(EngineError::corrupt(format!(
            "part {to}: incoming connection of {} bytes, expected {IN_LEN}",
            bytes.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_bench::oo1::database::kind_value;

    #[test]
    fn records_round_trip() {
        let p = Part {
            id: 7,
            kind: kind_value(3),
            x: 99_999,
            y: 0,
            build: 1_300_000_000,
        };
        let r = encode_part(&p);
        let v = PartRef::new(7, &r).expect("right length");
        assert_eq!((v.x(), v.y(), *v.kind()), (99_999, 0, kind_value(3)));
        let inc = v.incremented();
        let w = PartRef::from_array(&inc);
        assert_eq!((w.x(), w.y(), *w.kind()), (100_000, 1, kind_value(3)));
        assert!(PartRef::new(7, &r[..20]).is_err());

        let c = Connection {
            from: 7,
            to: 123_456,
            kind: kind_value(1),
            length: 42,
        };
        assert_eq!(out_target(7, &encode_out(2, &c)).expect("valid"), 123_456);
        assert!(out_target(7, &[0; 4]).is_err());
        assert_eq!(in_source(9, &encode_in(77, 1)).expect("valid"), 77);
        assert!(encode_out(0, &c) < encode_out(1, &c));
        assert!(encode_in(1, 2) < encode_in(2, 0));
    }
}
