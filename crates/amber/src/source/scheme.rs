//! QuickStore's client-server recovery schemes (`papers/002_*` §3): where a
//! transaction's recovery work is done, named as the paper names them.
//!
//! A scheme is a client log generator (the [`Strategy`] its transactions
//! run under) and what the client ships at commit:
//!
//! | scheme | client generator | shipped at commit | the server |
//! |---|---|---|---|
//! | `pd-esm` | page differencing | the records, then the dirty pages | logs the records, caches the pages (no redo for them) |
//! | `sd-esm` | sub-page differencing, 64-byte blocks | the same | the same |
//! | `sl-esm` | sub-page logging, 64-byte blocks | the same | the same |
//! | `pd-redo` | page differencing | the records | logs them and applies them to its copy of each page |
//! | `wpl` | whole pages | the dirty pages, as page records | logs them (the WPL table), installs them from the log |
//! | `auto` | [`Strategy::AUTO`] | the records | as `pd-redo` |
//!
//! Selected per database (`amber serve --scheme`, told to every client in
//! the `Welcome`) or per client session ([`RemoteOptions::scheme`], which
//! wins); a database served with neither leaves each client's own
//! [`Options::strategy`] in force, shipping records (REDO with that
//! generator). docs/design.md §11.7.
//!
//! [`RemoteOptions::scheme`]: crate::RemoteOptions::scheme
//! [`Options::strategy`]: crate::Options::strategy

use crate::db::{Detect, Log, Strategy};
use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// A client-server recovery scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Page differencing; records and dirty pages shipped (ESM).
    PdEsm,
    /// Sub-page differencing with 64-byte blocks; records and dirty pages.
    SdEsm,
    /// Sub-page logging with 64-byte blocks; records and dirty pages.
    SlEsm,
    /// Page differencing; records only, redone at the server.
    PdRedo,
    /// Whole-page logging: dirty pages only, logged by the server.
    Wpl,
    /// The client's adaptive strategy; records only.
    Auto,
}

impl Scheme {
    /// Every scheme, in the paper's order.
    pub const ALL: [Scheme; 6] = [
        Scheme::PdEsm,
        Scheme::SdEsm,
        Scheme::SlEsm,
        Scheme::PdRedo,
        Scheme::Wpl,
        Scheme::Auto,
    ];

    /// The name used by the CLI and the benchmarks' JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::PdEsm => "pd-esm",
            Scheme::SdEsm => "sd-esm",
            Scheme::SlEsm => "sl-esm",
            Scheme::PdRedo => "pd-redo",
            Scheme::Wpl => "wpl",
            Scheme::Auto => "auto",
        }
    }

    /// The strategy the client's transactions run under.
    pub fn strategy(self) -> Strategy {
        let cards64 = Strategy::detect(Detect::Cards { bytes: 64 });
        match self {
            Scheme::PdEsm | Scheme::PdRedo => Strategy::DEFAULT,
            Scheme::SdEsm => cards64,
            Scheme::SlEsm => cards64.with_log(Log::SubPages),
            Scheme::Wpl => Strategy::DEFAULT.with_log(Log::WholePages),
            Scheme::Auto => Strategy::AUTO,
        }
    }

    /// Whether the client ships its dirty pages beside the records (ESM).
    pub fn ships_pages(self) -> bool {
        matches!(self, Scheme::PdEsm | Scheme::SdEsm | Scheme::SlEsm)
    }

    /// Its code in a `Welcome` (docs/design.md §10.3); 0 is "none".
    pub fn code(self) -> u8 {
        match self {
            Scheme::PdEsm => 1,
            Scheme::SdEsm => 2,
            Scheme::SlEsm => 3,
            Scheme::PdRedo => 4,
            Scheme::Wpl => 5,
            Scheme::Auto => 6,
        }
    }

    /// The scheme of a `Welcome`'s code: `Ok(None)` for 0, an error for a
    /// code no scheme has.
    pub fn from_code(code: u8) -> Result<Option<Scheme>> {
        match code {
            0 => Ok(None),
            c => (Scheme::ALL.into_iter().find(|s| s.code() == c))
                .map(Some)
                .ok_or_else(|| Error::invalid(format!("recovery scheme code {c} is unknown"))),
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scheme {
    type Err = Error;

    fn from_str(s: &str) -> Result<Scheme> {
        (Scheme::ALL.into_iter().find(|x| x.name() == s)).ok_or_else(|| {
            Error::invalid(format!(
                "recovery scheme {s:?}: expected pd-esm, sd-esm, sl-esm, pd-redo, wpl or auto"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for s in Scheme::ALL {
            assert_eq!(s.name().parse::<Scheme>().unwrap(), s);
            assert_eq!(Scheme::from_code(s.code()).unwrap(), Some(s));
        }
        assert_eq!(Scheme::from_code(0).unwrap(), None);
        assert!(Scheme::from_code(7).is_err());
        assert!("esm".parse::<Scheme>().is_err());
        assert_eq!(Scheme::SdEsm.strategy(), "sd-64".parse().unwrap());
        assert_eq!(Scheme::SlEsm.strategy(), "sl-64".parse().unwrap());
        assert_eq!(Scheme::Wpl.strategy(), "wpl".parse().unwrap());
        assert_eq!(Scheme::PdRedo.strategy(), "pd".parse().unwrap());
        assert!(Scheme::SlEsm.ships_pages() && !Scheme::PdRedo.ships_pages());
    }
}
