//! The writer's I/O runtime: one tokio thread that stores files, stopped and restarted on
//! demand so that a process can fork with no thread of it running.

use std::sync::Mutex;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::error::{Result, WriterError};

/// How long [`IoRuntime::stop`] waits for the blocking threads of a file store to end.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// A tokio runtime of one worker, started on first use and again after [`IoRuntime::stop`].
pub(crate) struct IoRuntime {
    slot: Mutex<Option<Runtime>>,
}

impl IoRuntime {
    pub(crate) fn new() -> Self {
        IoRuntime { slot: Mutex::new(None) }
    }

    /// A handle to the running runtime, starting it if it is stopped.
    pub(crate) fn handle(&self) -> Result<Handle> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = slot.as_ref() {
            return Ok(rt.handle().clone());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("probelake-writer-io")
            // An idle blocking thread would otherwise wake after 10 s to end itself: a thread
            // that never wakes on its own holds no lock when the process forks.
            .thread_keep_alive(Duration::from_secs(24 * 3600))
            .enable_all()
            .build()
            .map_err(|e| WriterError::Internal(format!("cannot start the writer's I/O runtime: {e}")))?;
        let handle = rt.handle().clone();
        *slot = Some(rt);
        Ok(handle)
    }

    /// Stops the runtime and waits for its threads to end. Its tasks are dropped: callers stop
    /// it only when none is running ([`crate::Lake::quiesce`]).
    pub(crate) fn stop(&self) {
        let taken = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(rt) = taken {
            rt.shutdown_timeout(STOP_WAIT);
        }
    }
}

impl Drop for IoRuntime {
    /// Without blocking, so that a `Lake` may be dropped anywhere, async code included.
    fn drop(&mut self) {
        if let Some(rt) = self.slot.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            rt.shutdown_background();
        }
    }
}
