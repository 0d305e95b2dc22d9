//! Amber's benchmarks, run by `amber bench …`.
