//! The one tokio runtime of the module, and waiting for it with the GIL released.
//!
//! The runtime is kept in one place, keyed by the process id: a child created by `fork` (torch's
//! DataLoader workers, Ray) inherits the parent's memory but none of its threads. Before a fork
//! the runtime is stopped ([`crate::fork`]), and both processes start a new one on their next
//! call. Should a fork bypass those hooks (native code calling `fork` itself), the child sees a
//! different pid and builds a runtime of its own; the parent's is leaked, never dropped, since
//! dropping it would wait for threads that do not exist in the child.

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Mutex, Once};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::{Handle, Runtime};

use crate::error::{Error, Kind};
use crate::fork;

static RUNTIME: Mutex<Option<(u32, Runtime)>> = Mutex::new(None);

/// Tasks of [`block_on`] not finished yet (an interrupted call leaves its task running until
/// its next await point).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// How often a wait looks at pending signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// How long stopping the runtime waits for its blocking threads (file reads) to end.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// This process's id, cached: `getpid` is a system call, and `record` asks on every call.
static PID: AtomicU32 = AtomicU32::new(0);

/// The id of this process, without a system call once known; a child created by `fork`
/// learns its own in an at-fork handler.
pub fn process_id() -> u32 {
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        extern "C" fn forget_pid() {
            PID.store(0, Ordering::SeqCst);
        }
        // SAFETY: registers a handler that only stores to an atomic, which is async-signal
        // safe, in the child after a fork.
        unsafe {
            libc::pthread_atfork(None, None, Some(forget_pid));
        }
    });
    match PID.load(Ordering::SeqCst) {
        0 => {
            let pid = std::process::id();
            PID.store(pid, Ordering::SeqCst);
            pid
        }
        pid => pid,
    }
}

/// A handle to this process's runtime, which is started on first use (and again after a fork).
pub fn handle() -> Result<Handle, Error> {
    let pid = process_id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((owner, rt)) = slot.as_ref() {
        if *owner == pid {
            return Ok(rt.handle().clone());
        }
    }
    if let Some(inherited) = slot.take() {
        std::mem::forget(inherited);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("probelake")
        // An idle blocking thread would otherwise wake after 10 s to end itself; one that never
        // wakes on its own holds no lock when the process forks.
        .thread_keep_alive(Duration::from_secs(24 * 3600))
        .enable_all()
        .build()
        .map_err(|e| Error::new(Kind::Internal, format!("cannot start probelake's runtime: {e}")))?;
    let handle = rt.handle().clone();
    *slot = Some((pid, rt));
    Ok(handle)
}

/// Waits until no task of [`block_on`] is running.
pub(crate) fn wait_for_tasks() {
    while IN_FLIGHT.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(fork::POLL);
    }
}

/// In a child made by `fork`: the parent's tasks never end here.
pub(crate) fn forget_tasks() {
    IN_FLIGHT.store(0, Ordering::SeqCst);
}

/// This process's runtime if it is running; none is started.
pub(crate) fn running() -> Option<Handle> {
    let pid = process_id();
    let slot = RUNTIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match slot.as_ref() {
        Some((owner, rt)) if *owner == pid => Some(rt.handle().clone()),
        _ => None,
    }
}

/// Stops this process's runtime and waits for its threads to end; the next call starts a new
/// one. Only when no task needs it: [`wait_for_tasks`] and
/// [`crate::stream::collect_open_queries`] first.
pub(crate) fn stop() {
    let pid = process_id();
    let taken = {
        let mut slot = RUNTIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match slot.as_ref() {
            Some((owner, _)) if *owner == pid => slot.take(),
            _ => None,
        }
    };
    if let Some((_, rt)) = taken {
        rt.shutdown_timeout(STOP_WAIT);
    }
}

/// Counts one task of [`block_on`] until dropped, when it ends or is cancelled.
struct InFlight;

impl InFlight {
    fn start() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `fut` on the runtime with the GIL released, and returns its output. Every
/// [`SIGNAL_POLL`] the GIL is taken back to run Python's signal handlers: if one raises (Ctrl-C
/// raises `KeyboardInterrupt`), the future is cancelled — as the CLI drops a command on Ctrl-C,
/// which rolls back what it was writing — and the exception is returned at once.
pub fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let _entered = fork::enter(py);
    let rt = handle()?;
    // The wait is a channel rather than a tokio timer: timers fire only when a worker thread
    // turns the driver, and a worker busy in a CPU-bound operator (a large join) does not.
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let in_flight = InFlight::start();
    let task = rt.spawn(async move {
        let _in_flight = in_flight;
        let _ = tx.send(fut.await);
    });
    let mut rx = rx;
    loop {
        // The receiver is `Send` but not `Sync`: moved into the GIL-free closure and back.
        let (back, received) = py.detach(move || {
            let received = rx.recv_timeout(SIGNAL_POLL);
            (rx, received)
        });
        rx = back;
        match received {
            Ok(value) => return Ok(value),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::new(Kind::Internal, "a probelake task ended without an answer (it panicked)").into());
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    // Not waited for: a CPU-bound DataFusion operator reaches its next await
                    // point (where the task is dropped, rolling back what it wrote) only after
                    // its batch, which may take long in a large join.
                    task.abort();
                    return Err(interrupt);
                }
            }
        }
    }
}
