//! Adding parts and their connections inside a transaction: the database
//! build and the insert operation share it.
//!
//! Parts are added in id order, each where the allocator places new objects
//! (the current page), with its three outgoing connections inline. A part's
//! incoming vector is allocated at the first connection that ends at it,
//! which for most parts is when the part itself is added (the connections
//! from lower ids are waiting for it), so the vector's first buffer lands
//! near the part too.
//!
//! A connection to a part that is not allocated yet (a higher id) is left
//! without a target until the target arrives; the target then sets it and adds
//! the from-part to its incoming vector. So incoming vectors list their
//! from-parts in (from, slot) order, as `memory`'s do.

use std::collections::HashMap;

use amber::{PRef, PVec, Tx};

use super::schema::{CHUNK, Chunk, Out, Part, Root};
use crate::oo1::database::{NewPart, PartId};
use crate::oo1::engine::{EngineError, ResultExt};

/// Connections (from-part, slot) waiting for their target part.
#[derive(Default)]
pub(super) struct Loader {
    pending: HashMap<PartId, Vec<(PRef<Part>, usize)>>,
}

impl Loader {
    /// Adds `np` as the next part (its id must follow the last one) with its
    /// connections; targets above its id must be added later by this loader.
    pub(super) fn add(
        &mut self,
        tx: &mut Tx<'_>,
        root: PRef<Root>,
        np: &NewPart,
    ) -> Result<PRef<Part>, EngineError> {
        let p = &np.part;
        let next = tx.get(root).parts + 1;
        if u64::from(p.id) != next {
            return Err(EngineError::bad_input(format!(
                "part {} added where part {next} was expected",
                p.id
            )));
        }
        let mut out = [Out {
            to: None,
            kind: [0; 10],
            _pad: [0; 2],
            length: 0,
        }; 3];
        let mut targets = [None; 3];
        for (slot, c) in np.connections.iter().enumerate() {
            // No part connects to itself: a target at or below this id exists.
            if c.to < p.id {
                targets[slot] = Some(part_ref(tx, root, c.to)?);
            }
            out[slot] = Out {
                to: targets[slot],
                kind: c.kind,
                _pad: [0; 2],
                length: c.length,
            };
        }
        let part = tx
            .alloc(Part {
                id: p.id,
                kind: p.kind,
                _pad: [0; 2],
                x: p.x,
                y: p.y,
                build: p.build,
                out,
                incoming: PVec::new(),
            })
            .ctx("allocating a part")?;
        index_push(tx, root, part)?;
        for (from, slot) in self.pending.remove(&p.id).unwrap_or_default() {
            tx.get_mut(from).out[slot].to = Some(part);
            tx.push(part, |q| &mut q.incoming, from)
                .ctx("adding an incoming connection")?;
        }
        for (slot, c) in np.connections.iter().enumerate() {
            match targets[slot] {
                Some(to) => tx
                    .push(to, |q| &mut q.incoming, part)
                    .ctx("adding an incoming connection")?,
                None => self.pending.entry(c.to).or_default().push((part, slot)),
            }
        }
        Ok(part)
    }

    /// Fails if a connection still waits for a part that was never added.
    pub(super) fn finish(self) -> Result<(), EngineError> {
        match self.pending.keys().min() {
            Some(&id) => Err(EngineError::MissingPart { id }),
            None => Ok(()),
        }
    }
}

/// Appends `part` to the index as its next id, with a new chunk when the
/// last one is full.
fn index_push(tx: &mut Tx<'_>, root: PRef<Root>, part: PRef<Part>) -> Result<(), EngineError> {
    let i = tx.get(root).parts as usize;
    let chunk = if i.is_multiple_of(CHUNK) {
        let chunk = tx
            .alloc(Chunk {
                parts: [None; CHUNK],
            })
            .ctx("allocating an index chunk")?;
        tx.push(root, |r| &mut r.chunks, chunk)
            .ctx("adding an index chunk")?;
        chunk
    } else {
        *tx.slice(&tx.get(root).chunks)
            .get(i / CHUNK)
            .ok_or_else(|| EngineError::corrupt(format!("the index lacks chunk {}", i / CHUNK)))?
    };
    tx.get_mut(chunk).parts[i % CHUNK] = Some(part);
    tx.get_mut(root).parts += 1;
    Ok(())
}

/// The part with id `id`, read through the index in `tx`.
fn part_ref(tx: &Tx<'_>, root: PRef<Root>, id: PartId) -> Result<PRef<Part>, EngineError> {
    let r = tx.get(root);
    let i = (id as usize).wrapping_sub(1);
    if i as u64 >= r.parts {
        return Err(EngineError::MissingPart { id });
    }
    tx.slice(&r.chunks)
        .get(i / CHUNK)
        .and_then(|&c| tx.get(c).parts[i % CHUNK])
        .ok_or_else(|| EngineError::MissingPart { id })
}
