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
//! A writable open asks it for one more thing ([`Requests::request_install`]):
//! installing what recovery rebuilt, so that the open returns once the log
//! is replayed into memory rather than after writing the recovered pages.
//! That checkpoint runs whether or not one is due; until it has, reads find
//! the recovered changes in memory and the WPL table's images in the log,
//! as they find any commit's between checkpoints, and a crash meanwhile is
//! recovered by replaying the same log again (docs/design.md §3.1).
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
    /// The open left recovery's work to install.
    install: bool,
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

    /// Asks for recovery's work to be installed (a writable open that
    /// recovered something), whether or not a checkpoint is due.
    pub(crate) fn request_install(&self) {
        let mut s = self.state();
        s.install = true;
        self.changed.notify_all();
    }

    /// Returns once no checkpoint is asked for or running.
    pub(crate) fn wait_idle(&self) {
        let mut s = self.state();
        while s.install || ((s.requested || s.running) && !s.stop) {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The thread's wait for work: the checkpoint asked for (it is now
    /// running), `None` when the store is closing. Recovery's installation
    /// goes first, also when the store is closing (a store opened and
    /// closed or dropped at once leaves the page file as an open that
    /// installed before returning did), and stands for a due checkpoint
    /// asked for meanwhile (it installs everything committed).
    fn next(&self) -> Option<Job> {
        let mut s = self.state();
        loop {
            if s.stop && !s.install {
                return None;
            }
            if s.install || s.requested {
                let job = if s.install { Job::Recovered } else { Job::Due };
                (s.install, s.requested) = (false, false);
                s.running = true;
                return Some(job);
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

/// A checkpoint the thread runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// One a commit found due (run only if it still is).
    Due,
    /// The installation of what the open's recovery rebuilt.
    Recovered,
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
    while let Some(job) = core.requests.next() {
        let running = Running(core);
        let done = match job {
            Job::Due => core.checkpoint_background(),
            Job::Recovered => core.install_recovered(),
        };
        if let Err(e) = done {
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
