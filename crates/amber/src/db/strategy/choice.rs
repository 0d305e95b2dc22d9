//! The public choice of a strategy: how updates are detected ([`Detect`]),
//! how the log is generated from them ([`Log`]), and the names both print
//! and parse under (the command line's and the benchmarks' `scheme`).

use crate::error::{Error, Result};
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
    /// bytes, a power of two from 8 to 4096: Hosking's 16 to 4096, and
    /// QuickStore's 8-byte sub-page blocks) written; the commit scans the
    /// card table.
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
            Detect::Cards { bytes } if !(bytes.is_power_of_two() && (8..=4096).contains(&bytes)) => {
                Err(Error::invalid(format!(
                    "card size {bytes}: expected a power of two from 8 to 4096 bytes"
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

/// How a transaction's log records are generated from its detected
/// updates (QuickStore's log generators, `papers/002_*` §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Log {
    /// Differences against the clean version, coalesced by the minimal-log
    /// rule (the default): QuickStore's page differencing under page
    /// protection, its sub-page differencing under card marking, and
    /// Hosking's schemes. Every detection scheme gives the same log.
    #[default]
    Diff,
    /// Sub-page logging: what the barrier recorded (dirty cards, or marked
    /// or remembered objects) is logged whole, in persistent form, without
    /// diffing. Needs a software detection scheme.
    SubPages,
    /// Whole-page logging: the after-image of every page written.
    WholePages,
}

impl Log {
    fn name(self) -> &'static str {
        match self {
            Log::Diff => "diff",
            Log::SubPages => "sl",
            Log::WholePages => "wpl",
        }
    }
}

/// What a transaction runs with: the database's ([`Options::strategy`])
/// or one chosen for it ([`Db::begin_with`]).
///
/// Names (`Display`, `FromStr`): a detection scheme alone (`pages`,
/// `objects`, `remsets`, `cards-N`) diffs; QuickStore's names `pd`
/// (page protection, diff), `sd-N` (N-byte cards, N = 8 to 64, diff
/// against N-byte copies), `sl-N` (N-byte cards logged whole) and `wpl`
/// (page protection, whole pages); any other pair as `DETECT+LOG`, LOG
/// being `diff`, `sl` or `wpl`; and `auto` ([`Strategy::AUTO`]).
///
/// [`Options::strategy`]: crate::Options::strategy
/// [`Db::begin_with`]: crate::Db::begin_with
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Strategy {
    /// How updates are detected.
    pub detect: Detect,
    /// How the log is generated.
    pub log: Log,
    /// Chosen per transaction (`detect` and `log` are then ignored).
    auto: bool,
}

impl Strategy {
    /// The default: page protection, page differencing.
    pub const DEFAULT: Strategy = Strategy {
        detect: Detect::Pages,
        log: Log::Diff,
        auto: false,
    };

    /// Chosen per transaction from what the database's recent
    /// transactions cost: page protection or remembered sets, whichever ran
    /// the current kind of transaction faster, both diffing (so the log is
    /// the minimal one). The choice made is in [`CommitStats::strategy`].
    ///
    /// [`CommitStats::strategy`]: crate::CommitStats::strategy
    pub const AUTO: Strategy = Strategy {
        auto: true,
        ..Strategy::DEFAULT
    };

    /// Detecting updates with `detect`, diffing.
    pub const fn detect(detect: Detect) -> Strategy {
        Strategy {
            detect,
            log: Log::Diff,
            auto: false,
        }
    }

    /// Whether this is [`Strategy::AUTO`].
    pub const fn is_auto(self) -> bool {
        self.auto
    }

    /// This strategy, generating the log with `log`.
    pub const fn with_log(self, log: Log) -> Strategy {
        Strategy {
            log,
            auto: false,
            ..self
        }
    }

    /// Refuses a combination that does not exist.
    pub(crate) fn check(self) -> Result<()> {
        self.detect.check()?;
        if self.log == Log::SubPages && !self.detect.is_software() {
            return Err(Error::invalid(format!(
                "strategy {self}: sub-page logging logs what a software barrier \
                 recorded; page protection records whole pages (use wpl)"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.detect, self.log) {
            _ if self.auto => f.write_str("auto"),
            (d, Log::Diff) => write!(f, "{d}"),
            (Detect::Cards { bytes }, Log::SubPages) => write!(f, "sl-{bytes}"),
            (Detect::Pages, Log::WholePages) => f.write_str("wpl"),
            (d, l) => write!(f, "{d}+{}", l.name()),
        }
    }
}

impl FromStr for Strategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Strategy> {
        let bad = || {
            Error::invalid(format!(
                "strategy {s:?}: expected pd, sd-N (N = 8 to 64), sl-N, wpl, auto, a detection \
                 scheme (pages, objects, remsets, cards-N), or DETECT+LOG with LOG one of \
                 diff, sl, wpl"
            ))
        };
        let cards = |n: &str| n.parse().map(|bytes| Detect::Cards { bytes }).map_err(|_| bad());
        let st = if let Some((d, l)) = s.split_once('+') {
            let log = [Log::Diff, Log::SubPages, Log::WholePages]
                .into_iter()
                .find(|x| x.name() == l)
                .ok_or_else(bad)?;
            Strategy::detect(d.parse()?).with_log(log)
        } else if s == "pd" {
            Strategy::DEFAULT
        } else if s == "auto" {
            Strategy::AUTO
        } else if s == "wpl" {
            Strategy::DEFAULT.with_log(Log::WholePages)
        } else if let Some(n) = s.strip_prefix("sd-") {
            let d = cards(n)?;
            if !matches!(d, Detect::Cards { bytes: 8..=64 }) {
                return Err(bad());
            }
            Strategy::detect(d)
        } else if let Some(n) = s.strip_prefix("sl-") {
            Strategy::detect(cards(n)?).with_log(Log::SubPages)
        } else {
            Strategy::detect(s.parse().map_err(|_| bad())?)
        };
        st.check()?;
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_names_round_trip() {
        for d in [
            Detect::Pages,
            Detect::Objects,
            Detect::Remsets,
            Detect::Cards { bytes: 8 },
            Detect::Cards { bytes: 4096 },
        ] {
            assert_eq!(d.to_string().parse::<Detect>().unwrap(), d);
        }
        for bad in ["cards-4", "cards-8192", "cards-100", "cards-", "pagez"] {
            assert!(bad.parse::<Detect>().is_err(), "{bad}");
        }
    }

    #[test]
    fn strategy_names() {
        let cards = |bytes| Detect::Cards { bytes };
        let cases = [
            ("pd", Strategy::DEFAULT, "pages"),
            ("sd-8", Strategy::detect(cards(8)), "cards-8"),
            ("sd-64", Strategy::detect(cards(64)), "cards-64"),
            ("sl-64", Strategy::detect(cards(64)).with_log(Log::SubPages), "sl-64"),
            ("wpl", Strategy::DEFAULT.with_log(Log::WholePages), "wpl"),
            ("remsets", Strategy::detect(Detect::Remsets), "remsets"),
            ("remsets+sl", Strategy::detect(Detect::Remsets).with_log(Log::SubPages), "remsets+sl"),
            ("cards-16+wpl", Strategy::detect(cards(16)).with_log(Log::WholePages), "cards-16+wpl"),
            ("auto", Strategy::AUTO, "auto"),
        ];
        for (name, st, shown) in cases {
            assert_eq!(name.parse::<Strategy>().unwrap(), st, "{name}");
            assert_eq!(st.to_string(), shown);
            assert_eq!(shown.parse::<Strategy>().unwrap(), st, "{shown}");
        }
        for bad in ["sd-128", "sd-4", "pages+sl", "pd+diff", "sl-3", "remsets+x", "wpl-8", ""] {
            assert!(bad.parse::<Strategy>().is_err(), "{bad}");
        }
    }
}
