//! A model of the store's committed state and a random workload over it,
//! shared by the property, crash, error-countdown and kill tests.
#![allow(dead_code)]

use amber::internals::format::page::{self, BlockKind, HEADER_SIZE, USED_OFFSET};
use amber::internals::io::crash::SplitMix;
use amber::internals::store::{Store, StoreOptions, StoreTx};
use std::collections::BTreeMap;

/// No automatic checkpoint, none on close: everything stays in the log
/// until the test asks.
pub fn no_checkpoints() -> StoreOptions {
    StoreOptions {
        checkpoint_log_bytes: u64::MAX,
        checkpoint_pending_bytes: usize::MAX,
        checkpoint_on_close: false,
        ..StoreOptions::default()
    }
}

/// What the store must hold: block images (logical bytes), roots, types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    pub blocks: BTreeMap<u64, Vec<u8>>,
    pub roots: BTreeMap<String, u64>,
    pub types: BTreeMap<u32, Vec<u8>>,
}

impl Model {
    /// Compares the store's committed state with the model; returns what
    /// differs, a block the store cannot read included.
    pub fn diff(&self, s: &Store) -> Option<String> {
        match self.compare(s) {
            Err(d) => Some(d),
            Ok(unreadable) => unreadable
                .first()
                .map(|(h, e)| format!("block {h} unreadable: {e}")),
        }
    }

    /// Compares the store's committed state with the model, reading every
    /// block: `Err` with the first thing that differs, else the blocks the
    /// store refused to read and why (none when it holds exactly the model).
    /// A refusal is not wrong data; a difference is.
    pub fn compare(&self, s: &Store) -> Result<Vec<(u64, amber::Error)>, String> {
        // The store's metadata blobs are blocks too: ignore them. A
        // checkpoint may run meanwhile (the one installing what an open
        // recovered runs after the open returns): its new blobs are
        // allocated at its cut (the store counts them as its own from
        // there), its old ones freed at its end, so the old ones are those
        // of the superblock before the listing.
        let before = s.superblock();
        let blocks: BTreeMap<u64, u32> = s.blocks().into_iter().collect();
        let old = [before.fsm_page, before.roots_page, before.catalog_page];
        let ps = s.page_size();
        let want: BTreeMap<u64, u32> = self
            .blocks
            .iter()
            .map(|(h, b)| (*h, (b.len() / ps) as u32))
            .collect();
        let got: BTreeMap<u64, u32> = blocks
            .into_iter()
            .filter(|(h, _)| !old.contains(h) && !s.is_metadata(*h))
            .collect();
        if got != want {
            return Err(format!(
                "allocated blocks differ: store {got:?}, model {want:?}"
            ));
        }
        let mut unreadable = Vec::new();
        for (h, img) in &self.blocks {
            match s.read_block(*h) {
                Err(e) => unreadable.push((*h, e)),
                Ok(b) => {
                    if b[USED_OFFSET..USED_OFFSET + 4] != img[USED_OFFSET..USED_OFFSET + 4]
                        || b[HEADER_SIZE..] != img[HEADER_SIZE..]
                    {
                        let at = (HEADER_SIZE..b.len()).find(|&i| b[i] != img[i]);
                        return Err(format!("block {h} content differs (first at {at:?})"));
                    }
                }
            }
        }
        let roots: BTreeMap<String, u64> =
            s.roots().into_iter().map(|r| (r.name, r.addr)).collect();
        if roots != self.roots {
            return Err(format!(
                "roots differ: store {roots:?}, model {:?}",
                self.roots
            ));
        }
        let types: BTreeMap<u32, Vec<u8>> = s.types().into_iter().collect();
        if types != self.types {
            return Err("types differ".into());
        }
        Ok(unreadable)
    }
}

/// How a generated transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Commit,
    Abort,
}

/// Runs one random transaction against the store, mirroring it in a copy of
/// `model`. Returns the model after the transaction if it committed.
/// `Err` carries the store's error (a simulated crash or an injected fault).
pub fn random_tx(
    s: &Store,
    model: &Model,
    rng: &mut SplitMix,
    in_flight: &mut Option<Model>,
) -> Result<Model, amber::Error> {
    let ps = s.page_size();
    let mut m = model.clone();
    let mut tx: StoreTx<'_> = s.begin()?;
    let n_ops = 1 + rng.below(8);
    for _ in 0..n_ops {
        match rng.below(100) {
            0..=14 => {
                let pages = 1 + rng.below(3) as u32;
                let head = tx.alloc(pages, BlockKind::Raw)?;
                let mut img = vec![0u8; pages as usize * ps];
                page::format(&mut img, BlockKind::Raw, head, pages);
                m.blocks.insert(head, img);
            }
            15..=19 if !m.blocks.is_empty() => {
                let k = pick(&m.blocks, rng);
                tx.free(k)?;
                m.blocks.remove(&k);
            }
            20..=79 if !m.blocks.is_empty() => {
                let k = pick(&m.blocks, rng);
                let img = m.blocks.get_mut(&k).expect("picked");
                if rng.below(10) == 0 {
                    let used = (HEADER_SIZE + rng.below(64) as usize) as u32;
                    tx.write(k * ps as u64 + USED_OFFSET as u64, &used.to_le_bytes())?;
                    img[USED_OFFSET..USED_OFFSET + 4].copy_from_slice(&used.to_le_bytes());
                } else {
                    let max = if rng.below(8) == 0 { 3000 } else { 40 };
                    let len = 1 + rng.below(max) as usize;
                    let room = img.len() - HEADER_SIZE;
                    let len = len.min(room);
                    let off = HEADER_SIZE + rng.below((room - len + 1) as u64) as usize;
                    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                    if rng.below(6) == 0 {
                        let before = img[off..off + len].to_vec();
                        tx.write_with_before(k * ps as u64 + off as u64, &before, &data)?;
                    } else {
                        tx.write(k * ps as u64 + off as u64, &data)?;
                    }
                    img[off..off + len].copy_from_slice(&data);
                }
            }
            80..=84 if !m.blocks.is_empty() => {
                // A whole-page image of one page of a block.
                let k = pick(&m.blocks, rng);
                let img = m.blocks.get_mut(&k).expect("picked");
                let pages = img.len() / ps;
                let i = rng.below(pages as u64) as usize;
                let mut pimg: Vec<u8> = (0..ps).map(|_| rng.next_u64() as u8).collect();
                tx.write_page(k + i as u64, &pimg)?;
                if i == 0 {
                    // The store keeps its own header fields except `used`.
                    pimg[..USED_OFFSET].copy_from_slice(&img[..USED_OFFSET]);
                    pimg[USED_OFFSET + 4..HEADER_SIZE]
                        .copy_from_slice(&img[USED_OFFSET + 4..HEADER_SIZE]);
                }
                img[i * ps..(i + 1) * ps].copy_from_slice(&pimg);
            }
            85..=91 => {
                let name = format!("root{}", rng.below(5));
                let addr = if rng.below(4) == 0 {
                    0
                } else {
                    rng.next_u64() >> 8
                };
                tx.set_root(&name, addr, rng.below(9) as u32)?;
                if addr == 0 {
                    m.roots.remove(&name);
                } else {
                    m.roots.insert(name, addr);
                }
            }
            92..=94 => {
                let desc: Vec<u8> = (0..rng.below(30)).map(|_| rng.next_u64() as u8).collect();
                let id = tx.define_type(&desc)?;
                m.types.insert(id, desc);
            }
            _ => tx.log_early()?,
        }
    }
    if rng.below(5) == 0 {
        tx.abort();
        return Ok(model.clone());
    }
    *in_flight = Some(m.clone());
    tx.commit()?;
    *in_flight = None;
    Ok(m)
}

fn pick(blocks: &BTreeMap<u64, Vec<u8>>, rng: &mut SplitMix) -> u64 {
    let i = rng.below(blocks.len() as u64) as usize;
    *blocks.keys().nth(i).expect("non-empty")
}

/// Runs `txs` random transactions with occasional checkpoints, stopping at the
/// first error. Returns the last acknowledged model, the in-flight one (a
/// commit that was called but did not return), and the error if any.
///
/// After each transaction it waits for the checkpointer thread, so that the
/// automatic checkpoints' I/O calls come in a fixed order between the
/// transactions' (the crash and error-countdown tests number those calls);
/// a failed automatic checkpoint surfaces as the next call's error.
pub fn run_workload(
    s: &Store,
    start: Model,
    rng: &mut SplitMix,
    txs: usize,
) -> (Model, Option<Model>, Option<amber::Error>) {
    let mut model = start;
    let mut in_flight = None;
    for _ in 0..txs {
        if rng.below(8) == 0
            && let Err(e) = s.checkpoint()
        {
            return (model, in_flight, Some(e));
        }
        match random_tx(s, &model, rng, &mut in_flight) {
            Ok(m) => model = m,
            Err(e) => return (model, in_flight, Some(e)),
        }
        s.wait_for_checkpointer();
    }
    (model, in_flight, None)
}
