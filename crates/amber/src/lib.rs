//! Amber: a persistent object store for Rust.
#![deny(clippy::unwrap_used)]

#[allow(unsafe_code)]
pub mod vm;
