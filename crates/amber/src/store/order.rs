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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::thread::Thread;

/// The turnstile commits pass through in commit-record order.
///
/// A committer that must wait parks its thread, and a finished turn wakes
/// only the thread whose turn comes next: a group commit wakes its
/// committers together, and a condition variable notified at each turn
/// would wake every one of them at every turn, a context switch each, to
/// find it is not theirs.
#[derive(Debug, Default)]
pub(crate) struct ApplyOrder {
    turns: Mutex<Turns>,
}

#[derive(Debug, Default)]
struct Turns {
    /// The sequence number whose turn it is: every earlier commit has
    /// applied (or failed).
    next: u64,
    /// Turns finished out of order, ahead of `next`.
    finished: BTreeSet<u64>,
    /// The parked committers, by sequence number.
    parked: HashMap<u64, Thread>,
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
            t.parked.insert(self.seq, std::thread::current());
            drop(t);
            // An unpark that came first makes this return at once; a
            // spurious return goes round the loop.
            std::thread::park();
            t = self.order.turns();
        }
        t.parked.remove(&self.seq);
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
        let next = t.parked.get(&t.next).cloned();
        drop(t);
        if let Some(thread) = next {
            thread.unpark();
        }
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
