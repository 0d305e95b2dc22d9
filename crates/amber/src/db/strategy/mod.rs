//! Update-detection strategies: how a transaction's writes are found at
//! commit (Hosking et al., `papers/000_*` §4).
//!
//! - [`Detect::Pages`]: page protection, the fault backend's own
//!   (`vm/tracking.rs`): userfaultfd write-protection or SIGSEGV with
//!   QuickStore's recovery buffer. No barrier; the commit diffs every
//!   written block whole.
//! - The software schemes, behind a write barrier that every mutable
//!   accessor calls (`vm/barrier.rs`): [`Detect::Objects`] (a mark in the
//!   object's header; the commit scans every resident object,
//!   `objects.rs`), [`Detect::Remsets`] (a set of updated objects,
//!   `remsets.rs`), [`Detect::Cards`] (a byte per card of 2^k bytes,
//!   `cards.rs`). Frames are installed writable: no write fault is taken.
//!
//! Every scheme yields the same log: the commit diffs each written block
//! against its clean version (`commit.rs`), within what the scheme says
//! was written, and coalesces the differences by the minimal-log rule. A
//! software scheme only narrows where the diff looks. Debug builds check
//! that nothing changed outside it (a write that bypassed the barrier).

mod cards;
pub(crate) mod copies;
mod diff;
mod objects;
mod remsets;

use crate::error::{Error, Result};
use crate::vm::{Access, Barrier, FrameNo, FrameSpace, Memory};
use std::any::Any;
use std::fmt;
use std::str::FromStr;

/// How a transaction's updates are detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detect {
    /// Page protection (the default): the fault backend notices the first
    /// write to each page; no barrier.
    #[default]
    Pages,
    /// Object marking: the barrier sets a bit in the updated object's
    /// header; the commit scans every resident object for it.
    Objects,
    /// Remembered sets: the barrier puts the updated object in a hash set;
    /// the commit visits only the set.
    Remsets,
    /// Card marking: the barrier marks the cards (aligned runs of `bytes`
    /// bytes, a power of two from 16 to 4096) written; the commit scans
    /// the card table.
    Cards {
        /// Card size in bytes.
        bytes: u32,
    },
}

impl Detect {
    /// Whether writes are noted by a software barrier.
    pub fn is_software(self) -> bool {
        self != Detect::Pages
    }

    /// Refuses a card size the scheme does not have.
    pub(crate) fn check(self) -> Result<()> {
        match self {
            Detect::Cards { bytes } if !(bytes.is_power_of_two() && (16..=4096).contains(&bytes)) => {
                Err(Error::invalid(format!(
                    "card size {bytes}: expected a power of two from 16 to 4096 bytes"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The scheme names the benchmarks and the command line use: `pages`,
/// `objects`, `remsets`, `cards-N`.
impl fmt::Display for Detect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Detect::Pages => f.write_str("pages"),
            Detect::Objects => f.write_str("objects"),
            Detect::Remsets => f.write_str("remsets"),
            Detect::Cards { bytes } => write!(f, "cards-{bytes}"),
        }
    }
}

impl FromStr for Detect {
    type Err = Error;

    fn from_str(s: &str) -> Result<Detect> {
        let d = match s {
            "pages" => Detect::Pages,
            "objects" => Detect::Objects,
            "remsets" => Detect::Remsets,
            _ => match s.strip_prefix("cards-").map(str::parse) {
                Some(Ok(bytes)) => Detect::Cards { bytes },
                _ => {
                    return Err(Error::invalid(format!(
                        "detection scheme {s:?}: expected pages, objects, remsets or cards-N"
                    )));
                }
            },
        };
        d.check()?;
        Ok(d)
    }
}

/// What a transaction runs with: the database's ([`Options::strategy`])
/// or one chosen for it ([`Db::begin_with`]).
///
/// [`Options::strategy`]: crate::Options::strategy
/// [`Db::begin_with`]: crate::Db::begin_with
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Strategy {
    /// How updates are detected.
    pub detect: Detect,
}

impl Strategy {
    /// The default: page protection.
    pub const DEFAULT: Strategy = Strategy {
        detect: Detect::Pages,
    };

    /// The strategy detecting updates with `detect`.
    pub const fn detect(detect: Detect) -> Strategy {
        Strategy { detect }
    }
}

/// Virtual-address ranges `[start, end)`.
pub(crate) type Ranges = Vec<(u64, u64)>;

/// What a commit's scan may look at: the accessor (headers are read and
/// marks cleared through it), the frame space and the resident blocks.
pub(crate) struct Scan<'a> {
    pub(crate) access: &'a mut Access,
    pub(crate) fs: &'a FrameSpace,
    pub(crate) resident: &'a dyn Fn() -> Vec<(FrameNo, u32)>,
}

/// A software scheme's records.
#[derive(Debug)]
enum Records {
    Objects(objects::Marks),
    Remsets(remsets::RememberedSet),
    Cards(cards::CardTable),
}

/// The barrier of a software scheme, installed in the [`Access`].
#[derive(Debug)]
pub(crate) struct Software {
    detect: Detect,
    records: Records,
    /// Writes outside any object the caller knew (page headers, fields
    /// reached by address), for the object-granularity schemes.
    raw: Ranges,
    /// The clean version: chunks copied at their first write.
    pub(crate) copies: copies::CleanCopies,
}

impl Software {
    /// The barrier of software scheme `detect` (`None` for page
    /// protection, which has none); `base` is the frame space's first
    /// address.
    pub(crate) fn new(detect: Detect, base: u64) -> Option<Software> {
        let records = match detect {
            Detect::Pages => return None,
            Detect::Objects => Records::Objects(objects::Marks),
            Detect::Remsets => Records::Remsets(remsets::RememberedSet::default()),
            Detect::Cards { bytes } => Records::Cards(cards::CardTable::new(bytes, base)),
        };
        Some(Software {
            detect,
            records,
            raw: Vec::new(),
            copies: copies::CleanCopies::default(),
        })
    }

    /// The scheme.
    pub(crate) fn scheme(&self) -> Detect {
        self.detect
    }

    /// The ranges written since the last call, ascending and merged; the
    /// records are cleared.
    pub(crate) fn take(&mut self, scan: &mut Scan<'_>) -> Ranges {
        let mut out = std::mem::take(&mut self.raw);
        match &mut self.records {
            Records::Objects(m) => m.take(scan, &mut out),
            Records::Remsets(r) => r.take(scan, &mut out),
            Records::Cards(c) => c.take(&mut out),
        }
        merge(&mut out);
        out
    }

    /// Forgets every record (the transaction rolled back, or a new one
    /// starts). Marks left in memory are not cleared here: rollback gives
    /// every written block its committed image back.
    pub(crate) fn clear(&mut self) {
        self.raw.clear();
        self.copies.clear();
        match &mut self.records {
            Records::Objects(_) => {}
            Records::Remsets(r) => r.clear(),
            Records::Cards(c) => c.clear(),
        }
    }
}

impl Barrier for Software {
    #[inline]
    fn note(&mut self, object: u64, at: u64, len: usize, memory: &Memory<'_>) -> bool {
        self.copies.save(at, len, memory);
        match &mut self.records {
            Records::Cards(c) => {
                c.mark(at, len);
                false
            }
            _ if object == 0 => {
                self.raw.push((at, at + len as u64));
                false
            }
            Records::Objects(_) => true,
            Records::Remsets(r) => {
                r.insert(object);
                false
            }
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Sorts ranges and merges overlapping or touching ones.
pub(crate) fn merge(r: &mut Ranges) {
    r.sort_unstable();
    let mut k = 0;
    for i in 0..r.len() {
        if k > 0 && r[i].0 <= r[k - 1].1 {
            r[k - 1].1 = r[k - 1].1.max(r[i].1);
        } else {
            r[k] = r[i];
            k += 1;
        }
    }
    r.truncate(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in [
            Detect::Pages,
            Detect::Objects,
            Detect::Remsets,
            Detect::Cards { bytes: 16 },
            Detect::Cards { bytes: 4096 },
        ] {
            assert_eq!(d.to_string().parse::<Detect>().unwrap(), d);
        }
        for bad in ["cards-8", "cards-8192", "cards-100", "cards-", "pagez"] {
            assert!(bad.parse::<Detect>().is_err(), "{bad}");
        }
    }

    #[test]
    fn merge_joins_overlapping_and_touching() {
        let mut r = vec![(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)];
        merge(&mut r);
        assert_eq!(r, vec![(0, 8), (10, 30), (40, 41)]);
    }
}
