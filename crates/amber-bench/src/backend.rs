//! `--backend uffd|sigsegv|mapped|mapped-unverified|both|all`: which fault
//! backends a benchmark runs.

use std::fmt;
use std::str::FromStr;

use amber::BackendChoice;

/// The fault backends a benchmark measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backends {
    /// userfaultfd only.
    Uffd,
    /// SIGSEGV only.
    Sigsegv,
    /// The mapped-unverified backend only.
    MappedUnverified,
    /// The mapped backend (pages verified at first touch) only.
    Mapped,
    /// Both page-fetching backends, userfaultfd first.
    #[default]
    Both,
    /// All four.
    All,
}

impl Backends {
    /// The backends to open databases with, in order.
    pub fn choices(self) -> Vec<BackendChoice> {
        match self {
            Backends::Uffd => vec![BackendChoice::Uffd],
            Backends::Sigsegv => vec![BackendChoice::Sigsegv],
            Backends::MappedUnverified => vec![BackendChoice::MappedUnverified],
            Backends::Mapped => vec![BackendChoice::Mapped],
            Backends::Both => vec![BackendChoice::Uffd, BackendChoice::Sigsegv],
            Backends::All => vec![
                BackendChoice::Uffd,
                BackendChoice::Sigsegv,
                BackendChoice::MappedUnverified,
                BackendChoice::Mapped,
            ],
        }
    }
}

impl FromStr for Backends {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "uffd" => Ok(Backends::Uffd),
            "sigsegv" => Ok(Backends::Sigsegv),
            "mapped-unverified" => Ok(Backends::MappedUnverified),
            "mapped" => Ok(Backends::Mapped),
            "both" => Ok(Backends::Both),
            "all" => Ok(Backends::All),
            _ => Err(format!(
                "expected uffd, sigsegv, mapped, mapped-unverified, both or all, got {s:?}"
            )),
        }
    }
}

impl fmt::Display for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backends::Uffd => "uffd",
            Backends::Sigsegv => "sigsegv",
            Backends::MappedUnverified => "mapped-unverified",
            Backends::Mapped => "mapped",
            Backends::Both => "both",
            Backends::All => "all",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for b in [
            Backends::Uffd,
            Backends::Sigsegv,
            Backends::MappedUnverified,
            Backends::Mapped,
            Backends::Both,
            Backends::All,
        ] {
            assert_eq!(b.to_string().parse::<Backends>(), Ok(b));
        }
        assert!("mprotect".parse::<Backends>().is_err());
        assert_eq!(Backends::Both.choices().len(), 2);
    }
}
