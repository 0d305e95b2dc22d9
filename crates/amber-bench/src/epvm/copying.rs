//! EPVM 2.0's copy architecture (White & DeWitt's architecture 3) through
//! Amber's core: `Db::copy_cache` over the mapped version's database.
//! Parts are copied out of Amber's frames (the buffer pool, under the
//! cache budget) into the object cache at their first use — one at a time
//! (object caching) or with every object of their page (page caching) —
//! and found again through its OID hash table; connections are followed
//! through the cache, swizzled upon discovery (lazily, eagerly, or never:
//! eagerly, each part's first use copies in the targets of its three
//! connections, used or not — at the traversal's last level they are not);
//! updates change the copies and widen their modified ranges, which the
//! commit writes back into the objects through an Amber transaction (whose
//! detection and log generator log them).
//!
//! The index is the mapped version's: a chunk of part pointers is read
//! through the cache like any object, and the part pointer in it looked up
//! in the OID table (no swizzling: the paper's index lookups were calls);
//! the entry is read alone (`CopyTx::read`), so eager swizzling discovers
//! that one pointer and not the chunk's other 506.
//!
//! **(choice)** The object cache is not bounded (the paper's lived in the
//! client's virtual memory; only its buffer pool had a size): the
//! versions differ in the buffer pool below it, Amber's cache budget.

use std::path::Path;

use amber::{Caching, CopyCache, CopyOptions, CopyStats, CopyTx, Db, Obj, PRef, Swizzle};

use super::Version;
use super::engine::{Engine, Transaction, Work};
use super::mapped::{CHUNK, open_db};
use super::schema::Schema;
use crate::oo1::database::PartId;
use crate::oo1::engine::{Answer, EngineError, ResultExt, TRAVERSAL_DEPTH, Tally};
use crate::oo1::ops::Op;

/// The buffer pool of the small-pool versions (OC1M, PC1M, PC1M-NO) is the
/// others' divided by this: the paper's 1 MB against 5 MB.
pub const SMALL_POOL_DIVISOR: usize = 5;

/// How version `v` caches (`None`: not a copy-architecture version).
pub fn options(v: Version) -> Option<CopyOptions> {
    let (caching, swizzle) = match v {
        Version::Oc | Version::OcSmallPool => (Caching::Object, Swizzle::Lazy),
        Version::OcNo => (Caching::Object, Swizzle::None),
        Version::OcEager => (Caching::Object, Swizzle::Eager),
        Version::Pc => (Caching::Page, Swizzle::Lazy),
        Version::PcNo => (Caching::Page, Swizzle::None),
        Version::Cesm | Version::Epvm1 | Version::Epvm1No | Version::Mapped => return None,
    };
    Some(CopyOptions {
        caching,
        capacity_bytes: usize::MAX,
        swizzle,
    })
}

/// The buffer pool of version `v`, in pages, when the others' is `pages`.
pub fn pool_pages(v: Version, pages: usize) -> usize {
    match v {
        Version::OcSmallPool | Version::Pc | Version::PcNo => {
            pages.div_ceil(SMALL_POOL_DIVISOR).max(1)
        }
        _ => pages,
    }
}

/// The open database and its object cache.
pub struct Copying<S: Schema> {
    cache: CopyCache<Box<Db>>,
    chunks: Vec<PRef<S::Chunk>>,
    parts: u64,
    /// Integers an update changes (Figure 11).
    ints: usize,
}

impl<S: Schema> Copying<S> {
    /// Opens the mapped version's database in `dir` with a cache budget of
    /// `pool_bytes`, under an object cache of `opts`; an update changes
    /// `ints` integers (Figure 11; OO1's x and y else).
    pub fn open(
        dir: &Path,
        pool_bytes: u64,
        opts: CopyOptions,
        ints: usize,
    ) -> Result<Self, EngineError> {
        let (db, root) = open_db::<S>(dir, pool_bytes)?;
        let (chunks, parts) = S::index(db.get(root));
        let chunks = db.slice(chunks).to_vec();
        Ok(Copying {
            cache: CopyCache::new(Box::new(db), opts),
            chunks,
            parts,
            ints,
        })
    }

    /// What the object cache did.
    pub fn stats(&self) -> CopyStats {
        self.cache.stats()
    }

    /// The fault backend.
    pub fn backend(&self) -> String {
        self.cache.db().backend().to_string()
    }

    /// Closes the database.
    pub fn close(self) -> Result<(), EngineError> {
        self.cache.into_inner().close().ctx("closing the database")
    }
}

/// A transaction through the object cache (always a real one: the cache's
/// reads are a transaction's).
pub struct CopyingTx<'a, S: Schema> {
    tx: CopyTx<'a>,
    chunks: &'a [PRef<S::Chunk>],
    parts: u64,
    ints: usize,
}

impl<S: Schema> Engine for Copying<S> {
    type Tx<'a> = CopyingTx<'a, S>;

    fn begin(&mut self, _real: bool) -> Result<CopyingTx<'_, S>, EngineError> {
        Ok(CopyingTx {
            tx: self.cache.begin().ctx("beginning a transaction")?,
            chunks: &self.chunks,
            parts: self.parts,
            ints: self.ints,
        })
    }

    fn reads(&self) -> u64 {
        self.cache.db().stats().fetched
    }
}

impl<S: Schema> CopyingTx<'_, S> {
    /// The part of id `id`, through the index chunk's copy.
    fn lookup(&mut self, id: PartId) -> Result<Obj<S::Part>, EngineError> {
        let i = (id as usize)
            .checked_sub(1)
            .filter(|&i| (i as u64) < self.parts)
            .ok_or(EngineError::MissingPart { id })?;
        let chunk = *self
            .chunks
            .get(i / CHUNK)
            .ok_or_else(|| EngineError::corrupt(format!("no index chunk for part {id}")))?;
        let chunk = self.tx.fetch_ref(chunk).ctx("copying an index chunk")?;
        // One entry read, not the whole chunk used: eager swizzling
        // discovers that pointer only, as EPVM reading `index[i]` would.
        let part = self
            .tx
            .read(chunk, |c| S::entry(c, i % CHUNK))
            .ctx("reading an index chunk")?
            .ok_or(EngineError::MissingPart { id })?;
        self.tx.fetch_ref(part).ctx("copying a part")
    }

    /// Visits `o` and, to depth 7, its connections' targets.
    fn visit(
        &mut self,
        o: Obj<S::Part>,
        depth: u32,
        visit: &mut usize,
        work: &mut Work<'_>,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let (id, x, y, kind) = S::values(self.tx.get(o).ctx("reading a part")?);
        tally.visit(id, x, y, kind);
        if work.updates(*visit) {
            S::update_copy(&mut self.tx, o, self.ints).ctx("updating a part")?;
            tally.changed();
        }
        *visit += 1;
        if depth < TRAVERSAL_DEPTH {
            for slot in 0..3 {
                let to = self
                    .tx
                    .follow(o, |p: &S::Part| S::to(p, slot))
                    .ctx("following a connection")?
                    .ok_or_else(|| EngineError::corrupt("a part's connection is null"))?;
                self.visit(to, depth + 1, visit, work, tally)?;
            }
        }
        Ok(())
    }
}

impl<S: Schema> Transaction for CopyingTx<'_, S> {
    fn iterate(&mut self, id: PartId, mut work: Work<'_>) -> Result<Answer, EngineError> {
        let mut tally = Tally::for_op(Op::Traversal);
        let p = self.lookup(id)?;
        self.visit(p, 0, &mut 0, &mut work, &mut tally)?;
        Ok(tally.finish())
    }

    fn reads(&self) -> Option<u64> {
        Some(self.tx.blocks_fetched())
    }

    fn copied(&self) -> Option<u64> {
        Some(self.tx.stats().copied)
    }

    fn commit(self) -> Result<u64, EngineError> {
        self.tx.commit().map(|c| c.log_bytes).ctx("committing")
    }
}
