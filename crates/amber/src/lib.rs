//! Amber: a persistent object store for Rust.
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod db;
pub mod error;
pub mod fasthash;
pub mod format;
pub mod io;
pub mod ptr;
pub mod schema;
pub mod store;
pub mod translate;
pub mod wal;

#[allow(unsafe_code)]
pub mod vm;

// Lets `#[derive(Persistent)]`, which names `::amber`, be used inside Amber.
extern crate self as amber;

/// `#[derive(Persistent)]`: see the `amber_derive` crate for what it checks.
pub use amber_derive::Persistent;
pub use db::{Db, Options, Tx};
pub use error::{Error, Result};
pub use ptr::{PBytes, PIndex, PRef, PVec, Smart};
pub use vm::{Field, Persistent};

/// The README, whose Rust examples rustdoc compiles and runs as doctests, so
/// that a change of the API that breaks them fails `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
