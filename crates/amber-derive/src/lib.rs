//! `#[derive(Persistent)]` for Amber's persistent types.
