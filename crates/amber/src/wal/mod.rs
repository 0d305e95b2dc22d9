//! The write-ahead log: record format, file header, appending with group
//! commit, scanning back (forward, and backward for whole-page logging's
//! restart), and the minimal-log coalescing rule.

pub mod backward;
pub mod coalesce;
pub mod header;
mod readahead;
pub mod ranges;
pub mod record;
pub mod scan;
pub mod writer;

pub use record::{Record, TxId};
