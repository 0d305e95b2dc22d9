//! Amber's benchmarks, run by `amber bench …`.

pub mod json;
pub mod storage;
pub mod sys;
