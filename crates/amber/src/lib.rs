//! Amber: a persistent object store for Rust.
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod error;
pub mod format;
pub mod io;
pub mod ptr;
pub mod schema;
pub mod store;
pub mod wal;

#[allow(unsafe_code)]
pub mod vm;

pub use error::{Error, Result};
