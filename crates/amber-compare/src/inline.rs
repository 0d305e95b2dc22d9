//! The record of the inline engines (`lmdb-inline`, `redb-inline`): a part
//! with its outgoing and incoming connections in one value keyed by its id,
//! which is what a careful LMDB or redb user storing a graph would do — a
//! traversal step is one B-tree lookup, as against two in the normalised
//! `lmdb` and `redb` engines (the part's connections, then the part).
//!
//! - bytes `0..26`: the part record of [`crate::record`] (`x`, `y`, `build`,
//!   `kind`);
//! - bytes `26..80`: the 3 outgoing connections in slot order, 18 bytes each:
//!   `to: u32 LE | kind: [u8; 10] | length: i32 LE`;
//! - bytes `80..`: the incoming connections, one `from: u32 LE` per connection
//!   ending at the part (a part connecting twice appears twice), in the order
//!   they were added ((from, slot) order).
//!
//! Records are read in place from the engine's buffer; an update or a new
//! incoming connection rewrites the whole record (82 to about 100 bytes).

use amber_bench::oo1::database::CONNECTIONS_PER_PART;
use amber_bench::oo1::{Connection, EngineError, GeneratedDb, NewPart, Part, PartId};

use crate::record::{PART_LEN, PartRef, encode_part};

/// Bytes of one outgoing connection.
const OUT_LEN: usize = 18;
/// Bytes of the outgoing connections.
const OUT_BYTES: usize = CONNECTIONS_PER_PART * OUT_LEN;
/// Where the incoming connections start: the smallest record.
pub const IN_AT: usize = PART_LEN + OUT_BYTES;

/// Appends the record of `part` with `out` and `incoming` to `buf` (cleared
/// first).
pub fn encode(buf: &mut Vec<u8>, part: &Part, out: &[Connection], incoming: &[PartId]) {
    buf.clear();
    buf.extend_from_slice(&encode_part(part));
    for c in out {
        buf.extend_from_slice(&c.to.to_le_bytes());
        buf.extend_from_slice(&c.kind);
        buf.extend_from_slice(&c.length.to_le_bytes());
    }
    for from in incoming {
        buf.extend_from_slice(&from.to_le_bytes());
    }
}

/// Adds one incoming connection, from `from`, to a record.
pub fn push_incoming(record: &mut Vec<u8>, from: PartId) {
    record.extend_from_slice(&from.to_le_bytes());
}

/// Increments `x` and `y` of a record in place.
pub fn increment(id: PartId, record: &mut [u8]) -> Result<(), EngineError> {
    let part = InlineRef::new(id, record)?.part().incremented();
    record[..PART_LEN].copy_from_slice(&part);
    Ok(())
}

/// Every record of a generated database, in id order, with the parts'
/// incoming connections: `(id, record)` through `f`, which stores it.
pub fn for_each_record(
    db: &GeneratedDb,
    mut f: impl FnMut(PartId, &[u8]) -> Result<(), EngineError>,
) -> Result<(), EngineError> {
    let incoming = db.incoming_lists();
    let mut buf = Vec::new();
    for (p, from) in db.parts.iter().zip(&incoming) {
        let out = db.outgoing(p.id);
        if out.len() != CONNECTIONS_PER_PART {
            return Err(EngineError::bad_input(format!(
                "part {} has {} connections",
                p.id,
                out.len()
            )));
        }
        encode(&mut buf, p, out, from);
        f(p.id, &buf)?;
    }
    Ok(())
}

/// The record of a new part, before any connection ends at it.
pub fn new_record(buf: &mut Vec<u8>, np: &NewPart) {
    encode(buf, &np.part, &np.connections, &[]);
}

/// A stored record, borrowed from the engine's buffer.
#[derive(Clone, Copy, Debug)]
pub struct InlineRef<'a> {
    part: &'a [u8; PART_LEN],
    /// The outgoing connections, then the incoming ones.
    connections: &'a [u8],
}

impl<'a> InlineRef<'a> {
    /// Checks the shape of a stored record.
    pub fn new(id: PartId, bytes: &'a [u8]) -> Result<InlineRef<'a>, EngineError> {
        match bytes.split_first_chunk::<PART_LEN>() {
            Some((part, connections))
                if connections.len() >= OUT_BYTES
                    && (connections.len() - OUT_BYTES).is_multiple_of(4) =>
            {
                Ok(InlineRef { part, connections })
            }
            _ => Err(EngineError::corrupt(format!(
                "part {id}: inline record of {} bytes (expected {IN_AT} + 4 per incoming connection)",
                bytes.len()
            ))),
        }
    }

    /// The part's own fields.
    #[inline]
    pub fn part(&self) -> PartRef<'a> {
        PartRef::from_array(self.part)
    }

    /// The targets of the outgoing connections, in slot order.
    #[inline]
    pub fn targets(&self) -> [PartId; CONNECTIONS_PER_PART] {
        std::array::from_fn(|slot| u32_at(self.connections, slot * OUT_LEN))
    }

    /// The parts the incoming connections come from.
    #[inline]
    pub fn incoming(&self) -> impl Iterator<Item = PartId> + 'a {
        let bytes = self.connections;
        (OUT_BYTES..bytes.len())
            .step_by(4)
            .map(move |at| u32_at(bytes, at))
    }
}

#[inline]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_bench::oo1::database::kind_value;

    #[test]
    fn records_round_trip() {
        let part = Part {
            id: 7,
            kind: kind_value(3),
            x: 5,
            y: -1,
            build: 1_300_000_000,
        };
        let conn = |to, k| Connection {
            from: 7,
            to,
            kind: kind_value(k),
            length: 40 + to as i32,
        };
        let out = [conn(100_000, 1), conn(8, 2), conn(9, 0)];
        let mut rec = Vec::new();
        encode(&mut rec, &part, &out, &[3, 4]);
        assert_eq!(rec.len(), IN_AT + 8);
        push_incoming(&mut rec, 3);
        let r = InlineRef::new(7, &rec).expect("well formed");
        assert_eq!((r.part().x(), r.part().y()), (5, -1));
        assert_eq!(*r.part().kind(), kind_value(3));
        assert_eq!(r.targets(), [100_000, 8, 9]);
        assert_eq!(r.incoming().collect::<Vec<_>>(), vec![3, 4, 3]);
        increment(7, &mut rec).expect("well formed");
        let r = InlineRef::new(7, &rec).expect("well formed");
        assert_eq!((r.part().x(), r.part().y()), (6, 0));
        assert_eq!(r.targets(), [100_000, 8, 9]);
        assert!(InlineRef::new(7, &rec[..IN_AT - 1]).is_err());
        assert!(InlineRef::new(7, &rec[..IN_AT + 2]).is_err());
    }
}
