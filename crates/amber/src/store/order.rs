//! Commits apply to the running state in the order of their commit records.
//!
//! A commit appends its records and commit record (the log writer numbers
//! commit records 0, 1, 2, … as it appends them, under its lock), waits
//! until the log is durable, and then applies its records to the state.
//! Recovery replays committed transactions in commit-record order, so the
//! running store must apply them in that order too: two commits writing the
//! same bytes would otherwise leave the running state with the older one's
//! bytes and the recovered state with the newer one's. Group commit wakes
//! committers in any order, so each waits for its turn here before it takes
//! the state lock.
//!
//! A committer that fails between its append and its apply (the sync
//! failed) still finishes its turn, by dropping it: the commits after it
//! never wait forever. Such a failure poisons the store, so the running
//! state no longer has to match the log.

use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The turnstile commits pass through in commit-record order.
#[derive(Debug, Default)]
pub(crate) struct ApplyOrder {
    turns: Mutex<Turns>,
    next_up: Condvar,
}

#[derive(Debug, Default)]
struct Turns {
    /// The sequence number whose turn it is: every earlier commit has
    /// applied (or failed).
    next: u64,
    /// Turns finished out of order, ahead of `next`.
    finished: BTreeSet<u64>,
}

impl ApplyOrder {
    fn turns(&self) -> MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The turn of the commit whose commit record has sequence number `seq`
    /// (from [`LogWriter::append_commit`](crate::wal::writer::LogWriter::append_commit)).
    /// Dropping it finishes it.
    pub(crate) fn turn(&self, seq: u64) -> Turn<'_> {
        Turn { order: self, seq }
    }
}

/// One commit's place in the order; finished when dropped.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    order: &'a ApplyOrder,
    seq: u64,
}

impl Turn<'_> {
    /// Returns once every commit appended before this one has finished its
    /// turn.
    pub(crate) fn wait(&self) {
        let mut t = self.order.turns();
        while t.next != self.seq {
            t = self
                .order
                .next_up
                .wait(t)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut t = self.order.turns();
        t.finished.insert(self.seq);
        loop {
            let next = t.next;
            if !t.finished.remove(&next) {
                break;
            }
            t.next += 1;
        }
        drop(t);
        self.order.next_up.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_pass_in_sequence_whatever_order_they_arrive_in() {
        let order = ApplyOrder::default();
        let applied = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for seq in (0..16u64).rev() {
                let (order, applied) = (&order, &applied);
                s.spawn(move || {
                    let turn = order.turn(seq);
                    turn.wait();
                    applied.lock().expect("lock").push(seq);
                });
            }
        });
        assert_eq!(
            applied.into_inner().expect("lock"),
            (0..16).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_turn_dropped_without_waiting_does_not_block_the_next() {
        let order = ApplyOrder::default();
        let t2 = order.turn(2);
        // Turn 1 fails early (its sync failed), before turn 0 finished.
        drop(order.turn(1));
        drop(order.turn(0));
        t2.wait();
        assert_eq!(order.turns().next, 2);
        drop(t2);
        assert_eq!(order.turns().next, 3);
        assert!(order.turns().finished.is_empty());
    }
}
