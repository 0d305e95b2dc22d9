//! Comparison engines for Amber's benchmarks.
