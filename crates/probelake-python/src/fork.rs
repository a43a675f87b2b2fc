//! Forking safely after probelake was used.
//!
//! A child created by `fork` inherits the memory of every thread of its parent but runs only
//! the thread that forked. A lock that another thread held at that moment stays held in the
//! child for ever: tokio's runtime (over parking_lot, whose lock table is process-wide), the
//! allocator, any mutex of a library. So probelake makes sure none of its threads is doing
//! anything when the process forks. [`before_fork`], which the package registers with
//! `os.register_at_fork`:
//! 1. closes the gate: a call into probelake from another Python thread waits until the fork is
//!    done ([`enter`]);
//! 2. waits, with the GIL released, for the calls already under way to end: queries, commits,
//!    `record`s, and the entries they queued;
//! 3. reads every query result still open to its end, into memory (a running query's tasks
//!    wake on their own), then stops the writers' I/O threads and the query runtime; they start
//!    again on the next call, in the parent and in the child.
//!
//! The writers' other threads stay, waiting on their inboxes, so the parent's open units go on
//! and commit as usual. They wake now and then to look, touching only their own unit's queue,
//! which the child never touches: a unit opened before the fork cannot be used there, and is
//! forgotten rather than dropped. The child's calls start fresh threads. docs/python.md says
//! what this costs and what it does not cover.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use probelake_writer::WeakLake;
use pyo3::prelude::*;

use crate::runtime;

/// How often a wait for the fork (or for the calls the fork waits on) looks again.
pub(crate) const POLL: Duration = Duration::from_millis(1);

/// Set from the start of [`before_fork`] until the fork is done.
static FORKING: AtomicBool = AtomicBool::new(false);

/// Calls into probelake under way ([`enter`]).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The datasets this process writes to, with the process that opened each.
static WRITERS: Mutex<Vec<(u32, WeakLake)>> = Mutex::new(Vec::new());

thread_local! {
    /// How many [`Entered`] guards this thread holds: a nested call does not wait for a fork
    /// that waits for the outer one.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// A call into probelake under way; a fork waits for it to end.
pub(crate) struct Entered(());

/// Marks a call into probelake as under way, first waiting (with the GIL released) for a fork
/// that another thread has started.
pub(crate) fn enter(py: Python<'_>) -> Entered {
    let nested = DEPTH.with(|d| {
        let depth = d.get();
        d.set(depth + 1);
        depth > 0
    });
    loop {
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        // Both sides use sequentially consistent operations: either this call sees the fork
        // starting, or the fork sees this call under way.
        if nested || !FORKING.load(Ordering::SeqCst) {
            return Entered(());
        }
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
        py.detach(|| {
            while FORKING.load(Ordering::SeqCst) {
                std::thread::sleep(POLL);
            }
        });
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Remembers a dataset this process writes to, so that a fork stops its I/O thread first.
pub(crate) fn register_writer(lake: &probelake_writer::Lake) {
    let pid = runtime::process_id();
    let mut writers = WRITERS.lock().unwrap_or_else(|p| p.into_inner());
    writers.retain(|(owner, weak)| *owner == pid && weak.upgrade().is_some());
    writers.push((pid, lake.downgrade()));
}

/// Called by Python before `os.fork()`: waits for probelake's work under way to end and stops
/// its runtimes, so that no thread of probelake holds a lock the child would inherit.
#[pyfunction]
pub fn _before_fork(py: Python<'_>) {
    FORKING.store(true, Ordering::SeqCst);
    let pid = runtime::process_id();
    // Released: the calls waited for may need it (a device copy's waiter is Python code).
    // The calls this thread is inside of (a signal handler that forks, run while a call waits)
    // are not waited for: they resume after the fork.
    let own = DEPTH.with(|d| d.get()) as usize;
    py.detach(|| {
        while ACTIVE.load(Ordering::SeqCst) > own {
            std::thread::sleep(POLL);
        }
        runtime::wait_for_tasks();
        let lakes: Vec<probelake_writer::Lake> = {
            let writers = WRITERS.lock().unwrap_or_else(|p| p.into_inner());
            writers.iter().filter(|(owner, _)| *owner == pid).filter_map(|(_, weak)| weak.upgrade()).collect()
        };
        for lake in &lakes {
            lake.quiesce();
        }
        drop(lakes);
        crate::stream::collect_open_queries();
        runtime::stop();
    });
}

/// Called by Python in the parent after `os.fork()` (whether it succeeded or not).
#[pyfunction]
pub fn _after_fork_in_parent() {
    FORKING.store(false, Ordering::SeqCst);
}

/// Called by Python in the child after `os.fork()`: the gate opens; what the parent's threads
/// did is gone, and each call here starts fresh threads.
#[pyfunction]
pub fn _after_fork_in_child() {
    // Only this thread's calls go on here; the others' threads do not exist.
    ACTIVE.store(DEPTH.with(|d| d.get()) as usize, Ordering::SeqCst);
    runtime::forget_tasks();
    FORKING.store(false, Ordering::SeqCst);
}
