//! The harness's errors.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::path::PathBuf;

use super::engine::EngineError;

/// Why `amber bench oo1` failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BenchError {
    /// `--help` was given: the payload is the usage text (print it, exit 0).
    Help(String),
    /// The arguments are wrong; the message says how.
    Usage(String),
    /// A file or directory operation of the harness failed.
    Io {
        context: String,
        path: Option<PathBuf>,
        source: io::Error,
    },
    /// An engine failed while building, opening or running.
    Engine {
        engine: String,
        during: String,
        source: EngineError,
    },
    /// A child process failed or said something the harness could not read.
    Child {
        engine: String,
        job: String,
        message: String,
    },
    /// JSON could not be encoded or decoded.
    Json {
        context: String,
        source: serde_json::Error,
    },
    /// Engines ran, but some failed or gave answers that differ from the
    /// reference: the report was still printed and written.
    Failed {
        /// The benchmark: `OO1` or `OO7`.
        bench: &'static str,
        problems: Vec<String>,
    },
}

impl BenchError {
    pub(crate) fn io(
        context: impl Into<String>,
        path: impl Into<PathBuf>,
        source: io::Error,
    ) -> Self {
        Self::Io {
            context: context.into(),
            path: Some(path.into()),
            source,
        }
    }

    pub(crate) fn engine(engine: &str, during: impl Into<String>, source: EngineError) -> Self {
        Self::Engine {
            engine: engine.to_string(),
            during: during.into(),
            source,
        }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Help(usage) => f.write_str(usage),
            Self::Usage(message) => write!(f, "{message}"),
            Self::Io {
                context,
                path: Some(path),
                source,
            } => write!(f, "{context} {}: {source}", path.display()),
            Self::Io {
                context,
                path: None,
                source,
            } => write!(f, "{context}: {source}"),
            Self::Engine {
                engine,
                during,
                source,
            } => write!(f, "engine {engine}, {during}: {source}"),
            Self::Child {
                engine,
                job,
                message,
            } => write!(f, "engine {engine}, {job} (child process): {message}"),
            Self::Json { context, source } => write!(f, "{context}: {source}"),
            Self::Failed { bench, problems } => {
                write!(f, "{bench} failed ({} problems):", problems.len())?;
                for p in problems.iter().take(20) {
                    write!(f, "\n  {p}")?;
                }
                if problems.len() > 20 {
                    write!(f, "\n  … and {} more", problems.len() - 20)?;
                }
                Ok(())
            }
        }
    }
}

impl StdError for BenchError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Engine { source, .. } => Some(source),
            Self::Json { source, .. } => Some(source),
            _ => None,
        }
    }
}
