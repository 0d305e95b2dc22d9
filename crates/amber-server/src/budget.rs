//! The server's memory budget (`amber serve --memory-mib N`,
//! [`ServeOptions::memory_budget`]): what of the server's memory it bounds,
//! and how (docs/design.md §10.12).
//!
//! The server's memory is, besides its code and runtime:
//!
//! - per connection, the frames it reads and the answers it builds: at most
//!   `max_buffered` for answers (images held twice while their frame is
//!   built) and a request frame — the longest `Hello` on a database served
//!   read-only, up to `max_frame` for a `Commit`, whose records the store
//!   transaction holds once more;
//! - per connection, its read-only store: the changes committed since the
//!   last checkpoint, replayed from the log and kept in memory (a reader
//!   has no log writer to read whole-page images through);
//! - per database written, the writer store's pending changes until a
//!   checkpoint installs them, and the validator's recent commits (kept
//!   while an open transaction's snapshot is older).
//!
//! The budget `B` is shared out: a quarter to the writers, split evenly —
//! each checkpoints once its pending changes or its log since the last
//! checkpoint exceed its share (`StoreOptions::checkpoint_pending_bytes`,
//! `checkpoint_log_bytes`), which also bounds what each connection's store
//! replays from the log; half to the connections — a connection is
//! admitted only while the worst case of every connection's buffers fits,
//! the next is answered `Busy`; an eighth at most to the buffer pools of
//! framed fetch clusters (`image_cache.rs`), split evenly; the rest is left
//! for the runtime, the stores' replays and the validator, which are not
//! counted. A
//! checkpoint deferred by a connection's old snapshot lets its writer's
//! pending changes outgrow the share until that connection moves.

use crate::listener::Shared;
use crate::{ServeError, ServeOptions};
use amber::StoreOptions;
use std::sync::atomic::Ordering;

/// The most bytes one connection's buffers may hold at once.
pub fn per_connection(opts: &ServeOptions) -> usize {
    let request = if opts.read_only {
        // The longest `Hello` (`session.rs` bounds read requests by it).
        (crate::session::MAX_REQUEST as usize).min(opts.max_frame as usize)
    } else {
        // The frame, and its records held by the store transaction.
        2 * opts.max_frame as usize
    };
    opts.max_buffered.saturating_add(request)
}

/// How many connections are served at once: `max_connections`, or fewer
/// if the budget's half for connections holds fewer.
pub fn connection_limit(opts: &ServeOptions) -> usize {
    match opts.memory_budget {
        None => opts.max_connections,
        Some(b) => opts.max_connections.min(b / 2 / per_connection(opts)),
    }
}

/// How each database written is opened: with the budget, its checkpoints
/// come once its pending changes or its log since the last checkpoint
/// exceed its share (a quarter of the budget, split among the writers).
pub fn writer_options(opts: &ServeOptions) -> StoreOptions {
    let mut o = StoreOptions::default();
    if let Some(b) = opts.memory_budget {
        let share = b / 4 / opts.databases.len().max(1);
        o.checkpoint_pending_bytes = o.checkpoint_pending_bytes.min(share);
        o.checkpoint_log_bytes = o.checkpoint_log_bytes.min(share as u64);
    }
    o
}

/// The bytes of each database's buffer pool: its even share of
/// `image_cache`, and with a budget, of no more than an eighth of it.
pub fn image_cache_share(opts: &ServeOptions) -> usize {
    let all = match opts.memory_budget {
        Some(b) => opts.image_cache.min(b / 8),
        None => opts.image_cache,
    };
    all / opts.databases.len().max(1)
}

/// The log a writer may hold since its last checkpoint: its share of the
/// budget, or the store's default threshold without one.
fn writer_share(opts: &ServeOptions) -> u64 {
    writer_options(opts).checkpoint_log_bytes
}

/// After a commit to `database` was answered: a checkpoint of its writer
/// (on the blocking pool, waited for by this session only) once its log
/// since the last checkpoint passed the writer's share (the store's
/// default threshold without a budget), unless another session's is
/// running. The store's own checkpointer
/// tries at the commit, but the committing connection's snapshot is then
/// still behind the commit and defers it; here the connection has moved
/// past its commit. Another connection's older snapshot still defers it
/// (the attempt fails and is made again after a later commit). Waited
/// for, not left running, so that shutdown finds the writer free to close.
pub async fn relieve(shared: &Shared, database: &str) {
    let share = writer_share(&shared.opts);
    let Some(writer) = shared.writers.get(database) else {
        return;
    };
    let running = &writer.checkpointing;
    if writer.store.log_since_checkpoint() <= share || running.swap(true, Ordering::AcqRel) {
        return;
    }
    let w = writer.clone();
    let done = tokio::task::spawn_blocking(move || w.store.checkpoint()).await;
    running.store(false, Ordering::Release);
    match done {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log::debug!("checkpoint for the memory budget: {e}"),
        Err(e) => log::error!("checkpoint for the memory budget: {e}"),
    }
}

/// Refuses a budget that leaves room for no connection.
pub fn check(opts: &ServeOptions) -> Result<(), ServeError> {
    match opts.memory_budget {
        Some(b) if connection_limit(opts) == 0 => Err(ServeError::Config(format!(
            "a memory budget of {} MiB leaves half for connections, less than one connection's \
             buffers ({} MiB: --max-buffered, and a request frame of up to {}): lower \
             --max-buffered and --max-frame, or raise --memory-mib",
            b >> 20,
            per_connection(opts) >> 20,
            if opts.read_only {
                "70 KB".to_string()
            } else {
                "--max-frame, held twice".to_string()
            }
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_connections_and_writers() {
        let opts = ServeOptions {
            databases: vec![
                ("a".into(), "a.amber".into()),
                ("b".into(), "b.amber".into()),
            ],
            max_frame: 1 << 20,
            max_buffered: 4 << 20,
            memory_budget: Some(64 << 20),
            ..ServeOptions::default()
        };
        // Half of 64 MiB over 4 + 2 MiB per connection.
        assert_eq!(connection_limit(&opts), 5);
        let w = writer_options(&opts);
        assert_eq!(w.checkpoint_pending_bytes, 8 << 20);
        assert_eq!(w.checkpoint_log_bytes, 8 << 20);
        assert!(check(&opts).is_ok());
        // An eighth of 64 MiB, split between the two databases.
        assert_eq!(image_cache_share(&opts), 4 << 20);
        let none = ServeOptions {
            memory_budget: None,
            ..opts.clone()
        };
        assert_eq!(connection_limit(&none), none.max_connections);
        assert_eq!(
            writer_options(&none).checkpoint_pending_bytes,
            StoreOptions::default().checkpoint_pending_bytes
        );
        assert_eq!(image_cache_share(&none), none.image_cache / 2);
        let small = ServeOptions {
            memory_budget: Some(8 << 20),
            ..opts
        };
        assert!(
            check(&small)
                .unwrap_err()
                .to_string()
                .contains("lower --max-buffered")
        );
    }
}
