//! The checkpointer thread: automatic checkpoints run here, not in the
//! commit that finds them due.
//!
//! A commit that leaves the log or the pending changes past their limits
//! only asks for a checkpoint ([`Requests::request`]) and returns; the
//! thread runs it (`Core::checkpoint_background`), which checks again that
//! one is due and that no transaction has records in the log (if one has,
//! the checkpoint is simply not run: the next commit asks again). A failure
//! cannot be returned to anyone: it poisons the store, and the next call
//! (`begin`, `commit`, `log_early`, `checkpoint`, `close`) reports it.
//!
//! Each writable store has one such thread, started when it is created or
//! opened and stopped (a running checkpoint finishing first) and joined when
//! it is closed or dropped. A read-only store has none.

use super::Core;
use crate::error::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// What the checkpointer thread is asked to do, and whether it is busy.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    state: Mutex<RequestState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct RequestState {
    /// A commit found a checkpoint due.
    requested: bool,
    /// The thread is running one.
    running: bool,
    /// The store is closing: the thread ends.
    stop: bool,
}

impl Requests {
    fn state(&self) -> MutexGuard<'_, RequestState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks for a checkpoint (a commit found one due).
    pub(crate) fn request(&self) {
        let mut s = self.state();
        if !s.requested {
            s.requested = true;
            self.changed.notify_all();
        }
    }

    /// Returns once no checkpoint is asked for or running.
    pub(crate) fn wait_idle(&self) {
        let mut s = self.state();
        while (s.requested || s.running) && !s.stop {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The thread's wait for work: `true` when a checkpoint was asked for
    /// (it is now running), `false` when the store is closing.
    fn next(&self) -> bool {
        let mut s = self.state();
        loop {
            if s.stop {
                return false;
            }
            if s.requested {
                s.requested = false;
                s.running = true;
                return true;
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn finished(&self) {
        self.state().running = false;
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.state().stop = true;
        self.changed.notify_all();
    }
}

/// The running thread; stopping and joining it is dropping this.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    core: Arc<Core>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread for the writable store `core`.
    pub(crate) fn start(core: Arc<Core>) -> Result<Checkpointer> {
        let shared = core.clone();
        let thread = std::thread::Builder::new()
            .name("amber-checkpoint".into())
            .spawn(move || run(&shared))
            .map_err(|e| Error::Vm {
                what: "cannot start the store's checkpointer thread (is the process at its thread limit?)"
                    .into(),
                source: Some(e),
            })?;
        Ok(Checkpointer {
            core,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.core.requests.stop();
        if let Some(t) = self.thread.take() {
            // The thread catches nothing: a panic in a checkpoint has
            // poisoned the store already (`Running`), and is reported there.
            let _ = t.join();
        }
    }
}

/// The thread's loop.
fn run(core: &Core) {
    while core.requests.next() {
        let running = Running(core);
        if let Err(e) = core.checkpoint_background() {
            core.poison(format!("automatic checkpoint failed: {e}"));
        }
        drop(running);
    }
}

/// Marks the running checkpoint finished when dropped, also when it
/// panicked (a bug), which poisons the store so that it is not used on.
struct Running<'a>(&'a Core);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison("the automatic checkpoint panicked (a bug)");
        }
        self.0.requests.finished();
    }
}
