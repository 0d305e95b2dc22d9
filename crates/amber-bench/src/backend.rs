//! `--backend uffd|sigsegv|both`: which fault backends a benchmark runs.

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
    /// Both, userfaultfd first.
    #[default]
    Both,
}

impl Backends {
    /// The backends to open databases with, in order.
    pub fn choices(self) -> Vec<BackendChoice> {
        match self {
            Backends::Uffd => vec![BackendChoice::Uffd],
            Backends::Sigsegv => vec![BackendChoice::Sigsegv],
            Backends::Both => vec![BackendChoice::Uffd, BackendChoice::Sigsegv],
        }
    }
}

impl FromStr for Backends {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "uffd" => Ok(Backends::Uffd),
            "sigsegv" => Ok(Backends::Sigsegv),
            "both" => Ok(Backends::Both),
            _ => Err(format!("expected uffd, sigsegv or both, got {s:?}")),
        }
    }
}

impl fmt::Display for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backends::Uffd => "uffd",
            Backends::Sigsegv => "sigsegv",
            Backends::Both => "both",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for b in [Backends::Uffd, Backends::Sigsegv, Backends::Both] {
            assert_eq!(b.to_string().parse::<Backends>(), Ok(b));
        }
        assert!("mprotect".parse::<Backends>().is_err());
        assert_eq!(Backends::Both.choices().len(), 2);
    }
}
