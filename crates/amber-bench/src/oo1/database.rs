//! The OO1 database: parts, connections, the locality rule, and the generator
//! that every engine builds its database from.
//!
//! Generation is deterministic: the same [`GenParams`] give the same parts and
//! connections, bit for bit, so every engine (and every child process) sees the
//! same database.

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// A part's id: dense, `1..=N`.
pub type PartId = u32;

/// Length of a part's or connection's `kind`.
pub const KIND_LEN: usize = 10;

/// A part's or connection's kind: one of [`KIND_COUNT`] values, see [`kind_value`].
pub type Kind = [u8; KIND_LEN];

/// How many distinct kinds there are.
pub const KIND_COUNT: u8 = 10;

/// Outgoing connections per part.
pub const CONNECTIONS_PER_PART: usize = 3;

/// `x`, `y` and `length` are uniform in `0..=COORD_MAX`.
pub const COORD_MAX: i32 = 99_999;

/// **(choice)** `build` is a Unix time in seconds, uniform over the ten years
/// `[2010-01-01T00:00:00Z, 2020-01-01T00:00:00Z)`.
pub const BUILD_START: i64 = 1_262_304_000;
/// The length of the `build` range: 3,652 days.
pub const BUILD_SPAN: i64 = 3_652 * 86_400;

/// Probability that a connection goes to the closest 1% of ids.
pub const LOCAL_PROBABILITY: f64 = 0.9;

/// The smallest database the locality rule works for (a window of at least 2).
pub const MIN_PARTS: u32 = 200;

/// **(choice)** Kind number `k` is `"type00k"` padded with NUL bytes to 10 bytes
/// (the OO7 spelling), for parts and connections alike.
pub fn kind_value(k: u8) -> Kind {
    let mut kind = [0u8; KIND_LEN];
    kind[..6].copy_from_slice(b"type00");
    kind[6] = b'0' + (k % KIND_COUNT);
    kind
}

/// What the generator needs: the number of parts and the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenParams {
    /// N: parts have ids `1..=N`.
    pub parts: u32,
    /// Seed of every random choice.
    pub seed: u64,
}

impl GenParams {
    /// Checks that the locality rule can work on this many parts.
    pub fn validate(&self) -> Result<(), String> {
        if self.parts < MIN_PARTS {
            return Err(format!(
                "OO1 needs at least {MIN_PARTS} parts (the closest 1% must hold 2 ids), got {}",
                self.parts
            ));
        }
        if self.parts > u32::MAX / 2 {
            return Err(format!("{} parts is too many", self.parts));
        }
        Ok(())
    }

    /// The locality window of the database: W = N / 100.
    pub fn locality(&self) -> Locality {
        Locality {
            window: self.parts / 100,
        }
    }
}

/// A part as generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub id: PartId,
    pub kind: Kind,
    pub x: i32,
    pub y: i32,
    pub build: i64,
}

/// A connection as generated. The `slot` (0, 1, 2) of a connection is its
/// position among its part's outgoing connections, which is the order traversals
/// follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub from: PartId,
    pub to: PartId,
    pub kind: Kind,
    pub length: i32,
}

/// A new part for the insert operation, with its three outgoing connections in
/// slot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPart {
    pub part: Part,
    pub connections: [Connection; CONNECTIONS_PER_PART],
}

/// The locality rule: with probability 0.9 a connection goes to a part chosen
/// uniformly from a window of the W closest ids, otherwise to a part chosen
/// uniformly from all of them.
///
/// **(choice)** `lo = clamp(id − W/2, 1, N − W + 1)`, window `[lo, lo + W − 1]`;
/// when the target is the part itself it is redrawn *in the same branch* (the
/// 0.9 / 0.1 coin is not tossed again), so no part connects to itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locality {
    /// W, the window's width (N / 100 of the original database).
    pub window: u32,
}

impl Locality {
    /// The window `[lo, hi]` of part `id` in a database whose ids are `1..=max_id`.
    pub fn window_of(&self, id: PartId, max_id: PartId) -> (PartId, PartId) {
        let w = i64::from(self.window);
        let lo = (i64::from(id) - w / 2).clamp(1, i64::from(max_id) - w + 1);
        (lo as PartId, (lo + w - 1) as PartId)
    }

    /// Draws the target of one connection from `id`, with ids `1..=max_id`.
    pub fn pick_to(&self, rng: &mut Rng, id: PartId, max_id: PartId) -> PartId {
        if rng.chance(LOCAL_PROBABILITY) {
            let (lo, _) = self.window_of(id, max_id);
            loop {
                let to = lo + rng.below(u64::from(self.window)) as PartId;
                if to != id {
                    return to;
                }
            }
        } else {
            loop {
                let to = 1 + rng.below(u64::from(max_id)) as PartId;
                if to != id {
                    return to;
                }
            }
        }
    }
}

/// Draws one part and its connections, in a fixed order of draws: kind, x, y,
/// build, then for each connection: target, kind, length.
fn draw_part(rng: &mut Rng, id: PartId, max_id: PartId, locality: Locality) -> NewPart {
    let part = Part {
        id,
        kind: kind_value(rng.below(u64::from(KIND_COUNT)) as u8),
        x: rng.range_i64(0, i64::from(COORD_MAX)) as i32,
        y: rng.range_i64(0, i64::from(COORD_MAX)) as i32,
        build: BUILD_START + rng.range_i64(0, BUILD_SPAN - 1),
    };
    let mut draw_connection = || {
        let to = locality.pick_to(rng, id, max_id);
        Connection {
            from: id,
            to,
            kind: kind_value(rng.below(u64::from(KIND_COUNT)) as u8),
            length: rng.range_i64(0, i64::from(COORD_MAX)) as i32,
        }
    };
    let connections = [draw_connection(), draw_connection(), draw_connection()];
    NewPart { part, connections }
}

/// The whole generated database, the input of every engine's `build`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedDb {
    pub params: GenParams,
    /// Parts in id order: `parts[i].id == i + 1`.
    pub parts: Vec<Part>,
    /// Connections in (from, slot) order: connection `slot` of part `id` is
    /// `connections[(id − 1) · 3 + slot]`.
    pub connections: Vec<Connection>,
}

impl GeneratedDb {
    /// The part with this id.
    pub fn part(&self, id: PartId) -> Option<&Part> {
        self.parts.get((id as usize).checked_sub(1)?)
    }

    /// The outgoing connections of `id`, in slot order (empty for an unknown id).
    pub fn outgoing(&self, id: PartId) -> &[Connection] {
        let Some(i) = (id as usize).checked_sub(1) else {
            return &[];
        };
        let start = i * CONNECTIONS_PER_PART;
        self.connections
            .get(start..start + CONNECTIONS_PER_PART)
            .unwrap_or(&[])
    }

    /// For every part (index `id − 1`), the ids of the parts connecting to it,
    /// in canonical order: ascending (from, slot), one entry per connection.
    pub fn incoming_lists(&self) -> Vec<Vec<PartId>> {
        let mut incoming = vec![Vec::new(); self.parts.len()];
        for c in &self.connections {
            let slot = (c.to as usize).checked_sub(1);
            if let Some(list) = slot.and_then(|i| incoming.get_mut(i)) {
                list.push(c.from);
            }
        }
        incoming
    }
}

/// Generates the OO1 database for `params`: parts `1..=N` in id order, each
/// followed by its three connections (one random stream for the whole database).
pub fn generate(params: GenParams) -> Result<GeneratedDb, String> {
    params.validate()?;
    let n = params.parts;
    let locality = params.locality();
    let mut rng = Rng::stream(params.seed, &[STREAM_DATABASE, u64::from(n)]);
    let mut parts = Vec::with_capacity(n as usize);
    let mut connections = Vec::with_capacity(n as usize * CONNECTIONS_PER_PART);
    for id in 1..=n {
        let p = draw_part(&mut rng, id, n, locality);
        parts.push(p.part);
        connections.extend_from_slice(&p.connections);
    }
    Ok(GeneratedDb {
        params,
        parts,
        connections,
    })
}

/// Draws a batch of `count` new parts with ids `first_id..first_id + count`.
///
/// **(choice)** Their connections follow the locality rule with the original
/// database's W and ids `1..=first_id + count − 1`: a new part may connect to any
/// existing part or to any part of its own batch (so engines insert the batch's
/// parts before its connections).
pub fn new_parts(params: GenParams, rng: &mut Rng, first_id: PartId, count: u32) -> Vec<NewPart> {
    let locality = params.locality();
    let max_id = first_id + count - 1;
    (first_id..=max_id)
        .map(|id| draw_part(rng, id, max_id, locality))
        .collect()
}

/// Stream tag of the database generator.
const STREAM_DATABASE: u64 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> GeneratedDb {
        generate(GenParams {
            parts: 2_000,
            seed: 42,
        })
        .expect("valid parameters")
    }

    #[test]
    fn ids_are_dense_and_every_part_has_three_connections() {
        let db = small();
        assert_eq!(db.parts.len(), 2_000);
        assert_eq!(db.connections.len(), 6_000);
        for (i, p) in db.parts.iter().enumerate() {
            assert_eq!(p.id as usize, i + 1);
            let out = db.outgoing(p.id);
            assert_eq!(out.len(), 3);
            assert!(out.iter().all(|c| c.from == p.id));
        }
    }

    #[test]
    fn values_are_in_range() {
        let db = small();
        let kinds: Vec<Kind> = (0..KIND_COUNT).map(kind_value).collect();
        for p in &db.parts {
            assert!((0..=COORD_MAX).contains(&p.x) && (0..=COORD_MAX).contains(&p.y));
            assert!((BUILD_START..BUILD_START + BUILD_SPAN).contains(&p.build));
            assert!(kinds.contains(&p.kind));
        }
        for c in &db.connections {
            assert!((0..=COORD_MAX).contains(&c.length));
            assert!(kinds.contains(&c.kind));
            assert!((1..=2_000).contains(&c.to));
        }
    }

    #[test]
    fn no_self_loops() {
        let db = small();
        assert!(db.connections.iter().all(|c| c.from != c.to));
    }

    #[test]
    fn about_ninety_percent_of_connections_stay_in_the_window() {
        let db = generate(GenParams {
            parts: 20_000,
            seed: 7,
        })
        .expect("valid parameters");
        let loc = db.params.locality();
        assert_eq!(loc.window, 200);
        let inside = db
            .connections
            .iter()
            .filter(|c| {
                let (lo, hi) = loc.window_of(c.from, 20_000);
                (lo..=hi).contains(&c.to)
            })
            .count();
        // 0.9 local plus the uniform draws that land in the window (~0.1%).
        let share = inside as f64 / db.connections.len() as f64;
        assert!((0.895..0.907).contains(&share), "share in window {share}");
    }

    #[test]
    fn window_is_clamped_at_both_ends() {
        let loc = Locality { window: 20 };
        assert_eq!(loc.window_of(1, 2_000), (1, 20));
        assert_eq!(loc.window_of(5, 2_000), (1, 20));
        assert_eq!(loc.window_of(100, 2_000), (90, 109));
        assert_eq!(loc.window_of(2_000, 2_000), (1_981, 2_000));
    }

    #[test]
    fn deterministic_per_seed() {
        let a = small();
        let b = small();
        assert_eq!(a, b);
        let c = generate(GenParams {
            parts: 2_000,
            seed: 43,
        })
        .expect("valid parameters");
        assert_ne!(a.parts, c.parts);
        assert_ne!(a.connections, c.connections);
    }

    #[test]
    fn too_small_a_database_is_refused() {
        assert!(generate(GenParams { parts: 50, seed: 1 }).is_err());
    }

    #[test]
    fn new_parts_connect_within_existing_and_own_batch() {
        let params = GenParams {
            parts: 2_000,
            seed: 1,
        };
        let mut rng = Rng::seed_from_u64(9);
        let batch = new_parts(params, &mut rng, 2_001, 100);
        assert_eq!(batch.len(), 100);
        for (i, np) in batch.iter().enumerate() {
            assert_eq!(np.part.id, 2_001 + i as u32);
            for c in &np.connections {
                assert_eq!(c.from, np.part.id);
                assert_ne!(c.to, c.from);
                assert!((1..=2_100).contains(&c.to));
            }
        }
    }
}
