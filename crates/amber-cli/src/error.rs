//! The CLI's errors: every failure becomes one line on stderr and exit
//! status 2 (1 is `verify`'s "damage found").

use std::fmt;
use std::process::ExitCode;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// Help or version text was asked for: print it and succeed.
    Help(String),
    /// Anything else: one line, exit status 2.
    Failed(String),
}

impl CliError {
    /// A failure with this message.
    pub fn msg(m: impl Into<String>) -> Self {
        CliError::Failed(m.into())
    }

    /// Turns clap's multi-line report into one line (help and version
    /// requests are not errors).
    /// `cmd` is the command to point at when clap's report names none.
    pub fn from_clap(e: &clap::Error, cmd: &str) -> Self {
        use clap::error::ErrorKind;
        let text = e.render().to_string();
        match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => CliError::Help(text),
            _ => {
                // The error is the first paragraph; the usage line names the
                // command whose help to point at.
                let what = text
                    .lines()
                    .take_while(|l| !l.trim().is_empty())
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ");
                let what = what.strip_prefix("error: ").unwrap_or(&what);
                let cmd = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("Usage: "))
                    .map(|u| {
                        u.split_whitespace()
                            .take_while(|w| !w.starts_with(['<', '[', '-']))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| cmd.to_string());
                CliError::Failed(format!("{what} (see '{cmd} --help')"))
            }
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Help(t) | CliError::Failed(t) => f.write_str(t),
        }
    }
}

impl From<amber::Error> for CliError {
    fn from(e: amber::Error) -> Self {
        CliError::Failed(e.to_string())
    }
}

impl From<amber_bench::storage::BenchError> for CliError {
    fn from(e: amber_bench::storage::BenchError) -> Self {
        CliError::Failed(e.to_string())
    }
}

/// Folds a message onto one line.
pub fn one_line(s: &str) -> String {
    s.trim().replace('\n', "; ")
}

/// Prints the outcome of a failed command and gives its exit status.
pub fn report(e: CliError) -> ExitCode {
    match e {
        CliError::Help(text) => {
            println!("{}", text.trim_end());
            ExitCode::SUCCESS
        }
        CliError::Failed(m) => {
            eprintln!("amber: {}", one_line(&m));
            ExitCode::from(2)
        }
    }
}
