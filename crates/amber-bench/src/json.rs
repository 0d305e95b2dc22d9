//! Writing a benchmark's result as JSON (`--json FILE`).

use serde::Serialize;
use std::io;
use std::path::Path;

/// Writes `value` to `path` as pretty-printed JSON with a final newline.
pub fn write(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    text.push('\n');
    std::fs::write(path, text)
}
